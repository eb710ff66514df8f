//! The CLI's reads: resolving run ids, listing runs, approvals.

use pev_protocol::run::StepStatus;
use pev_store::{Record, Store, StoreError};

use super::{create, db, new_run, step_state};

fn three_runs() -> (super::Db, Store) {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "20260101-000000-aaaaaa", "2026-01-01T00:00:00.000Z");
    create(&store, "20260101-000000-aabbbb", "2026-01-01T00:00:00.500Z");
    create(&store, "20260102-000000-cccccc", "2026-01-02T00:00:00.000Z");
    (db, store)
}

#[test]
fn resolve_run_takes_exact_ids_prefixes_and_last() {
    let (_db, store) = three_runs();
    assert_eq!(store.resolve_run("20260101-000000-aaaaaa").unwrap(), "20260101-000000-aaaaaa");
    assert_eq!(store.resolve_run("20260102").unwrap(), "20260102-000000-cccccc");
    assert_eq!(store.resolve_run("20260101-000000-aab").unwrap(), "20260101-000000-aabbbb");
    assert_eq!(store.resolve_run("last").unwrap(), "20260102-000000-cccccc");
    assert_eq!(store.resolve_run("latest").unwrap(), "20260102-000000-cccccc");
}

#[test]
fn an_ambiguous_prefix_lists_its_candidates_newest_first() {
    let (_db, store) = three_runs();
    let err = store.resolve_run("20260101-000000-aa").unwrap_err();
    match &err {
        StoreError::Ambiguous { prefix, candidates } => {
            assert_eq!(prefix, "20260101-000000-aa");
            assert_eq!(candidates, &["20260101-000000-aabbbb", "20260101-000000-aaaaaa"]);
        }
        other => panic!("expected Ambiguous, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "run id prefix \"20260101-000000-aa\" is ambiguous: it matches 2 runs: \
         20260101-000000-aabbbb, 20260101-000000-aaaaaa"
    );
}

#[test]
fn an_ambiguity_message_names_ten_and_counts_the_rest() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    for i in 0..12 {
        create(&store, &format!("run-{i:02}"), &format!("2026-01-01T00:00:{i:02}.000Z"));
    }
    let msg = store.resolve_run("run-").unwrap_err().to_string();
    assert!(msg.starts_with("run id prefix \"run-\" is ambiguous: it matches 12 runs: run-11, "));
    assert!(msg.ends_with("run-02 and 2 more"), "{msg}");
}

#[test]
fn unknown_ids_are_not_found_with_a_clear_message() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    let err = store.resolve_run("last").unwrap_err();
    assert!(matches!(&err, StoreError::NotFound(id) if id == "last"), "{err:?}");
    assert_eq!(err.to_string(), "no run in the journal yet");
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let err = store.resolve_run("zzz").unwrap_err();
    assert!(matches!(&err, StoreError::NotFound(id) if id == "zzz"), "{err:?}");
    assert_eq!(err.to_string(), "no run matches \"zzz\" (`pev runs` lists them)");
    assert!(matches!(store.resolve_run(""), Err(StoreError::NotFound(_))));
    assert!(matches!(store.load_run("zzz"), Err(StoreError::NotFound(id)) if id == "zzz"));
    assert!(matches!(store.events("zzz"), Err(StoreError::NotFound(_))));
}

#[test]
fn list_runs_is_newest_first_with_step_counts() {
    let (_db, store) = three_runs();
    let run = "20260101-000000-aabbbb";
    store.write(&Record::StepState(step_state(run, "s0", StepStatus::Done))).unwrap();
    store.write(&Record::StepState(step_state(run, "s1", StepStatus::Done))).unwrap();
    store.write(&Record::StepState(step_state(run, "s2", StepStatus::Failed))).unwrap();
    store
        .write(&Record::RunStatus {
            run_id: run.into(),
            status: "failed".into(),
            result: None,
            updated_at: "2026-01-03T00:00:00.000Z".into(),
        })
        .unwrap();
    let runs = store.list_runs().unwrap();
    let ids: Vec<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, ["20260102-000000-cccccc", run, "20260101-000000-aaaaaa"]);
    let r = &runs[1];
    assert_eq!((r.steps_total, r.steps_done), (3, 2));
    assert_eq!(r.status, "failed");
    assert_eq!(r.goal, format!("goal of {run}"));
    assert_eq!(r.updated_at, "2026-01-03T00:00:00.000Z");
    assert_eq!(
        (runs[0].steps_total, runs[0].steps_done, runs[0].status.as_str()),
        (3, 0, "running")
    );
    let json = serde_json::to_value(r).unwrap();
    assert_eq!(json["run_id"], run);
    assert_eq!(json["steps_done"], 2);
}

#[test]
fn steps_total_falls_back_to_the_step_states_when_the_plan_has_no_steps_array() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    let mut run = new_run("r1", "2026-01-01T00:00:00.000Z", 0);
    run.plan = serde_json::json!({"goal": "no steps key"});
    store.create_run(&run).unwrap();
    store.write(&Record::StepState(step_state("r1", "x", StepStatus::Done))).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!((runs[0].steps_total, runs[0].steps_done), (1, 1));
}

#[test]
fn approvals_are_recorded_once_and_loaded() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    store.approve("r1", "s2", "alice").unwrap();
    store.approve("r1", "s2", "bob").unwrap();
    store.approve("r1", "s0", "bob").unwrap();
    let approvals = store.load_run("r1").unwrap().approvals;
    let got: Vec<(&str, &str)> =
        approvals.iter().map(|a| (a.step_id.as_str(), a.by.as_str())).collect();
    assert_eq!(got, [("s2", "alice"), ("s0", "bob")]);
    // The store stamps approvals itself, in RFC 3339 UTC.
    assert!(approvals[0].at.ends_with('Z') && approvals[0].at.contains('T'), "{}", approvals[0].at);
    let err = store.approve("nope", "s0", "alice").unwrap_err();
    assert!(matches!(&err, StoreError::NotFound(id) if id == "nope"), "{err:?}");
}
