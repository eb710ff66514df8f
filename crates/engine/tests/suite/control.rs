//! A person's control over a run: approval in its three modes (`--yes`, ask, defer), the
//! policy's `approve_tools`, approving and resuming a waiting run, and cancellation.

use std::sync::Arc;

use pev_engine::{Approval, ApprovalMode};
use pev_protocol::event::EventBody;
use pev_protocol::run::{ReasonCode, RunStatus, StepStatus};
use serde_json::json;

use super::support::{Harness, ScriptedApprover, codes, config, finished_error, plan, step};

fn needs_approval() -> serde_json::Value {
    plan(json!([
        {"id": "src", "tool": "test.echo", "parameters": {"key": "src", "n": 7}},
        {"id": "gate", "title": "Count it", "tool": "test.count",
         "parameters": {"key": "gate", "n": "${src.result.n}"}, "requires_approval": true},
        {"id": "after", "tool": "test.echo", "parameters": {"key": "after"}, "depends_on": ["gate"]},
        {"id": "free", "tool": "test.echo", "parameters": {"key": "free"}},
    ]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yes_approves_and_journals_by_dash_dash_yes() {
    let h = Harness::new();
    let mut cfg = config(2);
    cfg.approval = ApprovalMode::All;
    let result = h.run(needs_approval(), cfg).await;

    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert_eq!(h.probe.calls("gate"), 1);
    let events = h.observer.events();
    let granted: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ApprovalGranted { step, by } => Some((step.as_str(), by.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(granted, [("gate", "--yes")]);
    assert!(!events.iter().any(|e| matches!(e.body, EventBody::ApprovalRequested { .. })));
    let stored = h.store().load_run(&result.run_id).unwrap();
    let approvals: Vec<(&str, &str)> =
        stored.approvals.iter().map(|a| (a.step_id.as_str(), a.by.as_str())).collect();
    assert_eq!(approvals, [("gate", "--yes")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defer_blocks_the_step_and_its_dependents_but_not_independent_steps() {
    let h = Harness::new();
    let result = h.run(needs_approval(), config(2)).await;

    assert_eq!(result.status, RunStatus::AwaitingApproval, "{:?}", result.reasons);
    assert_eq!(step(&result, "gate").status, StepStatus::Blocked);
    assert_eq!(step(&result, "gate").attempts, 0);
    assert_eq!(step(&result, "after").status, StepStatus::Pending);
    assert_eq!(step(&result, "src").status, StepStatus::Done);
    assert_eq!(step(&result, "free").status, StepStatus::Done);
    assert_eq!(h.probe.calls("gate"), 0, "the tool must not run before approval");
    assert_eq!(h.probe.calls("after"), 0);
    assert_eq!(
        codes(&result),
        vec![(ReasonCode::StepsNotRun, None), (ReasonCode::ApprovalPending, Some("gate"))]
    );
    let events = h.observer.events();
    let requested: Vec<&EventBody> = events
        .iter()
        .map(|e| &e.body)
        .filter(|b| matches!(b, EventBody::ApprovalRequested { .. }))
        .collect();
    assert_eq!(
        requested,
        [&EventBody::ApprovalRequested { step: "gate".into(), tool: Some("test.count".into()) }]
    );
    assert!(!events.iter().any(|e| matches!(&e.body,
        EventBody::StepStarted { step, .. } if step == "gate")));
    let store = h.store();
    let stored = store.load_run(&result.run_id).unwrap();
    assert_eq!(stored.status, "awaiting_approval");
    assert!(stored.approvals.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_waiting_run_resumes_to_success() {
    let h = Harness::new();
    let first = h.run(needs_approval(), config(2)).await;
    assert_eq!(first.status, RunStatus::AwaitingApproval);
    assert_eq!(h.probe.calls("src"), 1);

    // Resuming without an approval waits again, and runs nothing twice.
    let again = h.resume(&first.run_id, config(2)).await;
    assert_eq!(again.status, RunStatus::AwaitingApproval, "{:?}", again.reasons);
    assert_eq!(h.probe.calls("gate"), 0);

    h.store().approve(&first.run_id, "gate", "tester").unwrap();
    let done = h.resume(&first.run_id, config(2)).await;
    assert_eq!(done.status, RunStatus::Success, "{:?}", done.reasons);
    assert_eq!(h.probe.calls("gate"), 1);
    assert_eq!(h.probe.calls("after"), 1);
    // Done steps were not run again, and the reference used the stored output.
    assert_eq!(h.probe.calls("src"), 1);
    assert_eq!(h.probe.calls("free"), 1);
    let stored = h.store().load_run(&first.run_id).unwrap();
    let gate = stored.tool_calls.iter().find(|c| c.step_id == "gate").unwrap();
    assert_eq!(gate.arguments["n"], json!(7));
    assert_eq!(stored.status, "success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_with_no_fails_the_step_as_refused() {
    let h = Harness::new();
    let approver = ScriptedApprover::new(&[Approval::No]);
    let mut cfg = config(2);
    cfg.approval = ApprovalMode::Ask(Arc::clone(&approver) as _);
    let result = h.run(needs_approval(), cfg).await;

    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(step(&result, "gate").status, StepStatus::Failed);
    assert_eq!(h.probe.calls("gate"), 0);
    assert_eq!(step(&result, "after").status, StepStatus::Pending);
    assert_eq!(
        finished_error(&h.observer.events(), "gate").as_deref(),
        Some("a person refused approval")
    );
    let requests = approver.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!((r.step.as_str(), r.title.as_str()), ("gate", "Count it"));
    assert_eq!(r.tool.as_deref(), Some("test.count"));
    assert_eq!(r.arguments, json!({"key": "gate", "n": 7}), "resolved arguments are shown");
    assert_eq!(r.reason, "the step sets requires_approval");
    assert!(h.store().load_run(&result.run_id).unwrap().approvals.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_with_yes_runs_the_step_and_journals_by_tty() {
    let h = Harness::new();
    let approver = ScriptedApprover::new(&[Approval::Yes]);
    let mut cfg = config(2);
    cfg.approval = ApprovalMode::Ask(Arc::clone(&approver) as _);
    let result = h.run(needs_approval(), cfg).await;

    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert_eq!(h.probe.calls("gate"), 1);
    let stored = h.store().load_run(&result.run_id).unwrap();
    assert_eq!(stored.approvals.len(), 1);
    assert_eq!(
        (stored.approvals[0].step_id.as_str(), stored.approvals[0].by.as_str()),
        ("gate", "tty")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_tools_globs_trigger_approval() {
    let h = Harness::new();
    h.write("notes.txt", "hello\n");
    let steps = json!([
        {"id": "read", "tool": "file.read", "parameters": {"path": "notes.txt"}},
        {"id": "t", "tool": "test.echo", "parameters": {"key": "t"}},
    ]);
    let approver = ScriptedApprover::new(&[]);
    let mut cfg = config(2);
    cfg.approve_tools = vec!["test.*".to_owned()];
    cfg.approval = ApprovalMode::Ask(Arc::clone(&approver) as _);
    let result = h.run(plan(steps), cfg).await;

    // The approver deferred (no answer scripted): the run waits.
    assert_eq!(result.status, RunStatus::AwaitingApproval, "{:?}", result.reasons);
    assert_eq!(step(&result, "read").status, StepStatus::Done, "file.read is not in test.*");
    assert_eq!(step(&result, "t").status, StepStatus::Blocked);
    assert_eq!(h.probe.calls("t"), 0);
    let requests = approver.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "only the matching tool asks");
    assert_eq!(requests[0].step, "t");
    assert_eq!(requests[0].reason, "the policy's approve_tools lists `test.*`");
    assert_eq!(codes(&result), vec![(ReasonCode::ApprovalPending, Some("t"))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_starts_no_new_step_and_the_run_can_be_resumed() {
    let h = Harness::new();
    let steps = json!([
        {"id": "a", "tool": "test.sleep", "parameters": {"key": "a", "ms": 100}},
        {"id": "b", "tool": "test.sleep", "parameters": {"key": "b", "ms": 10}},
        {"id": "c", "tool": "test.echo", "parameters": {"key": "c"}, "depends_on": ["a"]},
    ]);
    let cfg = config(1);
    h.observer.cancel_on("step.started", "a", &cfg.cancel);
    let result = h.run(plan(steps), cfg).await;

    assert_eq!(step(&result, "a").status, StepStatus::Done, "the running step finishes");
    assert_eq!(step(&result, "b").status, StepStatus::Pending);
    assert_eq!(step(&result, "c").status, StepStatus::Pending);
    assert!(!h.probe.has_span("b") && h.probe.calls("c") == 0);
    assert_eq!(
        codes(&result),
        vec![(ReasonCode::StepsNotRun, None), (ReasonCode::Cancelled, None)]
    );
    assert_eq!(result.status, RunStatus::Partial);
    let started: Vec<String> = h
        .observer
        .events()
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::StepStarted { step, .. } => Some(step.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["a"]);

    let resumed = h.resume(&result.run_id, config(2)).await;
    assert_eq!(resumed.status, RunStatus::Success, "{:?}", resumed.reasons);
    assert_eq!(h.probe.calls("a"), 1, "a done step is not run again");
    assert_eq!((h.probe.calls("b"), h.probe.calls("c")), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_retrying() {
    let h = Harness::new();
    let steps = json!([
        {"id": "f", "tool": "test.flaky", "parameters": {"key": "f", "fail_times": 10, "ms": 50},
         "on_fail": "retry", "max_attempts": 5},
    ]);
    let cfg = config(1);
    h.observer.cancel_on("step.started", "f", &cfg.cancel);
    let result = h.run(plan(steps), cfg).await;

    assert_eq!(h.probe.calls("f"), 1, "no new attempt after cancel");
    assert_eq!(step(&result, "f").attempts, 1);
    assert_eq!(step(&result, "f").status, StepStatus::Failed);
    assert!(codes(&result).contains(&(ReasonCode::Cancelled, None)));
    assert_eq!(result.status, RunStatus::Failed);
}

// Regression (fixed): a cancel that arrives while the scheduler is settling a finished step (Ctrl-C between two
// polls of its `select!`) is missed: `execute` only learns of it from the `cancel.cancelled()`
// branch, but its spawn loop checks `state.cancelled`, not `cancel.is_cancelled()`, so it starts
// the next ready step first. Here the cancel is raised on `a`'s `step.finished` (emitted in
// `settle`), and `b` is started anyway. Likewise a cancel raised while the last running step
// completes is never noticed at all: the loop ends with `running` empty and the result has no
// `cancelled` reason. Expected: no step starts once `Cancel::cancel` has returned, and the run
// reports `cancelled` (check `cancel.is_cancelled()` in the spawn loop and after the loop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_during_settle_starts_no_new_step() {
    let h = Harness::new();
    let steps = json!([
        {"id": "a", "tool": "test.echo", "parameters": {"key": "a"}},
        {"id": "b", "tool": "test.sleep", "parameters": {"key": "b", "ms": 20}},
        {"id": "c", "tool": "test.echo", "parameters": {"key": "c"}},
    ]);
    let cfg = config(1);
    h.observer.cancel_on("step.finished", "a", &cfg.cancel);
    let result = h.run(plan(steps), cfg).await;

    assert_eq!(step(&result, "a").status, StepStatus::Done);
    assert_eq!(h.probe.calls("b"), 0, "b started after the run was cancelled");
    assert_eq!(step(&result, "b").status, StepStatus::Pending);
    assert_eq!(
        codes(&result),
        vec![(ReasonCode::StepsNotRun, None), (ReasonCode::Cancelled, None)]
    );
}
