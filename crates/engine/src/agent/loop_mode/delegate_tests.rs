//! Loop mode's `delegate`: offered only when the gate can run child runs; the model reads the
//! child's verdict; a step cannot be marked done while the last child run delegated for it did
//! not succeed, nor on evidence naming a child run that did not.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use pev_protocol::run::{Reason, ReasonCode, RunResult, RunStatus, Usage};
use pev_protocol::{Delegation, Step, StepId};
use pev_providers::script::{ScriptTurn, ScriptedClient};
use pev_providers::{ContentBlock, ModelClient};
use pev_tools::{ToolContext, Workspace};
use serde_json::{Value, json};

use super::{LoopExecutor, LoopOptions};
use crate::instruct::{
    ChildVerdict, GateResult, InstructionExecutor, InstructionRequest, ToolGate,
};
use pev_providers::BoxFuture;

fn child(id: &str, status: RunStatus) -> RunResult {
    let reasons = if status == RunStatus::Success {
        Vec::new()
    } else {
        vec![Reason {
            code: ReasonCode::AssertionFailed,
            step: Some("guide".into()),
            message: "docs/guide.md does not exist".into(),
        }]
    };
    RunResult {
        run_id: id.into(),
        goal: "child".into(),
        status,
        reasons,
        goal_actions_executed: status == RunStatus::Success,
        steps: Vec::new(),
        postconditions: Vec::new(),
        file_mutations: Vec::new(),
        warnings: Vec::new(),
        usage: Usage::default(),
        duration_ms: 1,
        final_check: None,
    }
}

/// A gate that can delegate: each child run gets the next verdict of `verdicts`.
struct DelegatingGate {
    can: bool,
    verdicts: VecDeque<RunResult>,
    asked: Arc<Mutex<Vec<Delegation>>>,
}

impl ToolGate for DelegatingGate {
    fn call<'a>(&'a mut self, _tool: &'a str, _arguments: Value) -> BoxFuture<'a, GateResult> {
        Box::pin(async { GateResult { output: Ok(json!("ok")), fatal: false } })
    }

    fn can_delegate(&self) -> bool {
        self.can
    }

    fn delegate<'a>(
        &'a mut self,
        delegation: Delegation,
    ) -> BoxFuture<'a, Result<ChildVerdict, String>> {
        self.asked.lock().unwrap().push(delegation);
        let next = self.verdicts.pop_front().ok_or_else(|| "no more children".to_owned());
        let next = next.map(|result| {
            let claims = if result.status == RunStatus::Success {
                vec![pev_protocol::Assertion::FileContains {
                    path: "docs/guide.md".into(),
                    pattern: "Install".into(),
                    regex: false,
                    recovery: None,
                }]
            } else {
                Vec::new()
            };
            ChildVerdict { result, claims }
        });
        Box::pin(async move { next })
    }
}

fn call(id: &str, name: &str, input: Value) -> ScriptTurn {
    ScriptTurn::blocks(vec![ContentBlock::ToolUse { id: id.into(), name: name.into(), input }])
}

fn request() -> InstructionRequest {
    let goal = "Get the guide written by a sub-agent";
    InstructionRequest {
        run_goal: goal.into(),
        step: Step { id: StepId::new("loop"), description: Some(goal.into()), ..Step::default() },
        attempt: 1,
        max_attempts: 1,
        inputs: HashMap::new(),
        feedback: Vec::new(),
        tools: Vec::new(),
        budget_note: None,
    }
}

fn plan() -> ScriptTurn {
    call(
        "p",
        "plan_create",
        json!({"objective": "guide", "steps": [{"id": "guide", "title": "Get the guide written"}],
               "postconditions": []}),
    )
}

/// Runs `turns` against a gate answering `verdicts`; the client (for its requests) and the
/// tool results the model read, in order.
async fn run(
    turns: Vec<ScriptTurn>,
    verdicts: Vec<RunResult>,
    can: bool,
) -> (Arc<ScriptedClient>, Vec<String>, super::LoopReport) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = Arc::new(ToolContext::new(Workspace::open(dir.path()).unwrap()));
    let client = Arc::new(ScriptedClient::from_turns("loop", turns));
    let options = LoopOptions { max_refusals: 1, ..LoopOptions::default() };
    let executor =
        LoopExecutor::new(client.clone() as Arc<dyn ModelClient>, "m".into(), options, ctx);
    let mut gate = DelegatingGate { can, verdicts: verdicts.into(), asked: Arc::default() };
    let request = request();
    let _ = executor.execute(&request, &mut gate).await;
    let mut replies = Vec::new();
    if let Some(last) = client.requests().last() {
        for m in &last.messages {
            for block in &m.content {
                if let ContentBlock::ToolResult { content, .. } = block {
                    replies.push(content.clone());
                }
            }
        }
    }
    (client, replies, executor.report())
}

#[tokio::test]
async fn delegate_is_offered_only_when_the_gate_can_run_children() {
    let (client, _, _) = run(vec![ScriptTurn::text("nothing to do")], Vec::new(), false).await;
    let first = &client.requests()[0];
    assert!(!first.tools.iter().any(|t| t.name == "delegate"));
    let (client, _, _) = run(vec![ScriptTurn::text("nothing to do")], Vec::new(), true).await;
    let first = &client.requests()[0];
    assert!(first.tools.iter().any(|t| t.name == "delegate"));
    assert!(first.system.as_deref().unwrap_or_default().contains("## Sub-agents"));
}

#[tokio::test]
async fn a_partial_child_cannot_make_its_step_done_and_a_successful_one_can() {
    let turns = vec![
        plan(),
        call("s", "step_update", json!({"id": "guide", "status": "in_progress"})),
        call("d1", "delegate", json!({"goal": "Write docs/guide.md", "scope": "docs"})),
        call(
            "u1",
            "step_update",
            json!({"id": "guide", "status": "done",
            "evidence": "the sub-agent reported it wrote docs/guide.md"}),
        ),
        call("d2", "delegate", json!({"goal": "Write docs/guide.md, really", "scope": "docs"})),
        call(
            "u2",
            "step_update",
            json!({"id": "guide", "status": "done",
            "evidence": "child run r.loop-d2.1 ended success"}),
        ),
        ScriptTurn::text("The guide is written."),
    ];
    let verdicts =
        vec![child("r.loop-d1.1", RunStatus::Partial), child("r.loop-d2.1", RunStatus::Success)];
    let (_, replies, report) = run(turns, verdicts, true).await;
    // What the successful child verified is kept for the final re-check, as the step's.
    assert_eq!(report.child_claims.len(), 1, "{:?}", report.child_claims);
    assert_eq!(report.child_claims[0].child_run, "r.loop-d2.1");
    assert_eq!(report.child_claims[0].step.as_deref(), Some("guide"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/guide.md"), "# Guide\n").unwrap();
    let ctx = ToolContext::new(Workspace::open(dir.path()).unwrap());
    let check = crate::agent::loop_run::final_recheck(&ctx, &report).await;
    assert_eq!(check.regressed.len(), 1, "undone since: {check:?}");
    assert_eq!(check.regressed[0].of, pev_protocol::run::EvidenceOf::Step("guide".into()));
    std::fs::write(dir.path().join("docs/guide.md"), "## Install\n").unwrap();
    assert!(crate::agent::loop_run::final_recheck(&ctx, &report).await.regressed.is_empty());

    let verdict: Value = serde_json::from_str(&replies[2]).expect("the child's verdict as JSON");
    assert_eq!(verdict["status"], "partial");
    assert_eq!(verdict["child_run"], "r.loop-d1.1");
    assert!(verdict["reasons"][0].as_str().unwrap_or_default().contains("docs/guide.md"));
    assert!(replies[3].starts_with("step_update refused"), "{}", replies[3]);
    assert!(replies[3].contains("r.loop-d1.1, ended partial"), "{}", replies[3]);
    assert!(replies[5].starts_with("Step `guide` is done."), "{}", replies[5]);
    assert_eq!(report.final_answer.as_deref(), Some("The guide is written."));
}

#[tokio::test]
async fn evidence_that_names_a_failed_child_is_refused_even_for_another_step() {
    let turns = vec![
        call(
            "p",
            "plan_create",
            json!({"objective": "two", "steps": [{"id": "a", "title": "Part a"},
                   {"id": "b", "title": "Part b"}], "postconditions": []}),
        ),
        // Delegated with no step in progress: it may be any step's work.
        call("d1", "delegate", json!({"goal": "Do part a"})),
        call("u1", "step_update", json!({"id": "a", "status": "done", "evidence": "a is done"})),
        call("u2", "step_update", json!({"id": "b", "status": "done", "evidence": "b is done"})),
        call("d2", "delegate", json!({"goal": "Do part b"})),
        call(
            "u3",
            "step_update",
            json!({"id": "b", "status": "done", "evidence": "child run r.loop-d2.1 did b"}),
        ),
        // The later child's success does not make the failed one evidence.
        call(
            "u4",
            "step_update",
            json!({"id": "a", "status": "done", "evidence": "done by child run r.loop-d1.1"}),
        ),
        ScriptTurn::text("done"),
    ];
    let verdicts =
        vec![child("r.loop-d1.1", RunStatus::Failed), child("r.loop-d2.1", RunStatus::Success)];
    let (_, replies, _) = run(turns, verdicts, true).await;
    for i in [2, 3] {
        assert!(replies[i].contains("r.loop-d1.1, ended failed"), "{}", replies[i]);
    }
    assert!(replies[5].starts_with("Step `b` is done."), "{}", replies[5]);
    assert!(
        replies[6].contains("cites child run r.loop-d1.1, which ended failed"),
        "{}",
        replies[6]
    );
}

#[tokio::test]
async fn a_delegate_call_without_a_goal_is_answered_with_what_is_missing() {
    let turns = vec![call("d", "delegate", json!({"goal": "  "})), ScriptTurn::text("done")];
    let (_, replies, _) = run(turns, Vec::new(), true).await;
    assert!(replies[0].contains("`goal` is empty"), "{}", replies[0]);
    let turns =
        vec![call("d", "delegate", json!({"goal": "x", "scop": "docs"})), ScriptTurn::text("done")];
    let (_, replies, _) = run(turns, Vec::new(), true).await;
    assert!(replies[0].contains("scop"), "{}", replies[0]);
}
