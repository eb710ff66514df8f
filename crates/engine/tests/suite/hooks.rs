//! Hooks in a run: a `pre_tool_use` that denies keeps a tool step's call from being made (and
//! a failing one denies too), `post_tool_use` context becomes a tool step's evidence and reaches
//! an executor's model with the output, `step_finished` runs once per step and adds evidence,
//! and a failing hook that guards nothing is a warning.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pev_engine::EngineConfig;
use pev_engine::hooks::Hooks;
use pev_engine::instruct::{
    GateResult, InstructionExecutor, InstructionOutcome, InstructionRequest, ToolGate,
};
use pev_engine::{BoxFuture, ModelHooks};
use pev_protocol::run::{RunStatus, StepStatus};
use pev_providers::config::{HookCommand, HooksConfig, Source};
use pev_tools::{ToolContext, Workspace};
use serde_json::{Value, json};

use super::support::{Harness, config, finished_error, plan, step, warnings};

/// Which hook a command is for.
enum At {
    Pre,
    Post,
    StepFinished,
}

/// `config(1)` with `commands` configured for their hooks, run in `h`'s workspace.
fn hooked(h: &Harness, commands: &[(At, &str)]) -> EngineConfig {
    let mut hooks = HooksConfig::default();
    for (at, command) in commands {
        let command = HookCommand {
            command: (*command).to_owned(),
            timeout: HooksConfig::DEFAULT_TIMEOUT,
            source: Source::Default,
        };
        match at {
            At::Pre => hooks.pre_tool_use.push(command),
            At::Post => hooks.post_tool_use.push(command),
            At::StepFinished => hooks.step_finished.push(command),
        }
    }
    let ctx = Arc::new(ToolContext::new(Workspace::open(&h.root).unwrap()));
    EngineConfig { hooks: Some(Arc::new(Hooks::new(hooks, ctx))), ..config(1) }
}

/// A file next to the workspace (not in it) for hooks to log to.
fn outside(h: &Harness, name: &str) -> PathBuf {
    h.root.parent().unwrap().join(name)
}

/// Denies `file.write` calls, allows the rest.
const DENY_WRITES: &str = r#"if grep -q '"tool":"file.write"'; then echo '{"decision": "deny", "reason": "writes are frozen"}'; fi"#;

fn write_then_read() -> Value {
    plan(json!([
        {"id": "read", "tool": "file.read", "parameters": {"path": "a.txt"}},
        {"id": "write", "tool": "file.write", "depends_on": ["read"],
         "parameters": {"path": "a.txt", "content": "new"}}
    ]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denying_pre_tool_use_hook_fails_the_step_and_leaves_the_file() {
    let h = Harness::new();
    h.write("a.txt", "old");
    let result = h.run(write_then_read(), hooked(&h, &[(At::Pre, DENY_WRITES)])).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(step(&result, "read").status, StepStatus::Done);
    let write = step(&result, "write");
    assert_eq!(write.status, StepStatus::Failed);
    assert_eq!(write.error.as_deref(), Some("hook denied: writes are frozen"));
    assert_eq!(write.attempts, 1);
    assert!(
        write.evidence.contains(&"pre_tool_use hook denied file.write: writes are frozen".into()),
        "{:?}",
        write.evidence
    );
    assert_eq!(h.read("a.txt"), "old");
    // The denied call was never started, so the journal has no intent for it.
    assert_eq!(h.called_tools(), ["file.read"]);
    let events = h.observer.events();
    assert_eq!(finished_error(&events, "write").as_deref(), Some("hook denied: writes are frozen"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_pre_tool_use_hook_denies_and_warns() {
    let h = Harness::new();
    h.write("a.txt", "old");
    let steps = plan(json!([{"id": "write", "tool": "file.write",
        "parameters": {"path": "a.txt", "content": "new"}}]));
    let result = h.run(steps, hooked(&h, &[(At::Pre, "echo broken >&2; exit 7")])).await;
    let write = step(&result, "write");
    assert_eq!(write.status, StepStatus::Failed);
    let why = "pre_tool_use hook `echo broken >&2; exit 7` failed: exited with code 7: broken";
    assert_eq!(write.error.as_deref(), Some(format!("hook denied: {why}").as_str()));
    assert_eq!(h.read("a.txt"), "old");
    assert!(h.called_tools().is_empty());
    assert_eq!(warnings(&h.observer.events()), [format!("step `write`: {why}")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_context_is_a_tool_steps_evidence_and_its_event_has_the_output() {
    let h = Harness::new();
    h.write("a.txt", "old");
    let log = outside(&h, "post.jsonl");
    let command =
        format!(r#"cat >> '{}'; echo '{{"context": "checked by the linter"}}'"#, log.display());
    let result = h.run(write_then_read(), hooked(&h, &[(At::Post, &command)])).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    for id in ["read", "write"] {
        let evidence = &step(&result, id).evidence;
        assert!(
            evidence.contains(&"post_tool_use hook: checked by the linter".to_owned()),
            "{id}: {evidence:?}"
        );
    }
    assert_eq!(h.read("a.txt"), "new");
    let text = std::fs::read_to_string(&log).unwrap();
    // `cat` adds no newline: the two events are back to back.
    let events: Vec<Value> =
        serde_json::Deserializer::from_str(&text).into_iter().map(Result::unwrap).collect();
    assert_eq!(events.len(), 2, "{text}");
    assert_eq!(events[0]["hook"], "post_tool_use");
    assert_eq!(events[0]["step"], "read");
    assert_eq!(events[0]["output"]["content"], "old");
    assert_eq!(events[1]["tool"], "file.write");
    assert_eq!(events[1]["arguments"], json!({"path": "a.txt", "content": "new"}));
    assert_eq!(events[1]["run_id"].as_str(), Some(result.run_id.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_tool_use_deny_fails_a_tool_step_after_the_call() {
    let h = Harness::new();
    let deny = r#"echo '{"decision": "deny", "reason": "output rejected"}'"#;
    let steps = plan(json!([{"id": "write", "tool": "file.write",
        "parameters": {"path": "b.txt", "content": "x"}}]));
    let result = h.run(steps, hooked(&h, &[(At::Post, deny)])).await;
    let write = step(&result, "write");
    assert_eq!(write.status, StepStatus::Failed);
    assert_eq!(write.error.as_deref(), Some("hook denied: output rejected"));
    // The call was made: its change is recorded, not hidden.
    assert_eq!(h.read("b.txt"), "x");
    assert!(write.evidence.iter().any(|e| e.starts_with("file.write changed b.txt")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_finished_runs_once_per_step_and_adds_evidence() {
    let h = Harness::new();
    let log = outside(&h, "finished.jsonl");
    let command =
        format!(r#"cat >> '{0}'; echo >> '{0}'; echo '{{"context": "logged"}}'"#, log.display());
    let steps = plan(json!([
        {"id": "a", "tool": "test.echo", "parameters": {"key": "a"}},
        {"id": "flaky", "tool": "test.flaky", "on_fail": "retry", "depends_on": ["a"],
         "parameters": {"key": "f", "fail_times": 1}},
        {"id": "bad", "tool": "test.fail", "on_fail": "continue", "parameters": {"key": "b"}}
    ]));
    let result = h.run(steps, hooked(&h, &[(At::StepFinished, &command)])).await;
    assert_eq!(step(&result, "flaky").attempts, 2);
    let text = std::fs::read_to_string(&log).unwrap();
    let mut seen: Vec<(String, String, Value)> = text
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line).unwrap();
            assert_eq!(event["hook"], "step_finished", "{line}");
            let id = event["step"].as_str().unwrap().to_owned();
            (id, event["status"].as_str().unwrap().to_owned(), event["error"].clone())
        })
        .collect();
    seen.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        seen,
        [
            ("a".to_owned(), "done".to_owned(), Value::Null),
            (
                "bad".to_owned(),
                "failed".to_owned(),
                json!("test.fail failed: deliberate failure of `b`")
            ),
            ("flaky".to_owned(), "done".to_owned(), Value::Null),
        ]
    );
    for id in ["a", "flaky", "bad"] {
        assert!(
            step(&result, id).evidence.contains(&"step_finished hook: logged".to_owned()),
            "{id}: {:?}",
            step(&result, id).evidence
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_step_finished_hook_is_only_a_warning() {
    let h = Harness::new();
    let steps = plan(json!([{"id": "a", "tool": "test.echo", "parameters": {"key": "a"}}]));
    let result = h.run(steps, hooked(&h, &[(At::StepFinished, "echo '{'")])).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    let warned = warnings(&h.observer.events());
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].starts_with("step `a`: step_finished hook `echo '{'` failed: answered `{`"));
}

/// An executor that writes `c.txt` and then reads `in.txt` through the gate, keeping what the
/// gate answered.
#[derive(Default)]
struct Recording {
    results: Mutex<Vec<GateResult>>,
}

impl InstructionExecutor for Recording {
    fn execute<'a>(
        &'a self,
        _request: &'a InstructionRequest,
        tools: &'a mut dyn ToolGate,
    ) -> BoxFuture<'a, InstructionOutcome> {
        Box::pin(async move {
            let wrote = tools.call("file_write", json!({"path": "c.txt", "content": "x"})).await;
            let read = tools.call("file_read", json!({"path": "in.txt"})).await;
            self.results.lock().unwrap().extend([wrote, read]);
            InstructionOutcome {
                summary: "done".to_owned(),
                turns: 1,
                model_calls: 1,
                usage: Default::default(),
                cost_usd: 0.0,
                interrupted: None,
            }
        })
    }
}

/// Runs one instruction step with [`Recording`] as the executor; returns what the gate answered.
async fn run_executor(
    h: &Harness,
    mut engine_config: EngineConfig,
) -> (pev_protocol::run::RunResult, Vec<GateResult>) {
    let executor = Arc::new(Recording::default());
    engine_config.models = Some(ModelHooks {
        executor: Arc::clone(&executor) as Arc<dyn InstructionExecutor>,
        judge: None,
        judge_threshold: 0.7,
        budget_note: Arc::new(|| None),
        usage: Arc::new(Default::default),
        allowed_tools: Vec::new(),
        delegator: None,
    });
    let steps = plan(json!([{"id": "work", "description": "write c.txt", "max_attempts": 1}]));
    let result = h.run(steps, engine_config).await;
    let results = executor.results.lock().unwrap().clone();
    (result, results)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executors_calls_get_the_denial_and_the_context() {
    let h = Harness::new();
    h.write("in.txt", "hello");
    let post = r#"echo '{"context": "in.txt is generated; do not edit it"}'"#;
    let (result, results) =
        run_executor(&h, hooked(&h, &[(At::Pre, DENY_WRITES), (At::Post, post)])).await;
    assert_eq!(results.len(), 2);
    // The denied write: an error the model reads (not fatal), and no file.
    assert_eq!(results[0].output, Err("hook denied: writes are frozen".to_owned()));
    assert!(!results[0].fatal);
    assert!(!h.root.join("c.txt").exists());
    // The read went through, with the hook's context added to what the model sees.
    let read = results[1].output.clone().unwrap();
    assert_eq!(read["content"], "hello");
    assert_eq!(read["hook_context"], "in.txt is generated; do not edit it");
    assert_eq!(h.called_tools(), ["file.read"]);
    let evidence = &step(&result, "work").evidence;
    assert!(
        evidence.contains(&"pre_tool_use hook denied file.write: writes are frozen".to_owned()),
        "{evidence:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_tool_use_deny_turns_an_executors_result_into_an_error() {
    let h = Harness::new();
    h.write("in.txt", "hello");
    let deny_reads = r#"if grep -q '"tool":"file.read"'; then echo '{"decision": "deny", "reason": "secrets inside"}'; fi"#;
    let (_, results) = run_executor(&h, hooked(&h, &[(At::Post, deny_reads)])).await;
    assert_eq!(results.len(), 2);
    // The write was not objected to; it happened and the model sees its output as is.
    assert!(results[0].output.is_ok(), "{:?}", results[0].output);
    assert_eq!(h.read("c.txt"), "x");
    let error = results[1].output.clone().unwrap_err();
    assert!(
        error.starts_with("hook denied: secrets inside\n(the call was made; its result: {"),
        "{error}"
    );
    assert!(error.contains(r#""content":"hello""#), "{error}");
    assert!(!results[1].fatal);
}
