#!/usr/bin/env bash
# The keyed journal's cost (issue 28): pev-store's journal bench (crates/store/benches/journal.rs:
# queued records, one durable record, `Store::integrity` of a 1,000-step run) built at BASE (the
# commit before the journal key; default f2abed9^) and at HEAD, then run alternately ROUNDS times
# (default 3), so that whatever else loads the machine falls on both sides alike.
#
#   bash bench/journal_mac.sh [BASE] [ROUNDS]
#
# BASE is checked out in a temporary worktree and given HEAD's bench, with the calls of before
# keys (`Store::open`, `Journal::start`); both share this checkout's target directory.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
base=${1:-f2abed9^}
rounds=${2:-3}
tmp=$(mktemp -d)
wt="$tmp/before"
git -C "$root" worktree add --detach "$wt" "$base" >/dev/null
trap 'git -C "$root" worktree remove --force "$wt"; rm -rf "$tmp"' EXIT
sed -e '/^\/\/\/ The journal key the benches write with/,/^}/d' \
    -e 's/Store::open_keyed(&at, keying())/Store::open(\&at)/' \
    -e 's/Journal::start_keyed(&at, keying())/Journal::start(\&at)/' \
    "$root/crates/store/benches/journal.rs" > "$wt/crates/store/benches/journal.rs"

# `--features bench` where the checkout has it (criterion is behind it since issue 32).
bench_features() {
  if grep -q '^bench = ' "$1/crates/store/Cargo.toml"; then echo "--features=bench"; fi
}

# The bench executable a checkout builds.
build() {
  (cd "$1" && CARGO_TARGET_DIR="$root/target" cargo bench -p pev-store $(bench_features "$1") --bench journal --no-run \
      --message-format=json 2>/dev/null) |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "journal" and m.get("executable"):
        print(m["executable"])' | tail -1
}
before=$(build "$wt")
after=$(build "$root")
echo "before: $base ($before)"
echo "after:  $(git -C "$root" rev-parse --short HEAD) ($after)"
for i in $(seq "$rounds"); do
  for side in before after; do
    bin=$before
    [ "$side" = after ] && bin=$after
    echo "== $side, round $i"
    (cd "$tmp" && "$bin" --bench --noplot 2>&1 | grep -E "^journal|^ +time:" | grep -v "%")
  done
done
