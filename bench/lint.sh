#!/usr/bin/env bash
# Benchmarks `pev lint` as a whole process on generated plans of 1k, 10k and 100k steps, and
# plan-lint 0.0.3 on the same 10k plan and policy in the same run. Prints the machine, every
# figure (hyperfine mean ± stddev, ms per step, peak RSS from /usr/bin/time -v) and a Markdown
# table for BENCHMARKS.md. Installs what it needs on Debian (hyperfine, time) and creates
# bench/.venv with plan-lint 0.0.3 if it is missing. Everything it writes goes to bench/out/.
#
# Usage: bench/lint.sh            (env: SIZES="1000 10000 100000" RUNS=10 PLAN_LINT_RUNS=5)
#        bench/lint.sh --check    the regression check at 100,000 steps: bench/lint_scale.sh,
#                                 which fails when the median wall time or peak RSS is more
#                                 than 20% over the recorded figures (BEFORE=path to compare)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [[ "${1:-}" == "--check" ]]; then
  exec bash bench/lint_scale.sh
fi
out=bench/out
sizes="${SIZES:-1000 10000 100000}"
runs="${RUNS:-10}"
pl_runs="${PLAN_LINT_RUNS:-5}"
pl_size=10000
mkdir -p "$out"

as_root() { if [[ "$(id -u)" -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  as_root apt-get install -y "$@" || { as_root apt-get update && as_root apt-get install -y "$@"; }
}
command -v hyperfine >/dev/null || apt_install hyperfine
[[ -x /usr/bin/time ]] || apt_install time
if [[ ! -x bench/.venv/bin/plan-lint ]]; then
  python3 -m venv bench/.venv
  bench/.venv/bin/pip install --quiet plan-lint==0.0.3
fi
plan_lint=bench/.venv/bin/plan-lint

cargo build --release -p pev
pev="${CARGO_TARGET_DIR:-$root/target}/release/pev"
[[ "$pev" = /* ]] || pev="$root/$pev"

python3 bench/gen_plan.py --policy-out "$out/policy.yaml"
for n in $sizes; do python3 bench/gen_plan.py --steps "$n" --out "$out/plan-$n.json"; done
[[ -f "$out/plan-$pl_size.json" ]] || python3 bench/gen_plan.py --steps "$pl_size" --out "$out/plan-$pl_size.json"

echo "## machine"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
free -h | sed -n '1,2p'
echo "rustc: $(rustc --version); hyperfine: $(hyperfine --version); plan-lint: $("$plan_lint" --help >/dev/null 2>&1 && bench/.venv/bin/pip show plan-lint 2>/dev/null | grep -m1 Version)"
echo "python: $(bench/.venv/bin/python --version)"

# One run of each command first, to show what it reports and to stop on a broken run (hyperfine
# is told to ignore the exit status, because a plan with an error finding exits 1 by contract).
summarise() { # label, output file
  python3 - "$1" "$2" <<'PY'
import collections, json, sys
label, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
except Exception as e:  # a crash or a usage error prints no JSON
    sys.exit(f"{label}: output is not a lint result ({e}); see {path}")
count = lambda fs: dict(collections.Counter(f["code"] for f in fs))
print(f"{label}: status {r['status']}, risk {r['risk_score']}, errors {count(r['errors'])}, warnings {count(r['warnings'])}")
PY
}
echo "## what each run reports"
for n in $sizes; do
  rc=0; "$pev" lint "$out/plan-$n.json" --policy "$out/policy.yaml" --format json >"$out/pev-$n.out.json" 2>"$out/pev-$n.err" || rc=$?
  if [[ $rc -gt 1 ]]; then echo "pev exited $rc on plan-$n:"; cat "$out/pev-$n.err"; exit 1; fi
  summarise "pev $n steps (exit $rc)" "$out/pev-$n.out.json"
done
rc=0; "$plan_lint" "$out/plan-$pl_size.json" --policy "$out/policy.yaml" --format json >"$out/plan-lint-$pl_size.out.json" 2>&1 || rc=$?
summarise "plan-lint $pl_size steps (exit $rc)" "$out/plan-lint-$pl_size.out.json"

echo "## timing (hyperfine)"
for n in $sizes; do
  hyperfine --style basic -N -i --warmup 3 --runs "$runs" --export-json "$out/hyperfine-pev-$n.json" \
    -n "pev lint, $n steps" "$pev lint $out/plan-$n.json --policy $out/policy.yaml --format json"
done
hyperfine --style basic -N -i --warmup 1 --runs "$pl_runs" --export-json "$out/hyperfine-plan-lint-$pl_size.json" \
  -n "plan-lint 0.0.3, $pl_size steps" "$plan_lint $out/plan-$pl_size.json --policy $out/policy.yaml --format json"

echo "## peak memory (/usr/bin/time -v)"
for n in $sizes; do
  /usr/bin/time -v -o "$out/time-pev-$n.txt" "$pev" lint "$out/plan-$n.json" --policy "$out/policy.yaml" --format json >/dev/null 2>&1 || true
done
/usr/bin/time -v -o "$out/time-plan-lint-$pl_size.txt" "$plan_lint" "$out/plan-$pl_size.json" --policy "$out/policy.yaml" --format json >/dev/null 2>&1 || true

echo "## results"
python3 - "$out" "$pl_size" $sizes <<'PY'
import json, os, re, sys
out, pl_size, sizes = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3:]]
def timing(name):
    r = json.load(open(os.path.join(out, f"hyperfine-{name}.json")))["results"][0]
    return r["mean"] * 1e3, r["stddev"] * 1e3 if r["stddev"] is not None else 0.0, r["min"] * 1e3, r["max"] * 1e3, len(r["times"])
def rss_mb(name):
    text = open(os.path.join(out, f"time-{name}.txt")).read()
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    return int(m.group(1)) / 1024 if m else float("nan")
def size_mb(n):
    return os.path.getsize(os.path.join(out, f"plan-{n}.json")) / 1e6
print("| tool | steps | plan size | mean ± σ (ms) | min … max (ms) | runs | µs per step | peak RSS (MB) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for n in sizes:
    mean, sd, lo, hi, runs = timing(f"pev-{n}")
    print(f"| pev lint | {n:,} | {size_mb(n):.1f} MB | {mean:.1f} ± {sd:.1f} | {lo:.1f} … {hi:.1f} | {runs} | {mean * 1e3 / n:.2f} | {rss_mb(f'pev-{n}'):.1f} |")
mean, sd, lo, hi, runs = timing(f"plan-lint-{pl_size}")
print(f"| plan-lint 0.0.3 | {pl_size:,} | {size_mb(pl_size):.1f} MB | {mean:.1f} ± {sd:.1f} | {lo:.1f} … {hi:.1f} | {runs} | {mean * 1e3 / pl_size:.2f} | {rss_mb(f'plan-lint-{pl_size}'):.1f} |")
PY
