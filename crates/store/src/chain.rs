//! What makes a journal evidence: a keyed MAC chain over each run's events, and a MAC on every
//! row a verdict or a resume reads, under the journal key (`key.rs`) that no command of a run
//! can reach. `Store::integrity` (`verify.rs`) recomputes all of it and names the first bad row.
//!
//! **The events.** Each event row's `chain` is HMAC-SHA256(key, run_id ‖ prev ‖ seq ‖ at ‖ kind ‖
//! body), every part length-prefixed, `prev` the previous event's value (empty for the first);
//! the run's row keeps the last one (`chain_head`). Changing, inserting or deleting an event, or
//! cutting the tail and recomputing the chain, breaks it: without the key nobody can compute a
//! link.
//!
//! **The rows.** Every other table a verdict or a resume reads has a `mac` column:
//! HMAC-SHA256(key, table ‖ every column of the row in a fixed order, run_id first), each value
//! tagged (NULL, integer, text) and length-prefixed (see [`RowMac`] and [`COVER`]). The run id
//! binds a row to its run, the key column (call id, step id, version, seq) to its place.
//! Covered: `runs` (goal, workspace, status, created_at, updated_at, options, result,
//! chain_head, key_id: so the chain's head, the options a resume reopens with and the stored
//! result), `plan_versions`, `step_states`, `tool_calls`, `file_hashes`, `mutations`,
//! `approvals`, `model_calls` (resume answers a model call from them). A row updated in place
//! (a step state, a tool call's end, the run's status and chain head) gets its MAC recomputed in
//! the same statement. **Blobs** are content-addressed: verification recomputes the SHA-256 of
//! every blob a run's mutations, tool calls and model calls name.
//!
//! **Not covered**, said here so nobody relies on it: a row of a child table deleted whole (an
//! approval, a file hash, a tool call: the run's row does not count them; deleted *events* are
//! caught), an earlier version of a row put back in place of a later one (a step state saved
//! while the run went on, restored after; the chain's events still say what happened), a
//! whole journal rolled back to an earlier copy, and which blobs exist (a missing blob is shown
//! as missing, not forged). And a run whose every MAC and key id are removed reads as "not
//! verifiable", like a run journaled before keys or without one: nothing inside a file the
//! forger can write tells those apart, so `pev show` says it and a caller that needs evidence
//! refuses what is not [`Integrity::Intact`].
//!
//! The key protects against whoever can write the journal but not read the key: a command under
//! bubblewrap (which hides `~/.config`) or an MCP client's edit tools confined to a workspace. A
//! command that runs as the same user with no sandbox can read the key file as well as the
//! journal, and forge both: there the MACs are evidence against mistakes and other users only.
//!
//! The key id (HMAC(key, "pev journal key id"), 8 bytes) is in each run's row: a run journaled
//! with another key reads as broken with both ids named, not as forged row by row. A run
//! journaled before keys (schema < 5) has no key id; one journaled where no key could be made
//! has `''`: both read as not verifiable, and their events are checked against the unkeyed
//! SHA-256 chain pev wrote before.

use sha2::{Digest, Sha256};

use crate::db::{Conn, DbError, Param, Value, params};
use crate::key::{HmacSha256, JournalKey, hex};
use hmac::Mac;

/// The columns of an event its chain value covers.
pub(crate) struct EventCols<'a> {
    pub seq: u64,
    pub at: &'a str,
    pub kind: &'a str,
    pub body: &'a str,
}

/// The chain value of one event of `run_id` after `prev` (empty for the first): keyed, or the
/// plain SHA-256 of a run without a key.
pub(crate) fn link(
    key: Option<&JournalKey>,
    run_id: &str,
    prev: &str,
    e: &EventCols<'_>,
) -> String {
    let EventCols { seq, at, kind, body } = *e;
    let seq = seq.to_string();
    match key {
        Some(key) => {
            let mut h = key.mac();
            for part in [run_id, prev, &seq, at, kind, body] {
                h.update(&(part.len() as u64).to_le_bytes());
                h.update(part.as_bytes());
            }
            hex(&h.finalize().into_bytes())
        }
        None => {
            let mut h = Sha256::new();
            for part in [prev, seq.as_str(), at, kind, body] {
                h.update(part.len().to_le_bytes());
                h.update(part.as_bytes());
            }
            hex(&h.finalize())
        }
    }
}

/// The columns each MACed table's `mac` covers, in order; `run_id` first, the row's key next.
pub(crate) const COVER: &[(&str, &[&str])] = &[
    (
        "runs",
        &[
            "run_id",
            "goal",
            "workspace",
            "status",
            "created_at",
            "updated_at",
            "options",
            "result",
            "chain_head",
            "key_id",
        ],
    ),
    ("plan_versions", &["run_id", "version", "plan", "reason", "created_at"]),
    (
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
        ],
    ),
    (
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
        ],
    ),
    (
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
        ],
    ),
    ("file_hashes", &["run_id", "step_id", "path", "phase", "sha256", "bytes", "at"]),
    ("approvals", &["run_id", "step_id", "\"by\"", "at"]),
    ("model_calls", &["run_id", "seq", "role", "step_id", "started_at", "body"]),
];

/// A row's MAC, fed one column at a time in [`COVER`]'s order.
pub(crate) struct RowMac(HmacSha256);

impl RowMac {
    pub(crate) fn new(key: &JournalKey, table: &str) -> RowMac {
        let mut h = key.mac();
        h.update(&(table.len() as u64).to_le_bytes());
        h.update(table.as_bytes());
        RowMac(h)
    }

    pub(crate) fn null(&mut self) {
        self.0.update(&[0]);
    }

    pub(crate) fn int(&mut self, i: i64) {
        self.0.update(&[1]);
        self.0.update(&i.to_le_bytes());
    }

    /// Text as both backends read it back: Postgres stores a NUL as U+FFFD.
    pub(crate) fn text(&mut self, t: &str) {
        let owned;
        let t = if t.contains('\0') {
            owned = t.replace('\0', "\u{FFFD}");
            owned.as_str()
        } else {
            t
        };
        self.0.update(&[2]);
        self.0.update(&(t.len() as u64).to_le_bytes());
        self.0.update(t.as_bytes());
    }

    /// A value as bound for a statement.
    pub(crate) fn param(&mut self, p: &Param<'_>) {
        match *p {
            Param::Null => self.null(),
            Param::Int(i) => self.int(i),
            // Out of range for a column anyway: the insert fails.
            Param::Unsigned(u) => self.int(i64::try_from(u).unwrap_or(-1)),
            Param::Bool(b) => self.int(i64::from(b)),
            Param::Text(t) => self.text(t),
            Param::Bytes(b) => self.text(&hex(b)),
        }
    }

    /// A value as read back.
    pub(crate) fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.null(),
            Value::Int(i) => self.int(*i),
            // No covered column is a float; its text stands in.
            Value::Real(f) => self.text(&f.to_string()),
            Value::Text(t) => self.text(t),
            Value::Bytes(b) => self.text(&hex(b)),
        }
    }

    pub(crate) fn finish(self) -> String {
        hex(&self.0.finalize().into_bytes())
    }
}

/// The MAC of a row of `table` whose covered columns are `params` (in [`COVER`]'s order).
pub(crate) fn row_mac(key: &JournalKey, table: &str, params: &[Param<'_>]) -> String {
    let mut m = RowMac::new(key, table);
    for p in params {
        m.param(p);
    }
    m.finish()
}

/// The MAC of a row read back as `values` (in [`COVER`]'s order).
pub(crate) fn values_mac(key: &JournalKey, table: &str, values: &[Value]) -> String {
    let mut m = RowMac::new(key, table);
    for v in values {
        m.value(v);
    }
    m.finish()
}

/// The columns of `table`'s cover, comma-separated, for a SELECT.
pub(crate) fn cover_columns(table: &str) -> String {
    COVER.iter().find(|(t, _)| *t == table).map(|(_, cols)| cols.join(", ")).unwrap_or_default()
}

/// A run's row, as the writer keeps it between the records of one transaction.
pub(crate) fn read_run(
    conn: &mut Conn,
    run_id: &str,
) -> Result<Option<(Vec<Value>, Value)>, DbError> {
    let sql = format!(
        "SELECT {}, mac FROM runs WHERE run_id = ?1{}",
        cover_columns("runs"),
        conn.dialect().for_update()
    );
    Ok(conn.query_opt(&sql, params![run_id])?.map(|r| {
        let mut values = r.0;
        let mac = values.pop().unwrap_or(Value::Null);
        (values, mac)
    }))
}

/// Whether a row read back to be updated in place still matches its stored MAC: a writer
/// re-MACs what it read, so a row changed outside pev since it was written would otherwise be
/// vouched for by the next update.
pub(crate) fn still_matches(key: &JournalKey, table: &str, values: &[Value], mac: &Value) -> bool {
    matches!(mac, Value::Text(m) if *m == values_mac(key, table, values))
}

/// What checking a run's journal found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Integrity {
    /// Every event links to the one before, the last is the run's head, and every row and
    /// blob of the run matches its MAC or hash under this machine's key.
    Intact { events: usize },
    /// The run was journaled before the chain existed (schema 1): nothing to check.
    Unchained { events: usize },
    /// The run was journaled without a key this machine can check (before journal keys, where
    /// no key could be made, or this machine has none): its unkeyed chain holds, but anyone
    /// who could write the file could have rewritten it.
    Unverifiable { events: usize, why: String },
    /// The journal was changed outside pev: the first bad row and what is wrong with it.
    Broken { events: usize, problem: String },
}

impl Integrity {
    pub fn is_broken(&self) -> bool {
        matches!(self, Self::Broken { .. })
    }

    /// Whether the run is evidence: intact under this machine's key.
    pub fn is_verified(&self) -> bool {
        matches!(self, Self::Intact { .. })
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            Self::Intact { events } => {
                format!(
                    "intact ({events} events, MAC chain and rows verified with the journal key)"
                )
            }
            Self::Unchained { events } => {
                format!("not verifiable ({events} events journaled before the hash chain existed)")
            }
            Self::Unverifiable { events, why } => {
                format!("not verifiable: {why} ({events} events)")
            }
            Self::Broken { problem, .. } => {
                format!("CHANGED OUTSIDE PEV: {problem}; this run's record is not evidence")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{EventCols, link};

    fn l(prev: &str, seq: u64, at: &str, kind: &str, body: &str) -> String {
        link(None, "r", prev, &EventCols { seq, at, kind, body })
    }

    #[test]
    fn every_column_and_the_previous_link_change_the_hash() {
        let base = l("", 0, "t", "k", "{}");
        assert_ne!(base, l("x", 0, "t", "k", "{}"));
        assert_ne!(base, l("", 1, "t", "k", "{}"));
        assert_ne!(base, l("", 0, "u", "k", "{}"));
        assert_ne!(base, l("", 0, "t", "j", "{}"));
        assert_ne!(base, l("", 0, "t", "k", "{ }"));
        // Boundaries are part of the hash: moving a byte between columns changes it.
        assert_ne!(l("", 0, "ab", "c", ""), l("", 0, "a", "bc", ""));
        assert_eq!(base.len(), 64);
    }
}
