//! The hash chain: a journal pev wrote verifies; every way of changing its events behind pev's
//! back is reported, and another run's chain is unaffected.

use pev_store::{Integrity, Store};
use rusqlite::Connection;

use super::{create, db, event_rec};

fn journal_with(events: u64) -> (super::Db, Store) {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00Z");
    create(&store, "r2", "2026-01-01T00:00:01Z");
    for seq in 0..events {
        store.write(&event_rec("r1", seq)).unwrap();
        store.write(&event_rec("r2", seq)).unwrap();
    }
    (db, store)
}

/// What a run journaled before keys looks like: no key id, no MACs.
pub(super) const LEGACY: &str = "UPDATE runs SET key_id = NULL, mac = NULL; \
    UPDATE plan_versions SET mac = NULL; UPDATE step_states SET mac = NULL; \
    UPDATE tool_calls SET mac = NULL; UPDATE mutations SET mac = NULL; \
    UPDATE file_hashes SET mac = NULL; UPDATE approvals SET mac = NULL; \
    UPDATE model_calls SET mac = NULL";

fn tamper(path: &std::path::Path, sql: &str) {
    Connection::open(path).unwrap().execute_batch(sql).unwrap();
}

#[test]
fn a_journal_pev_wrote_is_intact() {
    let (_db, store) = journal_with(5);
    assert_eq!(store.integrity("r1").unwrap(), Integrity::Intact { events: 5 });
    // A run with no events yet is intact too.
    create(&store, "r3", "2026-01-01T00:00:02Z");
    assert_eq!(store.integrity("r3").unwrap(), Integrity::Intact { events: 0 });
}

#[test]
fn every_kind_of_edit_is_caught() {
    let edits = [
        (
            "UPDATE events SET body = replace(body, 's2', 'sX') WHERE run_id = 'r1' AND seq = 2",
            "event #2",
        ),
        ("UPDATE events SET kind = 'x' WHERE run_id = 'r1' AND seq = 0", "event #0"),
        ("UPDATE events SET at = 'then' WHERE run_id = 'r1' AND seq = 4", "event #4"),
        ("DELETE FROM events WHERE run_id = 'r1' AND seq = 1", "event #1 is missing"),
        ("DELETE FROM events WHERE run_id = 'r1' AND seq = 4", "last recorded event"),
        ("DELETE FROM events WHERE run_id = 'r1'", "last recorded event"),
        ("UPDATE events SET chain = NULL WHERE run_id = 'r1' AND seq = 3", "event #3"),
    ];
    for (sql, expected) in edits {
        let (db, store) = journal_with(5);
        tamper(&db.path, sql);
        let found = store.integrity("r1").unwrap();
        assert!(found.is_broken(), "{sql}: {found:?}");
        assert!(found.describe().contains(expected), "{sql}: {}", found.describe());
        assert_eq!(store.integrity("r2").unwrap(), Integrity::Intact { events: 5 }, "{sql}");
    }
}

#[test]
fn an_inserted_event_is_caught() {
    let (db, store) = journal_with(3);
    tamper(
        &db.path,
        "INSERT INTO events (run_id, seq, at, kind, body) \
         SELECT run_id, 3, at, kind, body FROM events WHERE run_id = 'r1' AND seq = 2",
    );
    assert!(store.integrity("r1").unwrap().is_broken());
}

#[test]
fn a_run_from_before_the_chain_is_not_verifiable_rather_than_broken() {
    let (db, store) = journal_with(2);
    tamper(
        &db.path,
        &format!("{LEGACY}; UPDATE events SET chain = NULL; UPDATE runs SET chain_head = NULL"),
    );
    assert_eq!(store.integrity("r1").unwrap(), Integrity::Unchained { events: 2 });
}

#[test]
fn a_chain_removed_from_a_run_that_journaled_its_sandbox_is_broken_not_old() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00Z");
    let started = pev_protocol::event::Event {
        run_id: "r1".into(),
        seq: 0,
        at: "2026-01-01T00:00:00.000Z".into(),
        body: pev_protocol::event::EventBody::RunStarted {
            goal: "g".into(),
            workspace: "/ws".into(),
            resumed: false,
            sandbox: Some(serde_json::json!({"mode": "auto"})),
        },
    };
    store.write(&pev_store::Record::Event(started)).unwrap();
    store.write(&event_rec("r1", 1)).unwrap();
    tamper(
        &db.path,
        &format!("{LEGACY}; UPDATE events SET chain = NULL; UPDATE runs SET chain_head = NULL"),
    );
    let found = store.integrity("r1").unwrap();
    assert!(found.describe().contains("hash chain was removed"), "{found:?}");
}
