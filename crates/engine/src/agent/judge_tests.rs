//! Tests of the judge with a scripted model: verdicts by confidence, a confident "no" that
//! overrules a "pass", invalid answers retried, provider and budget failures, and the evidence
//! the prompt carries.

use std::sync::Arc;

use pev_protocol::Step;
use pev_protocol::assertion::AssertionResult;
use pev_protocol::run::FileMutation;
use pev_providers::cost::PriceTable;
use pev_providers::script::{FailureKind, ScriptTurn, ScriptedClient};
use pev_providers::{ChatRequest, ContentBlock, Role, TokenUsage};
use serde_json::json;

use super::{JudgeOptions, ModelJudge, QUESTIONS};
use crate::agent::budget::{Budget, BudgetState, BudgetedClient};
use crate::instruct::{Interruption, Judge, JudgeRequest};

fn step() -> Step {
    serde_json::from_value(json!({
        "id": "edit-readme",
        "title": "Document the install command",
        "description": "Add an Installation section to README.md with `cargo install pev`.",
        "acceptance_criteria": ["README.md has an Installation section naming cargo install pev"],
        "assertions": [{"type": "file_contains", "path": "README.md", "pattern": "cargo install pev"}],
    }))
    .unwrap()
}

fn request() -> JudgeRequest {
    JudgeRequest {
        run_goal: "Make the README useful".to_owned(),
        step: step(),
        claim: "I added the Installation section. Everything is done.".to_owned(),
        assertions: vec![AssertionResult {
            kind: "file_contains".to_owned(),
            passed: true,
            detail: "README.md contains \"cargo install pev\" at line 12".to_owned(),
        }],
        mutations: vec![FileMutation {
            path: "README.md".to_owned(),
            bytes_before: 120,
            bytes_after: 188,
            lines_added: 4,
            lines_removed: 1,
            no_op: false,
        }],
        diffs: vec![
            "--- a/README.md\n+++ b/README.md\n@@ -10,1 +10,4 @@\n-TODO\n+## Installation\n+\n+    cargo install pev\n".to_owned(),
        ],
        evidence: vec!["exit code 0".to_owned()],
        warnings: vec!["fs.write: README.md had CRLF line endings".to_owned()],
        budget_note: Some("$0.42 of $1.00 left".to_owned()),
    }
}

fn answer_json(
    answers: &[(usize, bool, f64)],
    pass: bool,
    confidence: f64,
    feedback: &str,
) -> String {
    let answers: Vec<_> = answers
        .iter()
        .map(|&(q, yes, c)| json!({"question": QUESTIONS[q], "yes": yes, "confidence": c}))
        .collect();
    json!({"answers": answers, "pass": pass, "confidence": confidence, "feedback": feedback})
        .to_string()
}

fn usage(input: u64, output: u64) -> TokenUsage {
    TokenUsage { input_tokens: input, output_tokens: output, ..TokenUsage::default() }
}

fn judge_with(turns: Vec<ScriptTurn>) -> (Arc<ScriptedClient>, ModelJudge) {
    let client = Arc::new(ScriptedClient::from_turns("judge", turns));
    let judge = ModelJudge::new(client.clone(), "claude-sonnet-4-5", JudgeOptions::default());
    (client, judge)
}

fn user_text(request: &ChatRequest, index: usize) -> String {
    let message = &request.messages[index];
    assert_eq!(message.role, Role::User);
    message
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.as_str(),
            _ => "",
        })
        .collect()
}

#[tokio::test]
async fn an_all_yes_answer_passes() {
    let answer = answer_json(
        &[(0, true, 0.9), (1, true, 0.8), (2, true, 0.9), (3, true, 0.85)],
        true,
        0.85,
        "The section is there.",
    );
    let (client, judge) = judge_with(vec![ScriptTurn::text(answer).with_usage(usage(900, 120))]);
    let verdict = judge.judge(&request()).await.unwrap();
    assert!(verdict.pass);
    assert_eq!(verdict.confidence, 0.85);
    assert_eq!(verdict.feedback, "The section is there.");
    assert_eq!(verdict.answers.len(), 4);
    assert_eq!(verdict.answers[3].question, QUESTIONS[3]);
    assert_eq!((verdict.model_calls, verdict.usage), (1, usage(900, 120)));
    assert_eq!(verdict.cost_usd, 0.0);
    assert_eq!(client.requests()[0].model, "claude-sonnet-4-5");
}

#[tokio::test]
async fn a_confident_no_fails_the_step_even_when_the_model_says_pass() {
    let answer = answer_json(&[(0, true, 0.9), (3, false, 0.9)], true, 0.6, "Looks fine.");
    let (_, judge) = judge_with(vec![ScriptTurn::text(answer)]);
    let verdict = judge.judge(&request()).await.unwrap();
    assert!(!verdict.pass, "a 0.9 no was overruled by pass: true");
    assert_eq!(verdict.confidence, 0.9, "the verdict is as sure as its surest no");
    assert_eq!(
        verdict.feedback,
        format!("Looks fine.\nAnswered no: {} (no, confidence 0.90)", QUESTIONS[3])
    );
}

#[tokio::test]
async fn a_no_at_exactly_the_threshold_fails() {
    let answer = answer_json(&[(1, false, 0.7)], true, 0.5, "");
    let (_, judge) = judge_with(vec![ScriptTurn::text(answer)]);
    let verdict = judge.judge(&request()).await.unwrap();
    assert!(!verdict.pass);
    assert_eq!(verdict.confidence, 0.7);
    assert_eq!(verdict.feedback, format!("Answered no: {} (no, confidence 0.70)", QUESTIONS[1]));
}

#[tokio::test]
async fn a_low_confidence_no_is_a_fail_below_the_threshold() {
    let answer = answer_json(
        &[(0, true, 0.8), (2, false, 0.4)],
        false,
        0.4,
        "The CRLF warning may mean line endings changed across the file.",
    );
    let (_, judge) = judge_with(vec![ScriptTurn::text(answer)]);
    let verdict = judge.judge(&request()).await.unwrap();
    assert!(!verdict.pass);
    assert_eq!(verdict.confidence, 0.4, "the engine must see it is below 0.7 (a warning)");
    assert!(verdict.feedback.starts_with("The CRLF warning"), "{}", verdict.feedback);
    assert!(verdict.feedback.ends_with(&format!("{} (no, confidence 0.40)", QUESTIONS[2])));
    // A low-confidence no does not overrule a pass either.
    let answer = answer_json(&[(0, true, 0.9), (2, false, 0.3)], true, 0.8, "Fine.");
    let (_, judge) = judge_with(vec![ScriptTurn::text(answer)]);
    let verdict = judge.judge(&request()).await.unwrap();
    assert!(verdict.pass);
    assert_eq!(verdict.confidence, 0.8);
}

#[tokio::test]
async fn invalid_json_is_retried_with_the_problem() {
    let good = answer_json(&[(0, true, 0.9)], true, 0.9, "ok");
    let (client, judge) = judge_with(vec![
        ScriptTurn::text("Looks done to me!").with_usage(usage(800, 10)),
        ScriptTurn::text(format!("```json\n{good}\n```")).with_usage(usage(850, 60)),
    ]);
    let verdict = judge.judge(&request()).await.unwrap();
    assert!(verdict.pass);
    assert_eq!(verdict.model_calls, 2);
    assert_eq!(verdict.usage, usage(1650, 70));
    let requests = client.requests();
    assert_eq!(requests.len(), 2);
    let retry = user_text(&requests[1], 2);
    assert!(retry.contains("That answer is not a valid verdict"), "{retry}");
    assert!(retry.contains("No JSON object or array was found"), "{retry}");
}

#[tokio::test]
async fn a_verdict_missing_fields_is_retried_and_out_of_tries_is_a_provider_interruption() {
    let bad = json!({"pass": true}).to_string();
    let (client, judge) = judge_with(vec![
        ScriptTurn::text(bad.clone()),
        ScriptTurn::text(bad.clone()),
        ScriptTurn::text(bad),
    ]);
    let Err(Interruption::Provider(message)) = judge.judge(&request()).await else {
        panic!("expected a provider interruption");
    };
    assert!(message.starts_with("no valid verdict after 3 tries"), "{message}");
    assert!(message.contains("answers"), "{message}");
    assert_eq!(client.requests().len(), 3);
}

#[tokio::test]
async fn provider_errors_interrupt() {
    let (_, judge) = judge_with(vec![ScriptTurn::failure(FailureKind::Overloaded, None)]);
    let Err(Interruption::Provider(message)) = judge.judge(&request()).await else {
        panic!("expected a provider interruption");
    };
    assert!(message.contains("overloaded"), "{message}");
}

#[tokio::test]
async fn an_exhausted_budget_is_a_budget_interruption() {
    let inner = Arc::new(ScriptedClient::from_turns("judge", vec![ScriptTurn::text("{}")]));
    let state = Arc::new(BudgetState::new(
        Budget { max_turns: Some(0), ..Budget::default() },
        PriceTable::built_in(),
    ));
    let client =
        Arc::new(BudgetedClient::new(inner.clone(), "judge", PriceTable::built_in(), state));
    let judge = ModelJudge::new(client, "claude-sonnet-4-5", JudgeOptions::default());
    let Err(Interruption::Budget(message)) = judge.judge(&request()).await else {
        panic!("expected a budget interruption");
    };
    assert!(message.contains("all 0 model calls are used"), "{message}");
    assert!(inner.requests().is_empty());
}

#[tokio::test]
async fn the_prompt_carries_the_harness_evidence_and_labels_the_claim() {
    let (client, judge) =
        judge_with(vec![ScriptTurn::text(answer_json(&[(0, true, 1.0)], true, 1.0, "ok"))]);
    judge.judge(&request()).await.unwrap();
    let sent = &client.requests()[0];
    let system = sent.system.as_deref().unwrap();
    assert!(system.starts_with("You are a skeptical reviewer"), "{system}");
    assert!(system.contains("The executor's claim is not evidence."));
    for question in QUESTIONS {
        assert!(system.contains(question), "the system prompt lacks {question:?}");
    }
    assert!(system.contains("\"feedback\""), "the schema is not in the system prompt");
    let text = user_text(sent, 0);
    for wanted in [
        "# Step under review: edit-readme (Document the install command)",
        "Run goal, for context only: Make the README useful",
        "Add an Installation section to README.md with `cargo install pev`.",
        "- README.md has an Installation section naming cargo install pev",
        "- [PASS] file_contains: README.md contains \"cargo install pev\" at line 12",
        r#"- {"type":"file_contains","path":"README.md","pattern":"cargo install pev"}"#,
        "- README.md: 120 -> 188 bytes, +4 -1 lines",
        "```diff\n--- a/README.md\n+++ b/README.md\n@@ -10,1 +10,4 @@\n-TODO\n+## Installation",
        "## Other evidence\n- exit code 0",
        "## Tool warnings\n- fs.write: README.md had CRLF line endings",
        "## What the executor claims (a claim, not evidence)\nI added the Installation section.",
        "Budget: $0.42 of $1.00 left",
    ] {
        assert!(text.contains(wanted), "the prompt lacks {wanted:?}:\n{text}");
    }
    // The claim comes after the evidence, so the judge reads the evidence first.
    assert!(text.find("## Diffs").unwrap() < text.find("## What the executor claims").unwrap());
}

#[tokio::test]
async fn the_prompt_says_when_nothing_changed_and_caps_long_diffs() {
    let mut req = request();
    req.mutations.clear();
    req.assertions.clear();
    req.diffs = vec![format!("+{}", "é".repeat(20_000))];
    let (client, judge) = judge_with(vec![ScriptTurn::text(answer_json(
        &[(3, false, 0.95)],
        false,
        0.95,
        "No file changed.",
    ))]);
    let verdict = judge.judge(&req).await.unwrap();
    assert!(!verdict.pass);
    let text = user_text(&client.requests()[0], 0);
    assert!(text.contains("None: the step changed no file."), "{text}");
    assert!(text.contains("None: nothing about this step was checked mechanically."));
    assert!(text.contains("[… cut: 16383 of 40001 bytes shown]"), "the diff was not capped");
    assert!(text.len() < 24 * 1024, "prompt of {} bytes", text.len());
}
