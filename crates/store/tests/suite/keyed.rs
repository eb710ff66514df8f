//! The keyed journal (issue 28): every way a command that can write `.pev/pev.db` could rewrite
//! a run (its options, its events with the chain recomputed, a step's state, a tool call, a
//! blob) reads as broken and names the row; a run from before keys reads as not verifiable; a
//! run journaled with another key says so.

use pev_protocol::run::{FileMutation, StepStatus};
use pev_protocol::tool::Effect;
use pev_store::{
    CreateKey, Integrity, Keying, MutationRecord, Record, Store, StoreError, ToolCallEnd,
    ToolCallStart, ToolCallStatus,
};
use rusqlite::Connection;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{Db, create, db, event_rec, keying, step_state};

fn tamper(db: &Db, sql: &str) {
    Connection::open(&db.path).unwrap().execute_batch(sql).unwrap();
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Two runs, `r1` with events, a step state, a finished tool call, a mutation with its blob;
/// `r2` the same events, to show that a change to one run leaves the other intact.
fn journal(store_keying: &Keying) -> (Db, Store) {
    let db = db();
    let store = Store::open_keyed(&db.path, store_keying.clone()).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00Z");
    create(&store, "r2", "2026-01-01T00:00:01Z");
    for seq in 0..5 {
        store.write(&event_rec("r1", seq)).unwrap();
        store.write(&event_rec("r2", seq)).unwrap();
    }
    store.write(&Record::StepState(step_state("r1", "s1", StepStatus::Done))).unwrap();
    store
        .write(&Record::ToolCallStarted(ToolCallStart {
            run_id: "r1".into(),
            call_id: "c3".into(),
            step_id: "s1".into(),
            attempt: 1,
            tool: "file.write".into(),
            effect: Effect::Write,
            arguments: json!({"path": "a.txt", "content": "new\n"}),
            path: Some("a.txt".into()),
            pre_sha256: None,
            intended_sha256: Some(sha256_hex(b"new\n")),
            started_at: "2026-01-01T00:00:02.000Z".into(),
        }))
        .unwrap();
    store
        .write(&Record::ToolCallFinished(ToolCallEnd {
            run_id: "r1".into(),
            call_id: "c3".into(),
            status: ToolCallStatus::Finished,
            output: Some(json!({"bytes": 4})),
            error: None,
            ended_at: "2026-01-01T00:00:03.000Z".into(),
            duration_ms: 3,
        }))
        .unwrap();
    store
        .write(&Record::Blob { sha256: sha256_hex(b"new\n"), content: b"new\n".to_vec() })
        .unwrap();
    store
        .write(&Record::Mutation(MutationRecord {
            run_id: "r1".into(),
            step_id: "s1".into(),
            mutation: FileMutation {
                path: "a.txt".into(),
                bytes_before: 0,
                bytes_after: 4,
                lines_added: 1,
                lines_removed: 0,
                no_op: false,
            },
            before_sha256: None,
            after_sha256: Some(sha256_hex(b"new\n")),
        }))
        .unwrap();
    store
        .write(&Record::RunStatus {
            run_id: "r1".into(),
            status: "succeeded".into(),
            result: None,
            updated_at: "2026-01-01T00:00:04Z".into(),
        })
        .unwrap();
    (db, store)
}

fn broken_naming(found: &Integrity, expected: &str) {
    assert!(found.is_broken(), "{found:?}");
    assert!(found.describe().contains(expected), "{}", found.describe());
}

#[test]
fn a_run_pev_wrote_with_its_key_is_intact_and_verified() {
    let (_db, store) = journal(&keying());
    let found = store.integrity("r1").unwrap();
    assert_eq!(found, Integrity::Intact { events: 5 });
    assert!(found.is_verified());
    assert_eq!(store.require_intact("r1").unwrap(), found);
}

/// (a) The options a resume reopens the run with, rewritten with plain SQL.
#[test]
fn rewritten_options_break_the_runs_row() {
    let (db, store) = journal(&keying());
    tamper(&db, r#"UPDATE runs SET options = '{"jobs":2,"network":"open"}' WHERE run_id = 'r1'"#);
    broken_naming(&store.integrity("r1").unwrap(), "runs row (run r1) does not match its MAC");
    assert_eq!(store.integrity("r2").unwrap(), Integrity::Intact { events: 5 });
    let err = store.require_intact("r1").unwrap_err();
    assert!(matches!(err, StoreError::Tampered { .. }), "{err:?}");
    assert!(err.to_string().contains("runs row (run r1)"), "{err}");
}

/// A row changed between two of the writer's batches (by a command of the run itself) is not
/// re-MACed by the next record of the run: the write is refused and the run stays broken.
#[test]
fn the_next_record_does_not_vouch_for_a_row_changed_in_between() {
    let (db, store) = journal(&keying());
    tamper(&db, r#"UPDATE runs SET options = '{"network":"open"}' WHERE run_id = 'r1'"#);
    let err = store.write(&event_rec("r1", 5)).unwrap_err();
    assert!(err.to_string().contains("changed outside pev"), "{err}");
    broken_naming(&store.integrity("r1").unwrap(), "runs row (run r1) does not match its MAC");
    // The other run is written as before.
    store.write(&event_rec("r2", 5)).unwrap();
    assert_eq!(store.integrity("r2").unwrap(), Integrity::Intact { events: 6 });
}

/// A tool call's row changed while the call ran (its arguments rewritten by the command it
/// records) is not re-MACed when the call's end is written.
#[test]
fn a_tool_call_changed_while_it_ran_is_not_vouched_for_at_its_end() {
    let (db, store) = journal(&keying());
    store
        .write(&Record::ToolCallStarted(ToolCallStart {
            run_id: "r1".into(),
            call_id: "c4".into(),
            step_id: "s1".into(),
            attempt: 1,
            tool: "shell.exec".into(),
            effect: Effect::Exec,
            arguments: json!({"command": "true"}),
            path: None,
            pre_sha256: None,
            intended_sha256: None,
            started_at: "2026-01-01T00:00:04.000Z".into(),
        }))
        .unwrap();
    tamper(
        &db,
        r#"UPDATE tool_calls SET arguments = '{"command":"rm -rf /"}' WHERE call_id = 'c4'"#,
    );
    let end = Record::ToolCallFinished(ToolCallEnd {
        run_id: "r1".into(),
        call_id: "c4".into(),
        status: ToolCallStatus::Finished,
        output: None,
        error: None,
        ended_at: "2026-01-01T00:00:05.000Z".into(),
        duration_ms: 1,
    });
    let err = store.write(&end).unwrap_err();
    assert!(err.to_string().contains("changed outside pev while it ran"), "{err}");
    broken_naming(&store.integrity("r1").unwrap(), "tool_calls row (run r1, call c4)");
}

/// The chain pev wrote before keys: SHA-256 of the previous value and the event's columns.
fn unkeyed_link(prev: &str, seq: i64, at: &str, kind: &str, body: &str) -> String {
    let mut h = Sha256::new();
    for part in [prev, &seq.to_string(), at, kind, body] {
        h.update(part.len().to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// (b) Today's forger: delete the last events, recompute the unkeyed chain, set the head.
#[test]
fn deleted_events_with_a_recomputed_unkeyed_chain_are_caught() {
    let (db, store) = journal(&keying());
    let conn = Connection::open(&db.path).unwrap();
    conn.execute("DELETE FROM events WHERE run_id = 'r1' AND seq >= 3", []).unwrap();
    let rows: Vec<(i64, String, String, String)> = conn
        .prepare("SELECT seq, at, kind, body FROM events WHERE run_id = 'r1' ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut prev = String::new();
    for (seq, at, kind, body) in &rows {
        prev = unkeyed_link(&prev, *seq, at, kind, body);
        conn.execute(
            "UPDATE events SET chain = ?1 WHERE run_id = 'r1' AND seq = ?2",
            rusqlite::params![prev, seq],
        )
        .unwrap();
    }
    conn.execute("UPDATE runs SET chain_head = ?1 WHERE run_id = 'r1'", [&prev]).unwrap();
    let found = store.integrity("r1").unwrap();
    broken_naming(&found, "runs row (run r1)");
    // Even with the run's row left alone, the first event no longer matches its MAC.
    let (db, store) = journal(&keying());
    let conn = Connection::open(&db.path).unwrap();
    let (at, kind, body): (String, String, String) = conn
        .query_row("SELECT at, kind, body FROM events WHERE run_id = 'r1' AND seq = 0", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    conn.execute(
        "UPDATE events SET chain = ?1 WHERE run_id = 'r1' AND seq = 0",
        [unkeyed_link("", 0, &at, &kind, &body)],
    )
    .unwrap();
    broken_naming(&store.integrity("r1").unwrap(), "events row (run r1, event #0");
}

/// (c) A step's state and a tool call's outcome, changed in place.
#[test]
fn a_changed_step_state_or_tool_call_names_its_row() {
    let cases = [
        (
            "UPDATE step_states SET status = 'failed' WHERE run_id = 'r1' AND step_id = 's1'",
            "step_states row (run r1, step s1) does not match its MAC",
        ),
        (
            "UPDATE tool_calls SET status = 'started', output = NULL, ended_at = NULL, \
             duration_ms = NULL WHERE call_id = 'c3'",
            "tool_calls row (run r1, call c3) does not match its MAC",
        ),
        (
            "UPDATE tool_calls SET arguments = '{\"path\":\"b.txt\"}' WHERE call_id = 'c3'",
            "tool_calls row (run r1, call c3)",
        ),
        ("UPDATE tool_calls SET mac = NULL WHERE call_id = 'c3'", "call c3) has no MAC"),
        ("UPDATE mutations SET lines_added = 9 WHERE run_id = 'r1'", "mutations row (run r1"),
        (
            "UPDATE plan_versions SET plan = replace(plan, 's1', 'sX') WHERE run_id = 'r1'",
            "plan_versions row (run r1, version 1)",
        ),
        // A row moved to another run carries the first run's id in its MAC.
        ("UPDATE step_states SET run_id = 'r2' WHERE run_id = 'r1'", "step_states row"),
        // The blob a diff is drawn from, rewritten.
        ("UPDATE blobs SET content = X'6f6c640a', encoding = NULL", "blob "),
    ];
    for (sql, expected) in cases {
        let (db, store) = journal(&keying());
        tamper(&db, sql);
        let run = if sql.contains("run_id = 'r2'") { "r2" } else { "r1" };
        broken_naming(&store.integrity(run).unwrap(), expected);
    }
}

/// (d) A run journaled before keys (schema 4: the unkeyed chain, no key id, no MACs) is not
/// verifiable, not broken.
#[test]
fn a_run_from_before_keys_is_not_verifiable() {
    let (db, _) = journal(&Keying::Unkeyed { why: "an old pev".into() });
    tamper(&db, super::chain::LEGACY);
    let store = Store::open_keyed(&db.path, keying()).unwrap();
    let found = store.integrity("r1").unwrap();
    assert!(
        matches!(&found, Integrity::Unverifiable { events: 5, why } if why.contains("before")),
        "{found:?}"
    );
    assert!(!found.is_broken() && !found.is_verified());
    assert!(found.describe().starts_with("not verifiable"), "{}", found.describe());
    assert!(store.require_intact("r1").is_ok());
    // Its unkeyed chain is still checked: an edit there is broken.
    tamper(&db, "UPDATE events SET body = replace(body, 's2', 'sX') WHERE run_id = 'r1'");
    broken_naming(&store.integrity("r1").unwrap(), "event #2");
    // Removing the key id but not the MACs is no way out.
    let (db, store) = journal(&keying());
    tamper(&db, "UPDATE runs SET key_id = NULL, mac = NULL WHERE run_id = 'r1'");
    broken_naming(&store.integrity("r1").unwrap(), "key id was removed");
}

/// (e) Another machine's key: broken, and the message says the key differs.
#[test]
fn a_run_journaled_with_another_key_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let other = Keying::from_file(&dir.path().join("other.key"), CreateKey::Yes).unwrap();
    let (db, _store) = journal(&other);
    let mine = keying();
    let store = Store::open_keyed(&db.path, mine.clone()).unwrap();
    let found = store.integrity("r1").unwrap();
    broken_naming(&found, "another journal key");
    let text = found.describe();
    assert!(text.contains(other.key().unwrap().id()), "{text}");
    assert!(text.contains(mine.key().unwrap().id()), "{text}");
    // Writing into it with this key is refused too: its rows would read as forged.
    let err = store.write(&event_rec("r1", 5)).unwrap_err().to_string();
    assert!(err.contains("another journal key"), "{err}");
}

/// No key could be made: the journal is still written, and reads as not verifiable.
#[test]
fn an_unkeyed_journal_is_written_and_not_verifiable() {
    let unkeyed = Keying::Unkeyed { why: "no journal key (test)".into() };
    let (db, store) = journal(&unkeyed);
    let found = store.integrity("r1").unwrap();
    assert!(matches!(found, Integrity::Unverifiable { events: 5, .. }), "{found:?}");
    assert!(found.describe().contains("not verifiable"), "{}", found.describe());
    // A keyed machine reads it the same way (it was journaled without a key).
    let keyed = Store::open_keyed(&db.path, keying()).unwrap();
    assert!(matches!(keyed.integrity("r1").unwrap(), Integrity::Unverifiable { .. }));
    // And a keyed run read where there is no key is not verifiable either, saying why.
    let (db, _store) = journal(&keying());
    let bare = Store::open_keyed(&db.path, unkeyed).unwrap();
    let found = bare.integrity("r1").unwrap();
    assert!(found.describe().contains("no journal key (test)"), "{}", found.describe());
}

/// The writer's own path (group commits of many records, a call's start and end in one
/// transaction, model calls) verifies too.
#[test]
fn a_journal_written_through_the_writer_thread_verifies() {
    let db = db();
    let store = Store::open_keyed(&db.path, keying()).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00Z");
    let journal = pev_store::Journal::start_keyed(&db.path, keying()).unwrap();
    for n in 0..50u64 {
        journal.record(event_rec("r1", n)).unwrap();
        journal
            .record(Record::ToolCallStarted(ToolCallStart {
                run_id: "r1".into(),
                call_id: format!("c{n}"),
                step_id: "s1".into(),
                attempt: 1,
                tool: "file.read".into(),
                effect: Effect::Read,
                arguments: json!({"path": "a.txt"}),
                path: None,
                pre_sha256: None,
                intended_sha256: None,
                started_at: "2026-01-01T00:00:02.000Z".into(),
            }))
            .unwrap();
        journal
            .record(Record::ToolCallFinished(ToolCallEnd {
                run_id: "r1".into(),
                call_id: format!("c{n}"),
                status: ToolCallStatus::Failed,
                output: None,
                error: Some("nul \0 inside".into()),
                ended_at: "2026-01-01T00:00:03.000Z".into(),
                duration_ms: n,
            }))
            .unwrap();
        journal
            .record(Record::ModelCall(Box::new(pev_store::ModelCallRecord {
                run_id: "r1".into(),
                role: "executor".into(),
                ..Default::default()
            })))
            .unwrap();
        if n % 7 == 0 {
            journal.flush().unwrap();
        }
    }
    journal.close().unwrap();
    assert_eq!(store.integrity("r1").unwrap(), Integrity::Intact { events: 50 });
    tamper(&db, "UPDATE model_calls SET role = 'planner' WHERE seq = 7");
    broken_naming(&store.integrity("r1").unwrap(), "model_calls row (run r1, model call #7)");
}
