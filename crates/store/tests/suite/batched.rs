//! A commit of many records of every kind, on both backends (the conformance suite's
//! `Backend`s): on Postgres its rows go many to a statement (`write_pg.rs`), with a tool call's
//! end folded into its start, a step's repeated states into one row, and repeated blobs and
//! approvals dropped. Whatever the statements, the journal must read back exactly as when each
//! record is its own transaction on SQLite (one statement per row, the reference), every MAC
//! must hold, and an error must still name the record whose row the database refused.

use pev_protocol::event::EventBody;
use pev_protocol::run::{FileMutation, StepStatus};
use pev_protocol::tool::Effect;
use pev_store::{
    ApprovalRecord, FileHashRecord, HashPhase, Integrity, Keying, Location, ModelCallRecord,
    MutationRecord, Record, Store, ToolCallEnd, ToolCallStart, ToolCallStatus,
};
use serde_json::json;

use super::conformance::{Backend, postgres, sqlite};
use super::{event, new_run, step_state};

/// More steps than one multi-row statement holds (`write_pg::GROUP_ROWS`, 512).
const STEPS: usize = 600;
const RUN: &str = "r1";
const T0: &str = "2026-01-01T00:00:00.000Z";

macro_rules! both {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $case() { super::$case(&super::sqlite()); })*
        }
        mod postgres {
            $(#[test] fn $case() { if let Some(b) = super::postgres() { super::$case(&b); } })*
        }
    };
}

both!(
    a_commit_of_many_records_of_every_kind_reads_back_as_one_record_per_commit,
    a_commit_without_a_key_reads_back_the_same,
    a_refused_row_deep_in_a_long_commit_names_its_record_and_writes_nothing,
);

fn start(call: &str, step: &str) -> ToolCallStart {
    ToolCallStart {
        run_id: RUN.into(),
        call_id: call.into(),
        step_id: step.into(),
        attempt: 1,
        tool: "file.write".into(),
        effect: Effect::Write,
        arguments: json!({"path": format!("{call}.txt"), "content": "it's \\ 'x'"}),
        path: Some(format!("{call}.txt")),
        pre_sha256: None,
        intended_sha256: Some("e".repeat(64)),
        started_at: T0.into(),
    }
}

fn end(call: &str, i: usize) -> ToolCallEnd {
    let failed = i % 4 == 3;
    ToolCallEnd {
        run_id: RUN.into(),
        call_id: call.into(),
        status: if failed { ToolCallStatus::Failed } else { ToolCallStatus::Finished },
        output: (!failed).then(|| json!({"bytes": i})),
        error: failed.then(|| format!("error {i}")),
        ended_at: "2026-01-01T00:00:09.000Z".into(),
        duration_ms: i as u64,
    }
}

/// Blob `n`: its SHA-256 and content.
fn blob(n: usize) -> (String, Vec<u8>) {
    use sha2::Digest;
    let content = format!("blob {n}\n").repeat(20).into_bytes();
    let sha: String = sha2::Sha256::digest(&content).iter().map(|b| format!("{b:02x}")).collect();
    (sha, content)
}

/// The records of `STEPS` steps, as the engine writes them and more: every kind, a step's state
/// twice, blobs and approvals repeated, and a tool call whose start was committed before.
fn records() -> Vec<Record> {
    let mut recs = vec![Record::ToolCallFinished(end("early", 1))];
    for i in 0..STEPS {
        let step = format!("s{i}");
        let call = format!("c{i}");
        recs.push(Record::Event(event(RUN, 2 * i as u64)));
        if i % 3 == 0 {
            // Every second blob is the one before again.
            let (sha256, content) = blob(i / 6);
            recs.push(Record::Blob { sha256, content });
        }
        recs.push(Record::ToolCallStarted(start(&call, &step)));
        recs.push(Record::StepState(step_state(RUN, &step, StepStatus::InProgress)));
        recs.push(Record::ToolCallFinished(end(&call, i)));
        if i % 5 == 0 {
            let mutation = FileMutation {
                path: format!("{call}.txt"),
                bytes_before: 0,
                bytes_after: i as u64,
                lines_added: 1,
                lines_removed: 0,
                no_op: false,
            };
            recs.push(Record::Mutation(MutationRecord {
                run_id: RUN.into(),
                step_id: step.clone(),
                mutation,
                before_sha256: None,
                after_sha256: Some(blob(i / 6).0),
            }));
        }
        if i % 7 == 0 {
            for phase in [HashPhase::Before, HashPhase::After] {
                recs.push(Record::FileHash(FileHashRecord {
                    run_id: RUN.into(),
                    step_id: step.clone(),
                    path: format!("{call}.txt"),
                    phase,
                    sha256: (phase == HashPhase::After).then(|| format!("{i:064x}")),
                    bytes: Some(i as u64),
                    at: T0.into(),
                }));
            }
        }
        if i % 11 == 0 {
            for by in ["alice", "bob"] {
                let at = T0.into();
                let a =
                    ApprovalRecord { run_id: RUN.into(), step_id: step.clone(), by: by.into(), at };
                recs.push(Record::Approval(a));
            }
        }
        if i % 13 == 0 {
            recs.push(Record::ModelCall(Box::new(ModelCallRecord {
                run_id: RUN.into(),
                role: "executor".into(),
                step_id: Some(step.clone()),
                provider: "scripted".into(),
                request_model: "m".into(),
                started_at: T0.into(),
                duration_ms: i as u64,
                ..ModelCallRecord::default()
            })));
        }
        let mut done = step_state(RUN, &step, StepStatus::Done);
        done.evidence = vec![format!("step {i} done")];
        recs.push(Record::StepState(done));
        recs.push(Record::Event(pev_protocol::event::Event {
            body: EventBody::StepFinished {
                step,
                status: StepStatus::Done,
                attempts: 1,
                error: None,
                cached: false,
            },
            ..event(RUN, 2 * i as u64 + 1)
        }));
    }
    recs.push(Record::PlanVersion {
        run_id: RUN.into(),
        version: 2,
        plan: super::plan(2),
        reason: "replanned".into(),
        created_at: T0.into(),
    });
    recs.push(Record::RunStatus {
        run_id: RUN.into(),
        status: "success".into(),
        result: None,
        updated_at: "2026-01-01T00:00:10.000Z".into(),
    });
    recs
}

/// A journal at `at` with the run and the tool call `early` started (its own commit).
fn prepared(at: &Location, keying: &Keying) -> Store {
    let store = Store::open_keyed(at, keying.clone()).unwrap();
    store.create_run(&new_run(RUN, T0, 3)).unwrap();
    store.write(&Record::ToolCallStarted(start("early", "s0"))).unwrap();
    store
}

/// Everything a reader gets of the run and its blobs.
fn read_back(store: &Store) -> serde_json::Value {
    let blobs: Vec<Option<Vec<u8>>> =
        (0..STEPS / 6).map(|n| store.blob(&blob(n).0).unwrap()).collect();
    json!({
        "run": store.load_run(RUN).unwrap(),
        "events": store.events(RUN).unwrap(),
        "model_calls": store.model_calls(RUN).unwrap(),
        "plans": store.plan_versions(RUN).unwrap(),
        "blobs": blobs,
    })
}

/// `records()` committed on `b` in one transaction, against the same records one per
/// transaction on SQLite.
fn round_trip(b: &Backend, keying: &Keying) {
    let recs = records();
    let store = prepared(&b.at, keying);
    let journal = pev_store::Journal::start_keyed(&b.at, keying.clone()).unwrap();
    let before = journal.commits();
    journal.record_all(recs.clone()).unwrap();
    journal.flush().unwrap();
    assert_eq!(journal.commits(), before + 1, "one transaction");
    let reference = sqlite();
    let one_by_one = prepared(&reference.at, keying);
    for rec in &recs {
        one_by_one.write(rec).unwrap();
    }
    let (got, want) = (read_back(&store), read_back(&one_by_one));
    assert_eq!(got["run"]["tool_calls"].as_array().map(Vec::len), Some(STEPS + 1));
    assert_eq!(
        got["run"]["steps"][STEPS - 1]["evidence"],
        json!([format!("step {} done", STEPS - 1)])
    );
    assert_eq!(got["run"]["approvals"][0]["by"], "alice");
    assert!(got["blobs"].as_array().is_some_and(|b| b.iter().all(|b| !b.is_null())));
    assert_eq!(got, want);
    let integrity = store.integrity(RUN).unwrap();
    match keying {
        Keying::Keyed(_) => {
            assert_eq!(integrity, Integrity::Intact { events: 2 * STEPS }, "{integrity:?}")
        }
        Keying::Unkeyed { .. } => assert!(
            matches!(integrity, Integrity::Unverifiable { events, .. } if events == 2 * STEPS),
            "{integrity:?}"
        ),
    }
}

fn a_commit_of_many_records_of_every_kind_reads_back_as_one_record_per_commit(b: &Backend) {
    round_trip(b, &super::keying());
}

fn a_commit_without_a_key_reads_back_the_same(b: &Backend) {
    round_trip(b, &Keying::Unkeyed { why: "no key in this test".into() });
}

fn a_refused_row_deep_in_a_long_commit_names_its_record_and_writes_nothing(b: &Backend) {
    let keying = super::keying();
    let store = prepared(&b.at, &keying);
    let journal = pev_store::Journal::start_keyed(&b.at, keying).unwrap();
    // The 550th start is `early` again: past the first statement of tool calls on Postgres.
    let mut recs: Vec<Record> =
        (0..STEPS).map(|i| Record::ToolCallStarted(start(&format!("c{i}"), "s1"))).collect();
    recs[549] = Record::ToolCallStarted(start("early", "s1"));
    recs.push(Record::Event(event(RUN, 0)));
    journal.record_all(recs).unwrap();
    let err = journal.flush().unwrap_err().to_string();
    assert!(err.contains("write tool call start of run r1"), "{err}");
    let run = store.load_run(RUN).unwrap();
    assert_eq!(run.tool_calls.len(), 1, "only `early`, committed before");
    assert!(store.events(RUN).unwrap().is_empty());
}
