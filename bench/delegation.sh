#!/usr/bin/env bash
# Delegated steps (issue 17), offline with scripted models:
#  1. harness time per child: `pev agent` on a one-step plan whose step is an instruction the
#     executor carries out (two executor turns: a write, then its summary), against the same
#     work as a delegated step (the child's planner writes that one-step plan, the same executor
#     turns do it): the difference is what a child run costs the harness (its run record, its
#     plan, its own engine and journal writer, its verdict and final re-check, the parent's
#     checks of it). Median of R runs each.
#  2. N parallel children: a parent with N independent delegated steps (scopes c1..cN), each
#     child's plan one `sleep 1` command, run with --jobs N: wall time against the critical path
#     (1 s).
# Usage: PEV=target/release/pev bench/delegation.sh     env: R=15, NS="1 2 4 8"
set -euo pipefail
: "${PEV:?set PEV to the pev to measure}"
r="${R:-15}"
ns="${NS:-1 2 4 8}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
ms() { echo $(( ($2 - $1) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# $1: dir, $2: planner turns (JSON array of plans), $3: executor turns (JSON array of turns)
setup() {
  mkdir -p "$1/ws"
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
d, plans, turns = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
json.dump({"turns": [{"content": [{"type": "text", "text": json.dumps(p)}]} for p in plans]},
          open(f"{d}/planner.json", "w"))
json.dump({"turns": turns}, open(f"{d}/executor.json", "w"))
open(f"{d}/ws/pev.toml", "w").write(
    f'[roles.planner]\nprovider = "script:{d}/planner.json"\nmodel = "claude-opus-4-6"\n'
    f'[roles.executor]\nprovider = "script:{d}/executor.json"\nmodel = "claude-sonnet-4-5"\n'
    f'[roles.verifier]\nprovider = "script:{d}/executor.json"\nmodel = "claude-haiku-4-5"\n')
PY
  printf "sandbox: off\n" >"$1/policy.yaml"
}

# $1: dir, $2: goal, $3...: extra args; prints the wall time in ms and checks the outcome.
run_once() {
  local d="$1" goal="$2"; shift 2
  rm -rf "$d/ws/.pev" "$d/ws/out.txt" "$d/ws/c"* "$d/ws/w"
  local s e
  s=$(date +%s%N)
  "$PEV" agent "$goal" --workspace "$d/ws" --policy "$d/policy.yaml" --max-replans 0 "$@" \
    >"$d/out.log" 2>&1 || { echo "run failed: $(tail -5 "$d/out.log")" >&2; exit 1; }
  e=$(date +%s%N)
  ms "$s" "$e"
}

step='{"id":"write","description":"Write done to w/out.txt","max_attempts":1,
       "assertions":[{"type":"file_contains","path":"w/out.txt","pattern":"done"}]}'
turns='[{"content":[{"type":"tool_use","id":"t1","name":"file_write","input":{"path":"w/out.txt","content":"done"}}]},
        {"content":[{"type":"text","text":"Wrote done to w/out.txt."}]}]'
inline="$work/inline"; delegated="$work/delegated"
setup "$inline" "[{\"goal\":\"g\",\"steps\":[$step]}]" "$turns"
setup "$delegated" "[{\"goal\":\"g\",\"steps\":[{\"id\":\"sub\",\"delegate\":{\"goal\":\"Write done to w/out.txt\",\"scope\":\"w\"}}]},
                     {\"goal\":\"g\",\"steps\":[$step]}]" "$turns"
a=$(for _ in $(seq "$r"); do run_once "$inline" "Write done to w/out.txt"; done | median)
b=$(for _ in $(seq "$r"); do run_once "$delegated" "Write done to w/out.txt"; done | median)
echo "| plan | wall (median of $r) |"
echo "|---|---|"
echo "| one instruction step | ${a} ms |"
echo "| the same work as a delegated step (a child run) | ${b} ms |"
echo "| harness time per child | $((b - a)) ms |"
echo

echo "| children | --jobs | wall | critical path | overhead |"
echo "|---|---|---|---|---|"
for n in $ns; do
  d="$work/par-$n"
  plans=$(python3 - "$n" <<'PY'
import json, sys
n = int(sys.argv[1])
parent = {"goal": "g", "steps": [{"id": f"c{i}", "delegate": {"goal": f"Wait a second in c{i}", "scope": f"c{i}"}} for i in range(1, n + 1)]}
child = {"goal": "g", "steps": [{"id": "wait", "tool": "shell.exec", "parameters": {"command": "sleep 1"}}]}
print(json.dumps([parent] + [child] * n))
PY
)
  setup "$d" "$plans" '[]'
  t=$(for _ in 1 2 3; do run_once "$d" "Wait a second in $n sub-agents" --jobs "$n"; done | sort -n | head -1)
  echo "| $n | $n | ${t} ms | 1000 ms | $((t - 1000)) ms |"
done
