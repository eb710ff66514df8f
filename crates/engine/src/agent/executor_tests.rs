//! Tests of the executor model's tool loop (with a scripted model and a recording gate) and of
//! its step-scoped system prompt.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use pev_protocol::{Assertion, Step, StepId};
use pev_providers::script::{FailureKind, ScriptTurn, ScriptedClient};
use pev_providers::{
    ChatRequest, ContentBlock, ModelClient, Role, TokenUsage, ToolChoice, ToolSpec,
};
use serde_json::{Value, json};

use super::*;
use crate::agent::test_clients::{BROKE_MESSAGE, Broke};

/// A gate that records the calls it receives and answers from a script (then "ok").
#[derive(Default)]
struct FakeGate {
    calls: Vec<(String, Value)>,
    results: VecDeque<GateResult>,
}

impl FakeGate {
    fn answering(results: Vec<GateResult>) -> Self {
        Self { calls: Vec::new(), results: results.into() }
    }
}

impl ToolGate for FakeGate {
    fn call<'a>(&'a mut self, tool: &'a str, arguments: Value) -> BoxFuture<'a, GateResult> {
        self.calls.push((tool.to_owned(), arguments));
        let result = self
            .results
            .pop_front()
            .unwrap_or(GateResult { output: Ok(json!("ok")), fatal: false });
        Box::pin(async move { result })
    }
}

fn ok(value: Value) -> GateResult {
    GateResult { output: Ok(value), fatal: false }
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: format!("the {name} tool"),
        input_schema: json!({"type": "object"}),
    }
}

fn tool_use(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolUse { id: id.to_owned(), name: name.to_owned(), input }
}

fn usage(input: u64, output: u64) -> TokenUsage {
    TokenUsage { input_tokens: input, output_tokens: output, ..TokenUsage::default() }
}

fn step() -> Step {
    Step {
        id: StepId::new("patch-css"),
        title: Some("Patch the body rule".into()),
        description: Some("Set the body background of site/style.css to dark green.".into()),
        depends_on: vec![StepId::new("read-css")],
        acceptance_criteria: vec!["The page background is dark green (#006400)".into()],
        assertions: vec![Assertion::FileContains {
            path: "site/style.css".into(),
            pattern: "#006400".into(),
            regex: false,
            recovery: Some("edit the body rule, not a comment".into()),
        }],
        ..Step::default()
    }
}

fn request() -> InstructionRequest {
    InstructionRequest {
        run_goal: "Change the site background to dark green".into(),
        step: step(),
        attempt: 1,
        max_attempts: 3,
        inputs: HashMap::from([(
            "read-css".to_owned(),
            json!({"content": "body { background: white; }"}),
        )]),
        feedback: Vec::new(),
        tools: vec![tool("file_read"), tool("file_write")],
        budget_note: None,
    }
}

fn executor(client: Arc<dyn ModelClient>, max_turns: u32) -> ModelExecutor {
    let options = ExecutorOptions { max_turns_per_step: max_turns, max_tokens: 1234 };
    ModelExecutor::new(client, "exec-model".into(), options)
}

/// The tool results of the last message of `request`, as (id, content, is_error).
fn last_results(request: &ChatRequest) -> Vec<(String, String, bool)> {
    let last = request.messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    last.content
        .iter()
        .map(|b| match b {
            ContentBlock::ToolResult { tool_use_id, content, is_error } => {
                (tool_use_id.clone(), content.clone(), *is_error)
            }
            other => panic!("expected only tool results, got {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn two_turn_tool_loop_pairs_results_by_id_and_returns_the_summary() {
    let write = json!({"path": "site/style.css", "content": "body { background: #006400; }"});
    let client = Arc::new(ScriptedClient::from_turns(
        "loop",
        vec![
            ScriptTurn::blocks(vec![
                ContentBlock::text("Writing the file."),
                tool_use("tu_1", "file_write", write.clone()),
            ])
            .with_usage(usage(100, 20)),
            ScriptTurn::text("  Set the body background to #006400 in site/style.css.  ")
                .with_usage(usage(150, 30)),
        ],
    ));
    let mut gate = FakeGate::answering(vec![ok(json!({"bytes_written": 29}))]);
    let outcome = executor(client.clone(), 12).execute(&request(), &mut gate).await;

    assert_eq!(gate.calls, vec![("file_write".to_owned(), write)]);
    assert_eq!(outcome.summary, "Set the body background to #006400 in site/style.css.");
    assert_eq!(outcome.interrupted, None);
    assert_eq!((outcome.turns, outcome.model_calls), (2, 2));
    assert_eq!(outcome.usage, usage(250, 50));
    assert_eq!(outcome.cost_usd, 0.0);

    let sent = client.requests();
    assert_eq!(sent.len(), 2);
    let first = &sent[0];
    assert_eq!(first.model, "exec-model");
    assert_eq!(first.max_tokens, 1234);
    assert_eq!(first.tool_choice, ToolChoice::Auto);
    assert!(first.cache);
    assert_eq!(first.tools, request().tools);
    assert_eq!(first.messages.len(), 1);
    assert!(first.system.as_deref().unwrap().contains("id: patch-css"));

    let second = &sent[1];
    assert_eq!(second.messages.len(), 3);
    assert_eq!(second.messages[1].role, Role::Assistant);
    assert!(
        matches!(&second.messages[1].content[1], ContentBlock::ToolUse { id, .. } if id == "tu_1")
    );
    assert_eq!(
        last_results(second),
        vec![("tu_1".to_owned(), r#"{"bytes_written":29}"#.to_owned(), false)]
    );
}

#[tokio::test]
async fn several_calls_in_one_turn_answer_in_order_with_errors_marked() {
    let client = Arc::new(ScriptedClient::from_turns(
        "multi",
        vec![
            ScriptTurn::blocks(vec![
                tool_use("a", "file_read", json!({"path": "x"})),
                tool_use("b", "shell_exec", json!({"command": "rm -rf /"})),
                tool_use("c", "file_write", json!({"path": "y"})),
            ]),
            ScriptTurn::text("done"),
        ],
    ));
    let mut gate = FakeGate::answering(vec![
        ok(json!("line 1\nline 2")),
        GateResult { output: Err("path y is outside the workspace".into()), fatal: false },
    ]);
    let outcome = executor(client.clone(), 12).execute(&request(), &mut gate).await;

    // The unknown tool never reaches the gate.
    let names: Vec<&str> = gate.calls.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["file_read", "file_write"]);
    assert_eq!(outcome.interrupted, None);
    assert_eq!(
        last_results(&client.requests()[1]),
        vec![
            ("a".to_owned(), "line 1\nline 2".to_owned(), false),
            (
                "b".to_owned(),
                "unknown tool shell_exec; available: file_read, file_write".to_owned(),
                true
            ),
            ("c".to_owned(), "path y is outside the workspace".to_owned(), true),
        ]
    );
}

#[tokio::test]
async fn the_turn_limit_interrupts_after_the_last_allowed_turn() {
    let turn = |id: &str| {
        ScriptTurn::blocks(vec![tool_use(id, "file_read", json!({"path": "x"}))])
            .with_usage(usage(10, 1))
    };
    let client =
        Arc::new(ScriptedClient::from_turns("busy", vec![turn("1"), turn("2"), turn("3")]));
    let mut gate = FakeGate::default();
    let outcome = executor(client.clone(), 2).execute(&request(), &mut gate).await;

    assert_eq!(outcome.interrupted, Some(Interruption::TurnLimit(2)));
    assert_eq!((outcome.turns, outcome.model_calls), (2, 2));
    assert_eq!(outcome.usage, usage(20, 2));
    assert_eq!(client.requests().len(), 2);
    assert_eq!(client.remaining(), 1);
    // The second turn's call was made: its effect is real and the verifier should see it.
    assert_eq!(gate.calls.len(), 2);
    assert!(client.requests()[0].system.as_deref().unwrap().contains("at most 2 turns"));
}

#[tokio::test]
async fn a_provider_error_interrupts_with_its_message() {
    let client = Arc::new(ScriptedClient::from_turns(
        "flaky",
        vec![
            ScriptTurn::blocks(vec![tool_use("1", "file_read", json!({}))]).with_usage(usage(7, 3)),
            ScriptTurn::failure(FailureKind::Server, None),
        ],
    ));
    let mut gate = FakeGate::default();
    let outcome = executor(client, 12).execute(&request(), &mut gate).await;

    let Some(Interruption::Provider(message)) = &outcome.interrupted else {
        panic!("expected a provider interruption, got {:?}", outcome.interrupted);
    };
    assert!(message.contains("server error 500"), "{message}");
    assert_eq!((outcome.turns, outcome.model_calls), (1, 2));
    assert_eq!(outcome.usage, usage(7, 3));
}

#[tokio::test]
async fn a_refused_budget_is_a_budget_interruption_and_no_call() {
    let mut gate = FakeGate::default();
    let outcome = executor(Arc::new(Broke), 12).execute(&request(), &mut gate).await;
    assert_eq!(outcome.interrupted, Some(Interruption::Budget(BROKE_MESSAGE.into())));
    assert_eq!((outcome.turns, outcome.model_calls), (0, 0));
    assert!(gate.calls.is_empty());
}

#[tokio::test]
async fn a_fatal_gate_result_ends_the_attempt_at_once() {
    let client = Arc::new(ScriptedClient::from_turns(
        "fatal",
        vec![
            ScriptTurn::blocks(vec![
                ContentBlock::text("Patching."),
                tool_use("1", "file_write", json!({"path": "a"})),
                tool_use("2", "file_write", json!({"path": "b"})),
            ]),
            ScriptTurn::text("never asked"),
        ],
    ));
    let mut gate = FakeGate::answering(vec![GateResult {
        output: Err("approval refused for file_write".into()),
        fatal: true,
    }]);
    let outcome = executor(client.clone(), 12).execute(&request(), &mut gate).await;

    assert_eq!(
        outcome.interrupted,
        Some(Interruption::Provider(
            "the tool call file_write could not be made: approval refused for file_write".into()
        ))
    );
    assert_eq!(gate.calls.len(), 1);
    assert_eq!(client.requests().len(), 1);
    assert_eq!(outcome.summary, "Patching.");
}

#[tokio::test]
async fn big_tool_outputs_are_capped_with_a_note() {
    let big = "é".repeat(20_000); // 40,000 bytes
    let client = Arc::new(ScriptedClient::from_turns(
        "big",
        vec![
            ScriptTurn::blocks(vec![tool_use("r", "file_read", json!({"path": "big.txt"}))]),
            ScriptTurn::text("read it"),
        ],
    ));
    let mut gate = FakeGate::answering(vec![ok(Value::String(big))]);
    executor(client.clone(), 12).execute(&request(), &mut gate).await;

    let results = last_results(&client.requests()[1]);
    let (_, content, is_error) = &results[0];
    assert!(!is_error);
    let (head, note) = content.split_once('\n').unwrap();
    // 16,384 is even, so the cut falls between two 2-byte chars.
    assert_eq!(head.len(), TOOL_OUTPUT_CAP);
    assert!(head.chars().all(|c| c == 'é'));
    assert_eq!(note, format!("… truncated {} bytes", 40_000 - TOOL_OUTPUT_CAP));
}

#[test]
fn cap_text_cuts_on_a_char_boundary() {
    assert_eq!(cap_text("short", 10), "short");
    assert_eq!(cap_text("abcdef", 6), "abcdef");
    // "aé" is 3 bytes; a 2-byte cap would split the é.
    assert_eq!(cap_text("aébc", 2), "a\n… truncated 4 bytes");
    assert_eq!(cap_text("€€", 1), "\n… truncated 6 bytes");
}

fn prompt_request() -> InstructionRequest {
    let mut r = request();
    r.inputs.insert("read-css".into(), Value::String(format!("DEPSTART{}", "x".repeat(10_000))));
    r.inputs.insert("unrelated-step".into(), json!("SECRET-OTHER-OUTPUT"));
    r.feedback = vec![
        "file_contains site/style.css \"#006400\" failed: pattern not found\nrecovery: edit the \
         body rule"
            .into(),
        "judge: the header was changed instead of the body".into(),
    ];
    r.budget_note = Some("$0.42 of $1.00 left, 12 of 40 model calls left".into());
    r.attempt = 3;
    r
}

#[test]
fn the_prompt_holds_the_step_its_checks_its_inputs_and_its_feedback() {
    let p = system_prompt(&prompt_request(), 12);

    assert!(p.contains("Change the site background to dark green"), "{p}");
    assert!(p.contains("id: patch-css"));
    assert!(p.contains("title: Patch the body rule"));
    assert!(p.contains("attempt: 3 of 3"));
    assert!(p.contains("Set the body background of site/style.css to dark green."));
    assert!(p.contains("- The page background is dark green (#006400)"));
    assert!(p.contains(
        r##"- {"type":"file_contains","path":"site/style.css","pattern":"#006400","recovery":"edit the body rule, not a comment"}"##
    ));
    // The dependency's output, capped.
    assert!(p.contains("### read-css\nDEPSTART"));
    assert!(p.contains(&format!("… truncated {} bytes", 10_008 - INPUT_CAP)));
    assert!(!p.contains(&"x".repeat(INPUT_CAP)));
    // Feedback verbatim, as a numbered list.
    assert!(p.contains(
        "1. file_contains site/style.css \"#006400\" failed: pattern not found\nrecovery: edit \
         the body rule\n"
    ));
    assert!(p.contains("2. judge: the header was changed instead of the body\n"));
    assert!(p.contains("$0.42 of $1.00 left, 12 of 40 model calls left"));
    assert!(p.contains("claim of success is not believed"));
    assert!(p.contains("one-paragraph summary"));
    // A step it does not depend on stays out.
    assert!(!p.contains("unrelated-step"));
    assert!(!p.contains("SECRET-OTHER-OUTPUT"));
}

#[test]
fn a_first_attempt_prompt_has_no_feedback_or_budget_section() {
    let mut r = request();
    r.inputs.clear();
    let p = system_prompt(&r, 12);
    assert!(!p.contains("Why earlier attempts failed"));
    assert!(!p.contains("## Budget"));
    assert!(!p.contains("## Outputs of the steps"));
    assert!(p.contains("attempt: 1 of 3"));
}

#[tokio::test]
async fn the_sent_request_carries_the_scoped_prompt() {
    let client = Arc::new(ScriptedClient::from_turns("scoped", vec![ScriptTurn::text("done")]));
    let mut gate = FakeGate::default();
    let outcome = executor(client.clone(), 12).execute(&prompt_request(), &mut gate).await;
    assert_eq!(outcome.summary, "done");

    let sent = client.requests();
    let system = sent[0].system.as_deref().unwrap();
    assert_eq!(system, system_prompt(&prompt_request(), 12));
    assert!(system.contains("judge: the header was changed instead of the body"));
    let everything = serde_json::to_string(&sent[0]).unwrap();
    assert!(!everything.contains("SECRET-OTHER-OUTPUT"));
}

/// An answer cut off at the token limit: its call is not made (its arguments may be cut short),
/// every `tool_use` still gets a result, and the model is asked to go on more briefly.
#[tokio::test]
async fn a_call_cut_off_at_the_token_limit_is_not_made() {
    let cut = ScriptTurn {
        stop_reason: Some(pev_providers::StopReason::MaxTokens),
        ..ScriptTurn::blocks(vec![
            ContentBlock::text("Writing the whole file."),
            tool_use("big", "file_write", json!({"path": "site/style.css"})),
        ])
    };
    let client = Arc::new(ScriptedClient::from_turns(
        "cut",
        vec![
            cut,
            ScriptTurn::blocks(vec![tool_use("small", "file_write", json!({"path": "a"}))]),
            ScriptTurn::text("done in smaller pieces"),
        ],
    ));
    let mut gate = FakeGate::default();
    let outcome = executor(client.clone(), 12).execute(&request(), &mut gate).await;

    assert_eq!(gate.calls, vec![("file_write".to_owned(), json!({"path": "a"}))]);
    assert_eq!(outcome.interrupted, None);
    assert_eq!(outcome.summary, "done in smaller pieces");
    let second = &client.requests()[1];
    let reply = &second.messages.last().unwrap().content;
    assert!(matches!(
        &reply[0],
        ContentBlock::ToolResult { tool_use_id, is_error: true, content }
            if tool_use_id == "big" && content.contains("it was not made")
    ));
    assert!(matches!(&reply[1], ContentBlock::Text { text } if text.contains("1234 tokens")));
}

/// A refusal ends the attempt with the model's reason; nothing it holds is acted on.
#[tokio::test]
async fn a_refusal_interrupts_the_attempt_with_its_reason() {
    let refusal = ScriptTurn {
        stop_reason: Some(pev_providers::StopReason::Refusal),
        ..ScriptTurn::blocks(vec![
            ContentBlock::text("I can't help with that."),
            tool_use("t", "file_write", json!({"path": "a"})),
        ])
    };
    let client = Arc::new(ScriptedClient::from_turns("refuse", vec![refusal]));
    let mut gate = FakeGate::default();
    let outcome = executor(client, 12).execute(&request(), &mut gate).await;
    assert!(gate.calls.is_empty());
    assert_eq!(
        outcome.interrupted,
        Some(Interruption::Provider(
            "the executor model refused to answer: I can't help with that.".into()
        ))
    );
}

/// An empty answer is asked once to go on; a second one ends the attempt (the evidence decides).
#[tokio::test]
async fn an_empty_answer_is_asked_once_to_go_on() {
    let client = Arc::new(ScriptedClient::from_turns(
        "empty",
        vec![
            ScriptTurn::blocks(Vec::new()),
            ScriptTurn::blocks(vec![tool_use("w", "file_write", json!({"path": "a"}))]),
            ScriptTurn::text("  "),
            ScriptTurn::text("never asked"),
        ],
    ));
    let mut gate = FakeGate::default();
    let outcome = executor(client.clone(), 12).execute(&request(), &mut gate).await;
    assert_eq!(gate.calls.len(), 1);
    assert_eq!(outcome.interrupted, None);
    assert_eq!((outcome.turns, outcome.summary.as_str()), (3, ""));
    let second = &client.requests()[1];
    assert!(matches!(
        &second.messages.last().unwrap().content[0],
        ContentBlock::Text { text } if text.starts_with("Your answer was empty.")
    ));
    assert_eq!(client.remaining(), 1);
}
