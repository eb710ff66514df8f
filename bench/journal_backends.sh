#!/usr/bin/env bash
# Journal throughput and per-step overhead on both backends, side by side in one run:
#   1. the criterion bench of the journal writer (crates/store/benches/journal.rs): queued
#      records per second (group commit) and one record_durable, on SQLite (WAL,
#      synchronous=FULL, on this machine's disk) and on a local PostgreSQL 15 (fsync=on,
#      unix socket);
#   2. `pev run` of 1 and 10,000 cheap file.read steps, and 1 and 1,000 file.write steps (each
#      write journals its intent durably first), on each backend; per-step overhead is
#      (time(N) - time(1)) / N. hyperfine --prepare gives every run a fresh journal (removes
#      WS/.pev, or drops and recreates the database).
# The server comes from scripts/with-postgres.sh (PEV_PG_FSYNC=on). Everything it writes goes to
# bench/out/backends/. Usage: bench/journal_backends.sh   (env: RUNS=5, STEPS=10000, WRITES=1000)
#
# Two narrower modes, for the Postgres writer's figure (queued, 50,000 records; issue 32):
#   bench/journal_backends.sh --before REV [ROUNDS]   that figure for the bench built at REV (a
#       `git archive` of it, sharing the target directory) and for this tree, alternately,
#       ROUNDS times (default 3): whatever else loads the machine falls on both sides alike;
#   bench/journal_backends.sh --check   that figure for this tree against the one recorded in
#       bench/journal_backends.baseline: exits 1 when it is more than 20% below. Not part of
#       `cargo test`: a figure of this machine, for a person or a scheduled job to run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [[ -z "${PEV_TEST_POSTGRES:-}" ]]; then
  PEV_PG_FSYNC=on exec scripts/with-postgres.sh bash "$0" "$@"
fi
out=bench/out/backends
mkdir -p "$out"
filter='journal/queued/postgres/records/50000'

# The middle of criterion's throughput for the bench `$filter`, in records/s, from its output.
thrpt() {
  python3 -c '
import re, sys
units = {"elem/s": 1, "Kelem/s": 1e3, "Melem/s": 1e6, "Gelem/s": 1e9}
m = re.search(r"thrpt:\s*\[\S+ \S+ (\S+) (\S+)", sys.stdin.read())
if not m:
    sys.exit("no throughput in the bench output")
print(round(float(m.group(1)) * units[m.group(2)]))'
}

# Runs the Postgres queued bench of executable $1 (from directory $2); prints records/s.
queued_pg() {
  (cd "$2" && PEV_BENCH_POSTGRES="$PEV_TEST_POSTGRES" "$1" --bench --noplot "$filter" 2>&1) \
    | tee -a "$out/queued-pg.txt" | thrpt
}

# The bench executable the checkout $1 builds. Two checkouts give the workspace's crates the
# same names in the target directory, and cargo would take the other checkout's as up to date:
# they are removed first.
bench_exe() {
  local features=postgres
  # criterion is behind the `bench` feature since issue 32.
  if grep -q '^bench = ' "$1/crates/store/Cargo.toml"; then features=postgres,bench; fi
  (cd "$1" && cargo clean --release -p pev-store -p pev-protocol -p pev-test-support 2>/dev/null
   cargo bench -p pev-store --features "$features" --bench journal --no-run \
      --message-format=json 2>/dev/null) |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "journal" and m.get("executable"):
        print(m["executable"])' | tail -1
}

case "${1:-}" in
  --before)
    rev="${2:?--before needs a revision}"
    rounds="${3:-3}"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    git -C "$root" archive "$rev" | tar -x -C "$tmp"
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
    # Both builds give the executable one name: the first is copied away before the second.
    before="$(bench_exe "$tmp")"
    [[ -n "$before" ]] && cp "$before" "$tmp/journal-before" && before="$tmp/journal-before"
    after="$(bench_exe "$root")"
    [[ -n "$before" && -n "$after" ]] || { echo "a bench did not build" >&2; exit 2; }
    echo "== $filter, records/s: before = $rev, after = $(git -C "$root" rev-parse --short HEAD) and the tree"
    date -u +%Y-%m-%dT%H:%MZ; nproc; uname -r
    for i in $(seq "$rounds"); do
      echo "round $i: before $(queued_pg "$before" "$tmp")  after $(queued_pg "$after" "$root")"
    done
    exit 0
    ;;
  --check)
    baseline="$(awk '$1 == "postgres_queued_50000" { print $2 }' bench/journal_backends.baseline)"
    exe="$(bench_exe "$root")"
    [[ -n "$exe" && -n "$baseline" ]] || { echo "no bench or no baseline" >&2; exit 2; }
    got="$(queued_pg "$exe" "$root")"
    floor=$((baseline * 8 / 10))
    echo "$filter: $got records/s (baseline $baseline, floor $floor)"
    if (( got < floor )); then
      echo "REGRESSION: more than 20% below the baseline" >&2
      exit 1
    fi
    exit 0
    ;;
esac

runs="${RUNS:-5}"
steps="${STEPS:-10000}"
writes="${WRITES:-1000}"
command -v hyperfine >/dev/null || apt-get install -y hyperfine >/dev/null

echo "== machine"
nproc; uname -r; grep -m1 'model name' /proc/cpuinfo || true; date -u +%Y-%m-%dT%H:%MZ
psql "$PEV_TEST_POSTGRES" -Atc "SHOW fsync" | sed 's/^/postgres fsync=/'

echo "== 1. the journal writer (criterion)"
for backend in sqlite postgres; do
  url=""
  [[ "$backend" = postgres ]] && url="$PEV_TEST_POSTGRES"
  PEV_BENCH_POSTGRES="$url" cargo bench -p pev-store --features postgres,bench --bench journal \
    -- --noplot 2>&1 | grep -E '^journal|time:|thrpt:' | tee "$out/criterion-$backend.txt"
done

echo "== 2. pev run per-step overhead"
cargo build --release -p pev
pev="${CARGO_TARGET_DIR:-$root/target}/release/pev"
[[ "$pev" = /* ]] || pev="$root/$pev"
ws="$root/$out/ws"
rm -rf "$ws"; mkdir -p "$ws"
printf 'hello world\n' >"$ws/data.txt"
python3 bench/gen_run_plan.py --policy-out "$out/policy.yaml"
python3 bench/gen_run_plan.py --kind read --steps 1 --out "$out/read-1.json"
python3 bench/gen_run_plan.py --kind read --steps "$steps" --out "$out/read-n.json"
python3 bench/gen_run_plan.py --kind write --steps 1 --out "$out/write-1.json"
python3 bench/gen_run_plan.py --kind write --steps "$writes" --out "$out/write-n.json"

admin="$PEV_TEST_POSTGRES"
pg_url="${admin/\/postgres\?//bench?}"
# hyperfine -N runs --prepare without a shell too: each prepare is a script.
printf 'rm -rf %q %q\n' "$ws/.pev" "$ws/out" >"$out/prep-sqlite.sh"
{ cat "$out/prep-sqlite.sh"
  printf 'psql %q -qc "DROP DATABASE IF EXISTS bench WITH (FORCE)" -c "CREATE DATABASE bench"\n' "$admin"
} >"$out/prep-postgres.sh"
for backend in sqlite postgres; do
  prep="bash $out/prep-$backend.sh"
  if [[ "$backend" = sqlite ]]; then store=(); else store=(--store "$pg_url"); fi
  hyperfine -N --warmup 1 --runs "$runs" --prepare "$prep" \
    --export-json "$out/run-$backend.json" \
    -n "$backend read-1" "$pev run $out/read-1.json --workspace $ws --policy $out/policy.yaml --json ${store[*]}" \
    -n "$backend read-$steps" "$pev run $out/read-n.json --workspace $ws --policy $out/policy.yaml --json ${store[*]}" \
    -n "$backend write-1" "$pev run $out/write-1.json --workspace $ws --policy $out/policy.yaml --json ${store[*]}" \
    -n "$backend write-$writes" "$pev run $out/write-n.json --workspace $ws --policy $out/policy.yaml --json ${store[*]}" \
    >/dev/null
done
python3 - "$out" "$steps" "$writes" <<'EOF'
import json, sys
out, steps, writes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print("| backend | read ×1 | read ×%d | per read step | write ×1 | write ×%d | per write step |" % (steps, writes))
print("|---|---|---|---|---|---|---|")
for b in ["sqlite", "postgres"]:
    r = {x["command"].split(" ", 1)[1]: x["median"] for x in json.load(open(f"{out}/run-{b}.json"))["results"]}
    r1, rn = r["read-1"], r[f"read-{steps}"]
    w1, wn = r["write-1"], r[f"write-{writes}"]
    print(f"| {b} | {r1*1e3:.0f} ms | {rn*1e3:.0f} ms | {(rn-r1)/steps*1e3:.3f} ms | {w1*1e3:.0f} ms | {wn*1e3:.0f} ms | {(wn-w1)/writes*1e3:.3f} ms |")
EOF
