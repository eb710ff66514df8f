//! Tests of the loop as a whole, with a scripted model, a fake tool gate that really writes into
//! a temporary workspace, and the plan tools answered inside: the honest run, the gate refusing
//! then accepting, the refusal cap, the gate off, the reminder, and the ways a loop stops early.

use std::collections::HashMap;
use std::path::PathBuf;

use pev_protocol::{Step, StepId};
use pev_providers::script::{FailureKind, ScriptTurn, ScriptedClient};
use pev_providers::{TokenUsage, ToolSpec};
use pev_tools::Workspace;
use serde_json::json;
use tempfile::TempDir;

use super::*;
use crate::agent::test_clients::{BROKE_MESSAGE, Broke};

/// A gate that records the calls and carries out `file_write` in the workspace; anything else
/// answers "ok", or the fatal error it was given.
struct FakeGate {
    root: PathBuf,
    calls: Vec<(String, Value)>,
    fatal: Option<String>,
}

impl ToolGate for FakeGate {
    fn call<'a>(&'a mut self, tool: &'a str, arguments: Value) -> BoxFuture<'a, GateResult> {
        self.calls.push((tool.to_owned(), arguments.clone()));
        let result = if let Some(why) = self.fatal.clone() {
            GateResult { output: Err(why), fatal: true }
        } else if tool == "file_write" {
            let path = self.root.join(arguments["path"].as_str().unwrap());
            std::fs::write(path, arguments["content"].as_str().unwrap()).unwrap();
            GateResult { output: Ok(json!({"bytes": 1})), fatal: false }
        } else {
            GateResult { output: Ok(json!("ok")), fatal: false }
        };
        Box::pin(async move { result })
    }
}

struct Fixture {
    _dir: TempDir,
    ctx: Arc<ToolContext>,
    gate: FakeGate,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("style.css"), "body { background: white; }").unwrap();
        let ctx = Arc::new(ToolContext::new(Workspace::open(dir.path()).unwrap()));
        let gate = FakeGate { root: dir.path().to_owned(), calls: Vec::new(), fatal: None };
        Self { _dir: dir, ctx, gate }
    }

    fn executor(&self, client: Arc<dyn ModelClient>, options: LoopOptions) -> LoopExecutor {
        LoopExecutor::new(client, "loop-model".into(), options, self.ctx.clone())
    }
}

const GOAL: &str = "Make the page background dark green and check the page";

fn request(goal: &str) -> InstructionRequest {
    InstructionRequest {
        run_goal: goal.into(),
        step: Step { id: StepId::new("loop"), description: Some(goal.into()), ..Step::default() },
        attempt: 1,
        max_attempts: 1,
        inputs: HashMap::new(),
        feedback: Vec::new(),
        tools: vec![tool("file_read"), tool("file_write")],
        budget_note: Some("$0.50 left".into()),
    }
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: format!("the {name} tool"),
        input_schema: json!({"type": "object"}),
    }
}

fn call(id: &str, name: &str, input: Value) -> ScriptTurn {
    ScriptTurn::blocks(vec![ContentBlock::ToolUse { id: id.into(), name: name.into(), input }])
        .with_usage(TokenUsage { input_tokens: 10, output_tokens: 2, ..TokenUsage::default() })
}

fn plan_turn() -> ScriptTurn {
    call(
        "plan",
        "plan_create",
        json!({
            "objective": "Dark green page",
            "steps": [{"id": "patch", "title": "Patch the body rule", "assertions": [
                {"type": "file_contains", "path": "style.css", "pattern": "#006400"}]}],
            "postconditions": [{"description": "The page is green", "assertions": [
                {"type": "file_contains", "path": "style.css", "pattern": "#006400"}]}]
        }),
    )
}

fn write_turn() -> ScriptTurn {
    call(
        "w",
        "file_write",
        json!({"path": "style.css", "content": "body { background: #006400; }"}),
    )
}

fn done_turn() -> ScriptTurn {
    call("d", "step_update", json!({"id": "patch", "status": "done", "evidence": "wrote #006400"}))
}

fn verify_turn() -> ScriptTurn {
    call("v", "postcondition_verify", json!({"id": "p1", "evidence": "the file has #006400"}))
}

/// The tool results (and any text) of the last message of `request`.
fn last_user(request: &ChatRequest) -> Vec<ContentBlock> {
    let last = request.messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    last.content.clone()
}

fn text_of(block: &ContentBlock) -> &str {
    match block {
        ContentBlock::Text { text } => text,
        ContentBlock::ToolResult { content, .. } => content,
        other => panic!("unexpected block {other:?}"),
    }
}

#[tokio::test]
async fn an_honest_run_plans_works_verifies_and_is_accepted() {
    let mut f = Fixture::new();
    let client = Arc::new(ScriptedClient::from_turns(
        "honest",
        vec![
            plan_turn(),
            write_turn(),
            done_turn(),
            verify_turn(),
            ScriptTurn::text("  The background is now #006400.  "),
        ],
    ));
    let executor = f.executor(client.clone(), LoopOptions::default());
    let outcome = executor.execute(&request(GOAL), &mut f.gate).await;

    assert_eq!(outcome.interrupted, None);
    assert_eq!(outcome.summary, "The background is now #006400.");
    assert_eq!((outcome.turns, outcome.model_calls), (5, 5));
    assert_eq!(outcome.usage.input_tokens, 40);
    // Only the workspace tool went through the gate.
    let names: Vec<&str> = f.gate.calls.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["file_write"]);

    let report = executor.report();
    assert_eq!(report.final_answer.as_deref(), Some("The background is now #006400."));
    assert_eq!((report.refusals, report.premature_finalizations), (0, 0));
    assert!(!report.gate_exhausted);
    assert!(report.multi_step_goal);
    assert_eq!((report.rounds, report.plan_tool_calls), (5, 3));
    assert_eq!(report.revisions.len(), 1);
    let plan = report.plan.unwrap();
    assert_eq!(plan.steps[0].status, StepStatus::Done);
    assert_eq!(plan.postconditions[0].verified_by, Some(VerifiedBy::Harness));

    let sent = client.requests();
    let tools: Vec<&str> = sent[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        tools,
        [
            "plan_create",
            "plan_show",
            "step_update",
            "postcondition_verify",
            "todo_write",
            "file_read",
            "file_write"
        ]
    );
    assert_eq!(sent[0].model, "loop-model");
    assert_eq!(sent[0].max_tokens, 4096);
    assert_eq!(
        sent[0].messages[0],
        Message::user(format!("Task: {GOAL}\n\nStart now, using the tools."))
    );
    let system = sent[0].system.as_deref().unwrap();
    assert!(system.contains("This task has several parts: start by calling plan_create."));
    assert!(system.contains("Workspace tools: file_read, file_write."));
    assert!(system.contains("You have at most 50 rounds."));
    assert!(system.contains("$0.50 left. Spend it on the work"));
    // The plan tool answered with the rendered plan, paired by id.
    let first = last_user(&sent[1]);
    let ContentBlock::ToolResult { tool_use_id, content, is_error } = &first[0] else { panic!() };
    assert_eq!((tool_use_id.as_str(), *is_error), ("plan", false));
    assert!(content.starts_with("Plan created (revision 1): 1 steps, 1 postconditions."));
}

#[tokio::test]
async fn false_evidence_is_refused_with_what_the_harness_saw() {
    let mut f = Fixture::new();
    let client = Arc::new(ScriptedClient::from_turns(
        "liar",
        vec![plan_turn(), done_turn(), ScriptTurn::text("never reached")],
    ));
    let options = LoopOptions { max_refusals: 1, ..LoopOptions::default() };
    let executor = f.executor(client.clone(), options);
    executor.execute(&request(GOAL), &mut f.gate).await;

    let results = last_user(&client.requests()[2]);
    let ContentBlock::ToolResult { content, is_error, .. } = &results[0] else { panic!() };
    assert!(is_error);
    assert!(
        content.starts_with(
            "step_update refused: step `patch` stays pending: 1 of 1 assertions failed:\n- \
             file_contains: "
        ),
        "{content}"
    );
    assert_eq!(executor.report().plan.unwrap().steps[0].status, StepStatus::Pending);
}

#[tokio::test]
async fn the_gate_refuses_a_premature_answer_then_accepts_the_finished_work() {
    let mut f = Fixture::new();
    let client = Arc::new(ScriptedClient::from_turns(
        "lazy-then-honest",
        vec![
            plan_turn(),
            ScriptTurn::text("All done!"),
            write_turn(),
            done_turn(),
            verify_turn(),
            ScriptTurn::text("Really done."),
        ],
    ));
    let executor = f.executor(client.clone(), LoopOptions::default());
    let outcome = executor.execute(&request(GOAL), &mut f.gate).await;

    assert_eq!(outcome.interrupted, None);
    assert_eq!(outcome.summary, "Really done.");
    let sent = client.requests();
    // The refusal is the user message right after the premature answer.
    let refusal = last_user(&sent[2]);
    assert_eq!(refusal.len(), 1);
    assert_eq!(
        text_of(&refusal[0]),
        "Final answer refused (1 of 3; at 3 the run ends unfinished): the task is not finished.\n\
         What is missing:\n\
         - step `patch` (Patch the body rule) is pending\n\
         - postcondition p1 (The page is green) is not verified: call postcondition_verify with \
         evidence\n\
         Do the remaining work with the tools and record it (step_update with evidence, \
         postcondition_verify), or mark a step blocked with a reason if it truly cannot be done. \
         Then give your final answer.\n\n\
         Current plan:\n\
         Objective: Dark green page\n\
         Steps:\n\
         [ ] 1. patch: Patch the body rule [checks: file_contains]\n\
         Postconditions:\n\
         [✗] p1. The page is green — not verified\n"
    );
    assert_eq!(sent[2].messages[3].role, Role::Assistant);
    let report = executor.report();
    assert_eq!((report.refusals, report.premature_finalizations), (1, 1));
    assert_eq!(report.final_answer.as_deref(), Some("Really done."));
    assert!(!report.gate_exhausted);
}

#[tokio::test]
async fn the_refusal_cap_ends_the_loop_without_an_answer() {
    let mut f = Fixture::new();
    let client = Arc::new(ScriptedClient::from_turns(
        "lazy",
        vec![
            ScriptTurn::text("Done."),
            ScriptTurn::text("Done, really."),
            ScriptTurn::text("I insist."),
            ScriptTurn::text("never asked"),
        ],
    ));
    let executor = f.executor(client.clone(), LoopOptions::default());
    let outcome = executor.execute(&request(GOAL), &mut f.gate).await;

    assert_eq!(
        outcome.interrupted,
        Some(Interruption::Provider(
            "the finalization gate refused 3 final answers: no plan: this goal has several \
             parts, so call plan_create with its steps and postconditions, then carry them out"
                .into()
        ))
    );
    assert_eq!(outcome.summary, "");
    assert_eq!(outcome.turns, 3);
    assert_eq!(client.remaining(), 1);
    let report = executor.report();
    assert!(report.gate_exhausted);
    assert_eq!((report.refusals, report.premature_finalizations), (3, 3));
    assert_eq!(report.final_answer, None);
    assert!(report.plan.is_none());
}

#[tokio::test]
async fn with_the_gate_off_the_first_answer_is_accepted_and_counted_premature() {
    let mut f = Fixture::new();
    let client = Arc::new(ScriptedClient::from_turns(
        "lazy",
        vec![plan_turn(), ScriptTurn::text("Done."), ScriptTurn::text("never asked")],
    ));
    let options = LoopOptions { gate: false, ..LoopOptions::default() };
    let executor = f.executor(client.clone(), options);
    let outcome = executor.execute(&request(GOAL), &mut f.gate).await;

    assert_eq!(outcome.interrupted, None);
    assert_eq!(outcome.summary, "Done.");
    let report = executor.report();
    assert_eq!((report.refusals, report.premature_finalizations), (0, 1));
    assert_eq!(report.final_answer.as_deref(), Some("Done."));
    assert_eq!(report.plan.unwrap().steps[0].status, StepStatus::Pending);
    // The model was told the same thing as with the gate on.
    let on = system_prompt(&request(GOAL), &LoopOptions::default(), true);
    assert_eq!(client.requests()[0].system.as_deref(), Some(on.as_str()));
}

#[tokio::test]
async fn a_single_step_goal_may_finish_without_a_plan() {
    let mut f = Fixture::new();
    let client = Arc::new(ScriptedClient::from_turns(
        "quick",
        vec![write_turn(), ScriptTurn::text("Set it to #006400.")],
    ));
    let executor = f.executor(client.clone(), LoopOptions::default());
    let outcome =
        executor.execute(&request("Change the background to dark green"), &mut f.gate).await;
    assert_eq!(outcome.interrupted, None);
    let report = executor.report();
    assert!(!report.multi_step_goal);
    assert_eq!(report.premature_finalizations, 0);
    let system = client.requests()[0].system.clone().unwrap();
    assert!(system.contains("If the task needs more than one step, start by calling plan_create."));
}

#[tokio::test]
async fn a_reminder_follows_rounds_without_a_plan_or_todo_update() {
    let mut f = Fixture::new();
    let read = |id: &str| call(id, "file_read", json!({"path": "style.css"}));
    let client = Arc::new(ScriptedClient::from_turns(
        "wanderer",
        vec![
            read("r1"),
            read("r2"),
            call(
                "t",
                "todo_write",
                json!({"todos": [{"content": "Patch", "active_form": "Patching", "status": "in_progress"}]}),
            ),
            read("r3"),
            call("s", "plan_show", json!({})),
            ScriptTurn::text("stop"),
        ],
    ));
    let options = LoopOptions { reminder_every: 2, gate: false, ..LoopOptions::default() };
    let executor = f.executor(client.clone(), options);
    executor.execute(&request(GOAL), &mut f.gate).await;

    let sent = client.requests();
    // After round 1: just the result. After round 2: the result and the reminder.
    assert_eq!(last_user(&sent[1]).len(), 1);
    let second = last_user(&sent[2]);
    assert_eq!(second.len(), 2);
    assert!(text_of(&second[1]).starts_with("Reminder: 2 rounds without a plan or todo update."));
    assert!(matches!(second[1], ContentBlock::Text { .. }));
    // todo_write resets the count; plan_show does not count as an update.
    let third = last_user(&sent[3]);
    assert_eq!(text_of(&third[0]), "Todo list (0 of 1 completed):\n[~] Patching\n");
    assert_eq!(last_user(&sent[4]).len(), 1);
    assert_eq!(last_user(&sent[5]).len(), 2);
    let report = executor.report();
    assert_eq!(report.todo.len(), 1);
    assert_eq!(report.plan_tool_calls, 2);
}

#[tokio::test]
async fn the_round_limit_interrupts() {
    let mut f = Fixture::new();
    let read = |id: &str| call(id, "file_read", json!({}));
    let client =
        Arc::new(ScriptedClient::from_turns("busy", vec![read("1"), read("2"), read("3")]));
    let options = LoopOptions { max_rounds: 2, ..LoopOptions::default() };
    let executor = f.executor(client.clone(), options);
    let outcome = executor.execute(&request(GOAL), &mut f.gate).await;
    assert_eq!(outcome.interrupted, Some(Interruption::TurnLimit(2)));
    assert_eq!(outcome.summary, "");
    assert_eq!(f.gate.calls.len(), 2);
    assert_eq!(executor.report().rounds, 2);
}

#[tokio::test]
async fn provider_and_budget_errors_interrupt() {
    let mut f = Fixture::new();
    let outcome = f
        .executor(Arc::new(Broke), LoopOptions::default())
        .execute(&request(GOAL), &mut f.gate)
        .await;
    assert_eq!(outcome.interrupted, Some(Interruption::Budget(BROKE_MESSAGE.into())));
    assert_eq!(outcome.model_calls, 0);

    let client = Arc::new(ScriptedClient::from_turns(
        "flaky",
        vec![plan_turn(), ScriptTurn::failure(FailureKind::Server, None)],
    ));
    let executor = f.executor(client, LoopOptions::default());
    let outcome = executor.execute(&request(GOAL), &mut f.gate).await;
    let Some(Interruption::Provider(message)) = &outcome.interrupted else { panic!("{outcome:?}") };
    assert!(message.contains("server error 500"), "{message}");
    assert_eq!((outcome.turns, outcome.model_calls), (1, 2));
    // The plan made before the error is in the report.
    assert_eq!(executor.report().revisions.len(), 1);
}

#[tokio::test]
async fn a_fatal_gate_result_ends_the_loop_and_unknown_tools_never_reach_the_gate() {
    let mut f = Fixture::new();
    let client = Arc::new(ScriptedClient::from_turns(
        "fatal",
        vec![
            call("x", "shell_exec", json!({"command": "ls"})),
            write_turn(),
            ScriptTurn::text("never asked"),
        ],
    ));
    f.gate.fatal = Some("approval refused for file_write".into());
    let executor = f.executor(client.clone(), LoopOptions::default());
    let outcome = executor.execute(&request(GOAL), &mut f.gate).await;

    assert_eq!(
        outcome.interrupted,
        Some(Interruption::Provider(
            "the tool call file_write could not be made: approval refused for file_write".into()
        ))
    );
    let sent = client.requests();
    assert_eq!(sent.len(), 2);
    let unknown = last_user(&sent[1]);
    let ContentBlock::ToolResult { content, is_error, .. } = &unknown[0] else { panic!() };
    assert!(is_error);
    assert_eq!(
        content,
        "unknown tool shell_exec; available: plan_create, plan_show, step_update, \
         postcondition_verify, todo_write, file_read, file_write"
    );
    let names: Vec<&str> = f.gate.calls.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["file_write"]);
}

#[tokio::test]
async fn a_workspace_tool_named_like_a_plan_tool_is_answered_by_the_harness() {
    let mut f = Fixture::new();
    let client = Arc::new(ScriptedClient::from_turns(
        "shadow",
        vec![call("s", "plan_show", json!({})), ScriptTurn::text("ok")],
    ));
    let mut req = request("Change the background");
    req.tools.push(tool("plan_show"));
    let executor = f.executor(client.clone(), LoopOptions::default());
    executor.execute(&req, &mut f.gate).await;
    assert!(f.gate.calls.is_empty());
    let tools: Vec<String> = client.requests()[0].tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(tools.iter().filter(|t| *t == "plan_show").count(), 1);
}

/// The answers real models give, in loop mode: prose before a call, a call cut off at the token
/// limit (not made, answered, asked to go on), an empty answer (asked once to go on), a step
/// named by its position. The run still ends only through the gate, on recorded evidence.
#[tokio::test]
async fn cut_off_and_empty_answers_and_positions_are_handled_on_the_way_to_an_honest_finish() {
    let mut f = Fixture::new();
    let cut = ScriptTurn {
        stop_reason: Some(pev_providers::StopReason::MaxTokens),
        ..ScriptTurn::blocks(vec![ContentBlock::ToolUse {
            id: "cut".into(),
            name: "file_write".into(),
            input: json!({"path": "style.css"}),
        }])
    };
    let prose_then_write = ScriptTurn::blocks(vec![
        ContentBlock::text("I'll write the rule now."),
        ContentBlock::ToolUse {
            id: "w".into(),
            name: "file_write".into(),
            input: json!({"path": "style.css", "content": "body { background: #006400; }"}),
        },
    ]);
    let done_by_position =
        call("d", "step_update", json!({"id": "1", "status": "done", "evidence": "wrote it"}));
    let client = Arc::new(ScriptedClient::from_turns(
        "real answers",
        vec![
            plan_turn(),
            cut,
            ScriptTurn::blocks(Vec::new()),
            prose_then_write,
            done_by_position,
            verify_turn(),
            ScriptTurn::text("The background is now #006400."),
        ],
    ));
    let executor = f.executor(client.clone(), LoopOptions::default());
    let outcome = executor.execute(&request(GOAL), &mut f.gate).await;

    assert_eq!(outcome.interrupted, None);
    assert_eq!(outcome.summary, "The background is now #006400.");
    // The cut-off call never reached the gate.
    assert_eq!(f.gate.calls.len(), 1);
    let sent = client.requests();
    let after_cut = last_user(&sent[2]);
    assert!(text_of(&after_cut[0]).contains("it was not made"));
    assert!(text_of(&after_cut[1]).contains("cut off at the token limit"));
    assert!(text_of(&last_user(&sent[3])[0]).starts_with("Your answer was empty."));
    assert!(text_of(&last_user(&sent[5])[0]).starts_with("Step `patch` is done."));
    assert_eq!(executor.report().plan.unwrap().steps[0].status, StepStatus::Done);
}

/// A refusal stops the loop with the model's reason.
#[tokio::test]
async fn a_refusal_stops_the_loop_with_its_reason() {
    let mut f = Fixture::new();
    let refusal = ScriptTurn {
        stop_reason: Some(pev_providers::StopReason::Refusal),
        ..ScriptTurn::text("I won't do that.")
    };
    let client = Arc::new(ScriptedClient::from_turns("refuse", vec![refusal]));
    let executor = f.executor(client, LoopOptions::default());
    let outcome = executor.execute(&request(GOAL), &mut f.gate).await;
    assert_eq!(
        outcome.interrupted,
        Some(Interruption::Provider("the agent model refused to answer: I won't do that.".into()))
    );
    assert!(executor.report().final_answer.is_none());
}
