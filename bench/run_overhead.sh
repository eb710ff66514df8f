#!/usr/bin/env bash
# Benchmarks the harness overhead of `pev run` per step, journal included: whole-process wall
# time (hyperfine) and peak RSS (/usr/bin/time -v) of `pev run PLAN --workspace WS --json` on
# plans of 1 and 10,000 cheap tool calls (bench/gen_run_plan.py), each run on a fresh journal
# and fresh output files (hyperfine --prepare removes WS/.pev and WS/out, then syncs). Per-step overhead is
# (time of the 10,000-step plan - time of the 1-step plan of the same tool) / 10,000.
# Plans: file.read of a 12-byte file, all independent (default --jobs = cores) and as one
# sequential chain; file.write of a new small file per step, independent and as a chain (a write
# journals its intent durably, one fsync'd commit, before it touches the file).
# Prints the machine, every figure and a Markdown table for BENCHMARKS.md. Installs hyperfine
# and time on Debian if they are missing. Everything it writes goes to bench/out/run/.
#
# Usage: bench/run_overhead.sh        (env: STEPS=10000 RUNS=10)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out=bench/out/run
steps="${STEPS:-10000}"
runs="${RUNS:-10}"
mkdir -p "$out"

as_root() { if [[ "$(id -u)" -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  as_root apt-get install -y "$@" || { as_root apt-get update && as_root apt-get install -y "$@"; }
}
command -v hyperfine >/dev/null || apt_install hyperfine
[[ -x /usr/bin/time ]] || apt_install time

cargo build --release -p pev
pev="${CARGO_TARGET_DIR:-$root/target}/release/pev"
[[ "$pev" = /* ]] || pev="$root/$pev"

ws="$root/$out/ws"
mkdir -p "$ws"
printf 'hello world\n' >"$ws/data.txt"
python3 bench/gen_run_plan.py --policy-out "$out/policy.yaml"
# name kind steps chain
cases=(
  "read-1 read 1 0"
  "read-indep-$steps read $steps 0"
  "read-chain-$steps read $steps 1"
  "write-1 write 1 0"
  "write-indep-$steps write $steps 0"
  "write-chain-$steps write $steps 1"
)
for c in "${cases[@]}"; do
  read -r name kind n chain <<<"$c"
  python3 bench/gen_run_plan.py --kind "$kind" --steps "$n" --chain "$chain" --out "$out/$name.json"
done
# sync: the deletion of the last run's 10,000 files is written back before the next timed run,
# not during it.
reset="rm -rf $ws/.pev $ws/out"
prepare="sh -c '$reset && sync'"

echo "## machine"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
free -h | sed -n '1,2p'
echo "disk under $out: $(df -h --output=source,fstype "$out" | tail -1)"
echo "rustc: $(rustc --version); hyperfine: $(hyperfine --version)"
echo "pev: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ' + uncommitted changes in crates/')"

# One run of each first, to show the outcome and stop on a broken run (every plan must end
# `success`, exit 0; a plan refused by lint or a failed step would time something else).
echo "## what each run reports"
for c in "${cases[@]}"; do
  read -r name _ <<<"$c"
  $reset
  "$pev" run "$out/$name.json" --policy "$out/policy.yaml" --workspace "$ws" --json >"$out/$name.jsonl" 2>"$out/$name.err" \
    || { echo "$name: pev exited $?"; cat "$out/$name.err"; exit 1; }
  tail -n 1 "$out/$name.jsonl" | python3 -c '
import json, sys
r = json.load(sys.stdin)["result"]
done = sum(1 for s in r["steps"] if s["status"] == "done")
print(sys.argv[1] + ":", r["status"], done, "steps done,", r["usage"]["tool_calls"], "tool calls, duration_ms", r["duration_ms"])
' "$name"
done

echo "## timing (hyperfine)"
for c in "${cases[@]}"; do
  read -r name _ <<<"$c"
  hyperfine --style basic -N --warmup 2 --runs "$runs" --prepare "$prepare" \
    --export-json "$out/hyperfine-$name.json" -n "pev run, $name" \
    "$pev run $out/$name.json --policy $out/policy.yaml --workspace $ws --json"
done

echo "## peak memory (/usr/bin/time -v)"
for c in "${cases[@]}"; do
  read -r name _ <<<"$c"
  $reset
  /usr/bin/time -v -o "$out/time-$name.txt" "$pev" run "$out/$name.json" --policy "$out/policy.yaml" \
    --workspace "$ws" --json >/dev/null 2>&1
done
$reset

echo "## results"
python3 - "$out" "$steps" <<'PY'
import json, os, re, sys
out, steps = sys.argv[1], int(sys.argv[2])
def timing(name):
    r = json.load(open(os.path.join(out, f"hyperfine-{name}.json")))["results"][0]
    return r["mean"] * 1e3, (r["stddev"] or 0.0) * 1e3, r["min"] * 1e3, r["max"] * 1e3, len(r["times"])
def rss_mb(name):
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(os.path.join(out, f"time-{name}.txt")).read())
    return int(m.group(1)) / 1024 if m else float("nan")
rows = [("read-1", "file.read", 1, "-"), (f"read-indep-{steps}", "file.read", steps, "independent"),
        (f"read-chain-{steps}", "file.read", steps, "one chain"), ("write-1", "file.write", 1, "-"),
        (f"write-indep-{steps}", "file.write", steps, "independent"), (f"write-chain-{steps}", "file.write", steps, "one chain")]
print("| plan | steps | dependencies | mean ± σ (ms) | min … max (ms) | runs | overhead per step (ms) | peak RSS (MB) |")
print("|---|---:|---|---:|---:|---:|---:|---:|")
for name, tool, n, deps in rows:
    mean, sd, lo, hi, runs = timing(name)
    base = timing("read-1" if tool == "file.read" else "write-1")[0]
    per = f"{(mean - base) / n:.3f}" if n > 1 else "-"
    print(f"| {tool} | {n:,} | {deps} | {mean:.1f} ± {sd:.1f} | {lo:.1f} … {hi:.1f} | {runs} | {per} | {rss_mb(name):.1f} |")
PY
