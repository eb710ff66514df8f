//! The Postgres backend (feature `postgres`): a journal every machine of a team shares.
//!
//! The tables are SQLite's, in a schema of their own (`pev`) so a database the team already
//! runs keeps its own names; `rowid` is an identity column there, so the same queries order rows
//! the same way. The schema version lives in `pev.meta` and migrations run under a transaction
//! advisory lock, so two processes meeting a fresh database migrate it once.
//!
//! The connection string is libpq's (`postgres://user@host:port/db?…` or `host=… dbname=…`),
//! and what it leaves out comes from the environment the libpq way: `PGHOST`, `PGPORT`,
//! `PGUSER`, `PGDATABASE`, `PGPASSWORD`, then `~/.pgpass` (or `PGPASSFILE`). Nothing here
//! prints a password: a [`Target`] displays as `postgres://user@host:port/db`.
//!
//! Connections have TCP keepalives (a vanished host is noticed in about half a minute) and an
//! `application_name` naming this machine and process, which is how a refused second driver
//! learns who holds a run. TLS is `pg_tls.rs`'s (libpq's `sslmode`, and no cleartext to
//! another machine unless the string says `sslmode=disable`). The first connection of a
//! process to a database checks that it has a session of its own (`check_session`): a pooler
//! that hands a connection's statements to several server sessions (PgBouncer in transaction
//! mode) voids the one-driver lease, and is refused.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use postgres::config::Host;
use postgres::types::{IsNull, ToSql, Type};
use postgres::{Client, Config, NoTls, Statement};

use crate::db::{DbError, Location, Param, Row, Value};
use crate::error::StoreError;
use crate::pg_tls::{Decision, Reach, Tls};
use crate::pg_tls_conn::MakeRustls;
use crate::schema::Create;

/// The Postgres schema pev's tables live in.
pub(crate) const SCHEMA: &str = "pev";

/// The schema version this build writes to Postgres.
pub(crate) const SCHEMA_VERSION: i64 = PG_MIGRATIONS.len() as i64;

/// Entry `i` migrates version `i` to `i + 1`. Version 1 is SQLite's version 4 layout, version 2
/// its version 5 (the journal key's MACs: the same statements).
const PG_MIGRATIONS: &[&str] = &[crate::schema::PG_V1, crate::schema::V5];

/// The transaction advisory lock key migrations take ("pev-migr" in ASCII).
const MIGRATE_LOCK: i64 = 0x7065_762d_6d69_6772;

/// How many idle connections a process keeps per database for its next `Store`.
const IDLE_KEPT: usize = 4;

/// A Postgres journal: how to reach it, and this process's idle connections to it.
pub struct Target {
    config: Config,
    shown: String,
    /// What the connections do about TLS, and the rustls configuration when they use it.
    tls: Decision,
    rustls: Option<MakeRustls>,
    /// Set once a connection of this process was found to have a session of its own.
    session_checked: std::sync::OnceLock<()>,
    idle: Mutex<Vec<PgConn>>,
    /// The writer of this process's leases (see `lease.rs`), shared by every journal it opens.
    pub(crate) leased: Mutex<std::sync::Weak<crate::journal::Inner>>,
    /// The lease keys this process holds.
    pub(crate) held: Mutex<std::collections::HashSet<i64>>,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Target({})", self.shown)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl Target {
    /// Parses a connection string and completes it from the environment.
    pub(crate) fn parse(value: &str) -> Result<Target, String> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Target::parse_with(value, &env)
    }

    pub(crate) fn parse_with(
        value: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Target, String> {
        let (value, asked) = crate::pg_tls::split(value, env)
            .map_err(|e| format!("the postgres store's connection string: {e}"))?;
        let mut config: Config = value.parse().map_err(|e: postgres::Error| {
            // The parser's message is a fixed phrase per kind of error, never the value.
            format!("the postgres store's connection string is not valid: {e}")
        })?;
        if config.get_hosts().is_empty() {
            let host = env("PGHOST").unwrap_or_else(default_host);
            for h in host.split(',') {
                if h.starts_with('/') {
                    config.host_path(h);
                } else {
                    config.host(h);
                }
            }
        }
        if config.get_ports().is_empty()
            && let Some(port) = env("PGPORT")
        {
            let port = port.parse().map_err(|_| "PGPORT is not a port number".to_owned())?;
            config.port(port);
        }
        if config.get_user().is_none() {
            let user =
                env("PGUSER").or_else(|| env("USER")).or_else(|| env("LOGNAME")).or_else(os_user);
            let Some(user) = user else {
                return Err("the postgres store names no user, PGUSER and USER are not set, and \
                            this process's user has no name"
                    .to_owned());
            };
            config.user(&user);
        }
        let user = config.get_user().unwrap_or_default().to_owned();
        if config.get_dbname().is_none() {
            config.dbname(&env("PGDATABASE").unwrap_or_else(|| user.clone()));
        }
        let db = config.get_dbname().unwrap_or_default().to_owned();
        let (host, port) = first_host(&config);
        if config.get_password().is_none() {
            if let Some(pw) = env("PGPASSWORD") {
                config.password(pw);
            } else if let Some(pw) = pgpass(env, &host, port, &db, &user) {
                config.password(pw);
            }
        }
        if config.get_application_name().is_none() {
            // The pid first: the server keeps 63 bytes, and a long host name is cut, not it.
            config.application_name(&format!("pev {}@{}", std::process::id(), hostname()));
        }
        if config.get_options().is_none() {
            // The server's side of the keepalives, so that it frees a vanished machine's
            // leases within about half a minute, not the OS default of two hours (TCP only).
            config.options(
                "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3",
            );
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        config
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(3);
        let default_root = env("HOME")
            .map(|h| PathBuf::from(h).join(".postgresql/root.crt"))
            .filter(|p| p.is_file());
        let tls = crate::pg_tls::decide(&asked, reach(&config), default_root)
            .map_err(|e| format!("the postgres store's connection string ({host}): {e}"))?;
        config.ssl_mode(match tls.tls {
            Tls::Off => postgres::config::SslMode::Disable,
            Tls::Offered(_) => postgres::config::SslMode::Prefer,
            Tls::Required(_) => postgres::config::SslMode::Require,
        });
        let rustls = match &tls.tls {
            Tls::Off => None,
            Tls::Offered(v) | Tls::Required(v) => Some(MakeRustls {
                config: crate::pg_tls_conn::client_config(v)
                    .map_err(|e| format!("the postgres store ({host}): {e}"))?,
            }),
        };
        // A URL `--store` takes back (the password withheld: it comes from the environment).
        let mode = match tls.asked {
            Some(m) if m != crate::pg_tls::SslMode::Prefer => format!("sslmode={}", m.name()),
            _ => String::new(),
        };
        let root = match &asked.root {
            Some(crate::pg_tls::RootCert::System) => "sslrootcert=system".to_owned(),
            Some(crate::pg_tls::RootCert::File(p)) => {
                format!("sslrootcert={}", enc(&p.display().to_string()))
            }
            None => String::new(),
        };
        let extra: Vec<&str> =
            [mode.as_str(), root.as_str()].into_iter().filter(|s| !s.is_empty()).collect();
        let shown = if host.starts_with('/') {
            let port = if port == 5432 { String::new() } else { format!("&port={port}") };
            format!("postgresql:///{}?host={}&user={}{port}", enc(&db), enc(&host), enc(&user))
        } else {
            let query =
                if extra.is_empty() { String::new() } else { format!("?{}", extra.join("&")) };
            format!("postgres://{}@{}:{port}/{}{query}", enc(&user), enc(&host), enc(&db))
        };
        Ok(Target {
            config,
            shown,
            tls,
            rustls,
            session_checked: std::sync::OnceLock::new(),
            idle: Mutex::new(Vec::new()),
            leased: Mutex::new(std::sync::Weak::new()),
            held: Mutex::new(std::collections::HashSet::new()),
        })
    }

    /// The unix socket directories among the hosts.
    pub(crate) fn socket_dirs(&self) -> Vec<PathBuf> {
        self.config
            .get_hosts()
            .iter()
            .filter_map(|h| match h {
                Host::Unix(p) => Some(p.clone()),
                Host::Tcp(_) => None,
            })
            .collect()
    }

    /// A connection with the schema current: an idle one of this process, or a new one.
    pub(crate) fn connect(&self, at: &Location, create: Create) -> Result<PgConn, StoreError> {
        while let Some(mut conn) = lock(&self.idle).pop() {
            // One the server closed meanwhile (idle timeout, restart) is dropped.
            if !conn.client.is_closed() && conn.batch("SELECT 1").is_ok() {
                return Ok(conn);
            }
        }
        self.fresh(at, create)
    }

    /// A new connection of its own (a journal writer's: its session holds the leases).
    pub(crate) fn fresh(&self, at: &Location, create: Create) -> Result<PgConn, StoreError> {
        let open = |source: DbError| StoreError::Open { path: at.clone(), source };
        let client = self.client().map_err(open)?;
        let mut conn = PgConn { client, statements: HashMap::new() };
        if self.session_checked.get().is_none() {
            self.check_session(&mut conn).map_err(open)?;
            let _ = self.session_checked.set(());
        }
        // Every new connection checks the schema version (one query when it is current): a
        // long-lived process must still refuse a journal a newer pev has migrated since.
        migrate(&mut conn, at, create)?;
        // Literals inlined by `db::inline` rely on standard strings (the default since 9.1).
        conn.batch(&format!("SET search_path TO {SCHEMA}; SET standard_conforming_strings = on"))
            .map_err(|e| StoreError::Open { path: at.clone(), source: e })?;
        Ok(conn)
    }

    /// A connection that LISTENs on `channel` (for a [`crate::Watch`]).
    pub(crate) fn listener(&self, channel: &str) -> Result<Client, DbError> {
        let mut client = self.client()?;
        client.batch_execute(&format!("LISTEN {channel}"))?;
        Ok(client)
    }

    /// A new client, with TLS as decided; a TLS failure says why with the host and the mode.
    fn client(&self) -> Result<Client, DbError> {
        let connected = match &self.rustls {
            Some(tls) => self.config.connect(tls.clone()),
            None => self.config.connect(NoTls),
        };
        connected.map_err(|e| {
            let cause = describe(&e);
            if self.tls.tls != Tls::Off && cause.contains("TLS") {
                DbError::Refused(crate::pg_tls::explain(
                    &self.tls,
                    &first_host(&self.config).0,
                    &cause,
                ))
            } else {
                DbError::Postgres(e)
            }
        })
    }

    /// Refuses a connection whose statements do not all run in one server session: a pooler
    /// in transaction (or statement) mode. The lease is a session lock (`lease.rs`), which such
    /// a pooler leaves on a server session other clients' transactions then run in.
    ///
    /// Two statements of `conn` must run in the same backend, and a statement of a second
    /// connection, sent between them, in another one: a transaction pooler hands the second
    /// connection the session the first just let go of (PgBouncer reuses the most recent one).
    /// Once per process and database: one more connection and three round trips.
    fn check_session(&self, conn: &mut PgConn) -> Result<(), DbError> {
        let pid = |client: &mut Client| -> Result<i32, DbError> {
            Ok(client.query_one("SELECT pg_backend_pid()", &[])?.try_get(0)?)
        };
        let first = pid(&mut conn.client)?;
        // A second connection that cannot be had (a full server) proves nothing either way.
        let other = self.client().ok().map(|mut c| pid(&mut c)).transpose()?;
        let again = pid(&mut conn.client)?;
        if first == again && other != Some(first) {
            return Ok(());
        }
        Err(DbError::Refused(format!(
            "{} runs one connection's statements in several server sessions (backends {first}, \
             {again}{}): a pooler in transaction mode (PgBouncer's pool_mode = transaction) is \
             in between. The journal needs a session of its own: a run's one-driver lease is a \
             session lock, which such a pooler leaves behind for other clients, so two drivers \
             could apply a run's effects twice. Point pev at PostgreSQL directly, or at a pool \
             in session mode",
            first_host(&self.config).0,
            other.map(|o| format!(", and another connection's in {o}")).unwrap_or_default(),
        )))
    }

    /// Keeps `conn` for the next store of this process, unless it is broken or enough are kept.
    pub(crate) fn give_back(&self, mut conn: PgConn) {
        if conn.client.is_closed() || conn.batch("ROLLBACK").is_err() {
            return;
        }
        let mut idle = lock(&self.idle);
        if idle.len() < IDLE_KEPT {
            idle.push(conn);
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `text` percent-encoded for a URL, but for unreserved characters and `/` (a socket's path).
fn enc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// libpq's default: the Debian socket directory if it exists, else `/tmp`'s socket, else TCP
/// on localhost.
fn default_host() -> String {
    for dir in ["/var/run/postgresql", "/tmp"] {
        if std::path::Path::new(dir).join(".s.PGSQL.5432").exists() {
            return dir.to_owned();
        }
    }
    "localhost".to_owned()
}

/// How far the farthest host is (an address in `hostaddr` is where TCP goes).
fn reach(config: &Config) -> Reach {
    let hosts = config.get_hosts().iter().enumerate().map(|(i, h)| {
        match (config.get_hostaddrs().get(i), h) {
            (Some(addr), _) => Reach::of_host(&addr.to_string()),
            (None, Host::Tcp(name)) => Reach::of_host(name),
            (None, Host::Unix(_)) => Reach::Socket,
        }
    });
    let addrs = config.get_hostaddrs().iter().map(|a| Reach::of_host(&a.to_string()));
    hosts.chain(addrs).max().unwrap_or(Reach::Socket)
}

fn first_host(config: &Config) -> (String, u16) {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    (host, config.get_ports().first().copied().unwrap_or(5432))
}

/// The name of the user this process runs as (libpq's last resort), from `/etc/passwd`.
fn os_user() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uid = status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().nth(1)?;
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        (fields.nth(1)? == uid).then(|| name.to_owned())
    })
}

/// This machine's name, for the holder of a lease.
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "an unnamed host".to_owned())
}

/// The password `~/.pgpass` (or `PGPASSFILE`) holds for this host, port, database and user:
/// the first line whose fields match, `*` matching anything, `\` escaping `:` and `\`.
fn pgpass(
    env: &dyn Fn(&str) -> Option<String>,
    host: &str,
    port: u16,
    db: &str,
    user: &str,
) -> Option<String> {
    let file = env("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".pgpass")))?;
    let text = std::fs::read_to_string(file).ok()?;
    // libpq calls a unix socket's host "localhost" in this file.
    let host = if host.starts_with('/') { "localhost" } else { host };
    let port = port.to_string();
    text.lines().filter(|l| !l.trim_start().starts_with('#')).find_map(|line| {
        let fields = split_pgpass(line);
        let [h, p, d, u, pw] = fields.as_slice() else { return None };
        let matches = |field: &str, want: &str| field == "*" || field == want;
        (matches(h, host) && matches(p, &port) && matches(d, db) && matches(u, user))
            .then(|| pw.clone())
    })
}

fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(last)) = (chars.next(), fields.last_mut()) {
                    last.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(last) = fields.last_mut() {
                    last.push(c);
                }
            }
        }
    }
    fields
}

/// Brings the `pev` schema to [`SCHEMA_VERSION`] under a transaction advisory lock (two
/// processes racing on a fresh database migrate it once), or refuses a newer one.
fn migrate(conn: &mut PgConn, at: &Location, create: Create) -> Result<(), StoreError> {
    let open = |source: DbError| StoreError::Open { path: at.clone(), source };
    let version = current_version(conn).map_err(open)?;
    if version == Some(SCHEMA_VERSION) {
        return Ok(());
    }
    check_version(at, version)?;
    if version.is_none() && create == Create::No {
        return Err(StoreError::Missing { path: at.clone() });
    }
    conn.batch("BEGIN").map_err(open)?;
    let migrated = (|| {
        conn.batch(&format!("SELECT pg_advisory_xact_lock({MIGRATE_LOCK})")).map_err(open)?;
        conn.batch(&format!(
            "CREATE SCHEMA IF NOT EXISTS {SCHEMA};
             CREATE TABLE IF NOT EXISTS {SCHEMA}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        ))
        .map_err(open)?;
        let version = current_version(conn).map_err(open)?;
        check_version(at, version)?;
        if version.is_none() {
            let foreign: i64 = conn
                .query(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = ?1 AND tablename <> 'meta'",
                    &[Param::Text(SCHEMA)],
                )
                .map_err(open)?
                .first()
                .map_or(Ok(0), |r| r.get(0))
                .map_err(open)?;
            if foreign > 0 {
                return Err(StoreError::NotAJournal {
                    path: at.clone(),
                    reason: format!("schema {SCHEMA} holds {foreign} tables but no pev version"),
                });
            }
        }
        let start = usize::try_from(version.unwrap_or(0)).unwrap_or(usize::MAX);
        conn.batch(&format!("SET LOCAL search_path TO {SCHEMA}")).map_err(open)?;
        for (i, ddl) in PG_MIGRATIONS.iter().enumerate().skip(start) {
            conn.batch(ddl).map_err(|source| StoreError::Db {
                path: at.clone(),
                op: format!("migrate schema to version {}", i + 1),
                source,
            })?;
        }
        let v = SCHEMA_VERSION.to_string();
        conn.exec(
            &format!(
                "INSERT INTO {SCHEMA}.meta (key, value) VALUES ('schema_version', ?1), \
                 ('application', 'pev') ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            ),
            &[Param::Text(&v)],
        )
        .map_err(open)?;
        Ok(())
    })();
    match migrated {
        Ok(()) => conn.batch("COMMIT").map_err(open),
        Err(e) => {
            let _ = conn.batch("ROLLBACK");
            Err(e)
        }
    }
}

/// The schema version recorded, `None` before the first migration.
fn current_version(conn: &mut PgConn) -> Result<Option<i64>, DbError> {
    let exists: bool = conn
        .query(&format!("SELECT to_regclass('{SCHEMA}.meta') IS NOT NULL"), &[])?
        .first()
        .map_or(Ok(false), |r| r.get(0))?;
    if !exists {
        return Ok(None);
    }
    let rows = conn.query(
        &format!(
            "SELECT key, value FROM {SCHEMA}.meta WHERE key IN ('schema_version', 'application')"
        ),
        &[],
    )?;
    let mut version = None;
    for row in rows {
        let key: String = row.get(0)?;
        let value: String = row.get(1)?;
        if key == "application" && value != "pev" {
            return Err(DbError::Column { column: 1, message: format!("application {value:?}") });
        }
        if key == "schema_version" {
            version = Some(value.parse().map_err(|_| DbError::Column {
                column: 1,
                message: format!("schema version {value:?} is not a number"),
            })?);
        }
    }
    Ok(version)
}

fn check_version(at: &Location, version: Option<i64>) -> Result<(), StoreError> {
    match version {
        Some(found) if found > SCHEMA_VERSION => {
            Err(StoreError::TooNew { path: at.clone(), found, known: SCHEMA_VERSION })
        }
        _ => Ok(()),
    }
}

/// One Postgres session and the statements it has prepared.
pub(crate) struct PgConn {
    pub(crate) client: Client,
    statements: HashMap<String, Statement>,
}

impl PgConn {
    fn statement(&mut self, sql: &str) -> Result<Statement, DbError> {
        if let Some(st) = self.statements.get(sql) {
            return Ok(st.clone());
        }
        let st = self.client.prepare(&dollar_params(sql))?;
        self.statements.insert(sql.to_owned(), st.clone());
        Ok(st)
    }

    pub(crate) fn exec(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, DbError> {
        let st = self.statement(sql)?;
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as _).collect();
        Ok(self.client.execute(&st, &refs)?)
    }

    pub(crate) fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, DbError> {
        let st = self.statement(sql)?;
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as _).collect();
        self.client.query(&st, &refs)?.iter().map(pg_row).collect()
    }

    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        Ok(self.client.batch_execute(sql)?)
    }

    /// Runs `;`-separated statements in one round trip (the simple query protocol); the rows
    /// each changed, in order.
    pub(crate) fn script(&mut self, sql: &str) -> Result<Vec<u64>, DbError> {
        Ok(self
            .client
            .simple_query(sql)?
            .into_iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::CommandComplete(n) => Some(n),
                _ => None,
            })
            .collect())
    }
}

/// `?N` placeholders as Postgres's `$N`.
fn dollar_params(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

fn pg_row(row: &postgres::Row) -> Result<Row, DbError> {
    let mut values = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        let ty = column.type_();
        let v = if *ty == Type::INT8 {
            row.try_get::<_, Option<i64>>(i)?.map(Value::Int)
        } else if *ty == Type::INT4 {
            row.try_get::<_, Option<i32>>(i)?.map(|v| Value::Int(v.into()))
        } else if *ty == Type::INT2 {
            row.try_get::<_, Option<i16>>(i)?.map(|v| Value::Int(v.into()))
        } else if *ty == Type::BOOL {
            row.try_get::<_, Option<bool>>(i)?.map(|v| Value::Int(v.into()))
        } else if *ty == Type::FLOAT8 {
            row.try_get::<_, Option<f64>>(i)?.map(Value::Real)
        } else if *ty == Type::BYTEA {
            row.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Bytes)
        } else if [Type::TEXT, Type::VARCHAR, Type::NAME, Type::BPCHAR].contains(ty) {
            row.try_get::<_, Option<String>>(i)?.map(Value::Text)
        } else {
            return Err(DbError::Column { column: i, message: format!("unexpected type {ty}") });
        };
        values.push(v.unwrap_or(Value::Null));
    }
    Ok(Row(values))
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
        match *self {
            Param::Null => Ok(IsNull::Yes),
            Param::Int(i) => int_to_sql(i, ty, out),
            Param::Unsigned(u) => int_to_sql(i64::try_from(u)?, ty, out),
            Param::Bool(b) => b.to_sql_checked(ty, out),
            // Postgres text cannot hold NUL; SQLite's can. It becomes U+FFFD here (JSON columns
            // are unaffected: serde_json writes a NUL as `\u0000`).
            Param::Text(s) if s.contains('\0') => {
                s.replace('\0', "\u{FFFD}").to_sql_checked(ty, out)
            }
            Param::Text(s) => s.to_sql_checked(ty, out),
            Param::Bytes(b) => b.to_sql_checked(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn to_sql_checked(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
        self.to_sql(ty, out)
    }
}

fn int_to_sql(i: i64, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
    if *ty == Type::INT4 {
        i32::try_from(i)?.to_sql_checked(ty, out)
    } else if *ty == Type::INT2 {
        i16::try_from(i)?.to_sql_checked(ty, out)
    } else if *ty == Type::BOOL {
        (i != 0).to_sql_checked(ty, out)
    } else {
        i.to_sql_checked(ty, out)
    }
}

/// A Postgres error as a person reads it: the server's message, code and detail when there is
/// one, else the client's (connection refused, closed session, …).
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{} ({})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                s.push_str(&format!(": {detail}"));
            }
            s
        }
        // The client's own message is a fixed phrase; its cause (an io error, "password
        // missing") says what to fix, and neither holds the connection string.
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

/// The advisory lock key of a run: FNV-1a 64 of `pev run ` and its id.
pub(crate) fn lease_key(run_id: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in b"pev run ".iter().chain(run_id.as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h as i64
}

/// Who holds lease `key`, as " on HOST (pid N)" from the holder's `application_name`; `None`
/// when the server does not show it (another role's session) or nobody holds it any more.
pub(crate) fn holder(at: &Location, key: i64) -> Option<String> {
    let store = crate::Store::open_existing(at).ok()?;
    let bits = key as u64;
    let name: Option<String> = store
        .conn()
        .query_value(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
               AND l.classid::bigint = ?1 AND l.objid::bigint = ?2
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[Param::Int((bits >> 32) as i64), Param::Int((bits & 0xffff_ffff) as i64)],
        )
        .ok()?;
    let name = name?;
    Some(match name.strip_prefix("pev ").and_then(|rest| rest.split_once('@')) {
        Some((pid, host)) => format!(" on {host} (pid {pid})"),
        None => format!(" (session {name:?})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_marks_become_dollars() {
        assert_eq!(
            dollar_params("a = ?1 AND b = ?12 AND c = '?'"),
            "a = $1 AND b = $12 AND c = '?'"
        );
    }

    #[test]
    fn the_environment_completes_a_url_and_no_password_is_shown() {
        let env = |name: &str| match name {
            "PGUSER" => Some("alice".to_owned()),
            "PGPASSWORD" => Some("s3cret".to_owned()),
            _ => None,
        };
        let t = Target::parse_with("postgresql:///journal?host=/tmp/pg", &env).unwrap();
        assert_eq!(t.to_string(), "postgresql:///journal?host=/tmp/pg&user=alice");
        // What is shown parses back to the same place.
        let again = Target::parse_with(&t.to_string(), &env).unwrap();
        assert_eq!(again.to_string(), t.to_string());
        assert_eq!(t.config.get_password(), Some(&b"s3cret"[..]));
        let t = Target::parse_with("postgres://bob:hunter2@db.internal:6543/j", &env).unwrap();
        assert_eq!(t.to_string(), "postgres://bob@db.internal:6543/j");
        let shown = t.to_string();
        assert!(
            !format!("{shown} {:?}", Location::Postgres(std::sync::Arc::new(t)))
                .contains("hunter2")
        );
    }

    #[test]
    fn pgpass_lines_match_field_by_field() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(
            &file,
            "# comment\nother:5432:*:*:nope\nlocalhost:5432:j:alice:pa\\:ss\n*:*:*:*:fallback\n",
        )
        .unwrap();
        let f = file.display().to_string();
        let env = move |name: &str| (name == "PGPASSFILE").then(|| f.clone());
        assert_eq!(pgpass(&env, "/run/pg", 5432, "j", "alice").as_deref(), Some("pa:ss"));
        assert_eq!(pgpass(&env, "db", 5432, "j", "alice").as_deref(), Some("fallback"));
    }

    /// tokio-postgres keeps the value out of its parse errors today; this guards an upgrade.
    #[test]
    fn bad_strings_are_refused_without_their_values() {
        let env = |_: &str| Some("u".to_owned());
        let e =
            Target::parse_with("postgres://u:topsecret@h/db?bogus=topsecret", &env).err().unwrap();
        assert!(!e.contains("topsecret"), "{e}");
    }
}
