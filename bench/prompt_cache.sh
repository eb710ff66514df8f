#!/usr/bin/env bash
# Measures how much of pev's prompt the Anthropic prompt cache serves (issue 11, item 5), before
# and after the conversation breakpoints, with one pev binary: bench/cache_mock.py applies the
# caching rules to the requests pev really sends, and its --mode before ignores the breakpoints
# on message blocks (what pev sent before: the system prompt and the tool list only).
#
# Two scenarios, each run in a fresh workspace (a small Python package written by the mock) with
# a fresh cache, in both modes:
#   loop  `pev agent GOAL --mode loop`: 25 model calls (plan_create, file_list, reads, patches, a
#         write, step_update, postcondition_verify, the final answer), all by the executor role.
#   plan  `pev agent GOAL` (planner, executor, judge): a one-step plan whose instruction step the
#         executor carries out in 10 turns (9 tool calls and a summary); the judge passes. The
#         share is over the executor's calls only (the mock counts per role).
#
# For each run it prints the mock's counts (prompt tokens = plain input + cache reads + cache
# writes), the cached share (reads / prompt) and the input cost at Sonnet 4.5 prices ($3 plain,
# $0.30 read, $3.75 write per million tokens), and checks them against pev's own `usage` in its
# JSON result (all roles, since the result does not split usage by role).
#
# Usage: bench/prompt_cache.sh
#   env: PEV=path/to/pev to skip the build; SCENARIOS="loop plan"; MOCK_ARGS="--min-tokens 4096"
#   (or --lookback N, --ttl S) to try the rules' parameters; OUT=dir (default bench/out/cache).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${OUT:-bench/out/cache}"
[[ "$out" = /* ]] || out="$root/$out"
read -r -a mock_args <<<"${MOCK_ARGS:-}"
scenarios="${SCENARIOS:-loop plan}"
mkdir -p "$out"

if [[ -z "${PEV:-}" ]]; then
  # The debug build is enough: nothing here is timed. Copied at once, so that another build in a
  # shared CARGO_TARGET_DIR cannot swap the binary under the runs.
  cargo build -p pev
  target="${CARGO_TARGET_DIR:-$root/target}"
  [[ "$target" = /* ]] || target="$root/$target"
  cp "$target/debug/pev" "$out/pev"
  PEV="$out/pev"
fi

# The mock servers this script started, stopped on exit (by pid).
mock_pids=()
cleanup() { for pid in "${mock_pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# start_mock NAME ARGS...: starts bench/cache_mock.py ARGS and waits for its port in $out/NAME.port.
start_mock() {
  local name="$1"
  shift
  rm -f "$out/$name.port"
  python3 bench/cache_mock.py "$@" >"$out/$name.port" 2>"$out/$name.err" &
  mock_pids+=("$!")
  for _ in $(seq 100); do
    grep -q '^port ' "$out/$name.port" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "mock $name did not start:" >&2
  cat "$out/$name.err" >&2
  exit 1
}
port_of() { awk '/^port /{print $2; exit}' "$out/$1.port"; }

# workspace DIR URL: the mock's Python package, and a pev.toml sending the three roles to URL.
workspace() {
  local ws="$1" url="$2" role model
  rm -rf "$ws"
  mkdir -p "$ws"
  python3 bench/cache_mock.py --write-workspace "$ws"
  for role in planner executor verifier; do
    case "$role" in
      planner) model=claude-opus-4-6 ;;
      executor) model=claude-sonnet-4-5 ;;
      verifier) model=claude-haiku-4-5 ;;
    esac
    printf '[roles.%s]\nprovider = "anthropic"\nmodel = "%s"\nbase_url = "%s"\n\n' \
      "$role" "$model" "$url"
  done >"$ws/pev.toml"
}

goal="$(cd bench && python3 -c 'import cache_mock; print(cache_mock.GOAL)')"

echo "## machine"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc), kernel $(uname -r)"
echo "$(python3 --version); pev: $("$PEV" --version 2>/dev/null || echo '?'), tree $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ' + uncommitted changes in crates/')"

for scenario in $scenarios; do
  for mode in before after; do
    name="$scenario-$mode"
    start_mock "$name" --mode "$mode" "${mock_args[@]}"
    url="http://127.0.0.1:$(port_of "$name")"
    ws="$out/ws-$name"
    workspace "$ws" "$url"
    args=(agent "$goal" --workspace "$ws" --json)
    [[ "$scenario" = loop ]] && args+=(--mode loop)
    status=0
    env -i PATH="$PATH" ANTHROPIC_API_KEY=dummy "$PEV" "${args[@]}" \
      >"$out/$name.jsonl" 2>"$out/$name.err" || status=$?
    echo "$status" >"$out/$name.exit"
    curl -sf "$url/stats" >"$out/$name.stats.json"
    curl -sf "$url/calls" >"$out/$name.calls.json"
  done
done

python3 - "$out" $scenarios <<'PY'
import json, math, sys

out, scenarios = sys.argv[1], sys.argv[2:]
PLAIN, READ, WRITE = 3.00, 0.30, 3.75  # Sonnet 4.5, USD per million tokens (5-minute writes)


def cost(plain, read, write):
    return (plain * PLAIN + read * READ + write * WRITE) / 1e6


rows = []
for scenario in scenarios:
    for mode in ("before", "after"):
        name = f"{scenario}-{mode}"
        lines = [json.loads(l) for l in open(f"{out}/{name}.jsonl") if l.strip()]
        results = [l["result"] for l in lines if "result" in l]
        assert results, f"{name}: no result from pev (exit {open(f'{out}/{name}.exit').read().strip()}); see {out}/{name}.err"
        result = results[-1]
        stats = json.load(open(f"{out}/{name}.stats.json"))["roles"]
        calls = json.load(open(f"{out}/{name}.calls.json"))
        role = "executor"
        s = stats[role]
        # pev's usage covers every role: compare it with the mock's over every role.
        total = {k: sum(r[k] for r in stats.values()) for k in ("calls", "input", "cache_read", "cache_write", "prompt")}
        u = result["usage"]
        pev = (u["llm_calls"], u["input_tokens"], u.get("cache_read_tokens", 0), u.get("cache_write_tokens", 0))
        mock = (total["calls"], total["prompt"], total["cache_read"], total["cache_write"])
        assert pev == mock, f"{name}: pev's usage {pev} differs from the mock's {mock}"
        # Every call the mock answered was the scripted one: 25 in loop mode, 10 executor turns.
        expected = 25 if scenario == "loop" else 10
        assert s["calls"] == expected, f"{name}: {s['calls']} executor calls, expected {expected}"
        rows.append(dict(
            scenario=scenario, mode=mode, status=result["status"], calls=s["calls"],
            prompt=s["prompt"], read=s["cache_read"], write=s["cache_write"], plain=s["input"],
            share=s["cache_read"] / s["prompt"], cost=cost(s["input"], s["cache_read"], s["cache_write"]),
            uncached=cost(s["prompt"], 0, 0), pev_saved=u.get("cache_saved_usd", 0.0),
            other={r: v for r, v in stats.items() if r != role},
            pev_total=pev,
        ))
        json.dump(rows[-1], open(f"{out}/{name}.row.json", "w"), indent=1)

label = {"loop": "loop mode, 25 calls", "plan": "executor step, 10 turns"}
print()
print("| scenario | mode | pev status | calls | prompt tokens | cache reads | cache writes | plain input | cached share | input cost | without cache |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {label[r['scenario']]} | {r['mode']} | {r['status']} | {r['calls']} | {r['prompt']:,} | {r['read']:,} | "
          f"{r['write']:,} | {r['plain']:,} | {r['share']*100:.1f}% | ${r['cost']:.4f} | ${r['uncached']:.4f} |")
print()
for scenario in scenarios:
    before, after = [r for r in rows if r["scenario"] == scenario]
    print(f"{label[scenario]}: cached share {before['share']*100:.1f}% -> {after['share']*100:.1f}% "
          f"(target 80%: {'met' if after['share'] >= 0.8 else 'MISSED'}); input cost ${before['cost']:.4f} -> "
          f"${after['cost']:.4f} ({(1 - after['cost'] / before['cost'])*100:.0f}% less)")
print()
print("cross-check: pev's result usage (calls, prompt tokens, cache reads, cache writes; all roles) "
      "equals the mock's count in every run:")
for r in rows:
    extra = ", ".join(f"{k} {v['calls']} calls {v['prompt']:,} prompt, {v['cache_read']:,} read, {v['cache_write']:,} written"
                      for k, v in r["other"].items())
    print(f"  {r['scenario']}-{r['mode']}: pev {r['pev_total']}, cache_saved_usd {r['pev_saved']:.4f}"
          + (f"; other roles: {extra}" if extra else ""))
PY
