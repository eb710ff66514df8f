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
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [[ -z "${PEV_TEST_POSTGRES:-}" ]]; then
  PEV_PG_FSYNC=on exec scripts/with-postgres.sh bash "$0" "$@"
fi
out=bench/out/backends
runs="${RUNS:-5}"
steps="${STEPS:-10000}"
writes="${WRITES:-1000}"
mkdir -p "$out"
command -v hyperfine >/dev/null || apt-get install -y hyperfine >/dev/null

echo "== machine"
nproc; uname -r; grep -m1 'model name' /proc/cpuinfo || true; date -u +%Y-%m-%dT%H:%MZ
psql "$PEV_TEST_POSTGRES" -Atc "SHOW fsync" | sed 's/^/postgres fsync=/'

echo "== 1. the journal writer (criterion)"
for backend in sqlite postgres; do
  url=""
  [[ "$backend" = postgres ]] && url="$PEV_TEST_POSTGRES"
  PEV_BENCH_POSTGRES="$url" cargo bench -p pev-store --features postgres --bench journal \
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
