//! What the journal's writer converts and checks on the way: a value read back as a parameter
//! again and the reverse, a row's MAC under the run's key, JSON columns, and the writer's
//! error.

use std::sync::Arc;

use serde::Serialize;

use crate::chain::row_mac;
use crate::db::{DbError, Location, Param, Value};
use crate::error::{StoreError, db_err, json_err};
use crate::key::JournalKey;

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
