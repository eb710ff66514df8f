//! Retention: `Store::gc` deletes the runs last updated before the cutoff (never a `running`
//! one, never a child without its parent), their rows in every table, and then exactly the
//! blobs nothing left refers to.

use pev_protocol::run::FileMutation;
use pev_store::{GcOptions, MutationRecord, Record, Store};
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
    let store = crate::suite::open_store(&db.path).unwrap();
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
    let opts = |dry_run| GcOptions { dry_run, keep: &[], collect_blobs: true };
    let dry = store.gc(cutoff, opts(true)).unwrap();
    assert_eq!(dry.runs, ["old", "old.s0.1"]);
    assert_eq!(dry.kept, ["busy"]);
    assert_eq!(dry.blobs, 1, "the old run's own blob (not one it shares, not an orphan)");
    assert!(store.load_run("old").is_ok(), "a dry run changes nothing");
    assert!(store.blob(&old_blob).unwrap().is_some());

    let done = store.gc(cutoff, opts(false)).unwrap();
    assert_eq!(done, dry);
    assert_eq!(done.blob_bytes, 64);
    for gone in ["old", "old.s0.1"] {
        assert!(store.load_run(gone).is_err(), "{gone}");
        assert!(store.events(gone).map_or(true, |e| e.is_empty()), "{gone}");
    }
    for kept in ["busy", "new"] {
        assert!(store.load_run(kept).is_ok(), "{kept}");
    }
    assert_eq!(store.events("new").unwrap().len(), 1);
    assert!(store.blob(&old_blob).unwrap().is_none());
    assert!(store.blob(&orphan).unwrap().is_some(), "no deleted run named it");
    assert!(store.blob(&shared_blob).unwrap().is_some(), "still used by the new run");
    assert!(store.blob(&new_blob).unwrap().is_some());
    let ids: Vec<String> = store.list_runs().unwrap().into_iter().map(|r| r.run_id).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(store.integrity_check().unwrap(), "ok");
    // Nothing more to do.
    let again = store.gc(cutoff, opts(false)).unwrap();
    assert!(again.runs.is_empty() && again.blobs == 0);
}

/// A run another process holds, and one a resume may still finish, stay; with a run being
/// written, no blob is collected.
#[test]
fn held_and_resumable_runs_stay_and_blobs_wait_for_quiet() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    let sha = "e".repeat(64);
    for (run, status) in [("held", "success"), ("stopped", "partial"), ("done", "success")] {
        store.create_run(&new_run(run, "2026-01-01T00:00:00.000Z", 1)).unwrap();
        let result = (run == "stopped").then(|| {
            Box::new(
                serde_json::from_value(json!({
                    "run_id": run, "goal": "g", "status": "partial",
                    "reasons": [{"code": "budget_exhausted", "message": "out"}],
                    "goal_actions_executed": false, "steps": [], "postconditions": [],
                    "file_mutations": [], "warnings": [], "usage": {"llm_calls": 0,
                    "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "tool_calls": 0},
                    "duration_ms": 1
                }))
                .unwrap(),
            )
        });
        store
            .write(&Record::RunStatus {
                run_id: run.into(),
                status: status.into(),
                result,
                updated_at: "2026-01-02T00:00:00.000Z".into(),
            })
            .unwrap();
    }
    store.write(&blob(&sha)).unwrap();
    store.write(&mutation("done", &sha)).unwrap();
    let keep = ["held".to_owned()];
    let report = store
        .gc(
            "2026-03-01T00:00:00.000Z",
            GcOptions { dry_run: false, keep: &keep, collect_blobs: false },
        )
        .unwrap();
    assert_eq!(report.runs, ["done"]);
    assert_eq!(report.kept, ["held", "stopped"]);
    assert_eq!(report.blobs, 0);
    assert!(report.blobs_skipped.is_some());
    assert!(store.blob(&sha).unwrap().is_some(), "collected only when no run is written");
}

/// On a shared journal, blobs are collected while another process drives a run (a busy
/// journal always has one): the lease elsewhere does not hold collection back, and what the
/// driven run's rows name stays.
#[cfg(feature = "postgres")]
#[test]
fn blobs_are_collected_while_another_process_drives_a_run() {
    if pev_test_support::server("gc beside a driven run").is_none() {
        return;
    }
    let db = pev_test_support::Database::create();
    let at = pev_store::Location::parse(&db.url).unwrap();
    let store = crate::suite::open_store(&at).unwrap();
    let (gone, shared) = ("a".repeat(64), "b".repeat(64));
    store.create_run(&new_run("old", "2026-01-01T00:00:00.000Z", 1)).unwrap();
    finish(&store, "old", "2026-01-02T00:00:00.000Z");
    store.create_run(&new_run("driven", "2026-01-01T00:00:00.000Z", 1)).unwrap();
    // Another process drives `driven` (its own handle on the database, its own session).
    let elsewhere = pev_store::Location::parse(&db.url).unwrap();
    let lease = elsewhere.lease_keyed("driven", &crate::suite::keying()).unwrap();
    let journal = crate::suite::start_journal(&elsewhere).unwrap();
    for record in [blob(&gone), blob(&shared), mutation("old", &gone), mutation("old", &shared)] {
        store.write(&record).unwrap();
    }
    journal.record(blob(&shared)).unwrap();
    journal.record(mutation("driven", &shared)).unwrap();
    journal.flush().unwrap();
    let keep = ["driven".to_owned()];
    let report = store
        .gc(
            "2026-03-01T00:00:00.000Z",
            GcOptions { dry_run: false, keep: &keep, collect_blobs: true },
        )
        .unwrap();
    assert_eq!(report.runs, ["old"]);
    assert_eq!(report.kept, ["driven"]);
    assert_eq!((report.blobs, report.blobs_skipped), (1, None));
    assert_eq!(store.blob(&gone).unwrap(), None);
    assert!(store.blob(&shared).unwrap().is_some(), "the driven run names it");
    drop((journal, lease));
}
