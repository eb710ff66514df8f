//! Retention: `Store::gc` deletes the runs last updated before the cutoff (never a `running`
//! one, never a child without its parent), their rows in every table, and then exactly the
//! blobs nothing left refers to.

use pev_protocol::run::FileMutation;
use pev_store::{MutationRecord, Record, Store};
use serde_json::json;

use super::{db, event_rec, new_run};

fn mutation(run: &str, after: &str) -> Record {
    Record::Mutation(MutationRecord {
        run_id: run.into(),
        step_id: "s0".into(),
        mutation: FileMutation {
            path: "a.txt".into(),
            bytes_before: 0,
            bytes_after: 1,
            lines_added: 1,
            lines_removed: 0,
            no_op: false,
        },
        before_sha256: None,
        after_sha256: Some(after.into()),
    })
}

fn blob(sha: &str) -> Record {
    Record::Blob { sha256: sha.into(), content: sha.as_bytes().to_vec() }
}

fn finish(store: &Store, run: &str, at: &str) {
    store
        .write(&Record::RunStatus {
            run_id: run.into(),
            status: "success".into(),
            result: None,
            updated_at: at.into(),
        })
        .unwrap();
}

#[test]
fn old_finished_runs_go_with_their_children_and_their_blobs_only() {
    let db = db();
    let store = Store::open(&db.path).unwrap();
    let (old_blob, shared_blob, new_blob, orphan) =
        ("a".repeat(64), "b".repeat(64), "c".repeat(64), "d".repeat(64));
    // An old finished run with a child run; an old run still running; a recent run.
    store.create_run(&new_run("old", "2026-01-01T00:00:00.000Z", 2)).unwrap();
    let mut child = new_run("old.s0.1", "2026-01-01T00:00:01.000Z", 1);
    child.options = json!({"parent": {"run": "old", "step": "s0", "attempt": 1}});
    store.create_run(&child).unwrap();
    store.create_run(&new_run("busy", "2026-01-01T00:00:02.000Z", 1)).unwrap();
    store.create_run(&new_run("new", "2026-06-01T00:00:00.000Z", 1)).unwrap();
    for r in ["old", "old.s0.1"] {
        finish(&store, r, "2026-01-02T00:00:00.000Z");
    }
    finish(&store, "new", "2026-06-02T00:00:00.000Z");
    for record in [
        blob(&old_blob),
        blob(&shared_blob),
        blob(&new_blob),
        blob(&orphan),
        mutation("old", &old_blob),
        mutation("old.s0.1", &shared_blob),
        mutation("new", &shared_blob),
        mutation("new", &new_blob),
        event_rec("old", 0),
        event_rec("old.s0.1", 0),
        event_rec("new", 0),
    ] {
        store.write(&record).unwrap();
    }

    let cutoff = "2026-03-01T00:00:00.000Z";
    let dry = store.gc(cutoff, true).unwrap();
    assert_eq!(dry.runs, ["old", "old.s0.1"]);
    assert_eq!(dry.kept_running, ["busy"]);
    assert_eq!(dry.blobs, 2, "the old run's own blob and the orphan");
    assert!(store.load_run("old").is_ok(), "a dry run changes nothing");
    assert!(store.blob(&old_blob).unwrap().is_some());

    let done = store.gc(cutoff, false).unwrap();
    assert_eq!(done, dry);
    assert_eq!(done.blob_bytes, 128);
    for gone in ["old", "old.s0.1"] {
        assert!(store.load_run(gone).is_err(), "{gone}");
        assert!(store.events(gone).map_or(true, |e| e.is_empty()), "{gone}");
    }
    for kept in ["busy", "new"] {
        assert!(store.load_run(kept).is_ok(), "{kept}");
    }
    assert_eq!(store.events("new").unwrap().len(), 1);
    assert!(store.blob(&old_blob).unwrap().is_none());
    assert!(store.blob(&orphan).unwrap().is_none());
    assert!(store.blob(&shared_blob).unwrap().is_some(), "still used by the new run");
    assert!(store.blob(&new_blob).unwrap().is_some());
    let ids: Vec<String> = store.list_runs().unwrap().into_iter().map(|r| r.run_id).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(store.integrity_check().unwrap(), "ok");
    // Nothing more to do.
    let again = store.gc(cutoff, false).unwrap();
    assert!(again.runs.is_empty() && again.blobs == 0);
}
