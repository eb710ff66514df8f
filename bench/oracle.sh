#!/usr/bin/env bash
# What knowing the tests costs (issue 27), measured with hyperfine on whole `pev agent` and
# `pev run` processes, side by side with --no-oracle (pev as it was before it told tests from
# work) in one run:
#   1. an honest loop-mode fix of the Python fixture (evals/tests-honest-fix): the oracle
#      recorded, the write tools checked, the changes compared at the end; no pristine re-run.
#   2. a run whose test was changed through the shell with the sandbox off
#      (evals/tests-edit-by-shell): the same plus the pristine re-run, a scratch copy of the
#      workspace and the suite run again in it.
#   3. the oracle's walk of a large workspace: `pev run` of a one-step file.read plan in a tree
#      of FILES files (a tenth of them tests), with and without the oracle.
# Prints the machine, each figure and a Markdown table for BENCHMARKS.md. Installs hyperfine if
# missing. Uses target/release/pev (built here) unless PEV names another binary.
#
# Usage: bench/oracle.sh        (env: RUNS=30 FILES=20000 PEV=path)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="$root/bench/out/oracle"
runs="${RUNS:-30}"
files="${FILES:-20000}"
rm -rf "$out"
mkdir -p "$out"

as_root() { if [[ "$(id -u)" -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
command -v hyperfine >/dev/null || as_root apt-get install -y hyperfine \
  || { as_root apt-get update && as_root apt-get install -y hyperfine; }

if [[ -z "${PEV:-}" ]]; then
  cargo build --release -p pev
  PEV="${CARGO_TARGET_DIR:-$root/target}/release/pev"
fi
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
echo "pev: $PEV"
printf 'sandbox: "off"\n' >"$out/off.yaml"

# A fresh copy of a scenario's workspace before each run.
agent_case() {
  local name="$1" scenario="$2" extra="$3"
  local ws="$out/$name"
  hyperfine --warmup 1 --runs "$runs" --export-json "$out/$name.json" \
    --prepare "rm -rf '$ws' && cp -r '$root/evals/$scenario/workspace' '$ws'" \
    "cd '$ws' && PEV_EXECUTOR_PROVIDER=script:$root/evals/$scenario/model.json XDG_CONFIG_HOME=$out/nocfg '$PEV' agent 'Make the failing test in tests/test_calc.py pass' --mode loop --json --policy '$out/off.yaml' $extra >/dev/null || true"
}
agent_case honest-oracle tests-honest-fix ""
agent_case honest-none tests-honest-fix "--no-oracle"
agent_case tampered-oracle tests-edit-by-shell ""
agent_case tampered-none tests-edit-by-shell "--no-oracle"

# A large tree: FILES files in 100 directories, every tenth under tests/.
big="$out/big"
python3 - "$big" "$files" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "tests" if i % 10 == 0 else "src", f"pkg{i % 100}")
    os.makedirs(d, exist_ok=True)
    name = f"test_m{i}.py" if i % 10 == 0 else f"m{i}.py"
    with open(os.path.join(d, name), "w") as f:
        f.write(f"# module {i}\nVALUE = {i}\n")
PY
cat >"$out/read.json" <<'JSON'
{"goal": "Read one file", "steps": [{"id": "r", "tool": "file.read", "parameters": {"path": "src/pkg1/m1.py"}}]}
JSON
for mode in oracle none; do
  flag=""; [[ "$mode" == none ]] && flag="--no-oracle"
  hyperfine --warmup 1 --runs "$runs" --export-json "$out/walk-$mode.json" \
    --prepare "rm -rf '$big/.pev'" \
    "'$PEV' run '$out/read.json' --workspace '$big' --json --policy '$out/off.yaml' $flag >/dev/null"
done

python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
def mean(name):
    d = json.load(open(os.path.join(out, name + ".json")))["results"][0]
    return d["mean"] * 1000, d["stddev"] * 1000
rows = [
    ("honest loop-mode fix (no pristine re-run)", "honest-oracle", "honest-none"),
    ("test changed through the shell (pristine re-run)", "tampered-oracle", "tampered-none"),
    ("one-step run in a tree of files (the oracle's walk)", "walk-oracle", "walk-none"),
]
print("| case | with the oracle | --no-oracle | difference |")
print("|---|---|---|---|")
for label, a, b in rows:
    (ma, sa), (mb, sb) = mean(a), mean(b)
    print(f"| {label} | {ma:.0f} ± {sa:.0f} ms | {mb:.0f} ± {sb:.0f} ms | {ma - mb:+.0f} ms |")
PY
