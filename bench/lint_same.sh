#!/usr/bin/env bash
# Same output, two binaries: runs `pev lint` of BEFORE and AFTER on every JSON and YAML file of
# the repository (examples/, evals/, crates/*/tests, python/, bench/ but not bench/out) and on
# generated plans of 1,000, 10,000 and 100,000 steps (bench/gen_plan.py), each with the default
# policy and with bench/policy.yaml (POLICIES= to change), in json, text and sarif; compares
# standard output, standard error and the exit code byte for byte. Files that are not plans
# are linted too (they must fail the same way). Exits 1 on the first difference (and shows it),
# 0 when every run matched.
#
# Usage: BEFORE=/path/to/old/pev AFTER=/path/to/new/pev bash bench/lint_same.sh
#   env: SIZES="1000 10000 100000"   POLICIES="- bench/policy.yaml"   OUT=bench/out/lint_same
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
: "${BEFORE:?BEFORE=path to the older pev}" "${AFTER:?AFTER=path to the newer pev}"
out="${OUT:-bench/out/lint_same}"
sizes="${SIZES:-1000 10000 100000}"
policies="${POLICIES:-- bench/policy.yaml}"
mkdir -p "$out"

plans=()
while IFS= read -r f; do plans+=("$f"); done < <(
  find examples evals crates python bench -type f \( -name '*.json' -o -name '*.yaml' -o -name '*.yml' \) \
    -not -path '*/target/*' -not -path 'bench/out/*' -not -path '*/node_modules/*' -not -path '*/.venv/*' | sort)
for n in $sizes; do
  [[ -f "$out/plan-$n.json" ]] || python3 bench/gen_plan.py --steps "$n" --out "$out/plan-$n.json"
  plans+=("$out/plan-$n.json")
done

runs=0
for plan in "${plans[@]}"; do
  for policy in $policies; do
    for format in json text sarif; do
      args=(lint "$plan" --format "$format")
      [[ "$policy" == "-" ]] || args+=(--policy "$policy")
      set +e
      "$BEFORE" "${args[@]}" >"$out/before.out" 2>"$out/before.err"; b=$?
      "$AFTER" "${args[@]}" >"$out/after.out" 2>"$out/after.err"; a=$?
      set -e
      runs=$((runs + 1))
      if [[ $a -ne $b ]] || ! cmp -s "$out/before.out" "$out/after.out" || ! cmp -s "$out/before.err" "$out/after.err"; then
        echo "DIFFERENT: pev ${args[*]} (exit $b before, $a after)"
        diff <(head -c 2000 "$out/before.out") <(head -c 2000 "$out/after.out") | head -20 || true
        diff "$out/before.err" "$out/after.err" | head -10 || true
        exit 1
      fi
    done
  done
done
echo "lint_same: ${#plans[@]} files, $runs runs, every output identical"
