//! The Postgres half of a journal transaction's writes: they wait in [`Pending`] until the
//! batch ends (or holds [`FLUSH_BYTES`] of text), and the rows of one table and [`Shape`] go
//! together, up to [`GROUP_ROWS`] at a time, since what thousands of records cost the server is
//! parsing and planning a statement each, not the round trips. A plain insert of [`COPY_ROWS`]
//! rows or more is a `COPY … FROM STDIN` (nothing to parse or plan, rows inserted many to a
//! page; a round trip of its own); the other writes go in one round trip of statements, values
//! inlined as literals (the simple query protocol has no parameters). Each table's writes keep
//! their order (`rowid`, which orders rows, is per table; the only rows a batch's rows refer to
//! are the runs', which a batch writes last), and what one statement cannot hold twice is folded
//! into what the statements one by one would have left: a later upsert of the same key replaces
//! the earlier row (`DO UPDATE` sets every other column), a later `DO NOTHING` row of the same
//! key is dropped, and a tool call's end whose start waits in the same statement becomes that
//! row's final values. When a write fails, everything is rolled back to a savepoint and run
//! again one record at a time, in the records' order, so the error names the record whose
//! statement the database refused, as before grouping.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::db::{Conn, DbError, Location, Param, push_literal};
use crate::error::{StoreError, db_err};

/// Pending writes are sent once they hold this much text, in the same transaction: a batch of
/// large file snapshots must not become one message of hundreds of megabytes.
pub(crate) const FLUSH_BYTES: usize = 8 << 20;

/// The most rows one multi-row statement holds.
pub(crate) const GROUP_ROWS: usize = 512;

/// The most text of values one multi-row statement holds (a row larger than this is alone).
const GROUP_BYTES: usize = 1 << 20;

/// The fewest rows of a plain insert sent as a `COPY` (fewer go in the statements' round trip).
pub(crate) const COPY_ROWS: usize = 16;

/// What two rows with the same key in one table do, written one after the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SameKey {
    /// The second fails (a plain insert): one statement holding both fails as well.
    Fails,
    /// The second is dropped (`ON CONFLICT … DO NOTHING`).
    KeepFirst,
    /// The second's values replace the first's (`ON CONFLICT … DO UPDATE` of every column but
    /// the key's).
    KeepLast,
}

/// An insert into one table: its columns, what follows the values, and what a repeated key does.
pub(crate) struct Shape {
    pub(crate) table: &'static str,
    pub(crate) columns: &'static [&'static str],
    /// The key's positions among the columns (empty: rows are never folded).
    pub(crate) key: &'static [usize],
    /// `ON CONFLICT …`, or empty.
    pub(crate) tail: &'static str,
    pub(crate) same_key: SameKey,
    /// The one-row statement with `?N` placeholders, made once.
    pub(crate) one: OnceLock<String>,
}

impl Shape {
    /// Whether its rows may be copied in: a plain insert (no `ON CONFLICT`).
    fn copies(&self) -> bool {
        self.tail.is_empty()
    }

    /// `COPY table (columns) FROM STDIN`.
    fn copy_sql(&self) -> String {
        format!("COPY {} ({}) FROM STDIN", self.table, self.columns.join(", "))
    }

    /// `INSERT INTO table (columns) VALUES `.
    fn head(&self) -> String {
        format!("INSERT INTO {} ({}) VALUES ", self.table, self.columns.join(", "))
    }

    /// The statement inserting `rows` rows, with `?N` placeholders.
    pub(crate) fn sql(&self, rows: usize) -> String {
        let n = self.columns.len();
        let mut sql = self.head();
        for r in 0..rows {
            sql.push_str(if r == 0 { "(" } else { ", (" });
            for c in 0..n {
                if c > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!("?{}", r * n + c + 1));
            }
            sql.push(')');
        }
        if !self.tail.is_empty() {
            sql.push(' ');
            sql.push_str(self.tail);
        }
        sql
    }

    /// The one-row statement (SQLite prepares it once per connection).
    pub(crate) fn one(&self) -> &str {
        self.one.get_or_init(|| self.sql(1))
    }

    /// The key of a row of this shape, as text (values NUL-separated).
    fn key_of(&self, params: &[Param<'_>]) -> String {
        let mut key = String::new();
        for &i in self.key {
            match params.get(i) {
                Some(Param::Text(t)) => key.push_str(t),
                Some(Param::Int(n)) => key.push_str(&n.to_string()),
                Some(Param::Unsigned(n)) => key.push_str(&n.to_string()),
                Some(other) => key.push_str(&format!("{other:?}")),
                None => {}
            }
            key.push('\0');
        }
        key
    }
}

/// An update that may be folded into a row of `shape` with the same key waiting in the same
/// statement: the row is then written with `row` (all of `shape`'s columns) instead.
pub(crate) struct Fold<'a> {
    pub(crate) shape: &'static Shape,
    pub(crate) row: &'a [Param<'a>],
}

/// An update of `table` (`sql`, with `?N` placeholders for `params`).
pub(crate) struct Update<'a> {
    pub(crate) table: &'static str,
    pub(crate) sql: &'a str,
    pub(crate) params: &'a [Param<'a>],
    /// The error when it changes no row (it updates something that must exist).
    pub(crate) must_change: Option<String>,
    /// The whole row it leaves, should the row's insert wait in the same statement.
    pub(crate) fold: Option<Fold<'a>>,
}

/// A write waiting to be sent.
struct Item {
    table: &'static str,
    what: What,
    /// The error when it changes no row (an UPDATE of something that must exist).
    must_change: Option<String>,
    /// The record it writes ("write step_state of run R"), for an error.
    label: String,
}

enum What {
    /// A row of `shape`.
    Row { shape: &'static Shape, key: String, values: Vec<Owned> },
    /// A statement of its own, unless `fold` (a shape, a key and a row's values) finds the row
    /// it updates waiting in the same statement.
    Statement { sql: String, fold: Option<(&'static Shape, String, Vec<Owned>)> },
}

/// A parameter kept until the batch is sent (an unsigned one already checked to fit BIGINT).
enum Owned {
    Null,
    Int(i64),
    Bool(bool),
    Text(String),
    Bytes(Vec<u8>),
}

impl Owned {
    /// Parameter `n` of a row, kept.
    fn of(n: usize, p: &Param<'_>) -> Result<Owned, DbError> {
        Ok(match *p {
            Param::Null => Owned::Null,
            Param::Int(i) => Owned::Int(i),
            Param::Unsigned(u) => Owned::Int(i64::try_from(u).map_err(|_| DbError::Param {
                index: n,
                message: format!("{u} does not fit a BIGINT"),
            })?),
            Param::Bool(b) => Owned::Bool(b),
            Param::Text(t) => Owned::Text(t.to_owned()),
            Param::Bytes(b) => Owned::Bytes(b.to_vec()),
        })
    }

    fn param(&self) -> Param<'_> {
        match self {
            Owned::Null => Param::Null,
            Owned::Int(i) => Param::Int(*i),
            Owned::Bool(b) => Param::Bool(*b),
            Owned::Text(t) => Param::Text(t),
            Owned::Bytes(b) => Param::Bytes(b),
        }
    }

    /// About how much text it becomes.
    fn len(&self) -> usize {
        match self {
            Owned::Text(t) => t.len() + 4,
            Owned::Bytes(b) => 2 * b.len() + 20,
            _ => 8,
        }
    }

    /// As a field of `COPY`'s text format: `\N` for NULL, backslash escapes, NUL as U+FFFD
    /// (as when bound or inlined).
    fn push_copy(&self, out: &mut String) {
        match self {
            Owned::Null => out.push_str("\\N"),
            Owned::Int(i) => out.push_str(&i.to_string()),
            Owned::Bool(b) => out.push(if *b { 't' } else { 'f' }),
            Owned::Text(t) => {
                for ch in t.chars() {
                    match ch {
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        '\t' => out.push_str("\\t"),
                        '\0' => out.push('\u{FFFD}'),
                        ch => out.push(ch),
                    }
                }
            }
            Owned::Bytes(b) => {
                out.push_str("\\\\x");
                for byte in b {
                    out.push_str(&format!("{byte:02x}"));
                }
            }
        }
    }
}

/// About how much text a row becomes.
fn size(values: &[Owned]) -> usize {
    values.iter().map(Owned::len).sum()
}

/// `values` kept, or the error of the first that cannot be.
fn kept(params: &[Param<'_>]) -> Result<Vec<Owned>, DbError> {
    params.iter().enumerate().map(|(i, p)| Owned::of(i + 1, p)).collect()
}

impl Item {
    /// The statement that writes this item alone.
    fn alone(&self) -> String {
        match &self.what {
            What::Row { shape, values, .. } => {
                let mut sql = shape.head();
                push_tuple(&mut sql, values);
                if !shape.tail.is_empty() {
                    sql.push(' ');
                    sql.push_str(shape.tail);
                }
                sql
            }
            What::Statement { sql, .. } => sql.clone(),
        }
    }
}

/// `(…)`: `values` as literals.
fn push_tuple(out: &mut String, values: &[Owned]) {
    out.push('(');
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        // Kept values are literals already checked (`Owned::of`): this cannot fail.
        let _ = push_literal(out, i + 1, &v.param());
    }
    out.push(')');
}

/// The writes of a transaction not sent yet.
#[derive(Default)]
pub(crate) struct Pending {
    items: Vec<Item>,
    bytes: usize,
}

impl Pending {
    /// How much text waits.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Queues a row of `shape`.
    pub(crate) fn row(
        &mut self,
        shape: &'static Shape,
        params: &[Param<'_>],
        label: String,
    ) -> Result<(), DbError> {
        let values = kept(params)?;
        self.bytes += size(&values);
        let key = shape.key_of(params);
        let what = What::Row { shape, key, values };
        self.items.push(Item { table: shape.table, what, must_change: None, label });
        Ok(())
    }

    /// Queues `update`, for the record `label` names.
    pub(crate) fn statement(&mut self, update: Update<'_>, label: String) -> Result<(), DbError> {
        let sql = crate::db::inline(update.sql, update.params)?;
        self.bytes += sql.len();
        let fold = match update.fold {
            Some(f) => Some((f.shape, f.shape.key_of(f.row), kept(f.row)?)),
            None => None,
        };
        let what = What::Statement { sql, fold };
        let must_change = update.must_change;
        self.items.push(Item { table: update.table, what, must_change, label });
        Ok(())
    }

    /// Sends what waits (see [`send`]), behind a savepoint: if a write fails, the records are
    /// run again one at a time to name the one whose statement failed (the transaction fails
    /// either way). Always inside the caller's transaction.
    pub(crate) fn flush(&mut self, conn: &mut Conn, path: &Location) -> Result<(), StoreError> {
        if self.items.is_empty() {
            return Ok(());
        }
        let items = std::mem::take(&mut self.items);
        self.bytes = 0;
        let planned = plan(&items);
        let counts = match send(conn, &planned) {
            Ok(counts) => counts,
            Err(first) => {
                if conn.batch("ROLLBACK TO SAVEPOINT pev_batch").is_ok() {
                    for item in &items {
                        conn.batch(&item.alone()).map_err(|e| db_err(path, &item.label, e))?;
                    }
                }
                return Err(db_err(path, &format!("write {} records", items.len()), first));
            }
        };
        if counts.len() != planned.len() {
            return Err(StoreError::Invalid {
                path: path.clone(),
                message: format!(
                    "the server answered {} of {} statements of a journal write",
                    counts.len(),
                    planned.len()
                ),
            });
        }
        // The first record, in the records' order, whose update changed nothing.
        let unchanged = planned
            .iter()
            .zip(counts)
            .filter_map(|(p, count)| match p {
                Planned::One { item, .. } if count == 0 => Some(*item),
                _ => None,
            })
            .filter_map(|i| items[i].must_change.as_ref().map(|m| (i, m)))
            .min_by_key(|(i, _)| *i);
        match unchanged {
            Some((_, message)) => {
                Err(StoreError::Invalid { path: path.clone(), message: message.clone() })
            }
            None => Ok(()),
        }
    }
}

/// Sends `planned` behind a savepoint: the statements between two `COPY`s in one round trip,
/// each `COPY` in one of its own. How many rows each changed, in order.
fn send(conn: &mut Conn, planned: &[Planned<'_>]) -> Result<Vec<u64>, DbError> {
    let mut counts = Vec::with_capacity(planned.len());
    let mut script = String::from("SAVEPOINT pev_batch");
    // Whether the script still begins with the savepoint (whose answer is not a write's).
    let mut savepoint = true;
    for p in planned {
        if let Planned::Copy { shape, rows } = p {
            run_script(conn, &mut script, &mut savepoint, &mut counts)?;
            counts.push(copy_in(conn, &shape.copy_sql(), rows)?);
        } else {
            if !script.is_empty() {
                script.push_str(";\n");
            }
            p.write(&mut script);
        }
    }
    run_script(conn, &mut script, &mut savepoint, &mut counts)?;
    Ok(counts)
}

/// Sends the statements `script` holds, if any, and empties it.
fn run_script(
    conn: &mut Conn,
    script: &mut String,
    savepoint: &mut bool,
    counts: &mut Vec<u64>,
) -> Result<(), DbError> {
    if !script.is_empty() {
        let answers = conn.exec_script(script)?;
        counts.extend(answers.into_iter().skip(usize::from(std::mem::take(savepoint))));
        script.clear();
    }
    Ok(())
}

/// `row` as a line of `COPY`'s text format.
fn push_copy_row(data: &mut String, row: &[Owned]) {
    for (i, v) in row.iter().enumerate() {
        if i > 0 {
            data.push('\t');
        }
        v.push_copy(data);
    }
    data.push('\n');
}

/// `rows` in `COPY`'s text format.
fn copy_data(rows: &[&[Owned]]) -> String {
    let mut data = String::new();
    for row in rows {
        push_copy_row(&mut data, row);
    }
    data
}

/// How much `COPY` data goes to the server in one message: the server starts on the first
/// rows while the next are written, and keeps no buffer as large as the whole.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
const COPY_CHUNK: usize = 64 << 10;

/// Runs `COPY … FROM STDIN` with `rows`; how many rows it inserted.
#[cfg(feature = "postgres")]
fn copy_in(conn: &mut Conn, sql: &str, rows: &[&[Owned]]) -> Result<u64, DbError> {
    use std::io::Write;
    let Conn::Postgres(pg) = conn else {
        return Err(DbError::Refused("COPY is Postgres's".to_owned()));
    };
    let mut writer = pg.client.copy_in(sql)?;
    // The writer's errors are the client's, wrapped in an io::Error.
    let unwrap = |e: std::io::Error| match e.into_inner().map(|e| e.downcast::<postgres::Error>()) {
        Some(Ok(pg)) => DbError::Postgres(*pg),
        Some(Err(other)) => DbError::Refused(other.to_string()),
        None => DbError::Refused("the COPY to the server failed".to_owned()),
    };
    let mut chunk = String::with_capacity(COPY_CHUNK + 4096);
    for row in rows {
        push_copy_row(&mut chunk, row);
        if chunk.len() >= COPY_CHUNK {
            writer.write_all(chunk.as_bytes()).map_err(unwrap)?;
            chunk.clear();
        }
    }
    writer.write_all(chunk.as_bytes()).map_err(unwrap)?;
    Ok(writer.finish()?)
}

#[cfg(not(feature = "postgres"))]
fn copy_in(_: &mut Conn, _: &str, _: &[&[Owned]]) -> Result<u64, DbError> {
    unreachable!("only a Postgres batch has pending writes")
}

/// One statement of the script.
enum Planned<'a> {
    /// Item `item`'s own statement.
    One { item: usize, sql: &'a str },
    /// Rows of one shape, in one `INSERT`.
    Rows { shape: &'static Shape, rows: Vec<&'a [Owned]> },
    /// Rows of one shape, copied in.
    Copy { shape: &'static Shape, rows: Vec<&'a [Owned]> },
}

impl Planned<'_> {
    fn write(&self, script: &mut String) {
        match self {
            Planned::One { sql, .. } => script.push_str(sql),
            Planned::Copy { shape, rows } => {
                script.push_str(&shape.copy_sql());
                script.push('\n');
                script.push_str(&copy_data(rows));
            }
            Planned::Rows { shape, rows } => {
                script.push_str(&shape.head());
                for (i, row) in rows.iter().enumerate() {
                    if i > 0 {
                        script.push_str(", ");
                    }
                    push_tuple(script, row);
                }
                if !shape.tail.is_empty() {
                    script.push(' ');
                    script.push_str(shape.tail);
                }
            }
        }
    }
}

/// The rows of one statement being put together.
struct Group<'a> {
    shape: &'static Shape,
    rows: Vec<&'a [Owned]>,
    /// Where each key's row is among `rows`.
    keys: HashMap<&'a str, usize>,
    bytes: usize,
}

impl<'a> Group<'a> {
    fn new(shape: &'static Shape) -> Self {
        Group { shape, rows: Vec::new(), keys: HashMap::new(), bytes: 0 }
    }

    fn fits(&self, shape: &'static Shape, values: &[Owned]) -> bool {
        std::ptr::eq(self.shape, shape)
            && self.rows.len() < GROUP_ROWS
            && (self.rows.is_empty() || self.bytes + size(values) <= GROUP_BYTES)
    }

    fn add(&mut self, key: &'a str, values: &'a [Owned]) {
        self.bytes += size(values);
        match (self.shape.same_key, self.keys.get(key)) {
            (SameKey::KeepFirst, Some(_)) => {}
            (SameKey::KeepLast, Some(&at)) => self.rows[at] = values,
            _ => {
                if !self.shape.key.is_empty() {
                    self.keys.insert(key, self.rows.len());
                }
                self.rows.push(values);
            }
        }
    }

    fn done(self) -> Planned<'a> {
        if self.shape.copies() && self.rows.len() >= COPY_ROWS {
            Planned::Copy { shape: self.shape, rows: self.rows }
        } else {
            Planned::Rows { shape: self.shape, rows: self.rows }
        }
    }
}

/// The script's statements: table by table (in the order each first appears), each table's
/// writes in their order, consecutive rows of one shape in one statement.
fn plan(items: &[Item]) -> Vec<Planned<'_>> {
    let mut tables: Vec<&'static str> = Vec::new();
    for item in items {
        if !tables.contains(&item.table) {
            tables.push(item.table);
        }
    }
    let mut out = Vec::new();
    for table in tables {
        let mut group: Option<Group<'_>> = None;
        for (i, item) in items.iter().enumerate().filter(|(_, item)| item.table == table) {
            match &item.what {
                What::Row { shape, key, values } => {
                    if !group.as_ref().is_some_and(|g| g.fits(shape, values)) {
                        out.extend(group.take().map(Group::done));
                    }
                    group.get_or_insert_with(|| Group::new(shape)).add(key, values);
                }
                What::Statement { sql, fold } => {
                    if let (Some((shape, key, row)), Some(g)) = (fold, group.as_mut())
                        && std::ptr::eq(g.shape, *shape)
                        && let Some(&at) = g.keys.get(key.as_str())
                    {
                        g.bytes += size(row);
                        g.rows[at] = row;
                        continue;
                    }
                    out.extend(group.take().map(Group::done));
                    out.push(Planned::One { item: i, sql });
                }
            }
        }
        out.extend(group.take().map(Group::done));
    }
    out
}

#[cfg(test)]
#[path = "write_pg_tests.rs"]
mod tests;
