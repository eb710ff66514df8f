#!/usr/bin/env bash
# How long the test suite takes on a fresh clone (issue 32, item 6): `cargo test --workspace
# --locked` in a clone of HEAD with a target directory of its own, once cold (nothing built,
# the crates already downloaded) and then warm (everything built, nothing changed), with the
# wall time of each, the load average beside it, and the slowest test binaries of the warm run.
# With STRESS=1 both runs are made with `stress -c 2` keeping both cores busy.
#
# Usage: bench/test_suite.sh [--check]  (env: KEEP=1 keeps the clone; STRESS=1; REV=HEAD)
# --check fails (exit 1) when a run fails or takes more than 20% longer than the recorded
# figure (RECORDED_COLD_S=247, RECORDED_WARM_S=101: BENCHMARKS.md, issue 32, on a quiet 2-core
# machine; another machine should pass its own).
# Writes nothing to this tree; the clone and its target (~5 GB) live under $TMPDIR and are
# removed at the end unless KEEP=1.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="${REV:-HEAD}"
work="$(mktemp -d "${TMPDIR:-/tmp}/pev-test-suite-XXXXXX")"
cleanup() {
  if [[ -n "${stress_pid:-}" ]]; then kill "$stress_pid" 2>/dev/null || true; fi
  if [[ "${KEEP:-0}" != 1 ]]; then rm -rf "$work"; else echo "kept: $work"; fi
}
trap cleanup EXIT

git clone --quiet --no-hardlinks "$root" "$work/pev"
git -C "$work/pev" checkout --quiet "$rev"
cd "$work/pev"
export CARGO_TARGET_DIR="$work/target"
# The crates are fetched before the clock starts: the figure is building and testing, not the
# network.
cargo fetch --locked >/dev/null

if [[ "${STRESS:-0}" == 1 ]]; then
  command -v stress >/dev/null || { echo "STRESS=1 needs stress (apt-get install stress)"; exit 2; }
  stress -c 2 >/dev/null 2>&1 &
  stress_pid=$!
fi

timed() {
  local name="$1" log="$work/$1.log" start end
  start=$(date +%s.%N)
  if cargo test --workspace --locked >"$log" 2>&1; then status=ok; else status="FAILED (see $log)"; fi
  end=$(date +%s.%N)
  elapsed=$(echo "$end - $start" | bc)
  printf '%s: %.1f s, %s, load average %s\n' "$name" "$elapsed" "$status" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
  local recorded="${2:?}"
  if [[ "$status" != ok ]] || (( $(echo "$elapsed > 1.2 * $recorded" | bc) )); then
    failed=1
  fi
  if [[ "$status" != ok ]]; then
    # The clone goes at the end (unless KEEP=1): what failed is shown here.
    grep -E -A12 "^---- |panicked at|^error" "$log" | head -60 | sed 's/^/    /'
  fi
}

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, rev $(git rev-parse --short HEAD), stress: ${STRESS:-0}"
failed=0
timed cold "${RECORDED_COLD_S:-247}"
timed warm "${RECORDED_WARM_S:-101}"
echo "slowest test binaries of the warm run (s):"
grep -E '^\s+Running|test result' "$work/warm.log" | paste - - |
  sed -E 's/.*Running ([^ ]+) \(([^)]+)\).*finished in ([0-9.]+)s.*/\3 \1 \2/' |
  sort -rn | head -5 | sed 's/^/  /'
if [[ "${1:-}" == --check && "$failed" == 1 ]]; then
  echo "check: FAILED (a run failed, or took more than 20% over the recorded figure)"
  exit 1
fi
