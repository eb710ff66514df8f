//! `Store::append_event` and `append_guarded`: numbering inside the write transaction, the
//! optimistic guard of read-decide-write callers in other processes, and all-or-nothing writes.

use pev_protocol::event::EventBody;
use pev_store::{Guard, Record};

use super::{create, db};

fn warning(text: &str) -> EventBody {
    EventBody::Warning { step: None, message: text.to_owned() }
}

#[test]
fn appends_number_on_and_the_chain_holds() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-11-25T10:00:00.000Z");
    let a = store.append_event("r1", warning("a")).unwrap();
    let b = store.append_event("r1", warning("b")).unwrap();
    assert_eq!((a.seq, b.seq), (0, 1));
    // Another connection (another process) continues the numbering.
    let other = crate::suite::open_store(&db.path).unwrap();
    assert_eq!(other.append_event("r1", warning("c")).unwrap().seq, 2);
    assert!(!store.integrity("r1").unwrap().is_broken());
    assert!(store.append_event("nope", warning("x")).is_err());
}

#[test]
fn a_guard_refuses_a_writer_that_read_before_a_newer_event() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-11-25T10:00:00.000Z");
    let first = store.append_event("r1", warning("state 1")).unwrap();
    // Two writers read the same state; the first to write wins.
    let guard = Guard { kind: "warning", last: Some(first.seq) };
    let won = store.append_guarded("r1", Some(guard), &[], vec![warning("from A")]).unwrap();
    assert!(won.is_some());
    let status = Record::RunStatus {
        run_id: "r1".into(),
        status: "success".into(),
        result: None,
        updated_at: "2026-11-25T10:00:01.000Z".into(),
    };
    let lost = store.append_guarded("r1", Some(guard), &[status], vec![warning("from B")]).unwrap();
    assert!(lost.is_none());
    // Nothing of the loser was written: not its event, not its status.
    let record = store.load_run("r1").unwrap();
    assert_eq!(record.status, "running");
    assert_eq!(store.events("r1").unwrap().len(), 2);
    // No event of the kind yet: `last: None` passes only while there is none.
    let none = Guard { kind: "run.finished", last: None };
    assert!(store.append_guarded("r1", Some(none), &[], vec![warning("ok")]).unwrap().is_some());
}
