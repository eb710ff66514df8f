#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL server: installs PostgreSQL from the distribution if
# it is missing, creates a cluster in a temporary directory, starts it on a unix socket there (no
# TCP port), exports PEV_TEST_POSTGRES (a connection URL to its `postgres` database, whose role
# may create databases) and runs "$@"; the server is stopped and its directory removed however
# the command ends. The command's exit status is this script's.
#
# PostgreSQL refuses to run as root, so as root the server runs as the user `pevpg` (created if
# missing). A server that cannot be installed or started is an error (exit 3), never a skip.
#
#   scripts/with-postgres.sh cargo test -p pev-store --features postgres
#   PEV_PG_FSYNC=on scripts/with-postgres.sh bash bench/journal_backends.sh
set -euo pipefail

fail() { echo "with-postgres: $*" >&2; exit 3; }

bindir=""
find_bindir() {
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && bindir="$d"
  done
  [ -n "$bindir" ]
}

if ! find_bindir; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "with-postgres: installing postgresql" >&2
    { apt-get install -y --no-install-recommends postgresql >/dev/null 2>&1 \
      || { apt-get update >/dev/null 2>&1 \
           && apt-get install -y --no-install-recommends postgresql >/dev/null 2>&1; }; } \
      || fail "cannot install postgresql with apt-get"
  elif command -v sudo >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    sudo -n apt-get install -y --no-install-recommends postgresql >/dev/null 2>&1 \
      || fail "cannot install postgresql (sudo apt-get failed)"
  else
    fail "no PostgreSQL server binaries (initdb) and no way to install them"
  fi
  find_bindir || fail "postgresql installed, but no initdb under /usr/lib/postgresql/*/bin"
fi

as_server=()
owner="$(id -un)"
if [ "$(id -u)" = 0 ]; then
  owner=pevpg
  id -u "$owner" >/dev/null 2>&1 \
    || useradd --system --no-create-home --shell /usr/sbin/nologin "$owner" \
    || fail "cannot create the user $owner to run the server as"
  as_server=(runuser -u "$owner" --)
fi

dir="$(mktemp -d "${TMPDIR:-/tmp}/pev-pg.XXXXXX")"
# A second socket outside /tmp and /run (which pev's sandbox hides anyway), where only pev's own
# protection of a journal's socket keeps commands away: the sandbox test connects through it.
dir2="$(mktemp -d /var/tmp/pev-pg-sock.XXXXXX 2>/dev/null || true)"
chmod 755 "$dir" ${dir2:+"$dir2"}
[ "$(id -u)" = 0 ] && chown "$owner" "$dir" ${dir2:+"$dir2"}
cleanup() {
  "${as_server[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir" ${dir2:+"$dir2"}
}
trap cleanup EXIT

"${as_server[@]}" "$bindir/initdb" -D "$dir/data" -U "$owner" --auth=trust -E UTF8 \
  --no-instructions >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; fail "initdb failed"; }
fsync="${PEV_PG_FSYNC:-off}"
"${as_server[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
  -o "-k $dir${dir2:+,$dir2} -c listen_addresses='' -c fsync=$fsync -c max_connections=200" start >/dev/null \
  || { cat "$dir/server.log" >&2; fail "the server did not start"; }

export PEV_TEST_POSTGRES="postgresql:///postgres?host=$dir&user=$owner"
export PEV_TEST_POSTGRES_DIR="$dir" PEV_TEST_POSTGRES_SOCKET2="$dir2"
echo "with-postgres: PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on $dir (fsync=$fsync)" >&2
status=0
"$@" || status=$?
exit "$status"
