#!/usr/bin/env bash
# Side by side, one hyperfine run each: two pev binaries (before and after a re-lay of the code,
# issue 29) on the same inputs, so that a move that should change nothing is seen to change
# nothing: `pev lint` of a 10,000-step plan, and `pev run` of 2,000 cheap steps (file.read, all
# independent) on a fresh journal each time.
#
# Usage: OLD=path/to/old/pev NEW=path/to/new/pev bench/relay_compare.sh     (env: RUNS=10 STEPS=2000)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${OLD:?set OLD to the earlier pev binary}" "${NEW:?set NEW to the later pev binary}"
runs="${RUNS:-10}"; steps="${STEPS:-2000}"
work="$(mktemp -d /var/tmp/pev-relay.XXXXXX)"
trap 'rm -rf "$work"' EXIT
python3 "$root/bench/gen_plan.py" --steps 10000 --out "$work/lint.json" --policy-out "$work/lint-policy.yaml" >/dev/null
python3 "$root/bench/gen_run_plan.py" --kind read --steps "$steps" --out "$work/run.json" \
  --policy-out "$work/run-policy.yaml" >/dev/null
mkdir -p "$work/ws"; printf 'hello world\n' > "$work/ws/data.txt"
echo "machine: $(nproc) cores, $(uname -r); $(date -u +%Y-%m-%dT%H:%MZ)"
echo "old: $OLD ($(stat -c %s "$OLD") bytes)"; echo "new: $NEW ($(stat -c %s "$NEW") bytes)"
hyperfine -N --warmup 2 --runs "$runs" -i \
  -n "old lint 10k" "$OLD lint $work/lint.json --policy $work/lint-policy.yaml --format json" \
  -n "new lint 10k" "$NEW lint $work/lint.json --policy $work/lint-policy.yaml --format json"
hyperfine --warmup 1 --runs "$runs" -i \
  --prepare "rm -rf $work/ws/.pev" \
  -n "old run $steps reads" "$OLD run $work/run.json --policy $work/run-policy.yaml --workspace $work/ws --json --yes > /dev/null" \
  -n "new run $steps reads" "$NEW run $work/run.json --policy $work/run-policy.yaml --workspace $work/ws --json --yes > /dev/null"
