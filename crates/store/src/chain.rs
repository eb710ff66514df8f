//! The hash chain over a run's events: each event row stores the SHA-256 of the previous row's
//! chain value and its own columns, and the run's row keeps the head. Changing, inserting or
//! deleting an event (or its tail) breaks the chain, and `pev show` says so.
//!
//! The chain has no secret: it catches a journal edited behind pev's back (by a command of a run
//! without bubblewrap, where `.pev/` is writable, or by hand), not a forger who recomputes it.
//! Under bubblewrap `.pev/` is read-only to every command, which is the protection; the chain is
//! how anyone can check afterwards.

use crate::db::{Conn, DbError, params};
use sha2::{Digest, Sha256};

/// The chain value of one event after `prev` (empty for the first).
pub(crate) fn link(prev: &str, seq: u64, at: &str, kind: &str, body: &str) -> String {
    let mut h = Sha256::new();
    for part in [prev, &seq.to_string(), at, kind, body] {
        h.update(part.len().to_le_bytes());
        h.update(part.as_bytes());
    }
    let digest = h.finalize();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The chain value of the run's last event, `""` before the first. The run's row stays locked
/// until the transaction ends (Postgres), so two writers of one run cannot fork the chain.
pub(crate) fn head(conn: &mut Conn, run_id: &str) -> Result<String, DbError> {
    let sql =
        format!("SELECT chain_head FROM runs WHERE run_id = ?1{}", conn.dialect().for_update());
    let head: Option<String> = conn.query_value(&sql, params![run_id])?;
    Ok(head.unwrap_or_default())
}

/// Sets a run's chain head: `?1` the head, `?2` the run.
pub(crate) const SET_HEAD: &str = "UPDATE runs SET chain_head = ?1 WHERE run_id = ?2";

/// What checking a run's chain found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Integrity {
    /// Every event links to the one before and the last is the run's head.
    Intact { events: usize },
    /// The run was journaled before the chain existed (schema 1): nothing to check.
    Unchained { events: usize },
    /// The journal was changed outside pev: what is wrong, first.
    Broken { events: usize, problem: String },
}

impl Integrity {
    pub fn is_broken(&self) -> bool {
        matches!(self, Self::Broken { .. })
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            Self::Intact { events } => format!("intact ({events} events, hash chain verified)"),
            Self::Unchained { events } => {
                format!("not verifiable ({events} events journaled before the hash chain existed)")
            }
            Self::Broken { problem, .. } => {
                format!("CHANGED OUTSIDE PEV: {problem}; this run's record is not evidence")
            }
        }
    }
}

/// Recompute the chain of `run_id`.
pub(crate) fn verify(conn: &mut Conn, run_id: &str) -> Result<Integrity, DbError> {
    type Row = (u64, String, String, String, Option<String>);
    let rows: Vec<Row> = conn
        .query(
            "SELECT seq, at, kind, body, chain FROM events WHERE run_id = ?1 ORDER BY seq",
            params![run_id],
        )?
        .iter()
        .map(|r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .collect::<Result<_, DbError>>()?;
    let stored_head: Option<String> =
        conn.query_value("SELECT chain_head FROM runs WHERE run_id = ?1", params![run_id])?;
    let events = rows.len();
    if stored_head.is_none() && !rows.is_empty() && rows.iter().all(|r| r.4.is_none()) {
        // A pev that chains also journals the sandbox in `run.started`: such a run without a
        // chain had it removed.
        let chained_era = rows.iter().any(|r| r.2 == "run.started" && r.3.contains("\"sandbox\""));
        if chained_era {
            return Ok(Integrity::Broken {
                events,
                problem: "the hash chain was removed from a run journaled with one".into(),
            });
        }
        return Ok(Integrity::Unchained { events });
    }
    let broken = |problem: String| Ok(Integrity::Broken { events, problem });
    let mut prev = String::new();
    for (i, (seq, at, kind, body, chain)) in rows.iter().enumerate() {
        if *seq != i as u64 {
            return broken(format!("event #{i} is missing (the next one is #{seq})"));
        }
        let expected = link(&prev, *seq, at, kind, body);
        if chain.as_deref() != Some(expected.as_str()) {
            return broken(format!("event #{seq} ({kind}) does not match its hash"));
        }
        prev = expected;
    }
    if stored_head.as_deref().unwrap_or_default() != prev {
        return broken(format!(
            "the run's last recorded event is not its last event ({events} events remain)"
        ));
    }
    Ok(Integrity::Intact { events })
}

#[cfg(test)]
mod tests {
    use super::link;

    #[test]
    fn every_column_and_the_previous_link_change_the_hash() {
        let base = link("", 0, "t", "k", "{}");
        assert_ne!(base, link("x", 0, "t", "k", "{}"));
        assert_ne!(base, link("", 1, "t", "k", "{}"));
        assert_ne!(base, link("", 0, "u", "k", "{}"));
        assert_ne!(base, link("", 0, "t", "j", "{}"));
        assert_ne!(base, link("", 0, "t", "k", "{ }"));
        // Boundaries are part of the hash: moving a byte between columns changes it.
        assert_ne!(link("", 0, "ab", "c", ""), link("", 0, "a", "bc", ""));
        assert_eq!(base.len(), 64);
    }
}
