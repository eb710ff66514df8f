//! `--cache` end to end: a second run of an unchanged plan calls no tool and no model and still
//! ends `success`; a changed input file, a changed step, a write someone undid, an exec step, a
//! step that needs approval, and a run without the cache all run their steps again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use pev_engine::instruct::{
    GateResult, InstructionExecutor, InstructionOutcome, InstructionRequest, ToolGate,
};
use pev_engine::{ApprovalMode, BoxFuture, EngineConfig, ModelHooks};
use pev_protocol::event::{Event, EventBody};
use pev_protocol::run::{ReasonCode, RunResult, RunStatus, StepStatus};
use serde_json::{Value, json};

use super::support::{Harness, codes, config, plan, step};

fn cached(jobs: usize) -> EngineConfig {
    EngineConfig { cache: true, ..config(jobs) }
}

/// The events of one run.
fn events_of(h: &Harness, result: &RunResult) -> Vec<Event> {
    h.observer.events().into_iter().filter(|e| e.run_id == result.run_id).collect()
}

/// The steps that called a tool in this run, in order.
fn called(h: &Harness, result: &RunResult) -> Vec<String> {
    events_of(h, result)
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::ToolCalled { step, .. } => Some(step),
            _ => None,
        })
        .collect()
}

/// Which steps sent `step.started` and `step.finished` in this run.
fn started_and_finished(h: &Harness, result: &RunResult) -> (Vec<String>, Vec<String>) {
    let events = events_of(h, result);
    let started = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::StepStarted { step, .. } => Some(step.clone()),
            _ => None,
        })
        .collect();
    let finished = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::StepFinished { step, status: StepStatus::Done, .. } => Some(step.clone()),
            _ => None,
        })
        .collect();
    (started, finished)
}

fn entries(h: &Harness) -> usize {
    std::fs::read_dir(h.root.join(".pev").join("cache"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .count()
        })
        .unwrap_or(0)
}

/// Reads `in.txt`, writes its content to `out.txt` and checks it.
fn copy_plan(extra: Option<&str>) -> Value {
    let mut write = json!({"id": "write", "tool": "test.write",
        "parameters": {"path": "out.txt", "content": "copied: ${read.result.content}"},
        "assertions": [{"type": "file_contains", "path": "out.txt", "pattern": "copied"}]});
    if let Some(description) = extra {
        write["description"] = json!(description);
    }
    plan(json!([{"id": "read", "tool": "file.read", "parameters": {"path": "in.txt"}}, write]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_plan_reuses_every_step_and_calls_no_tool() {
    let h = Harness::new();
    h.write("in.txt", "hello");
    let first = h.run(copy_plan(None), cached(2)).await;
    assert_eq!(first.status, RunStatus::Success, "{:?}", first.reasons);
    assert_eq!(called(&h, &first), vec!["read", "write"]);
    assert_eq!(entries(&h), 2);
    assert_eq!(h.probe.calls("out.txt"), 1);

    let second = h.run(copy_plan(None), cached(2)).await;
    assert_eq!(second.status, RunStatus::Success, "{:?}", second.reasons);
    assert!(called(&h, &second).is_empty(), "no tool.called: {:?}", called(&h, &second));
    assert_eq!(h.probe.calls("out.txt"), 1, "test.write was not called again");
    assert_eq!(second.usage.tool_calls, 0);
    assert!(second.file_mutations.is_empty(), "nothing was written in the second run");
    // The write step's goal work still holds: its write is in place.
    assert!(second.goal_actions_executed);
    let (started, finished) = started_and_finished(&h, &second);
    assert_eq!(started, vec!["read", "write"]);
    assert_eq!(finished, vec!["read", "write"]);
    let write = step(&second, "write");
    assert_eq!(write.attempts, 1);
    assert_eq!(write.output, step(&first, "write").output);
    assert_eq!(write.assertions, step(&first, "write").assertions);
    assert!(
        write.evidence[0].starts_with(&format!(
            "reused the verified result of run {} (cache key ",
            first.run_id
        )),
        "{:?}",
        write.evidence
    );
    assert!(
        write.evidence[0].ends_with(
            "definition, inputs and the 0 files it read are unchanged, and the 1 file it changed \
             is as it left it"
        ),
        "out.txt, absent before and checked by the assertion, is checked as the write: {:?}",
        write.evidence
    );
    assert!(step(&second, "read").evidence[0].contains("the 1 file it read are unchanged"));
    assert_eq!(step(&second, "read").output, step(&first, "read").output);
    assert!(h.observer.events().iter().all(|e| !matches!(&e.body, EventBody::Warning { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_input_file_runs_the_steps_again() {
    let h = Harness::new();
    h.write("in.txt", "hello");
    h.run(copy_plan(None), cached(2)).await;
    h.write("in.txt", "goodbye");
    let second = h.run(copy_plan(None), cached(2)).await;
    assert_eq!(second.status, RunStatus::Success, "{:?}", second.reasons);
    // `read` read a changed file; `write` then sees a changed argument.
    assert_eq!(called(&h, &second), vec!["read", "write"]);
    assert_eq!(h.read("out.txt"), "copied: goodbye");
    assert_eq!(h.probe.calls("out.txt"), 2);
    assert!(step(&second, "read").evidence.iter().all(|e| !e.starts_with("reused")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_step_definition_runs_that_step_again() {
    let h = Harness::new();
    h.write("in.txt", "hello");
    h.run(copy_plan(None), cached(2)).await;
    let second = h.run(copy_plan(Some("copy it, now with a description")), cached(2)).await;
    assert_eq!(called(&h, &second), vec!["write"], "`read` is unchanged and reused");
    assert_eq!(h.probe.calls("out.txt"), 2);
    // Run again, the write rewrote the same bytes: the harness calls that a no-op.
    assert_eq!(codes(&second), vec![(ReasonCode::NoOpMutation, Some("write"))]);
    // A step whose write was a no-op is not cached: reused, its no-op would vanish.
    let third = h.run(copy_plan(Some("copy it, now with a description")), cached(2)).await;
    assert_eq!(called(&h, &third), vec!["write"]);
    assert_eq!(codes(&third), vec![(ReasonCode::NoOpMutation, Some("write"))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_someone_undid_is_made_again() {
    let h = Harness::new();
    h.write("in.txt", "hello");
    h.run(copy_plan(None), cached(2)).await;
    h.write("out.txt", "someone else's text");
    let second = h.run(copy_plan(None), cached(2)).await;
    assert_eq!(second.status, RunStatus::Success, "{:?}", second.reasons);
    assert_eq!(called(&h, &second), vec!["write"]);
    assert_eq!(h.read("out.txt"), "copied: hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_steps_and_steps_needing_approval_are_never_cached() {
    let h = Harness::new();
    let steps = json!([
        {"id": "exec", "tool": "test.exec", "parameters": {"key": "e"}},
        {"id": "approved", "tool": "test.write", "requires_approval": true,
         "parameters": {"path": "a.txt", "content": "a"}},
    ]);
    let yes = || EngineConfig { approval: ApprovalMode::All, ..cached(1) };
    let first = h.run(plan(steps.clone()), yes()).await;
    assert_eq!(first.status, RunStatus::Success, "{:?}", first.reasons);
    assert_eq!(entries(&h), 0, "nothing was cached");
    let second = h.run(plan(steps), yes()).await;
    assert_eq!(called(&h, &second), vec!["exec", "approved"]);
    assert_eq!(h.probe.calls("e"), 2);
    assert_eq!(h.probe.calls("a.txt"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_without_a_path_is_never_cached() {
    let h = Harness::new();
    // A write tool with no `path` changes something pev cannot see.
    let steps = json!([{"id": "count", "tool": "test.count", "parameters": {"key": "c"}}]);
    h.run(plan(steps.clone()), cached(1)).await;
    h.run(plan(steps), cached(1)).await;
    assert_eq!(h.probe.calls("c"), 2);
    assert_eq!(entries(&h), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_cache_every_run_calls_its_tools() {
    let h = Harness::new();
    h.write("in.txt", "hello");
    h.run(copy_plan(None), config(2)).await;
    let second = h.run(copy_plan(None), config(2)).await;
    assert_eq!(called(&h, &second), vec!["read", "write"]);
    assert_eq!(h.probe.calls("out.txt"), 2);
    assert!(!h.root.join(".pev").join("cache").exists(), "no entry is written");
}

/// An executor that reads `in.txt` and writes its upper-cased content to `up.txt`, counting
/// how often it is asked.
struct Upper {
    asked: AtomicU32,
}

impl InstructionExecutor for Upper {
    fn execute<'a>(
        &'a self,
        _request: &'a InstructionRequest,
        tools: &'a mut dyn ToolGate,
    ) -> BoxFuture<'a, InstructionOutcome> {
        Box::pin(async move {
            self.asked.fetch_add(1, Ordering::SeqCst);
            let GateResult { output, .. } =
                tools.call("file_read", json!({"path": "in.txt"})).await;
            let text = output.ok().and_then(|o| o["content"].as_str().map(str::to_uppercase));
            let content = text.unwrap_or_default();
            tools.call("file_write", json!({"path": "up.txt", "content": content})).await;
            InstructionOutcome {
                summary: "wrote up.txt".to_owned(),
                turns: 2,
                model_calls: 2,
                usage: Default::default(),
                cost_usd: 0.0,
                interrupted: None,
            }
        })
    }
}

fn with_executor(executor: &Arc<Upper>) -> EngineConfig {
    let executor = Arc::clone(executor) as Arc<dyn InstructionExecutor>;
    EngineConfig {
        models: Some(ModelHooks {
            executor,
            judge: None,
            judge_threshold: 0.7,
            budget_note: Arc::new(|| None),
            usage: Arc::new(Default::default),
            allowed_tools: Vec::new(),
            delegator: None,
        }),
        ..cached(1)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instruction_step_is_reused_without_asking_the_executor() {
    let h = Harness::new();
    h.write("in.txt", "hello");
    let upper = Arc::new(Upper { asked: AtomicU32::new(0) });
    let steps = json!([{"id": "up", "description": "upper-case in.txt into up.txt",
        "max_attempts": 1,
        "assertions": [{"type": "file_contains", "path": "up.txt", "pattern": "HELLO"}]}]);
    let first = h.run(plan(steps.clone()), with_executor(&upper)).await;
    assert_eq!(first.status, RunStatus::Success, "{:?}", first.reasons);
    assert_eq!(upper.asked.load(Ordering::SeqCst), 1);

    let second = h.run(plan(steps.clone()), with_executor(&upper)).await;
    assert_eq!(second.status, RunStatus::Success, "{:?}", second.reasons);
    assert_eq!(upper.asked.load(Ordering::SeqCst), 1, "the executor was not asked again");
    assert!(called(&h, &second).is_empty());
    assert!(step(&second, "up").evidence[0].contains("the 1 file it read are unchanged"));

    // The file the executor read changes: the step runs again.
    h.write("in.txt", "bye");
    let third = h.run(plan(steps), with_executor(&upper)).await;
    assert_eq!(upper.asked.load(Ordering::SeqCst), 2);
    assert_eq!(called(&h, &third), vec!["up", "up"]);
    assert_eq!(h.read("up.txt"), "BYE");
    // Its assertion now fails (it looks for HELLO): a failed step is not reused later either.
    assert_eq!(third.status, RunStatus::Failed);
}
