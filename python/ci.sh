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
(cd "$work" && PATH="$work/venv/bin:$PATH" "$py" -m pytest -q -p no:cacheprovider "$root/python/tests")
echo "-- pytest: pev-plan-lint (plan-lint's 13 upstream tests, unchanged, and the drop-in's own)"
(cd "$work" && PATH="$work/venv/bin:$PATH" "$py" -m pytest -q -p no:cacheprovider "$root/python/plan-lint/tests")
echo "-- plan-lint's CI smoke command"
(cd python/plan-lint/src/plan_lint && "$py" -m plan_lint examples/price_drop.json --policy examples/policy.yaml --format json >"$work/smoke.json" || true)
grep -q TOOL_DENY "$work/smoke.json" && grep -q RAW_SECRET "$work/smoke.json"
echo "python: ok"
