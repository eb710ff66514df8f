//! The journal's backends behind one small SQL interface: [`Conn`] runs a statement with
//! [`Param`]s and hands back [`Row`]s of [`Value`]s, whichever database holds the journal.
//! Everything above it (the records, the group-commit writer, the reads, the hash chain, gc) is
//! written once, in SQL both dialects accept: `?N` placeholders (rewritten to `$N` for
//! Postgres), `ON CONFLICT`, a `rowid` column that orders rows (SQLite's own; an identity column
//! in Postgres). The few places the dialects differ (JSON paths, row locks, what a write
//! transaction locks up front) ask [`Dialect`].
//!
//! A [`Location`] says where a journal is: a SQLite file, or (with the `postgres` feature) a
//! Postgres database shared by every machine. It is what `--store` and `PEV_STORE` parse into.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// Where a journal lives.
#[derive(Clone)]
pub enum Location {
    /// A SQLite file (`.pev/pev.db` by default).
    File(PathBuf),
    /// A Postgres database; the connection string never leaves this value unredacted.
    #[cfg(feature = "postgres")]
    Postgres(std::sync::Arc<crate::pg::Target>),
}

impl Location {
    /// Parses a `--store` value: `postgres://…`/`postgresql://…` (or libpq's `postgresql:` with
    /// only query parameters) is a Postgres database; any other URL (`sqlite:…`, `https://…`,
    /// anything with `://`) is refused; the rest is a file path (`odd:name.db` included). The
    /// error never repeats the value, which may hold a password.
    pub fn parse(value: &str) -> Result<Location, String> {
        const SCHEMES: [&str; 7] =
            ["postgres", "postgresql", "sqlite", "file", "mysql", "redis", "s3"];
        if value.is_empty() {
            return Err("the journal path is empty".to_owned());
        }
        let scheme = value.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
        let is_url =
            value.contains("://") || scheme.as_deref().is_some_and(|s| SCHEMES.contains(&s));
        match scheme.as_deref() {
            _ if !is_url => Ok(Location::File(PathBuf::from(value))),
            Some("postgres" | "postgresql") => postgres_location(value),
            other => Err(format!(
                "`{}:…` is not a journal pev knows: give a SQLite file's path (e.g. \
                 .pev/pev.db) or a postgres://… URL",
                other.unwrap_or_default()
            )),
        }
    }

    /// The SQLite file, if the journal is one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Location::File(p) => Some(p),
            #[cfg(feature = "postgres")]
            Location::Postgres(_) => None,
        }
    }

    /// The unix socket directories a Postgres journal is reached through (none for a file or
    /// a TCP host): a run's sandbox hides them from commands.
    pub fn local_sockets(&self) -> Vec<PathBuf> {
        match self {
            Location::File(_) => Vec::new(),
            #[cfg(feature = "postgres")]
            Location::Postgres(t) => t.socket_dirs(),
        }
    }

    /// Whether the journal is shared by machines (a server), not a file on this one.
    pub fn is_shared(&self) -> bool {
        self.file().is_none()
    }
}

#[cfg(feature = "postgres")]
fn postgres_location(value: &str) -> Result<Location, String> {
    crate::pg::Target::parse(value).map(|t| Location::Postgres(std::sync::Arc::new(t)))
}

#[cfg(not(feature = "postgres"))]
fn postgres_location(_value: &str) -> Result<Location, String> {
    Err("this pev was built without the `postgres` feature, so it cannot use a postgres:// \
         store; rebuild with `--features postgres` (the default) or give a file path"
        .to_owned())
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File(p) => write!(f, "{}", p.display()),
            #[cfg(feature = "postgres")]
            Location::Postgres(t) => write!(f, "{t}"),
        }
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Location({self})")
    }
}

impl From<&Path> for Location {
    fn from(p: &Path) -> Self {
        Location::File(p.to_path_buf())
    }
}

impl From<&PathBuf> for Location {
    fn from(p: &PathBuf) -> Self {
        Location::File(p.clone())
    }
}

impl From<PathBuf> for Location {
    fn from(p: PathBuf) -> Self {
        Location::File(p)
    }
}

impl From<&Location> for Location {
    fn from(l: &Location) -> Self {
        l.clone()
    }
}

/// What went wrong in the database itself.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[cfg(feature = "postgres")]
    #[error("{}", crate::pg::describe(.0))]
    Postgres(#[from] postgres::Error),
    /// pev refused the connection (TLS it cannot have, a pooler that voids the lease): the
    /// message says why and what to do.
    #[cfg(feature = "postgres")]
    #[error("{0}")]
    Refused(String),
    /// A column held something else than the reader expected.
    #[error("column {column}: {message}")]
    Column { column: usize, message: String },
    /// A parameter does not fit the database's integers.
    #[error("parameter {index}: {message}")]
    Param { index: usize, message: String },
}

/// A statement parameter, borrowed from the record being written.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Param<'a> {
    Null,
    Int(i64),
    /// Kept unsigned until bound: a value past `i64::MAX` is an error, not a wrapped number.
    Unsigned(u64),
    Bool(bool),
    Text(&'a str),
    Bytes(&'a [u8]),
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(v: &'a str) -> Self {
        Param::Text(v)
    }
}
impl<'a> From<&'a String> for Param<'a> {
    fn from(v: &'a String) -> Self {
        Param::Text(v)
    }
}
impl<'a> From<&'a [u8]> for Param<'a> {
    fn from(v: &'a [u8]) -> Self {
        Param::Bytes(v)
    }
}
impl From<i64> for Param<'_> {
    fn from(v: i64) -> Self {
        Param::Int(v)
    }
}
impl From<u64> for Param<'_> {
    fn from(v: u64) -> Self {
        Param::Unsigned(v)
    }
}
impl From<u32> for Param<'_> {
    fn from(v: u32) -> Self {
        Param::Int(i64::from(v))
    }
}
impl From<usize> for Param<'_> {
    fn from(v: usize) -> Self {
        Param::Unsigned(v as u64)
    }
}
impl From<bool> for Param<'_> {
    fn from(v: bool) -> Self {
        Param::Bool(v)
    }
}
macro_rules! from_ref {
    ($($t:ty),*) => {$(
        impl From<&$t> for Param<'_> {
            fn from(v: &$t) -> Self {
                (*v).into()
            }
        }
    )*};
}
from_ref!(i64, u64, u32, usize, bool);
impl<'a> From<&'a Option<String>> for Param<'a> {
    fn from(v: &'a Option<String>) -> Self {
        v.as_deref().map_or(Param::Null, Param::Text)
    }
}
macro_rules! from_opt_ref {
    ($($t:ty),*) => {$(
        impl From<&Option<$t>> for Param<'_> {
            fn from(v: &Option<$t>) -> Self {
                v.map_or(Param::Null, Into::into)
            }
        }
    )*};
}
from_opt_ref!(i64, u64, u32, usize, bool);
impl<'a, T: Into<Param<'a>>> From<Option<T>> for Param<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Param::Null, Into::into)
    }
}

/// `params![a, b, …]`: a slice of [`Param`]s.
macro_rules! params {
    ($($p:expr),* $(,)?) => {
        &[$($crate::db::Param::from($p)),*][..]
    };
}
pub(crate) use params;

/// A column's value as read back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Bytes(Vec<u8>),
}

/// One result row.
#[derive(Debug)]
pub(crate) struct Row(pub(crate) Vec<Value>);

impl Row {
    /// Column `idx` as `T`.
    pub(crate) fn get<T: FromValue>(&self, idx: usize) -> Result<T, DbError> {
        let v = self.0.get(idx).ok_or_else(|| DbError::Column {
            column: idx,
            message: format!("no such column (the row has {})", self.0.len()),
        })?;
        T::from_value(v).map_err(|message| DbError::Column { column: idx, message })
    }

    /// Column `idx` as text, moved out of the row.
    pub(crate) fn take_text(&mut self, idx: usize) -> Result<Option<String>, DbError> {
        match self.0.get_mut(idx).map(|v| std::mem::replace(v, Value::Null)) {
            Some(Value::Text(s)) => Ok(Some(s)),
            Some(Value::Null) => Ok(None),
            other => Err(DbError::Column {
                column: idx,
                message: format!("expected text, found {other:?}"),
            }),
        }
    }
}

/// A Rust type a column converts to.
pub(crate) trait FromValue: Sized {
    fn from_value(v: &Value) -> Result<Self, String>;
}

impl FromValue for String {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Text(s) => Ok(s.clone()),
            other => Err(format!("expected text, found {other:?}")),
        }
    }
}
impl FromValue for Vec<u8> {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Bytes(b) => Ok(b.clone()),
            Value::Text(s) => Ok(s.as_bytes().to_vec()),
            other => Err(format!("expected bytes, found {other:?}")),
        }
    }
}
impl FromValue for i64 {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Int(i) => Ok(*i),
            other => Err(format!("expected an integer, found {other:?}")),
        }
    }
}
impl FromValue for f64 {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Real(f) => Ok(*f),
            Value::Int(i) => Ok(*i as f64),
            other => Err(format!("expected a number, found {other:?}")),
        }
    }
}
impl FromValue for bool {
    fn from_value(v: &Value) -> Result<Self, String> {
        i64::from_value(v).map(|i| i != 0)
    }
}
macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(v: &Value) -> Result<Self, String> {
                let i = i64::from_value(v)?;
                <$t>::try_from(i).map_err(|_| format!("{i} is out of range for {}", stringify!($t)))
            }
        }
    )*};
}
from_int!(u64, u32, i32, usize);
impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// Which SQL a connection speaks, where the two differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The text at `path` (dotted keys) of the JSON text column `column`, NULL when absent.
    pub(crate) fn json_text(self, column: &str, path: &[&str]) -> String {
        match self {
            Dialect::Sqlite => format!("json_extract({column}, '$.{}')", path.join(".")),
            // `json`, not `jsonb`: the latter refuses the `\u0000` serde_json writes for a NUL.
            Dialect::Postgres => format!("(({column})::json #>> '{{{}}}')", path.join(",")),
        }
    }

    /// The length of the array at key `key` of the JSON text column `column`.
    pub(crate) fn json_array_length(self, column: &str, key: &str) -> String {
        match self {
            Dialect::Sqlite => format!("json_array_length({column}, '$.{key}')"),
            Dialect::Postgres => format!("json_array_length(({column})::json -> '{key}')"),
        }
    }

    /// What a `SELECT` of a row another writer may change next appends to lock it until the
    /// transaction ends. SQLite's write transactions lock the whole file up front.
    pub(crate) fn for_update(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Postgres => " FOR UPDATE",
        }
    }
}

/// How a transaction begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Begin {
    /// A snapshot of every table, for a read that must see one instant.
    Read,
    /// A transaction that will write. SQLite takes the file's write lock at once, so the
    /// reads it makes before writing cannot be overtaken.
    Write,
}

/// A connection to a journal, whichever backend.
pub(crate) enum Conn {
    Sqlite(rusqlite::Connection),
    #[cfg(feature = "postgres")]
    Postgres(Box<crate::pg::PgConn>),
}

impl Conn {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Conn::Sqlite(_) => Dialect::Sqlite,
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs a statement; the number of rows it changed.
    pub(crate) fn exec(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, DbError> {
        match self {
            Conn::Sqlite(c) => {
                let mut st = c.prepare_cached(sql)?;
                Ok(st.execute(rusqlite::params_from_iter(params.iter()))? as u64)
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.exec(sql, params),
        }
    }

    /// Runs a query; every row.
    pub(crate) fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, DbError> {
        match self {
            Conn::Sqlite(c) => {
                let mut st = c.prepare_cached(sql)?;
                let columns = st.column_count();
                let mut rows = st.query(rusqlite::params_from_iter(params.iter()))?;
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    let mut values = Vec::with_capacity(columns);
                    for i in 0..columns {
                        values.push(sqlite_value(row.get_ref(i)?, i)?);
                    }
                    out.push(Row(values));
                }
                Ok(out)
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.query(sql, params),
        }
    }

    /// The first row, if any.
    pub(crate) fn query_opt(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Option<Row>, DbError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// The first column of the first row (`T` is an `Option` where the query may return none).
    pub(crate) fn query_value<T: FromValue>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<T, DbError> {
        match self.query_opt(sql, params)? {
            Some(row) => row.get(0),
            None => T::from_value(&Value::Null)
                .map_err(|_| DbError::Column { column: 0, message: "no row".to_owned() }),
        }
    }

    /// Runs `;`-separated statements in one round trip; how many rows each changed (Postgres;
    /// SQLite runs them and reports none).
    pub(crate) fn exec_script(&mut self, sql: &str) -> Result<Vec<u64>, DbError> {
        match self {
            Conn::Sqlite(c) => c.execute_batch(sql).map(|()| Vec::new()).map_err(Into::into),
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.script(sql),
        }
    }

    /// Runs statements without parameters (DDL, transaction control).
    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        match self {
            Conn::Sqlite(c) => Ok(c.execute_batch(sql)?),
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.batch(sql),
        }
    }

    /// Begins a transaction that rolls back when dropped uncommitted.
    pub(crate) fn begin(&mut self, kind: Begin) -> Result<Tx<'_>, DbError> {
        let sql = match (self.dialect(), kind) {
            (Dialect::Sqlite, Begin::Read) => "BEGIN DEFERRED",
            (Dialect::Sqlite, Begin::Write) => "BEGIN IMMEDIATE",
            (Dialect::Postgres, Begin::Read) => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
            (Dialect::Postgres, Begin::Write) => "BEGIN",
        };
        self.batch(sql)?;
        Ok(Tx { conn: self, open: true })
    }
}

/// A transaction on a [`Conn`]; dropped without [`Tx::commit`], it rolls back.
pub(crate) struct Tx<'c> {
    conn: &'c mut Conn,
    open: bool,
}

impl Tx<'_> {
    /// Commits; a failed commit rolls back (on drop), as an unfinished transaction does.
    pub(crate) fn commit(mut self) -> Result<(), DbError> {
        self.conn.batch("COMMIT")?;
        self.open = false;
        Ok(())
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn
    }
}

impl std::ops::DerefMut for Tx<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open {
            // A connection that cannot roll back is broken; its next statement says so.
            let _ = self.conn.batch("ROLLBACK");
        }
    }
}

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value as V, ValueRef};
        Ok(match *self {
            Param::Null => ToSqlOutput::Owned(V::Null),
            Param::Int(i) => ToSqlOutput::Owned(V::Integer(i)),
            Param::Unsigned(u) => ToSqlOutput::Owned(V::Integer(
                i64::try_from(u).map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?,
            )),
            Param::Bool(b) => ToSqlOutput::Owned(V::Integer(i64::from(b))),
            Param::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Param::Bytes(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

fn sqlite_value(v: rusqlite::types::ValueRef<'_>, column: usize) -> Result<Value, DbError> {
    use rusqlite::types::ValueRef;
    Ok(match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(
            String::from_utf8(t.to_vec())
                .map_err(|e| DbError::Column { column, message: format!("not UTF-8: {e}") })?,
        ),
        ValueRef::Blob(b) => Value::Bytes(b.to_vec()),
    })
}

/// `sql` with each `?N` replaced by parameter N as a Postgres literal, for statements sent
/// together in one round trip (the simple query protocol has no parameters). Text is an
/// escape string, `E'…'` with `\` and `'` doubled, which reads the same whatever the session's
/// `standard_conforming_strings`; NUL becomes U+FFFD as when bound; bytes are
/// `decode('…', 'hex')`.
pub(crate) fn inline(sql: &str, params: &[Param<'_>]) -> Result<String, DbError> {
    let mut out = String::with_capacity(sql.len() + 64 * params.len());
    let mut chars = sql.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '?' || !chars.peek().is_some_and(|(_, d)| d.is_ascii_digit()) {
            out.push(c);
            continue;
        }
        let mut n = 0usize;
        while let Some((_, d)) = chars.peek().copied().filter(|(_, d)| d.is_ascii_digit()) {
            n = n * 10 + (d as usize - '0' as usize);
            chars.next();
        }
        let param = n.checked_sub(1).and_then(|i| params.get(i)).ok_or_else(|| DbError::Param {
            index: n,
            message: format!("the statement names ?{n} but has {} parameters", params.len()),
        })?;
        push_literal(&mut out, n, param)?;
    }
    Ok(out)
}

/// Appends `param` (the statement's parameter `n`, for an error) as a Postgres literal: see
/// [`inline`].
pub(crate) fn push_literal(out: &mut String, n: usize, param: &Param<'_>) -> Result<(), DbError> {
    match *param {
        Param::Null => out.push_str("NULL"),
        Param::Int(i) => out.push_str(&i.to_string()),
        Param::Unsigned(u) => {
            let i = i64::try_from(u).map_err(|_| DbError::Param {
                index: n,
                message: format!("{u} does not fit a BIGINT"),
            })?;
            out.push_str(&i.to_string());
        }
        Param::Bool(b) => out.push_str(if b { "TRUE" } else { "FALSE" }),
        Param::Text(t) => {
            out.push_str("E'");
            for ch in t.chars() {
                match ch {
                    '\'' => out.push_str("''"),
                    '\\' => out.push_str("\\\\"),
                    '\0' => out.push('\u{FFFD}'),
                    ch => out.push(ch),
                }
            }
            out.push('\'');
        }
        Param::Bytes(b) => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.reserve(b.len() * 2 + 24);
            out.push_str("decode('");
            for byte in b {
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 15)]));
            }
            out.push_str("', 'hex')");
        }
    }
    Ok(())
}

/// The store error of a failed statement.
pub(crate) fn db_err(at: &Location, op: &str, source: impl Into<DbError>) -> StoreError {
    StoreError::Db { path: at.clone(), op: op.to_owned(), source: source.into() }
}

#[cfg(test)]
mod tests {
    use super::{Param, inline};

    #[test]
    fn inlined_values_are_literals_whatever_they_hold() {
        let sql = inline(
            "INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5, ?10, ?1)",
            &[
                Param::Text("it's a \\ back'slash ?2 ; -- \0 end"),
                Param::Int(-7),
                Param::Null,
                Param::Bool(true),
                Param::Bytes(&[0, 0xff, 0x27]),
                Param::Unsigned(1),
                Param::Unsigned(2),
                Param::Unsigned(3),
                Param::Unsigned(4),
                Param::Unsigned(42),
            ],
        )
        .unwrap();
        let text = "E'it''s a \\\\ back''slash ?2 ; -- \u{FFFD} end'";
        assert_eq!(
            sql,
            format!(
                "INSERT INTO t VALUES ({text}, -7, NULL, TRUE, decode('00ff27', 'hex'), 42, {text})"
            )
        );
        assert!(inline("?3", &[Param::Null]).is_err());
        assert!(inline("?0", &[Param::Null]).is_err());
        assert!(inline("?1", &[Param::Unsigned(u64::MAX)]).is_err());
    }
}
