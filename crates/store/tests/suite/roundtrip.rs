//! Every kind of record, written through the journal, comes back from `load_run` (and `events`,
//! `blob`) exactly as written.

use pev_protocol::event::EventBody;
use pev_protocol::run::{
    FileMutation, Reason, ReasonCode, RunResult, RunStatus, StepStatus, Usage,
};
use pev_protocol::tool::Effect;
use pev_store::{
    ApprovalRecord, FileHashRecord, HashPhase, ModelCallRecord, MutationRecord, Record,
    ToolCallEnd, ToolCallStart, ToolCallStatus,
};
use serde_json::json;

use super::{create, db, event, step_state};

fn start(call_id: &str, step: &str) -> ToolCallStart {
    ToolCallStart {
        run_id: "r1".into(),
        call_id: call_id.into(),
        step_id: step.into(),
        attempt: 2,
        tool: "file.write".into(),
        effect: Effect::Write,
        arguments: json!({"path": "a.txt", "content": "x"}),
        path: Some("a.txt".into()),
        pre_sha256: None,
        intended_sha256: Some("ab".repeat(32)),
        started_at: format!("2026-01-01T00:00:0{}.000Z", call_id.len() % 10),
    }
}

fn result() -> RunResult {
    RunResult {
        run_id: "r1".into(),
        goal: "goal of r1".into(),
        status: RunStatus::Partial,
        reasons: vec![Reason {
            code: ReasonCode::NoEffects,
            step: None,
            message: "nothing changed".into(),
        }],
        goal_actions_executed: false,
        steps: vec![],
        postconditions: vec![],
        file_mutations: vec![],
        warnings: vec!["w".into()],
        usage: Usage { tool_calls: 3, ..Usage::default() },
        duration_ms: 42,
        final_check: None,
    }
}

#[test]
fn every_record_kind_round_trips() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let journal = crate::suite::start_journal(&db.path).unwrap();

    let ev = event("r1", 0);
    let ev1 = pev_protocol::Event {
        seq: 1,
        body: EventBody::Warning { step: Some("s0".into()), message: "careful".into() },
        ..event("r1", 1)
    };
    let mut done = step_state("r1", "s0", StepStatus::InProgress);
    let pending = step_state("r1", "s1", StepStatus::Pending);
    let finished_call = start("c1", "s0");
    let open_call = start("c22", "s1");
    let end = ToolCallEnd {
        run_id: "r1".into(),
        call_id: "c1".into(),
        status: ToolCallStatus::Recovered,
        output: Some(json!({"bytes": 1})),
        error: None,
        ended_at: "2026-01-01T00:00:09.000Z".into(),
        duration_ms: 7,
    };
    let hash = FileHashRecord {
        run_id: "r1".into(),
        step_id: "s0".into(),
        path: "a.txt".into(),
        phase: HashPhase::After,
        sha256: Some("cd".repeat(32)),
        bytes: Some(1),
        at: "2026-01-01T00:00:03.000Z".into(),
    };
    let absent =
        FileHashRecord { phase: HashPhase::Before, sha256: None, bytes: None, ..hash.clone() };
    let mutation = MutationRecord {
        run_id: "r1".into(),
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
        after_sha256: Some("cd".repeat(32)),
    };
    let noop = MutationRecord {
        mutation: FileMutation { no_op: true, ..mutation.mutation.clone() },
        ..mutation.clone()
    };
    let approval = ApprovalRecord {
        run_id: "r1".into(),
        step_id: "s1".into(),
        by: "tester".into(),
        at: "2026-01-01T00:00:04.000Z".into(),
    };
    let revised = json!({"goal": "g", "steps": [{"id": "only"}]});

    journal.record(Record::Event(ev.clone())).unwrap();
    journal.record(Record::Event(ev1.clone())).unwrap();
    journal.record(Record::StepState(done.clone())).unwrap();
    journal.record(Record::StepState(pending.clone())).unwrap();
    // The second state of s0 replaces the first and keeps its place.
    done.status = StepStatus::Done;
    done.attempts = 2;
    journal.record(Record::StepState(done.clone())).unwrap();
    journal.record(Record::ToolCallStarted(finished_call.clone())).unwrap();
    journal.record(Record::ToolCallStarted(open_call.clone())).unwrap();
    journal.record(Record::ToolCallFinished(end.clone())).unwrap();
    journal.record(Record::FileHash(absent.clone())).unwrap();
    journal.record(Record::FileHash(hash.clone())).unwrap();
    journal
        .record(Record::Blob { sha256: "cd".repeat(32), content: b"x\n\0\xff".to_vec() })
        .unwrap();
    // The same blob again is kept once, not an error.
    journal
        .record(Record::Blob { sha256: "cd".repeat(32), content: b"x\n\0\xff".to_vec() })
        .unwrap();
    journal.record(Record::Mutation(mutation.clone())).unwrap();
    journal.record(Record::Mutation(noop.clone())).unwrap();
    journal.record(Record::Approval(approval.clone())).unwrap();
    journal
        .record(Record::PlanVersion {
            run_id: "r1".into(),
            version: 2,
            plan: revised.clone(),
            reason: "replan".into(),
            created_at: "2026-01-01T00:00:05.000Z".into(),
        })
        .unwrap();
    journal
        .record_durable(Record::RunStatus {
            run_id: "r1".into(),
            status: "partial".into(),
            result: Some(Box::new(result())),
            updated_at: "2026-01-01T00:00:06.000Z".into(),
        })
        .unwrap();
    journal.close().unwrap();

    let run = store.load_run("r1").unwrap();
    assert_eq!(run.run_id, "r1");
    assert_eq!(run.goal, "goal of r1");
    assert_eq!(run.workspace, "/ws");
    assert_eq!(run.status, "partial");
    assert_eq!(run.created_at, "2026-01-01T00:00:00.000Z");
    assert_eq!(run.updated_at, "2026-01-01T00:00:06.000Z");
    assert_eq!(run.options, json!({"jobs": 2}));
    assert_eq!(run.plan_version, 2);
    assert_eq!(run.plan, revised);
    assert_eq!(run.result, Some(result()));
    assert_eq!(run.steps, vec![done, pending]);
    assert_eq!(run.tool_calls.len(), 2);
    let c1 = &run.tool_calls[0];
    assert_eq!(c1.call_id, "c1");
    assert_eq!(c1.step_id, "s0");
    assert_eq!(c1.attempt, 2);
    assert_eq!(c1.tool, "file.write");
    assert_eq!(c1.effect, Effect::Write);
    assert_eq!(c1.arguments, finished_call.arguments);
    assert_eq!(c1.path.as_deref(), Some("a.txt"));
    assert_eq!(c1.pre_sha256, None);
    assert_eq!(c1.intended_sha256, finished_call.intended_sha256);
    assert_eq!(c1.started_at, finished_call.started_at);
    assert_eq!(c1.status, ToolCallStatus::Recovered);
    assert_eq!(c1.output, end.output);
    assert_eq!(c1.ended_at.as_deref(), Some(end.ended_at.as_str()));
    assert_eq!(c1.duration_ms, Some(end.duration_ms));
    let c22 = &run.tool_calls[1];
    assert_eq!((c22.call_id.as_str(), c22.step_id.as_str()), ("c22", "s1"));
    assert_eq!(c22.started_at, open_call.started_at);
    assert_eq!(c22.status, ToolCallStatus::Started);
    assert_eq!((c22.output.as_ref(), c22.ended_at.as_ref(), c22.duration_ms), (None, None, None));
    assert_eq!(run.file_hashes, vec![absent, hash]);
    // Mutations come back in order with their sequence.
    assert_eq!(run.mutations, vec![mutation, noop]);
    assert_eq!(run.approvals, vec![approval]);
    assert_eq!(run.next_seq, 2);

    assert_eq!(store.events("r1").unwrap(), vec![ev, ev1]);
    assert_eq!(store.blob(&"cd".repeat(32)).unwrap(), Some(b"x\n\0\xff".to_vec()));
    assert_eq!(store.blob("00").unwrap(), None);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn a_fresh_run_has_its_first_plan_version_and_nothing_else() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let run = store.load_run("r1").unwrap();
    assert_eq!(run.status, "running");
    assert_eq!(run.updated_at, run.created_at);
    assert_eq!(run.plan_version, 1);
    assert_eq!(run.plan["steps"].as_array().map(Vec::len), Some(3));
    assert_eq!(run.result, None);
    assert!(run.steps.is_empty() && run.tool_calls.is_empty() && run.approvals.is_empty());
    assert_eq!(run.next_seq, 0);
    assert_eq!(store.events("r1").unwrap(), vec![]);
}

#[test]
fn a_duplicate_run_id_is_refused() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let err = store.create_run(&super::new_run("r1", "2026-01-02T00:00:00.000Z", 1)).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("create run r1") && msg.contains("UNIQUE"), "{msg}");
    // The failed create left the first run as it was.
    assert_eq!(store.load_run("r1").unwrap().created_at, "2026-01-01T00:00:00.000Z");
}

#[test]
fn model_calls_are_numbered_per_run_and_come_back_whole() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    create(&store, "r2", "2026-01-01T00:00:01.000Z");
    let journal = crate::suite::start_journal(&db.path).unwrap();
    let call = |run: &str, role: &str, step: Option<&str>| ModelCallRecord {
        run_id: run.into(),
        seq: 0,
        role: role.into(),
        step_id: step.map(str::to_owned),
        attempt: step.map(|_| 2),
        provider: "anthropic".into(),
        server: Some("api.anthropic.com:443".into()),
        request_model: "claude-x".into(),
        response_model: Some("claude-x-2026".into()),
        response_id: Some(format!("msg_{role}")),
        finish_reason: Some("tool_use".into()),
        input_tokens: 120,
        output_tokens: 30,
        cache_read_tokens: 100,
        cache_write_tokens: 0,
        cost_usd: Some(0.0021),
        started_at: "2026-01-01T00:00:02.000Z".into(),
        duration_ms: 812,
        error_type: None,
        error: None,
        request: None,
        response_sha256: None,
        retries: Vec::new(),
    };
    journal.record(Record::ModelCall(Box::new(call("r1", "planner", None)))).unwrap();
    journal.record(Record::ModelCall(Box::new(call("r2", "executor", Some("a"))))).unwrap();
    let mut failed = call("r1", "executor", Some("b"));
    failed.error_type = Some("rate_limited".into());
    failed.error = Some("429".into());
    failed.response_id = None;
    journal.record(Record::ModelCall(Box::new(failed.clone()))).unwrap();
    journal.close().unwrap();

    let calls = store.model_calls("r1").unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!((calls[0].seq, calls[1].seq), (1, 2), "numbered within the run");
    let mut expected = call("r1", "planner", None);
    expected.seq = 1;
    assert_eq!(calls[0], expected);
    failed.seq = 2;
    assert_eq!(calls[1], failed);
    let other = store.model_calls("r2").unwrap();
    assert_eq!(other.len(), 1);
    assert_eq!(other[0].seq, 1, "another run's numbering is its own");
    assert!(store.model_calls("nope").unwrap().is_empty());
    // A reader following the run asks only for what is new.
    let after = |n| store.model_calls_after("r1", n).unwrap().iter().map(|c| c.seq).collect();
    let seqs: [Vec<u64>; 3] = [after(None), after(Some(1)), after(Some(2))];
    assert_eq!(seqs, [vec![1, 2], vec![2], vec![]]);
}
