#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL server: installs PostgreSQL (and PgBouncer) from the
# distribution if missing, creates a cluster in a temporary directory, starts it on a unix socket
# there (no TCP port), exports PEV_TEST_POSTGRES (a connection URL to its `postgres` database,
# whose role may create databases) and runs "$@"; the servers are stopped and the directory
# removed however the command ends. The command's exit status is this script's.
#
# Beside it, for the TLS and pooler tests (crates/store/tests/suite/pg_tls.rs), on 127.0.0.1 only:
#   - a copy of the cluster serving TLS on a free port, with a certificate for `localhost` and
#     127.0.0.1 signed by a CA made here with openssl: PEV_TEST_POSTGRES_TLS
#     (postgres://USER@localhost:PORT/postgres), PEV_TEST_POSTGRES_CA (the CA's PEM file) and
#     PEV_TEST_POSTGRES_OTHER_CA (a CA that signed nothing);
#   - a PgBouncer on a free port (no TLS) in front of the first server, with a database `pevtx`
#     pooled in transaction mode and `pevsess` in session mode: PEV_TEST_PGBOUNCER_TX and
#     PEV_TEST_PGBOUNCER_SESSION (their URLs).
#
# PostgreSQL and PgBouncer refuse to run as root, so as root they run as the user `pevpg`
# (created if missing). A server that cannot be installed or started is an error (exit 3),
# never a skip.
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

# Installs the distribution's package $1 (as root, or with sudo -n), or fails naming it.
install_pkg() {
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "with-postgres: installing $1" >&2
    { apt-get install -y --no-install-recommends "$1" >/dev/null 2>&1 \
      || { apt-get update >/dev/null 2>&1 \
           && apt-get install -y --no-install-recommends "$1" >/dev/null 2>&1; }; } \
      || fail "cannot install $1 with apt-get"
  elif command -v sudo >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    sudo -n apt-get install -y --no-install-recommends "$1" >/dev/null 2>&1 \
      || fail "cannot install $1 (sudo apt-get failed)"
  else
    fail "no $1 and no way to install it"
  fi
}

if ! find_bindir; then
  install_pkg postgresql
  find_bindir || fail "postgresql installed, but no initdb under /usr/lib/postgresql/*/bin"
fi
command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || install_pkg pgbouncer
pgbouncer_bin="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
command -v openssl >/dev/null 2>&1 || install_pkg openssl

# A TCP port nothing listens on now (another run of this script may be under way beside us).
free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
  else
    echo $((20000 + RANDOM % 30000))
  fi
}

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
  if [ -f "$dir/pgbouncer.pid" ]; then kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true; fi
  "${as_server[@]}" "$bindir/pg_ctl" -D "$dir/tls-data" -m immediate stop >/dev/null 2>&1 || true
  "${as_server[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir" ${dir2:+"$dir2"}
}
trap cleanup EXIT

"${as_server[@]}" "$bindir/initdb" -D "$dir/data" -U "$owner" --auth=trust -E UTF8 \
  --no-instructions >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; fail "initdb failed"; }
# The TLS server is a copy of the fresh cluster (quicker than a second initdb).
"${as_server[@]}" cp -a "$dir/data" "$dir/tls-data" || fail "cannot copy the cluster"
fsync="${PEV_PG_FSYNC:-off}"
"${as_server[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
  -o "-k $dir${dir2:+,$dir2} -c listen_addresses='' -c fsync=$fsync -c max_connections=200" start >/dev/null \
  || { cat "$dir/server.log" >&2; fail "the server did not start"; }

# A CA, a server certificate it signed for localhost and 127.0.0.1, and a CA that signed nothing.
tls="$dir/tls"
mkdir "$tls"
{
  for ca in ca other-ca; do
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj "/CN=pev test $ca" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" -keyout "$tls/$ca.key" -out "$tls/$ca.crt"
  done
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
    -keyout "$tls/server.key" -out "$tls/server.csr"
  printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" \
    "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >"$tls/server.ext"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" \
    -CAcreateserial -days 2 -extfile "$tls/server.ext" -out "$tls/server.crt"
} >"$dir/openssl.log" 2>&1 || { cat "$dir/openssl.log" >&2; fail "openssl could not make the test certificates"; }
chmod 600 "$tls/server.key"
chmod 644 "$tls/ca.crt" "$tls/other-ca.crt"
if [ "$(id -u)" = 0 ]; then chown -R "$owner" "$tls"; fi
tls_port="$(free_port)"
"${as_server[@]}" "$bindir/pg_ctl" -D "$dir/tls-data" -l "$dir/tls-server.log" -w -t 30 \
  -o "-k $dir -p $tls_port -c listen_addresses=127.0.0.1 -c fsync=$fsync -c ssl=on -c ssl_cert_file=$tls/server.crt -c ssl_key_file=$tls/server.key" \
  start >/dev/null || { cat "$dir/tls-server.log" >&2; fail "the TLS server did not start"; }

# PgBouncer in front of the first server: one database pooled per transaction, one per
# session. pev sends `options` (the server's keepalives), which PgBouncer 1.18 refuses unless
# told to ignore it.
"${as_server[@]}" "$bindir/createdb" -h "$dir" pev_pooled || fail "cannot create pev_pooled"
bouncer_port="$(free_port)"
cat >"$dir/pgbouncer.ini" <<INI
[databases]
pevtx = host=$dir dbname=pev_pooled user=$owner pool_mode=transaction
pevsess = host=$dir dbname=pev_pooled user=$owner pool_mode=session
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bouncer_port
unix_socket_dir =
auth_type = any
ignore_startup_parameters = options,extra_float_digits
default_pool_size = 10
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
if [ "$(id -u)" = 0 ]; then chown "$owner" "$dir/pgbouncer.ini"; fi
"${as_server[@]}" "$pgbouncer_bin" -d "$dir/pgbouncer.ini" >"$dir/pgbouncer.out" 2>&1 \
  || { cat "$dir/pgbouncer.out" >&2; fail "pgbouncer did not start"; }
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$bouncer_port") 2>/dev/null && break
  sleep 0.1
done

export PEV_TEST_POSTGRES="postgresql:///postgres?host=$dir&user=$owner"
export PEV_TEST_POSTGRES_DIR="$dir" PEV_TEST_POSTGRES_SOCKET2="$dir2"
export PEV_TEST_POSTGRES_TLS="postgres://$owner@localhost:$tls_port/postgres"
export PEV_TEST_POSTGRES_CA="$tls/ca.crt" PEV_TEST_POSTGRES_OTHER_CA="$tls/other-ca.crt"
export PEV_TEST_PGBOUNCER_TX="postgres://$owner@127.0.0.1:$bouncer_port/pevtx"
export PEV_TEST_PGBOUNCER_SESSION="postgres://$owner@127.0.0.1:$bouncer_port/pevsess"
echo "with-postgres: PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on $dir (fsync=$fsync), TLS on 127.0.0.1:$tls_port, PgBouncer on 127.0.0.1:$bouncer_port" >&2
status=0
"$@" || status=$?
exit "$status"
