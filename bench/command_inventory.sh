#!/usr/bin/env bash
# The cost of finding what a command changed (issue 13 item 9: the workspace inventory taken
# before and after each `shell.exec` of a step that runs alone), side by side with a pev built
# before it: one plan of N `shell.exec` `true` steps, --jobs 1, sandbox off (to isolate the
# inventory), in workspaces of FILES small files (2 KiB each, 20 directories) and of none.
#
# Usage: PEV_BEFORE=path/to/old/pev PEV=path/to/pev bench/command_inventory.sh
#   env: N=50 (steps), FILES=2000
set -euo pipefail
n="${N:-50}"
files="${FILES:-2000}"
: "${PEV:?set PEV to the pev to measure}"
: "${PEV_BEFORE:?set PEV_BEFORE to a pev built before the inventory}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 - "$n" >"$work/plan.json" <<'PY'
import json, sys
n = int(sys.argv[1])
steps = [{"id": f"s{i}", "tool": "shell.exec", "args": {"command": "true"}} for i in range(n)]
print(json.dumps({"goal": "measure the inventory", "steps": steps}))
PY
printf "sandbox: off\nmax_steps: 100000\n" >"$work/policy.yaml"
make_ws() { # dir count
  mkdir -p "$1"
  python3 - "$1" "$2" <<'PY'
import os, sys
root, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    d = os.path.join(root, f"dir{i % 20}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}.txt"), "w") as f:
        f.write(("line %d\n" % i) * 256)
PY
}
measure() { # label pev workspace-files
  local ws="$work/ws-$RANDOM"
  make_ws "$ws" "$3"
  local start end
  start=$(date +%s%N)
  "$2" run "$work/plan.json" --workspace "$ws" --policy "$work/policy.yaml" --jobs 1 --yes --json \
    >/dev/null 2>&1 || true
  end=$(date +%s%N)
  printf "%-28s %5s files  wall/step=%7.2f ms\n" "$1" "$3" "$(echo "($end - $start) / $n / 1000000" | bc -l)"
}
echo "$n steps of shell.exec 'true', --jobs 1, sandbox off; $(nproc) cores; $(uname -r)"
for count in 0 "$files"; do
  measure "before (no inventory)" "$PEV_BEFORE" "$count"
  measure "with the inventory" "$PEV" "$count"
done
