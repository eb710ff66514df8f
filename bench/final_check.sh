#!/usr/bin/env bash
# What the final re-check costs on a 1,000-step plan. Each step writes its own small file and
# asserts it with file_contains and content_changed (2,000 assertions run again at the end);
# the same plan without assertions is the baseline. Measured two ways, release build, fresh
# journal per run:
#   - the end phase inside one run: from the last `step.finished` event to `verify.finished`
#     (postconditions, the final re-check, the outcome), from the events' millisecond stamps;
#   - the whole process, with hyperfine (the re-check's share of a run).
# Variants: `files` (file assertions only) and `command` (every step also asserts the same
# `command_succeeds`, which the re-check runs once for all 1,000 steps).
# Everything it writes goes to bench/out/final_check/. Installs hyperfine on Debian if missing.
#
# Usage: bench/final_check.sh      (env: STEPS=1000 RUNS=10)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out=bench/out/final_check
steps="${STEPS:-1000}"
runs="${RUNS:-10}"
mkdir -p "$out"

as_root() { if [[ "$(id -u)" -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
command -v hyperfine >/dev/null || { as_root apt-get update && as_root apt-get install -y hyperfine; }

cargo build --release -p pev
pev="${CARGO_TARGET_DIR:-$root/target}/release/pev"
[[ "$pev" = /* ]] || pev="$root/$pev"

python3 - "$out" "$steps" <<'PY'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
def plan(kind):
    steps = []
    for i in range(n):
        path = f"out/f{i}.txt"
        step = {"id": f"s{i}", "tool": "file.write",
                "parameters": {"path": path, "content": f"value {i}\n"}}
        if kind != "none":
            step["assertions"] = [
                {"type": "file_contains", "path": path, "pattern": f"value {i}"},
                {"type": "content_changed", "path": path},
            ]
        if kind == "command":
            step["assertions"].append({"type": "command_succeeds", "command": "test -d out"})
        steps.append(step)
    return {"goal": "Write the value files", "steps": steps}
for kind in ["none", "files", "command"]:
    with open(f"{out}/{kind}.json", "w") as f:
        json.dump(plan(kind), f)
PY

python3 bench/gen_run_plan.py --policy-out "$out/policy.yaml"
ws="$root/$out/ws"
mkdir -p "$ws"
reset="rm -rf $ws/.pev $ws/out"

echo "## machine"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
free -h | sed -n '1,2p'

echo
echo "## end phase (last step.finished -> verify.finished), median of $runs runs, ms"
for kind in none files command; do
  for _ in $(seq "$runs"); do
    sh -c "$reset"
    "$pev" run "$out/$kind.json" --policy "$out/policy.yaml" --workspace "$ws" --json >"$out/$kind.jsonl" || true
    python3 - "$out/$kind.jsonl" <<'PY'
import json, sys, datetime
def ms(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp() * 1000
events = [json.loads(l) for l in open(sys.argv[1])]
last_step = max(ms(e["at"]) for e in events if e["event"] == "step.finished")
verify = next(ms(e["at"]) for e in events if e["event"] == "verify.finished")
result = events[-1]["result"]
fc = result.get("final_check") or {}
print(f"{verify - last_step:.0f} {result['status']} {fc.get('rechecked', 0)}")
PY
  done >"$out/$kind.phase"
  sort -n "$out/$kind.phase" | awk -v k="$kind" '{a[NR]=$1; s=$2; r=$3} END {printf "%-8s median %s ms  (status %s, %s assertions re-run)\n", k, a[int((NR+1)/2)], s, r}'
done

echo
echo "## whole process (hyperfine, $runs runs)"
hyperfine --warmup 1 --runs "$runs" --prepare "sh -c '$reset && sync'" \
  --export-markdown "$out/hyperfine.md" \
  -n none "$pev run $out/none.json --policy $out/policy.yaml --workspace $ws --json" \
  -n files "$pev run $out/files.json --policy $out/policy.yaml --workspace $ws --json" \
  -n command "$pev run $out/command.json --policy $out/policy.yaml --workspace $ws --json" >/dev/null
cat "$out/hyperfine.md"
