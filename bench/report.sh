#!/usr/bin/env bash
# `pev report` on a 1,000-step run (issue 15): the HTML file's size, the time to write it, and
# the time headless Chromium takes to open it (load, parse, lay out, print the DOM), beside the
# same for a 3-step run.
# Usage: PEV=target/release/pev bench/report.sh     env: N=1000
set -euo pipefail
: "${PEV:?set PEV to the pev to measure}"
n="${N:-1000}"
browser="$(command -v chromium || command -v chromium-browser || true)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for steps in 3 "$n"; do
  ws="$work/ws-$steps"
  mkdir -p "$ws"
  python3 "$(dirname "$0")/chain_plan.py" "$steps" >"$ws/plan.json"
  printf "sandbox: off\nmax_steps: 100000\n" >"$ws/policy.yaml"
  (cd "$ws" && "$PEV" run plan.json --policy policy.yaml --yes >/dev/null 2>&1)
  start=$(date +%s%N)
  (cd "$ws" && "$PEV" report last -o "$ws/report.html" >/dev/null)
  end=$(date +%s%N)
  size=$(stat -c %s "$ws/report.html")
  open="n/a"
  if [[ -n "$browser" ]]; then
    s=$(date +%s%N)
    "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --dump-dom "file://$ws/report.html" >/dev/null 2>&1
    e=$(date +%s%N)
    open="$(( (e - s) / 1000000 )) ms"
  fi
  echo "| $steps steps | $(( size / 1024 )) KB | $(( (end - start) / 1000000 )) ms | $open |"
done
