//! Wire names end to end: a model is offered and calls tools by wire name (`file_patch`), the
//! engine journals the call under the plan name (`file.patch`). The requests a scripted model
//! receives, in both the executor and loop mode, offer only valid wire names; a call of a name
//! the model was not given is answered with the wire names it may use.

use std::sync::{Arc, Mutex};

use pev_engine::agent::executor::{ExecutorOptions, ModelExecutor};
use pev_engine::agent::loop_mode::{LoopExecutor, LoopOptions};
use pev_engine::instruct::{
    GateResult, InstructionExecutor, InstructionOutcome, InstructionRequest, ToolGate,
};
use pev_engine::{BoxFuture, EngineConfig, ModelHooks};
use pev_protocol::run::{RunStatus, StepStatus};
use pev_providers::script::{ScriptTurn, ScriptedClient};
use pev_providers::{ChatRequest, ContentBlock, ModelClient};
use pev_tools::{ToolContext, Workspace};
use serde_json::{Value, json};

use super::support::{Harness, config, plan, step};

/// `^[a-zA-Z0-9_-]{1,64}$`, checked character by character.
fn is_valid_wire_name(name: &str) -> bool {
    (1..=64).contains(&name.chars().count())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Every tool every request offered, asserted to be a valid wire name; the names of the first.
fn offered(requests: &[ChatRequest]) -> Vec<String> {
    assert!(!requests.is_empty(), "the model was never asked");
    for request in requests {
        for tool in &request.tools {
            assert!(is_valid_wire_name(&tool.name), "offered an invalid tool name {:?}", tool.name);
        }
    }
    requests[0].tools.iter().map(|t| t.name.clone()).collect()
}

pub(super) fn models(
    executor: Arc<dyn InstructionExecutor>,
    allowed_tools: &[&str],
) -> EngineConfig {
    let hooks = ModelHooks {
        executor,
        judge: None,
        judge_threshold: 0.7,
        budget_note: Arc::new(|| None),
        usage: Arc::new(Default::default),
        allowed_tools: allowed_tools.iter().map(|t| (*t).to_owned()).collect(),
        delegator: None,
    };
    EngineConfig { models: Some(hooks), ..config(1) }
}

pub(super) fn patch_call() -> ScriptTurn {
    ScriptTurn::blocks(vec![ContentBlock::ToolUse {
        id: "p1".into(),
        name: "file_patch".into(),
        input: json!({"path": "style.css", "edits": [{"old": "white", "new": "#006400"}]}),
    }])
}

/// One instruction step that must leave `style.css` green.
pub(super) fn green_step() -> Value {
    plan(json!([{
        "id": "green",
        "description": "Make the page background dark green",
        "max_attempts": 1,
        "assertions": [
            {"type": "content_changed", "path": "style.css"},
            {"type": "file_contains", "path": "style.css", "pattern": "#006400"}
        ]
    }]))
}

/// A white stylesheet, and an executor whose model patches it green with `file_patch`.
fn white_page_and_patching_executor() -> (Harness, Arc<ScriptedClient>, ModelExecutor) {
    let h = Harness::new();
    h.write("style.css", "body { background: white; }");
    let client = Arc::new(ScriptedClient::from_turns(
        "executor",
        vec![patch_call(), ScriptTurn::text("The background is #006400.")],
    ));
    let executor = ModelExecutor::new(
        Arc::clone(&client) as Arc<dyn ModelClient>,
        "m".into(),
        ExecutorOptions::default(),
    );
    (h, client, executor)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_calling_file_patch_edits_the_file_and_the_journal_says_file_patch() {
    let (h, client, executor) = white_page_and_patching_executor();
    let result = h.run(green_step(), models(Arc::new(executor), &[])).await;

    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert_eq!(h.read("style.css"), "body { background: #006400; }");
    // The journal, the events and the result keep the plan name.
    assert_eq!(h.called_tools(), ["file.patch"]);
    let record = h.store().load_run(&result.run_id).unwrap();
    let journaled: Vec<&str> = record.tool_calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(journaled, ["file.patch"]);
    let evidence = &step(&result, "green").evidence;
    assert!(evidence.iter().any(|e| e.starts_with("file.patch changed style.css")), "{evidence:?}");
    // The model was offered wire names only, the built-ins and the test tools alike.
    let names = offered(&client.requests());
    for wire in ["file_list", "file_patch", "file_read", "file_write", "shell_exec", "test_echo"] {
        assert!(names.iter().any(|n| n == wire), "{wire} not offered: {names:?}");
    }
    assert!(!names.iter().any(|n| n.contains('.')), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_executor_is_offered_only_the_allowed_tools_by_wire_name() {
    let (h, client, executor) = white_page_and_patching_executor();
    let allowed = ["file.read", "file.patch"];
    let result = h.run(green_step(), models(Arc::new(executor), &allowed)).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert_eq!(offered(&client.requests()), ["file_patch", "file_read"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_mode_offers_and_lists_wire_names_and_journals_plan_names() {
    let h = Harness::new();
    h.write("style.css", "body { background: white; }");
    let client = Arc::new(ScriptedClient::from_turns(
        "loop",
        vec![patch_call(), ScriptTurn::text("The background is #006400.")],
    ));
    let ctx = Arc::new(ToolContext::new(Workspace::open(&h.root).unwrap()));
    let options = LoopOptions { gate: false, ..LoopOptions::default() };
    let executor = LoopExecutor::new(
        Arc::clone(&client) as Arc<dyn ModelClient>,
        "loop-model".into(),
        options,
        ctx,
    );
    let result = h.run(green_step(), models(Arc::new(executor), &[])).await;

    assert_eq!(step(&result, "green").status, StepStatus::Done, "{:?}", result.reasons);
    assert_eq!(h.read("style.css"), "body { background: #006400; }");
    assert_eq!(h.called_tools(), ["file.patch"]);
    let requests = client.requests();
    let names = offered(&requests);
    // The harness's plan tools first, then the workspace's under their wire names.
    assert_eq!(
        names[..5],
        ["plan_create", "plan_show", "step_update", "postcondition_verify", "todo_write"]
    );
    assert!(names.iter().any(|n| n == "file_patch"), "{names:?}");
    assert!(!names.iter().any(|n| n.contains('.')), "{names:?}");
    // The system prompt names the workspace tools as the model must call them.
    let system = requests[0].system.as_deref().unwrap();
    let listed = system
        .lines()
        .find_map(|l| l.strip_prefix("Workspace tools: "))
        .and_then(|l| l.strip_suffix(". Every call is recorded."))
        .unwrap_or_else(|| panic!("no workspace tool line in:\n{system}"));
    let listed: Vec<&str> = listed.split(", ").collect();
    assert!(listed.contains(&"file_patch"), "{listed:?}");
    assert!(listed.iter().all(|n| is_valid_wire_name(n)), "{listed:?}");
}

/// An executor that calls the tools it is given by name, keeping what the gate answered.
struct Calls {
    names: Vec<&'static str>,
    answers: Mutex<Vec<GateResult>>,
}

impl InstructionExecutor for Calls {
    fn execute<'a>(
        &'a self,
        _request: &'a InstructionRequest,
        tools: &'a mut dyn ToolGate,
    ) -> BoxFuture<'a, InstructionOutcome> {
        Box::pin(async move {
            for name in &self.names {
                let answer = tools.call(name, json!({"path": "style.css"})).await;
                self.answers.lock().unwrap().push(answer);
            }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tool_is_answered_with_the_wire_names_on_offer() {
    let h = Harness::new();
    h.write("style.css", "body { background: white; }");
    let executor = Arc::new(Calls {
        names: vec!["file.read", "no_such_tool", "file_read", "shell_exec"],
        answers: Mutex::default(),
    });
    let engine_config = models(Arc::clone(&executor) as _, &["file.read", "file.list"]);
    let steps = plan(json!([{"id": "look", "description": "read style.css", "max_attempts": 1}]));
    h.run(steps, engine_config).await;

    let answers = executor.answers.lock().unwrap().clone();
    assert_eq!(answers.len(), 4);
    // The dotted plan name is not a name a model may call.
    assert_eq!(
        answers[0].output,
        Err("unknown tool `file.read`; available: file_list, file_read".to_owned())
    );
    assert!(!answers[0].fatal);
    assert_eq!(
        answers[1].output,
        Err("unknown tool `no_such_tool`; available: file_list, file_read".to_owned())
    );
    // The wire name is the tool.
    let read = answers[2].output.clone().unwrap();
    assert_eq!(read["content"], "body { background: white; }");
    // A registered tool the policy does not allow is named as the model called it.
    assert_eq!(
        answers[3].output,
        Err("the policy does not allow the tool `shell_exec`".to_owned())
    );
    assert_eq!(h.called_tools(), ["file.read"]);
}

/// Arguments that fail the tool's schema: the error goes back to the model, in the names it
/// knows (`file_patch`, not `file.patch`), and its corrected call does the work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_error_goes_back_to_the_model_in_wire_terms() {
    let h = Harness::new();
    h.write("style.css", "body { background: white; }");
    let bad = ScriptTurn::blocks(vec![ContentBlock::ToolUse {
        id: "bad".into(),
        name: "file_patch".into(),
        input: json!({"path": "style.css", "edit": {"old": "white", "new": "#006400"}}),
    }]);
    let client = Arc::new(ScriptedClient::from_turns(
        "executor",
        vec![bad, patch_call(), ScriptTurn::text("The background is #006400.")],
    ));
    let executor = ModelExecutor::new(
        Arc::clone(&client) as Arc<dyn ModelClient>,
        "m".into(),
        ExecutorOptions::default(),
    );
    let result = h.run(green_step(), models(Arc::new(executor), &[])).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    let second = &client.requests()[1];
    let answer = second.messages.last().unwrap();
    let ContentBlock::ToolResult { content, is_error: true, .. } = &answer.content[0] else {
        panic!("expected an error result, got {answer:?}");
    };
    assert!(content.starts_with("invalid arguments for file_patch: "), "{content}");
    assert!(!content.contains("file.patch"), "{content}");
}
