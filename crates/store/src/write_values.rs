//! What the journal's writer converts and checks on the way: a value read back as a parameter
//! again and the reverse, a row's MAC under the run's key, JSON columns, the writer's error,
//! and each table's insert (its [`Shape`]: one statement per row on SQLite, many rows per
//! statement on Postgres, `write_pg.rs`).

use std::sync::Arc;

use serde::Serialize;

use crate::chain::row_mac;
use crate::db::{DbError, Location, Param, Value};
use crate::error::{StoreError, db_err, json_err};
use crate::key::JournalKey;
use crate::write_pg::{SameKey, Shape};

/// An error of a record with JSON columns: either half can fail.
pub(crate) enum WriteError {
    Sql(DbError),
    Json(serde_json::Error),
    /// The run was journaled with a key this writer does not hold.
    Key(String),
}

impl WriteError {
    pub(crate) fn into_store(self, path: &Location, op: &str) -> StoreError {
        match self {
            Self::Sql(e) => db_err(path, op, e),
            Self::Json(e) => json_err(path, op, e),
            Self::Key(message) => {
                StoreError::Invalid { path: path.clone(), message: format!("{op}: {message}") }
            }
        }
    }
}

impl From<DbError> for WriteError {
    fn from(e: DbError) -> Self {
        Self::Sql(e)
    }
}

impl From<serde_json::Error> for WriteError {
    fn from(e: serde_json::Error) -> Self {
        Self::Json(e)
    }
}

/// A value read back, as a parameter again.
pub(crate) fn param_of(v: &Value) -> Param<'_> {
    match v {
        Value::Null => Param::Null,
        Value::Int(i) => Param::Int(*i),
        Value::Real(f) => Param::Int(*f as i64),
        Value::Text(t) => Param::Text(t),
        Value::Bytes(b) => Param::Bytes(b),
    }
}

/// A parameter as the value it is read back as.
pub(crate) fn value_of(p: &Param<'_>) -> Value {
    match *p {
        Param::Null => Value::Null,
        Param::Int(i) => Value::Int(i),
        Param::Unsigned(u) => Value::Int(i64::try_from(u).unwrap_or(-1)),
        Param::Bool(b) => Value::Int(i64::from(b)),
        Param::Text(t) => Value::Text(t.to_owned()),
        Param::Bytes(b) => Value::Bytes(b.to_vec()),
    }
}

/// The MAC of a row of `table` of a run keyed with `key` (none for a run without one).
pub(crate) fn mac_of(
    key: Option<&Arc<JournalKey>>,
    table: &str,
    covered: &[Param<'_>],
) -> Option<String> {
    key.map(|k| row_mac(k, table, covered))
}

/// `covered` and then the MAC, the parameters of an insert.
pub(crate) fn with_mac<'a>(covered: &[Param<'a>], mac: &'a Option<String>) -> Vec<Param<'a>> {
    let mut all = Vec::with_capacity(covered.len() + 1);
    all.extend_from_slice(covered);
    all.push(Param::from(mac));
    all
}

pub(crate) fn to_json<T: Serialize + ?Sized>(v: &T) -> Result<String, WriteError> {
    Ok(serde_json::to_string(v)?)
}

pub(crate) fn opt_json<T: Serialize>(v: Option<&T>) -> Result<Option<String>, WriteError> {
    v.map(to_json).transpose()
}

/// A shape with its one-row statement not made yet.
const fn shape(
    table: &'static str,
    columns: &'static [&'static str],
    key: &'static [usize],
    tail: &'static str,
    same_key: SameKey,
) -> Shape {
    Shape { table, columns, key, tail, same_key, one: std::sync::OnceLock::new() }
}

/// Each table's insert; the columns are the covered ones (`chain::COVER`) and then the MAC.
pub(crate) static EVENTS: Shape =
    shape("events", &["run_id", "seq", "at", "kind", "body", "chain"], &[], "", SameKey::Fails);
pub(crate) static MODEL_CALLS: Shape = shape(
    "model_calls",
    &["run_id", "seq", "role", "step_id", "started_at", "body", "mac"],
    &[],
    "",
    SameKey::Fails,
);
pub(crate) static STEP_STATES: Shape = shape(
    "step_states",
    &[
        "run_id",
        "step_id",
        "status",
        "attempts",
        "output",
        "error",
        "started_at",
        "ended_at",
        "assertions",
        "evidence",
        "mac",
    ],
    &[0, 1],
    // An upsert keeps the row (and its rowid, which orders `RunRecord::steps`).
    "ON CONFLICT (run_id, step_id) DO UPDATE SET status = excluded.status,
         attempts = excluded.attempts, output = excluded.output, error = excluded.error,
         started_at = excluded.started_at, ended_at = excluded.ended_at,
         assertions = excluded.assertions, evidence = excluded.evidence, mac = excluded.mac",
    SameKey::KeepLast,
);
pub(crate) static TOOL_CALLS: Shape = shape(
    "tool_calls",
    &[
        "run_id",
        "call_id",
        "step_id",
        "attempt",
        "tool",
        "effect",
        "arguments",
        "path",
        "pre_sha256",
        "intended_sha256",
        "status",
        "output",
        "error",
        "started_at",
        "ended_at",
        "duration_ms",
        "mac",
    ],
    &[0, 1],
    "",
    SameKey::Fails,
);
pub(crate) static FILE_HASHES: Shape = shape(
    "file_hashes",
    &["run_id", "step_id", "path", "phase", "sha256", "bytes", "at", "mac"],
    &[],
    "",
    SameKey::Fails,
);
pub(crate) static MUTATIONS: Shape = shape(
    "mutations",
    &[
        "run_id",
        "seq",
        "step_id",
        "path",
        "bytes_before",
        "bytes_after",
        "lines_added",
        "lines_removed",
        "no_op",
        "before_sha256",
        "after_sha256",
        "mac",
    ],
    &[],
    "",
    SameKey::Fails,
);
pub(crate) static PLAN_VERSIONS: Shape = shape(
    "plan_versions",
    &["run_id", "version", "plan", "reason", "created_at", "mac"],
    &[],
    "",
    SameKey::Fails,
);
/// A step approved already keeps its first approval.
pub(crate) static APPROVALS: Shape = shape(
    "approvals",
    &["run_id", "step_id", "\"by\"", "at", "mac"],
    &[0, 1],
    "ON CONFLICT (run_id, step_id) DO NOTHING",
    SameKey::KeepFirst,
);
pub(crate) static BLOBS: Shape = shape(
    "blobs",
    &["sha256", "content", "encoding"],
    &[0],
    "ON CONFLICT (sha256) DO NOTHING",
    SameKey::KeepFirst,
);
