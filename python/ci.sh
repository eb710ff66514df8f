#!/usr/bin/env bash
# The Python package in CI (.ci/run calls this): build the wheel (extension + bundled binaries),
# install it with the plan-lint drop-in into a fresh venv, and run both pytest suites there
# (plan-lint's 13 upstream tests included) plus the adapters' tests against the real framework
# packages. Needs python3 (with venv) and PyPI; installs python3-venv with apt when it is missing.
#
# PEV_BUNDLE_PROFILE=dev (the default here) packs the debug binaries `cargo test` already built in
# target/, which saves a release build of pev; `PEV_BUNDLE_PROFILE=release python/ci.sh` builds
# the wheel as it ships.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"

if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get install -y --no-install-recommends python3-venv >/dev/null 2>&1 \
      || { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends python3-venv >/dev/null 2>&1; }
  fi
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export PEV_BUNDLE_PROFILE="${PEV_BUNDLE_PROFILE:-dev}"
export PEV_BUNDLE_TARGET_DIR="${PEV_BUNDLE_TARGET_DIR:-${CARGO_TARGET_DIR:-$root/target}}"

echo "-- build the wheel (maturin, PEV_BUNDLE_PROFILE=$PEV_BUNDLE_PROFILE)"
python3 -m venv "$work/build"
"$work/build/bin/pip" install -q "maturin>=1.9,<2"
(cd python && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}/py" \
  "$work/build/bin/maturin" build --release --locked --out "$work/dist")
wheel="$(ls "$work"/dist/pev_harness-*.whl)"
ls -l "$wheel"
python3 -m zipfile -l "$wheel" | grep -E "scripts/pev(-sandbox)?$|_pev.*\.so|py.typed"

echo "-- a fresh venv: the wheel, the plan-lint drop-in, the test and framework packages"
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q --upgrade pip
"$py" -m pip install -q "$wheel"
"$py" -m pip install -q ./python/plan-lint
"$py" -m pip install -q pytest jsonschema pyyaml langgraph openai-agents pydantic-ai-slim
test -x "$work/venv/bin/pev" && test -x "$work/venv/bin/pev-sandbox" && test -x "$work/venv/bin/plan-lint"
"$work/venv/bin/pev" --version
"$py" -m pev --version

echo "-- pytest: pev (lint parity with the CLI, run/gate/mcp, adapters)"
# Nothing may skip here: every framework package is installed above, and `pev check` exists.
(cd "$work" && PATH="$work/venv/bin:$PATH" "$py" -m pytest -q -rs -p no:cacheprovider "$root/python/tests") | tee "$work/pytest.log"
if grep -qE '[0-9]+ skipped' "$work/pytest.log"; then echo "python tests skipped in CI: see above"; exit 1; fi
echo "-- pytest: pev-plan-lint (plan-lint's 13 upstream tests, unchanged, and the drop-in's own)"
(cd "$work" && PATH="$work/venv/bin:$PATH" "$py" -m pytest -q -p no:cacheprovider "$root/python/plan-lint/tests")
echo "-- plan-lint's CI smoke command"
# plan-lint's own CI runs it from its checkout's root, where examples/ is; exit 1: the plan has errors.
cp -r python/plan-lint/src/plan_lint/examples "$work/examples"
code=0
(cd "$work" && "$py" -m plan_lint examples/price_drop.json --policy examples/policy.yaml --format json >"$work/smoke.json") || code=$?
test "$code" = 1 || { echo "plan-lint smoke: exit $code, expected 1"; cat "$work/smoke.json"; exit 1; }
grep -q TOOL_DENY "$work/smoke.json"
grep -q RAW_SECRET "$work/smoke.json"
echo "-- the README's Python section, as printed (python -c lines and the python block), in the venv"
python3 - "$root/README.md" "$work/readme" <<'PY'
import re, sys, pathlib
text = pathlib.Path(sys.argv[1]).read_text()
section = text.split("## Python", 1)[1].split("\n## ", 1)[0]
out = pathlib.Path(sys.argv[2]); out.mkdir()
commands = [l for b in re.findall(r"```sh\n(.*?)```", section, re.S) for l in b.splitlines() if l.startswith("python ")]
blocks = re.findall(r"```python\n(.*?)```", section, re.S)
assert commands and blocks, "the README's Python section lost its examples"
(out / "commands.sh").write_text("set -e\n" + "\n".join(commands) + "\n")
for i, b in enumerate(blocks):
    (out / f"block{i}.py").write_text(b)
PY
(cd "$root" && PATH="$work/venv/bin:$PATH" bash "$work/readme/commands.sh")
for block in "$work"/readme/block*.py; do (cd "$root" && "$py" "$block"); done
echo "python: ok"
