//! The journal's tables and how a connection to it is opened: the pragmas every connection
//! needs (WAL so a reader never blocks the writer, synchronous=FULL so a commit survives power
//! loss, a busy timeout so a CLI process and a running engine can share the file, foreign keys
//! so no row outlives its run) and the schema migrations.
//!
//! The schema version is `PRAGMA user_version`. Migrations run in one IMMEDIATE transaction that
//! re-reads the version inside it, so two processes opening a fresh file at once cannot both
//! migrate. A version newer than this build knows is refused: guessing at a layout could
//! corrupt a journal a newer pev relies on.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::db::{Conn, Location};
use crate::error::StoreError;

/// `PRAGMA application_id` of a pev journal: "pev1" in ASCII.
const APPLICATION_ID: i64 = 0x7065_7631;

/// How long a connection waits for another process's write lock before failing.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_millis(5000);

/// One entry per schema version: entry `i` migrates version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5];

/// The schema version this build writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Version 5: the journal key (see `chain.rs`): each run's key id, and a MAC on every row a
/// verdict or a resume reads. Rows of earlier versions keep NULL and read as not verifiable.
pub(crate) const V5: &str = "
ALTER TABLE runs ADD COLUMN key_id TEXT;
ALTER TABLE runs ADD COLUMN mac TEXT;
ALTER TABLE plan_versions ADD COLUMN mac TEXT;
ALTER TABLE step_states ADD COLUMN mac TEXT;
ALTER TABLE tool_calls ADD COLUMN mac TEXT;
ALTER TABLE mutations ADD COLUMN mac TEXT;
ALTER TABLE file_hashes ADD COLUMN mac TEXT;
ALTER TABLE approvals ADD COLUMN mac TEXT;
ALTER TABLE model_calls ADD COLUMN mac TEXT;
";

/// Version 4: a blob may be stored deflated (`encoding = 'deflate'`); its sha256 is still the
/// raw content's.
const V4: &str = "
ALTER TABLE blobs ADD COLUMN encoding TEXT;
";

/// Version 3: model calls (`ModelCallRecord`, whole in `body`; the other columns index it).
const V3: &str = "
CREATE TABLE model_calls (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    seq         INTEGER NOT NULL,
    role        TEXT NOT NULL,
    step_id     TEXT,
    started_at  TEXT NOT NULL,
    body        TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
";

/// Version 2: the hash chain over events (see `chain.rs`). Rows of version 1 keep a NULL chain
/// and are reported as not verifiable.
const V2: &str = "
ALTER TABLE events ADD COLUMN chain TEXT;
ALTER TABLE runs ADD COLUMN chain_head TEXT;
";

/// PostgreSQL's version 1: SQLite's version 4 layout in PostgreSQL's types (`BIGINT`,
/// `BYTEA`), with an explicit `rowid` (SQLite's is implicit) for the order rows were written
/// in. PostgreSQL's version 2 is [`V5`], the same statements. Kept here, beside SQLite's, so that
/// a column added to one is seen missing from the other (the test below compares them).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) const PG_V1: &str = r#"
CREATE TABLE runs (
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    run_id      TEXT PRIMARY KEY NOT NULL,
    goal        TEXT NOT NULL,
    workspace   TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    options     TEXT NOT NULL,
    result      TEXT,
    chain_head  TEXT
);
CREATE INDEX runs_created ON runs(created_at);
CREATE TABLE plan_versions (
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    version     BIGINT NOT NULL,
    plan        TEXT NOT NULL,
    reason      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (run_id, version)
);
CREATE TABLE events (
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    seq         BIGINT NOT NULL,
    at          TEXT NOT NULL,
    kind        TEXT NOT NULL,
    body        TEXT NOT NULL,
    chain       TEXT,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE step_states (
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    step_id     TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    BIGINT NOT NULL,
    output      TEXT,
    error       TEXT,
    started_at  TEXT,
    ended_at    TEXT,
    assertions  TEXT NOT NULL,
    evidence    TEXT NOT NULL,
    PRIMARY KEY (run_id, step_id)
);
CREATE TABLE tool_calls (
    rowid           BIGINT GENERATED ALWAYS AS IDENTITY,
    run_id          TEXT NOT NULL REFERENCES runs(run_id),
    call_id         TEXT NOT NULL,
    step_id         TEXT NOT NULL,
    attempt         BIGINT NOT NULL,
    tool            TEXT NOT NULL,
    effect          TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    path            TEXT,
    pre_sha256      TEXT,
    intended_sha256 TEXT,
    status          TEXT NOT NULL
        CHECK (status IN ('started', 'finished', 'failed', 'recovered')),
    output          TEXT,
    error           TEXT,
    started_at      TEXT NOT NULL,
    ended_at        TEXT,
    duration_ms     BIGINT,
    PRIMARY KEY (run_id, call_id)
);
CREATE TABLE file_hashes (
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    step_id     TEXT NOT NULL,
    path        TEXT NOT NULL,
    phase       TEXT NOT NULL CHECK (phase IN ('before', 'after')),
    sha256      TEXT,
    bytes       BIGINT,
    at          TEXT NOT NULL
);
CREATE INDEX file_hashes_run ON file_hashes(run_id);
CREATE TABLE blobs (
    sha256      TEXT PRIMARY KEY NOT NULL,
    content     BYTEA NOT NULL,
    encoding    TEXT
);
CREATE TABLE mutations (
    rowid           BIGINT GENERATED ALWAYS AS IDENTITY,
    run_id          TEXT NOT NULL REFERENCES runs(run_id),
    seq             BIGINT NOT NULL,
    step_id         TEXT NOT NULL,
    path            TEXT NOT NULL,
    bytes_before    BIGINT NOT NULL,
    bytes_after     BIGINT NOT NULL,
    lines_added     BIGINT NOT NULL,
    lines_removed   BIGINT NOT NULL,
    no_op           BOOLEAN NOT NULL,
    before_sha256   TEXT,
    after_sha256    TEXT,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE approvals (
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    step_id     TEXT NOT NULL,
    "by"        TEXT NOT NULL,
    at          TEXT NOT NULL,
    PRIMARY KEY (run_id, step_id)
);
CREATE TABLE model_calls (
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    seq         BIGINT NOT NULL,
    role        TEXT NOT NULL,
    step_id     TEXT,
    started_at  TEXT NOT NULL,
    body        TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"#;

/// Version 1. JSON columns hold serde_json text; timestamps are RFC 3339 UTC text, which sorts
/// chronologically. `runs(created_at)` is indexed for "last" and `pev runs`.
const V1: &str = "
CREATE TABLE runs (
    run_id      TEXT PRIMARY KEY NOT NULL,
    goal        TEXT NOT NULL,
    workspace   TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    options     TEXT NOT NULL,
    result      TEXT
);
CREATE INDEX runs_created ON runs(created_at);

CREATE TABLE plan_versions (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    version     INTEGER NOT NULL,
    plan        TEXT NOT NULL,
    reason      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (run_id, version)
);

CREATE TABLE events (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    seq         INTEGER NOT NULL,
    at          TEXT NOT NULL,
    kind        TEXT NOT NULL,
    body        TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE step_states (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    step_id     TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    output      TEXT,
    error       TEXT,
    started_at  TEXT,
    ended_at    TEXT,
    assertions  TEXT NOT NULL,
    evidence    TEXT NOT NULL,
    PRIMARY KEY (run_id, step_id)
);

CREATE TABLE tool_calls (
    run_id          TEXT NOT NULL REFERENCES runs(run_id),
    call_id         TEXT NOT NULL,
    step_id         TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    tool            TEXT NOT NULL,
    effect          TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    path            TEXT,
    pre_sha256      TEXT,
    intended_sha256 TEXT,
    status          TEXT NOT NULL
        CHECK (status IN ('started', 'finished', 'failed', 'recovered')),
    output          TEXT,
    error           TEXT,
    started_at      TEXT NOT NULL,
    ended_at        TEXT,
    duration_ms     INTEGER,
    PRIMARY KEY (run_id, call_id)
);

CREATE TABLE file_hashes (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    step_id     TEXT NOT NULL,
    path        TEXT NOT NULL,
    phase       TEXT NOT NULL CHECK (phase IN ('before', 'after')),
    sha256      TEXT,
    bytes       INTEGER,
    at          TEXT NOT NULL
);
CREATE INDEX file_hashes_run ON file_hashes(run_id);

CREATE TABLE blobs (
    sha256      TEXT PRIMARY KEY NOT NULL,
    content     BLOB NOT NULL
);

CREATE TABLE mutations (
    run_id          TEXT NOT NULL REFERENCES runs(run_id),
    seq             INTEGER NOT NULL,
    step_id         TEXT NOT NULL,
    path            TEXT NOT NULL,
    bytes_before    INTEGER NOT NULL,
    bytes_after     INTEGER NOT NULL,
    lines_added     INTEGER NOT NULL,
    lines_removed   INTEGER NOT NULL,
    no_op           INTEGER NOT NULL,
    before_sha256   TEXT,
    after_sha256    TEXT,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE approvals (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    step_id     TEXT NOT NULL,
    by          TEXT NOT NULL,
    at          TEXT NOT NULL,
    PRIMARY KEY (run_id, step_id)
);
";

/// Whether opening may create the file (and its directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Create {
    Yes,
    No,
}

/// A connection to the journal at `at`, its schema current. `own`: a Postgres connection of its
/// own (a journal writer's), not one this process kept idle.
#[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
pub(crate) fn connect(at: &Location, create: Create, own: bool) -> Result<Conn, StoreError> {
    match at {
        Location::File(path) => open(path, create).map(Conn::Sqlite),
        #[cfg(feature = "postgres")]
        Location::Postgres(target) => {
            let conn = if own { target.fresh(at, create)? } else { target.connect(at, create)? };
            Ok(Conn::Postgres(Box::new(conn)))
        }
    }
}

/// Opens `path` as a journal: creates it if asked, sets the pragmas, migrates.
pub(crate) fn open(path: &Path, create: Create) -> Result<Connection, StoreError> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    match create {
        Create::Yes => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                    path: Location::from(path),
                    source,
                })?;
            }
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        Create::No => {
            if !path.exists() {
                return Err(StoreError::Missing { path: Location::from(path) });
            }
        }
    }
    let open_err = |source: rusqlite::Error| StoreError::Open {
        path: Location::from(path),
        source: source.into(),
    };
    let mut conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
    // The first statement that reads the file: a file that is not SQLite fails here. Switching a
    // new file to WAL while another process opens it can be refused as busy without the busy
    // handler being asked (SQLite does not wait on that lock), so it is tried again here, within
    // the same time a busy statement waits.
    let started = std::time::Instant::now();
    let mode: String = loop {
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => break other.map_err(open_err)?,
        }
    };
    if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
        return Err(StoreError::NotAJournal {
            path: Location::from(path),
            reason: format!("cannot use write-ahead logging (journal mode stays {mode:?})"),
        });
    }
    conn.pragma_update(None, "synchronous", "FULL").map_err(open_err)?;
    conn.pragma_update(None, "foreign_keys", "ON").map_err(open_err)?;
    conn.set_prepared_statement_cache_capacity(64);
    migrate(&mut conn, path)?;
    Ok(conn)
}

/// Brings the schema to [`SCHEMA_VERSION`], or refuses a file that is not (or no longer) ours.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let open_err = |source: rusqlite::Error| StoreError::Open {
        path: Location::from(path),
        source: source.into(),
    };
    // The common case, a current journal, needs no write lock.
    let version = user_version(conn).map_err(open_err)?;
    check_identity(conn, path, version)?;
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(open_err)?;
    let version = user_version(&tx).map_err(open_err)?;
    check_identity(&tx, path, version)?;
    let start = usize::try_from(version).unwrap_or(usize::MAX);
    for (i, ddl) in MIGRATIONS.iter().enumerate().skip(start) {
        tx.execute_batch(ddl).map_err(|source| StoreError::Db {
            path: Location::from(path),
            op: format!("migrate schema to version {}", i + 1),
            source: source.into(),
        })?;
    }
    tx.pragma_update(None, "application_id", APPLICATION_ID).map_err(open_err)?;
    tx.pragma_update(None, "user_version", SCHEMA_VERSION).map_err(open_err)?;
    tx.commit().map_err(open_err)
}

fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// Refuses a database another program wrote, and one from a newer pev.
fn check_identity(conn: &Connection, path: &Path, version: i64) -> Result<(), StoreError> {
    let open_err = |source: rusqlite::Error| StoreError::Open {
        path: Location::from(path),
        source: source.into(),
    };
    let app: i64 =
        conn.pragma_query_value(None, "application_id", |row| row.get(0)).map_err(open_err)?;
    if app != 0 && app != APPLICATION_ID {
        return Err(StoreError::NotAJournal {
            path: Location::from(path),
            reason: format!("its application id is {app:#x}"),
        });
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: Location::from(path),
            found: version,
            known: SCHEMA_VERSION,
        });
    }
    if version == 0 {
        // A fresh file has no tables; one with tables but no version is someone else's.
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0))
            .map_err(open_err)?;
        if tables > 0 {
            return Err(StoreError::NotAJournal {
                path: Location::from(path),
                reason: format!("it holds {tables} schema objects but no pev schema version"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod same_tables {
    use std::collections::{BTreeMap, BTreeSet};

    use super::{MIGRATIONS, PG_V1, V5};

    /// Tables and columns as SQLite has them after every migration.
    fn sqlite() -> BTreeMap<String, BTreeSet<String>> {
        let conn = rusqlite::Connection::open_in_memory().expect("sqlite");
        for migration in MIGRATIONS {
            conn.execute_batch(migration).expect("migration");
        }
        let mut stmt =
            conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").expect("tables");
        let tables: Vec<String> =
            stmt.query_map([], |r| r.get(0)).expect("query").map(|r| r.expect("name")).collect();
        tables
            .into_iter()
            .map(|t| {
                let mut stmt = conn.prepare(&format!("PRAGMA table_info({t})")).expect("info");
                let columns: BTreeSet<String> = stmt
                    .query_map([], |r| r.get::<_, String>(1))
                    .expect("columns")
                    .map(|c| c.expect("column"))
                    .collect();
                (t, columns)
            })
            .collect()
    }

    /// Tables and columns as PostgreSQL's DDL writes them (`CREATE TABLE`, `ALTER TABLE … ADD
    /// COLUMN`), without its explicit `rowid`.
    fn postgres() -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let text = format!("{PG_V1}\n{V5}");
        let mut rest = text.as_str();
        while let Some(at) = rest.find("CREATE TABLE ") {
            let after = &rest[at + "CREATE TABLE ".len()..];
            let name = after.split(|c: char| c.is_whitespace() || c == '(').next().unwrap_or("");
            let open = after.find('(').unwrap_or(0);
            let end = pev_test_support::matching(after, open, '(', ')').unwrap_or(after.len());
            let items = pev_test_support::split_top_level(&after[open + 1..end], '(', ')');
            let columns = out.entry(name.to_owned()).or_default();
            for item in items {
                let word = item.split_whitespace().next().unwrap_or("").trim_matches('"');
                let constraint = ["PRIMARY", "UNIQUE", "FOREIGN", "CHECK", "CONSTRAINT"];
                if !word.is_empty() && !constraint.contains(&word) && word != "rowid" {
                    columns.insert(word.to_owned());
                }
            }
            rest = &after[end..];
        }
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let ["ALTER", "TABLE", table, "ADD", "COLUMN", column, ..] = words.as_slice() {
                let column = column.trim_matches('"').trim_end_matches(';');
                out.entry((*table).to_owned()).or_default().insert(column.to_owned());
            }
        }
        out
    }

    #[test]
    fn sqlite_and_postgres_describe_the_same_tables_and_columns() {
        let (sqlite, postgres) = (sqlite(), postgres());
        assert!(sqlite.contains_key("tool_calls") && sqlite["runs"].contains("mac"), "{sqlite:?}");
        assert_eq!(sqlite, postgres);
    }
}
