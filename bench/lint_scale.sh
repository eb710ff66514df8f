#!/usr/bin/env bash
# Regression check for `pev lint` at scale (issue 32): wall time, CPU time and peak RSS of
# `pev lint PLAN --policy bench/policy.yaml --format json` on generated plans of 1k, 10k and 100k
# steps (bench/gen_plan.py), RUNS runs each, medians. With a second binary (BEFORE=path) both are
# run side by side, alternating run by run, and their outputs are compared byte for byte.
#
# Fails (exit 1) when the 100k-step median wall time exceeds the recorded figure by more than
# 20%, or the median CPU time (user + system) or the median peak RSS does, or when BEFORE is
# given and the outputs differ. The recorded figures are those of issue 32's section in
# BENCHMARKS.md ("`pev lint` at 100,000 steps"), measured on a 2-core machine; another machine
# should pass its own (RECORDED_WALL_S, RECORDED_CPU_S, RECORDED_RSS_MB). Wall time depends on
# what else the machine is doing (CPU time much less so): the load average is printed with the
# figures, and a failure on a busy machine is worth a second run before it is believed.
# `bench/lint.sh --check` runs this script. The defaults are the default build's (glibc malloc),
# recorded on 2026-11-27 16:05 UTC at a load average of 1.9 (BENCHMARKS.md, "fourth pass"),
# so on a busier machine the wall time may fail first. (A build with `--features mimalloc` was
# last measured before that pass: 0.49 s, 0.55 s of CPU, 198 MB.)
#
# Not part of `cargo test`: it builds a release binary and runs for a minute.
#
# Usage: bench/lint_scale.sh
#   env: BEFORE=/path/to/older/pev   PEV=/path/to/pev (skips the build)   RUNS=5
#        SIZES="1000 10000 100000"   RECORDED_WALL_S=0.245   RECORDED_CPU_S=0.41
#        RECORDED_RSS_MB=137
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out=bench/out/lint_scale
runs="${RUNS:-5}"
sizes="${SIZES:-1000 10000 100000}"
recorded_wall="${RECORDED_WALL_S:-0.245}"
recorded_cpu="${RECORDED_CPU_S:-0.41}"
recorded_rss="${RECORDED_RSS_MB:-137}"
policy=bench/policy.yaml
mkdir -p "$out"

[[ -x /usr/bin/time ]] || { echo "lint_scale: /usr/bin/time is needed (apt-get install time)" >&2; exit 2; }
if [[ -z "${PEV:-}" ]]; then
  cargo build --release -p pev
  PEV="${CARGO_TARGET_DIR:-$root/target}/release/pev"
fi
[[ "$PEV" = /* ]] || PEV="$root/$PEV"
bins=("$PEV")
if [[ -n "${BEFORE:-}" ]]; then bins=("$BEFORE" "$PEV"); fi

for n in $sizes; do
  [[ -f "$out/plan-$n.json" ]] || python3 bench/gen_plan.py --steps "$n" --out "$out/plan-$n.json"
done

echo "## machine"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc), kernel $(uname -r)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for b in "${bins[@]}"; do echo "binary: $b ($(stat -c %s "$b") bytes)"; done

# One run of each first: its output is kept for the comparison, and a crash stops the script
# (a plan with error findings exits 1 by contract; 2 would be a bad input).
status=0
for n in $sizes; do
  for k in "${!bins[@]}"; do
    rc=0
    "${bins[$k]}" lint "$out/plan-$n.json" --policy "$policy" --format json \
      >"$out/out-$n-$k.json" 2>"$out/err-$n-$k.txt" || rc=$?
    if [[ $rc -gt 1 ]]; then
      echo "lint_scale: ${bins[$k]} exited $rc on plan-$n:" >&2
      cat "$out/err-$n-$k.txt" >&2
      exit 1
    fi
  done
  if [[ ${#bins[@]} -eq 2 ]]; then
    if cmp -s "$out/out-$n-0.json" "$out/out-$n-1.json"; then
      echo "plan-$n: outputs identical ($(stat -c %s "$out/out-$n-1.json") bytes)"
    else
      echo "plan-$n: OUTPUTS DIFFER (see $out/out-$n-0.json and $out/out-$n-1.json)"
      status=1
    fi
  fi
done

# Timed runs, alternating binaries run by run so that both see the same machine. Wall time is
# taken around /usr/bin/time (whose own %e has 10 ms steps), CPU time and peak RSS from it.
for n in $sizes; do
  for k in "${!bins[@]}"; do : >"$out/time-$n-$k.txt"; done
  for _ in $(seq "$runs"); do
    for k in "${!bins[@]}"; do
      start=$EPOCHREALTIME
      /usr/bin/time -f '%U %S %M' -o "$out/last.txt" \
        "${bins[$k]}" lint "$out/plan-$n.json" --policy "$policy" --format json \
        >/dev/null 2>&1 || true
      end=$EPOCHREALTIME
      echo "$(python3 -c "print(f'{$end - $start:.4f}')") $(tail -1 "$out/last.txt")" >>"$out/time-$n-$k.txt"
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out" "$recorded_wall" "$recorded_cpu" "$recorded_rss" "$sizes" "${bins[@]}" <<'PY' || status=1
import statistics, sys
out, sizes, bins = sys.argv[1], sys.argv[5].split(), sys.argv[6:]
wall_max, cpu_max, rss_max = (float(a) for a in sys.argv[2:5])
names = ["before", "after"] if len(bins) == 2 else ["pev"]
print("\n| binary | steps | wall median (s) | wall min…max (s) | CPU user+sys median (s) | CPU min (s) | peak RSS median (MB) | RSS min…max (MB) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
last = {}
for n in sizes:
    for k, name in enumerate(names):
        rows = [l.split() for l in open(f"{out}/time-{n}-{k}.txt") if l[:1].isdigit()]
        wall = [float(r[0]) for r in rows]
        cpu = [float(r[1]) + float(r[2]) for r in rows]
        rss = [int(r[3]) / 1024 for r in rows]
        med = (statistics.median(wall), statistics.median(cpu), statistics.median(rss))
        print(f"| {name} | {int(n):,} | {med[0]:.4f} | {min(wall):.4f}…{max(wall):.4f} | {med[1]:.2f} | {min(cpu):.2f} | {med[2]:.1f} | {min(rss):.1f}…{max(rss):.1f} |")
        last[(n, name)] = med
checked = [n for n in sizes if n == "100000"]
failed = False
for n in checked:
    wall, cpu, rss = last[(n, names[-1])]
    print(f"\n100k steps: wall {wall:.3f} s (recorded {wall_max:.3f} s, limit {1.2 * wall_max:.3f} s); "
          f"CPU {cpu:.2f} s (recorded {cpu_max:.2f} s, limit {1.2 * cpu_max:.2f} s); "
          f"peak RSS {rss:.1f} MB (recorded {rss_max:.1f} MB, limit {1.2 * rss_max:.1f} MB)")
    if wall > 1.2 * wall_max:
        print("FAIL: wall time more than 20% over the recorded figure"); failed = True
    if cpu > 1.2 * cpu_max:
        print("FAIL: CPU time more than 20% over the recorded figure"); failed = True
    if rss > 1.2 * rss_max:
        print("FAIL: peak RSS more than 20% over the recorded figure"); failed = True
if not checked:
    print("\n(no 100,000-step run in SIZES: nothing checked against the recorded figures)")
sys.exit(1 if failed else 0)
PY
exit $status
