#!/usr/bin/env bash
# Mutation testing of pev's decision core with cargo-mutants (https://mutants.rs): the code that
# decides what a run may claim (verify's outcome, re-check, mutation and goal rules; the loop's
# finalization gate and plan state; the final re-check's journal half; the budget; lint's step
# graph; provider retries; an MCP client's verdict and its stop gate). Each mutant is a plausible
# bug; a mutant that no test of its own crate notices ("missed") is a test that is owed. The
# target is zero missed mutants; the last report is in docs/mutants.md.
#
# Usage:
#   bench/mutants.sh                 every decision-core file (about 560 mutants: hours on 2 cores)
#   bench/mutants.sh FILE...         only these files (paths from the repository root)
#   bench/mutants.sh --changed BASE  only the mutants in lines of the decision core changed since
#                                    the git revision BASE (what CI runs when those files change)
#   bench/mutants.sh --rotate K/N    shard K of N (0-based) of the decision core and the settled
#                                    `full` files, judged by each crate's unit tests: what CI runs on
#                                    every change (K from the commit count), so every mutant of
#                                    those files is tried again once every N changes
#   bench/mutants.sh --full [FILE...] the decision core and what decides confinement and a client's
#                                    session (`full` below: pev-mcp's sessions, the sandbox's
#                                    hidden / read-only / writable computation), every test of the
#                                    mutated crate judging (its unit and integration tests), and with
#                                    MUTANTS_CLI=1 the CLI's suite too (`--test-package pev`: hours)
# env: MUTANTS_OUT (default bench/out/mutants), MUTANTS_TIMEOUT (seconds a mutant's tests may take;
# default 60: a mutant that makes a test loop counts as caught, not as a wait), MUTANTS_IN_PLACE=1 to mutate this tree in place
# (faster: reuses target/; never while someone edits the tree), MUTANTS_JOBS (parallel mutants; default 1).
#
# Each crate's own unit tests (`--lib`) judge its mutants: the decision core is tested where it
# lives, and the unit tests are what build fast enough to run hundreds of times. Installs
# cargo-mutants with `cargo install --locked` when it is missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

core=(
  crates/verify/src/outcome.rs
  crates/verify/src/recheck.rs
  crates/verify/src/mutation.rs
  crates/verify/src/goal.rs
  crates/verify/src/mismatch.rs
  crates/engine/src/verdict/final_check.rs
  crates/engine/src/agent/loop_mode/gate.rs
  crates/engine/src/agent/loop_mode/plan_state.rs
  crates/engine/src/agent/budget.rs
  crates/lint/src/graph.rs
  crates/providers/src/retry.rs
  crates/mcp/src/verdict.rs
  crates/mcp/src/gate.rs
)

# Issue 33: beyond the decision core, the code that decides a client's session and run, and
# what a command may read and write. `full_re` is matched against each mutant's name (its path
# and function): it keeps every mutant of the files named after a rule (session, gate, verdict,
# mismatch, outcome, ...) and, in the sandbox's lib.rs and confine.rs, only the functions that
# compute what is hidden, read-only and writable (the rest is process plumbing the escape
# tests judge).
full=(
  crates/mcp/src/session.rs
  crates/sandbox/src/lib.rs
  crates/sandbox/src/confine.rs
)
# The `full` files whose survivors are settled (docs/mutants.md): they join the rotation, so a
# change that lets a mutant of them survive fails CI within N changes.
settled_full=(
  crates/mcp/src/session.rs
  crates/sandbox/src/lib.rs
  crates/sandbox/src/confine.rs
)
full_re='session|find_run|load|pinned|launch_in|hidden_paths|credential_files|readable_roots|grant|hidden_ancestors|verdict|gate|mismatch|same_file|named_files|stem_mentioned|outcome|recheck|mutation|goal|final_check|plan_state|budget|graph|retry'

out="${MUTANTS_OUT:-bench/out/mutants}"
mkdir -p "$out"
args=(--no-config --test-workspace=false --baseline skip --timeout "${MUTANTS_TIMEOUT:-60}" -o "$out"
      --cargo-test-arg=--lib)
# In place there is one tree, so one mutant at a time (cargo-mutants refuses --jobs with it).
if [[ "${MUTANTS_IN_PLACE:-0}" == 1 ]]; then
  args+=(--in-place)
else
  args+=(-j "${MUTANTS_JOBS:-1}")
fi

files=()
if [[ "${1:-}" == "--full" ]]; then
  shift
  # Every test of the mutated crate judges (not only `--lib`), and the CLI's with MUTANTS_CLI=1.
  kept=()
  for a in "${args[@]}"; do [[ "$a" == --cargo-test-arg=--lib ]] || kept+=("$a"); done
  args=("${kept[@]}")
  [[ "${MUTANTS_CLI:-0}" == 1 ]] && args+=(--test-package pev)
  args+=(--re "$full_re")
  if [[ $# -gt 0 ]]; then files=("$@"); else files=("${core[@]}" "${full[@]}"); fi
elif [[ "${1:-}" == "--rotate" ]]; then
  shard="${2:?--rotate needs K/N}"
  [[ "$shard" =~ ^[0-9]+/[0-9]+$ ]] || { echo "--rotate: K/N, not $shard" >&2; exit 2; }
  args+=(--shard "$shard" --re "$full_re")
  files=("${core[@]}" "${settled_full[@]}")
elif [[ "${1:-}" == "--changed" ]]; then
  base="${2:?--changed needs a git revision}"
  diff="$out/changed.diff"
  git diff "$base" -- "${core[@]}" >"$diff"
  if [[ ! -s "$diff" ]]; then
    echo "mutants: no decision-core file changed since $base; nothing to mutate"
    exit 0
  fi
  args+=(--in-diff "$diff")
  files=("${core[@]}")
elif [[ $# -gt 0 ]]; then
  files=("$@")
else
  files=("${core[@]}")
fi
for f in "${files[@]}"; do args+=(-f "$f"); done

command -v cargo-mutants >/dev/null || cargo install --locked cargo-mutants

echo "== cargo mutants ${args[*]}"
status=0
cargo mutants "${args[@]}" || status=$?
echo
for kind in caught missed timeout unviable; do
  printf '%-9s %s\n' "$kind" "$(wc -l <"$out/mutants.out/$kind.txt" 2>/dev/null || echo 0)"
done
if [[ -s "$out/mutants.out/missed.txt" ]]; then
  echo
  echo "missed (each is a test owed, or an equivalent mutant to explain in docs/mutants.md):"
  cat "$out/mutants.out/missed.txt"
fi
# cargo-mutants exits 3 when its only problems are timeouts. A mutant whose tests outlast
# MUTANTS_TIMEOUT made them hang (an endless loop: the unit tests take about a second), so the
# tests noticed it: counted as caught, as the header says, not as a failure of the run. A
# missed mutant still fails whatever else happened.
if [[ "$status" == 3 && ! -s "$out/mutants.out/missed.txt" ]]; then
  echo
  echo "timeouts (each hung its crate's tests: counted as caught):"
  cat "$out/mutants.out/timeout.txt" 2>/dev/null || true
  status=0
fi
exit "$status"
