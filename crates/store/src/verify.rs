//! Checking one run's journal against its key (what `chain.rs` says is covered): the run's row,
//! the event chain and its head, every MACed row, then the blobs the run names. The answer names
//! the first bad row, in that order, with its table and key.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use crate::chain::{COVER, EventCols, Integrity, cover_columns, link, values_mac};
use crate::db::{Conn, DbError, Value, params};
use crate::key::{KEY_FILE_ENV, Keying, hex};

/// Recompute everything `run_id`'s journal holds against `keying`'s key.
pub(crate) fn verify(conn: &mut Conn, keying: &Keying, run_id: &str) -> Result<Integrity, DbError> {
    type Ev = (u64, String, String, String, Option<String>);
    let events: Vec<Ev> = conn
        .query(
            "SELECT seq, at, kind, body, chain FROM events WHERE run_id = ?1 ORDER BY seq",
            params![run_id],
        )?
        .iter()
        .map(|r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .collect::<Result<_, DbError>>()?;
    let n = events.len();
    let broken = |problem: String| Ok(Integrity::Broken { events: n, problem });
    let sql = format!("SELECT {}, mac FROM runs WHERE run_id = ?1", cover_columns("runs"));
    let Some(run) = conn.query_opt(&sql, params![run_id])? else {
        if n > 0 {
            return broken(format!("the runs row of run {run_id} is missing"));
        }
        return Ok(Integrity::Unverifiable { events: 0, why: format!("no run {run_id}") });
    };
    let head: Option<String> = run.get(8)?;
    let key_id: Option<String> = run.get(9)?;
    let key_id = match key_id.as_deref() {
        None | Some("") => {
            let why = match key_id {
                None => "journaled before pev keyed its journal",
                Some(_) => "journaled without a journal key (none could be made)",
            };
            return unkeyed(conn, run_id, &events, head.as_deref(), why);
        }
        Some(id) => id.to_owned(),
    };
    let key = match keying {
        Keying::Unkeyed { why } => {
            let why = format!("{why}; the run was journaled with key id {key_id}");
            return Ok(Integrity::Unverifiable { events: n, why });
        }
        Keying::Keyed(key) => key,
    };
    if key.id() != key_id {
        return broken(format!(
            "run {run_id} was written with another journal key (id {key_id}); this machine's key \
             is {} ({}, set {KEY_FILE_ENV} to the key the run was journaled with)",
            key.id(),
            key.file().display()
        ));
    }
    if let Some(problem) = row_problem(key, "runs", &run.0, || format!("run {run_id}")) {
        return broken(problem);
    }
    let mut prev = String::new();
    for (i, (seq, at, kind, body, chain)) in events.iter().enumerate() {
        if *seq != i as u64 {
            return broken(format!("event #{i} is missing (the next one is #{seq})"));
        }
        let expected = link(Some(key), run_id, &prev, &EventCols { seq: *seq, at, kind, body });
        if chain.as_deref() != Some(expected.as_str()) {
            return broken(format!(
                "events row (run {run_id}, event #{seq}, {kind}) does not match its MAC"
            ));
        }
        prev = expected;
    }
    if head.unwrap_or_default() != prev {
        return broken(format!(
            "the run's last recorded event is not its last event ({n} events remain)"
        ));
    }
    let mut named = BTreeSet::new();
    for (table, columns) in COVER.iter().skip(1) {
        let sql = format!(
            "SELECT {}, mac FROM {table} WHERE run_id = ?1 ORDER BY rowid",
            columns.join(", ")
        );
        for row in conn.query(&sql, params![run_id])? {
            let which = || row_name(table, &row.0, run_id);
            if let Some(problem) = row_problem(key, table, &row.0, which) {
                return broken(problem);
            }
            blobs_named(table, &row.0, &mut named);
        }
    }
    for sha in named {
        if let Some(problem) = blob_problem(conn, &sha)? {
            return broken(format!("{problem} (named by run {run_id})"));
        }
    }
    Ok(Integrity::Intact { events: n })
}

/// What is wrong with a MACed row (`values`: the covered columns, then `mac`), if anything.
fn row_problem(
    key: &crate::key::JournalKey,
    table: &str,
    values: &[Value],
    which: impl Fn() -> String,
) -> Option<String> {
    let (mac, covered) = values.split_last()?;
    match mac {
        Value::Text(mac) if *mac == values_mac(key, table, covered) => None,
        Value::Null => Some(format!("{table} row ({}) has no MAC", which())),
        _ => Some(format!("{table} row ({}) does not match its MAC", which())),
    }
}

/// A row's table key, for people: `run R, call c3`.
fn row_name(table: &str, v: &[Value], run_id: &str) -> String {
    let text = |i: usize| match v.get(i) {
        Some(Value::Text(t)) => t.clone(),
        Some(Value::Int(n)) => n.to_string(),
        _ => "?".to_owned(),
    };
    let key = match table {
        "plan_versions" => format!("version {}", text(1)),
        "step_states" | "approvals" => format!("step {}", text(1)),
        "tool_calls" => format!("call {}", text(1)),
        "mutations" => format!("mutation #{}, {}", text(1), text(3)),
        "file_hashes" => format!("step {}, {} {}", text(1), text(3), text(2)),
        "model_calls" => format!("model call #{}", text(1)),
        _ => String::new(),
    };
    format!("run {run_id}, {key}")
}

/// The blobs a row names: a mutation's two versions, a tool call's file hashes (stored when
/// the file's content was), the blobs of a model call's request and response.
fn blobs_named(table: &str, v: &[Value], out: &mut BTreeSet<String>) {
    let columns: &[usize] = match table {
        "mutations" => &[9, 10],
        "tool_calls" => &[8, 9],
        "model_calls" => {
            if let Some(Value::Text(body)) = v.get(5) {
                let mut found = std::collections::HashSet::new();
                crate::gc::hashes_in(body, &mut found);
                out.extend(found);
            }
            &[]
        }
        _ => &[],
    };
    for i in columns {
        if let Some(Value::Text(sha)) = v.get(*i)
            && sha.len() == 64
        {
            out.insert(sha.to_ascii_lowercase());
        }
    }
}

/// Whether the stored blob `sha` (if stored) holds content with that hash.
fn blob_problem(conn: &mut Conn, sha: &str) -> Result<Option<String>, DbError> {
    let Some(row) =
        conn.query_opt("SELECT content, encoding FROM blobs WHERE sha256 = ?1", params![sha])?
    else {
        return Ok(None);
    };
    let content: Vec<u8> = row.get(0)?;
    let encoding: Option<String> = row.get(1)?;
    Ok(match crate::blob::decode(content, encoding.as_deref()) {
        Ok(raw) if hex(&Sha256::digest(&raw)) == sha => None,
        Ok(_) => Some(format!("blob {sha} does not hold the content its hash names")),
        Err(e) => Some(format!("blob {sha} cannot be read: {e}")),
    })
}

/// A run without a key id: its rows must carry no MACs (else the id was removed), and its
/// events the unkeyed SHA-256 chain of before.
fn unkeyed(
    conn: &mut Conn,
    run_id: &str,
    rows: &[(u64, String, String, String, Option<String>)],
    stored_head: Option<&str>,
    why: &str,
) -> Result<Integrity, DbError> {
    let events = rows.len();
    let broken = |problem: String| Ok(Integrity::Broken { events, problem });
    for (table, _) in COVER {
        let sql = format!("SELECT 1 FROM {table} WHERE run_id = ?1 AND mac IS NOT NULL LIMIT 1");
        if conn.query_opt(&sql, params![run_id])?.is_some() {
            return broken(format!(
                "{table} rows of run {run_id} carry MACs, but the run's key id was removed"
            ));
        }
    }
    if stored_head.is_none() && !rows.is_empty() && rows.iter().all(|r| r.4.is_none()) {
        // A pev that chains also journals the sandbox in `run.started`: such a run without a
        // chain had it removed.
        let chained_era = rows.iter().any(|r| r.2 == "run.started" && r.3.contains("\"sandbox\""));
        if chained_era {
            return broken("the hash chain was removed from a run journaled with one".into());
        }
        return Ok(Integrity::Unchained { events });
    }
    let mut prev = String::new();
    for (i, (seq, at, kind, body, chain)) in rows.iter().enumerate() {
        if *seq != i as u64 {
            return broken(format!("event #{i} is missing (the next one is #{seq})"));
        }
        let expected = link(None, run_id, &prev, &EventCols { seq: *seq, at, kind, body });
        if chain.as_deref() != Some(expected.as_str()) {
            return broken(format!("event #{seq} ({kind}) does not match its hash"));
        }
        prev = expected;
    }
    if stored_head.unwrap_or_default() != prev {
        return broken(format!(
            "the run's last recorded event is not its last event ({events} events remain)"
        ));
    }
    Ok(Integrity::Unverifiable { events, why: why.to_owned() })
}
