#!/usr/bin/env bash
# Benchmarks the parallel efficiency of `pev run`: 64 independent `shell.exec` steps of
# `sleep 0.2` (bench/gen_run_plan.py --kind sleep) with --jobs 16. The critical path is
# 64 / 16 * 0.2 s = 0.8 s; the target is a wall time within 1.25x of it (1.0 s). Times the whole
# process with hyperfine (fresh journal per run: --prepare removes WS/.pev) and prints the
# ratio to the critical path, plus the same plan with --jobs 64 (critical path 0.2 s) to show
# what the fixed costs are. Also reports, from one run's JSON events, how many steps were
# running at once at most. Writes everything to bench/out/run/.
#
# Usage: bench/run_parallel.sh        (env: RUNS=10)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out=bench/out/run
runs="${RUNS:-10}"
mkdir -p "$out"

as_root() { if [[ "$(id -u)" -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  as_root apt-get install -y "$@" || { as_root apt-get update && as_root apt-get install -y "$@"; }
}
command -v hyperfine >/dev/null || apt_install hyperfine

cargo build --release -p pev
pev="${CARGO_TARGET_DIR:-$root/target}/release/pev"
[[ "$pev" = /* ]] || pev="$root/$pev"

ws="$root/$out/ws-sleep"
mkdir -p "$ws"
plan="$out/sleep-64.json"
python3 bench/gen_run_plan.py --kind sleep --steps 64 --seconds 0.2 --out "$plan"
reset="rm -rf $ws/.pev"

echo "## machine"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
free -h | sed -n '1,2p'
echo "rustc: $(rustc --version); hyperfine: $(hyperfine --version)"
echo "pev: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ' + uncommitted changes in crates/')"

echo "## one run with --jobs 16: outcome and concurrency"
$reset
"$pev" run "$plan" --workspace "$ws" --json --jobs 16 >"$out/sleep-64-j16.jsonl" 2>"$out/sleep-64-j16.err" \
  || { echo "pev exited $?"; cat "$out/sleep-64-j16.err"; exit 1; }
python3 - "$out/sleep-64-j16.jsonl" <<'PY'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
result = events[-1]["result"]
running = peak = 0
for e in events:  # events are in seq order
    if e["event"] == "step.started":
        running += 1
        peak = max(peak, running)
    elif e["event"] == "step.finished":
        running -= 1
print(f"status {result['status']}, {sum(s['status'] == 'done' for s in result['steps'])} steps done, "
      f"at most {peak} steps running at once, duration_ms {result['duration_ms']}")
PY

echo "## timing (hyperfine)"
for jobs in 16 64; do
  hyperfine --style basic -N --warmup 1 --runs "$runs" --prepare "$reset" \
    --export-json "$out/hyperfine-sleep-64-j$jobs.json" -n "pev run, 64 x sleep 0.2, --jobs $jobs" \
    "$pev run $plan --workspace $ws --json --jobs $jobs"
done
$reset

echo "## results"
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
print("| plan | --jobs | critical path (s) | mean ± σ (s) | min … max (s) | runs | mean / critical path | max / critical path |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for jobs in (16, 64):
    r = json.load(open(os.path.join(out, f"hyperfine-sleep-64-j{jobs}.json")))["results"][0]
    cp = 64 / jobs * 0.2 if jobs <= 64 else 0.2
    print(f"| 64 x `sleep 0.2` | {jobs} | {cp:.1f} | {r['mean']:.3f} ± {r['stddev'] or 0:.3f} | "
          f"{r['min']:.3f} … {r['max']:.3f} | {len(r['times'])} | {r['mean'] / cp:.3f} | {r['max'] / cp:.3f} |")
PY
