#!/usr/bin/env bash
# The cost of confinement per `shell.exec` call (issue 12): one plan of N `shell.exec` steps
# running `true`, run with --jobs 1 by the same release pev binary under three sandboxes, side
# by side in one run:
#   off      sandbox: off (spawn /bin/sh in a process group: the cost before the sandbox existed)
#   landlock sandbox: auto on a PATH without bwrap, PEV_SANDBOX_NAMESPACES=off (helper
#            supervisor + Landlock/seccomp stage)
#   pev-ns   sandbox: auto on a PATH without bwrap: the above plus pev's own namespaces (the
#            full sandbox without bubblewrap, issue 28)
#   full     sandbox: auto with bubblewrap (the Landlock/seccomp stage inside bwrap's namespaces)
# For each it prints the median and p90 of the calls' own duration (tool.finished duration_ms:
# spawn to exit, output read) and the wall time of the whole run divided by N.
#
# Usage: bench/sandbox_cost.sh        env: PEV=path/to/pev (skips the build), N=200 (steps)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
n="${N:-200}"
if [[ -z "${PEV:-}" ]]; then
  cargo build --release -p pev --manifest-path "$root/Cargo.toml" >&2
  PEV="$root/target/release/pev"
  [[ -n "${CARGO_TARGET_DIR:-}" ]] && PEV="$CARGO_TARGET_DIR/release/pev"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 - "$n" >"$work/plan.json" <<'PY'
import json, sys
n = int(sys.argv[1])
steps = [{"id": f"s{i}", "tool": "shell.exec", "args": {"command": "true"}} for i in range(n)]
print(json.dumps({"goal": "measure spawn cost", "steps": steps}))
PY
# A PATH with everything in /usr/bin but bwrap, for the Landlock-only row.
mkdir -p "$work/nobwrap"
for f in /usr/bin/* /bin/*; do
  b="$(basename "$f")"; [[ "$b" == bwrap || -e "$work/nobwrap/$b" ]] || ln -s "$f" "$work/nobwrap/$b"
done
printf "sandbox: off\nmax_steps: 100000\n" >"$work/off.yaml"
printf "sandbox: auto\nmax_steps: 100000\n" >"$work/auto.yaml"
measure() { # name policy PATH [namespaces]
  local ws="$work/ws-$1"; mkdir -p "$ws"
  local start end
  start=$(date +%s%N)
  PEV_SANDBOX_NAMESPACES="${4:-on}" PATH="$3" "$PEV" run "$work/plan.json" --workspace "$ws" --policy "$2" --jobs 1 --yes --json \
    >"$work/$1.jsonl" 2>/dev/null || true
  end=$(date +%s%N)
  python3 - "$1" "$work/$1.jsonl" "$(( (end - start) / 1000 ))" "$n" <<'PY'
import json, sys, statistics
name, path, wall_us, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
events = [json.loads(l) for l in open(path)]
ms = sorted(e["duration_ms"] for e in events if e.get("event") == "tool.finished")
sandbox = next((e.get("sandbox") or {} for e in events if e.get("event") == "run.started"), {})
p90 = ms[int(len(ms) * 0.9) - 1]
print(f"{name:9} {sandbox.get('level', '?'):8} calls={len(ms):4}  median={statistics.median(ms):5.1f} ms"
      f"  p90={p90:4d} ms  wall/step={wall_us / n / 1000:6.2f} ms")
PY
}
echo "pev: $PEV; $n steps of shell.exec 'true', --jobs 1; $(nproc) cores; $(uname -r)"
measure off "$work/off.yaml" "$PATH"
measure landlock "$work/auto.yaml" "$work/nobwrap" off
measure pev-ns "$work/auto.yaml" "$work/nobwrap"
measure full "$work/auto.yaml" "$PATH"
# Reference: the same spawns without pev, for scale (a bare fork+exec of /bin/sh, and bwrap alone).
ref() { # name command...
  local start end
  start=$(date +%s%N)
  for _ in $(seq "$n"); do "${@:2}" >/dev/null 2>&1 || true; done
  end=$(date +%s%N)
  printf "%-18s per spawn=%6.2f ms\n" "$1" "$(echo "($end - $start) / $n / 1000000" | bc -l)"
}
ref "sh -c true" /bin/sh -c true
if command -v bwrap >/dev/null; then
  ref "bwrap sh -c true" bwrap --die-with-parent --unshare-pid --unshare-net --ro-bind / / \
    --dev /dev --proc /proc -- /bin/sh -c true
fi
