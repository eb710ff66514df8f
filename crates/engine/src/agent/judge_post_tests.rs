//! Tests of the postcondition judge with a scripted model: a confident yes holds; a confident
//! "no" to any question outweighs the model's "holds"; an unsure yes does not hold; a
//! postcondition left unanswered does not hold; the prompt carries the run's evidence before
//! the claims.

use std::sync::Arc;

use pev_protocol::assertion::AssertionResult;
use pev_protocol::run::FileMutation;
use pev_providers::script::{FailureKind, ScriptTurn, ScriptedClient};
use pev_providers::{ContentBlock, Role};
use serde_json::json;

use super::POSTCONDITION_QUESTIONS;
use crate::agent::judge::{JudgeOptions, ModelJudge};
use crate::instruct::{Interruption, Judge, PostconditionRequest, StepEvidence};

fn request() -> PostconditionRequest {
    PostconditionRequest {
        run_goal: "Change the site background to dark green".to_owned(),
        postconditions: vec![
            "The page background is dark green".to_owned(),
            "Nothing else on the page changed".to_owned(),
        ],
        steps: vec![StepEvidence {
            id: "patch-css".to_owned(),
            task: "Patch the body rule: set the background to #013220".to_owned(),
            status: "done".to_owned(),
            evidence: vec!["file.patch changed site/style.css: 30 -> 32 bytes, +1 -1 lines".into()],
            assertions: vec![AssertionResult {
                kind: "file_contains".to_owned(),
                passed: true,
                detail: "site/style.css contains \"#013220\" at line 1".to_owned(),
            }],
        }],
        mutations: vec![FileMutation {
            path: "site/style.css".to_owned(),
            bytes_before: 30,
            bytes_after: 32,
            lines_added: 1,
            lines_removed: 1,
            no_op: false,
        }],
        diffs: vec!["--- site/style.css\n+++ site/style.css\n-body { background: white; }\n+body { background: #013220; }\n".to_owned()],
        calls: vec!["file.patch {\"path\":\"site/style.css\"} (step 'patch-css') -> ok: {}".into()],
        warnings: vec![],
        claims: vec!["executor of step 'patch-css': The background is dark green now.".into()],
        budget_note: Some("$0.80 of $1.00 left".to_owned()),
    }
}

/// `(id, [(question, yes, confidence)], holds, confidence, explanation)` as the model writes it.
type Answer<'a> = (&'a str, &'a [(usize, bool, f64)], bool, f64, &'a str);

fn answer_json(items: &[Answer<'_>]) -> String {
    let posts: Vec<_> = items
        .iter()
        .map(|(id, answers, holds, confidence, explanation)| {
            let answers: Vec<_> = answers
                .iter()
                .map(|&(q, yes, c)| {
                    json!({"question": POSTCONDITION_QUESTIONS[q], "yes": yes, "confidence": c})
                })
                .collect();
            json!({"id": id, "answers": answers, "holds": holds, "confidence": confidence,
                   "explanation": explanation})
        })
        .collect();
    json!({ "postconditions": posts }).to_string()
}

fn judge_with(turns: Vec<ScriptTurn>) -> (Arc<ScriptedClient>, ModelJudge) {
    let client = Arc::new(ScriptedClient::from_turns("verifier", turns));
    let judge = ModelJudge::new(client.clone(), "claude-haiku-4-5", JudgeOptions::default());
    (client, judge)
}

#[tokio::test]
async fn each_postcondition_gets_its_own_verdict_by_the_confidence_rule() {
    let answer = answer_json(&[
        (
            "p1",
            &[(0, true, 0.9), (1, true, 0.9), (2, true, 0.85)],
            true,
            0.9,
            "The diff sets #013220.",
        ),
        // "Holds", but a confident no to one question: it does not.
        ("p2", &[(0, true, 0.9), (1, false, 0.8)], true, 0.6, "Looks fine."),
    ]);
    let (client, judge) = judge_with(vec![ScriptTurn::text(answer)]);
    let verdicts = judge.judge_postconditions(&request()).await.unwrap();
    assert_eq!(verdicts.model_calls, 1);
    let [Some(first), Some(second)] = verdicts.judgments.as_slice() else {
        panic!("{verdicts:?}");
    };
    assert!(first.holds);
    assert_eq!((first.model.as_str(), first.confidence), ("claude-haiku-4-5", 0.9));
    assert_eq!(first.answers.len(), 3);
    assert_eq!(first.explanation, "The diff sets #013220.");
    assert!(!second.holds, "a 0.8 no was overruled by holds: true");
    assert_eq!(second.confidence, 0.8, "as sure as its surest no");
    assert!(second.explanation.contains("Answered no: Does every part of it hold"), "{second:?}");
    assert_eq!(client.requests()[0].model, "claude-haiku-4-5");
}

#[tokio::test]
async fn an_unsure_yes_does_not_hold_and_an_unanswered_postcondition_is_none() {
    let answer = answer_json(&[("p1", &[(0, true, 0.5)], true, 0.5, "Probably.")]);
    let (_, judge) = judge_with(vec![ScriptTurn::text(answer)]);
    let verdicts = judge.judge_postconditions(&request()).await.unwrap();
    let first = verdicts.judgments[0].as_ref().unwrap();
    assert!(!first.holds, "a yes at 0.5 is below the 0.7 the rule needs");
    assert_eq!(verdicts.judgments[1], None, "p2 was not answered");
}

#[tokio::test]
async fn unknown_and_repeated_ids_are_ignored() {
    let answer = answer_json(&[
        ("p9", &[(0, true, 1.0)], true, 1.0, "not asked"),
        ("P2", &[(0, false, 0.9)], false, 0.9, "first"),
        ("p2", &[(0, true, 1.0)], true, 1.0, "second"),
    ]);
    let (_, judge) = judge_with(vec![ScriptTurn::text(answer)]);
    let verdicts = judge.judge_postconditions(&request()).await.unwrap();
    assert_eq!(verdicts.judgments[0], None);
    let second = verdicts.judgments[1].as_ref().unwrap();
    assert!(!second.holds);
    assert!(second.explanation.starts_with("first"), "{second:?}");
}

#[tokio::test]
async fn a_provider_failure_is_an_interruption() {
    let (_, judge) = judge_with(vec![ScriptTurn::failure(FailureKind::Overloaded, None)]);
    let Err(Interruption::Provider(message)) = judge.judge_postconditions(&request()).await else {
        panic!("expected a provider interruption");
    };
    assert!(message.contains("overloaded"), "{message}");
}

#[tokio::test]
async fn the_prompt_carries_the_run_evidence_before_the_claims() {
    let answer = answer_json(&[("p1", &[(0, true, 1.0)], true, 1.0, "ok")]);
    let (client, judge) = judge_with(vec![ScriptTurn::text(answer)]);
    judge.judge_postconditions(&request()).await.unwrap();
    let sent = &client.requests()[0];
    let system = sent.system.as_deref().unwrap();
    assert!(system.starts_with("You are a skeptical reviewer"), "{system}");
    assert!(system.contains("A model's claim is not evidence."), "{system}");
    for question in POSTCONDITION_QUESTIONS {
        assert!(system.contains(question), "the system prompt lacks {question:?}");
    }
    let message = &sent.messages[0];
    assert_eq!(message.role, Role::User);
    let text: String = message
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.as_str(),
            _ => "",
        })
        .collect();
    for wanted in [
        "Run goal: Change the site background to dark green",
        "- p1: The page background is dark green",
        "- p2: Nothing else on the page changed",
        "- patch-css [done]: Patch the body rule: set the background to #013220",
        "  - file.patch changed site/style.css: 30 -> 32 bytes, +1 -1 lines",
        "  - [PASS] file_contains: site/style.css contains \"#013220\" at line 1",
        "- site/style.css: 30 -> 32 bytes, +1 -1 lines",
        "+body { background: #013220; }",
        "## Tool calls (journaled by the harness, oldest first)\n- file.patch",
        "## What models said they did (claims, not evidence)\n- executor of step 'patch-css'",
        "Budget: $0.80 of $1.00 left",
    ] {
        assert!(text.contains(wanted), "the prompt lacks {wanted:?}:\n{text}");
    }
    assert!(text.find("## Diffs").unwrap() < text.find("## What models said").unwrap());
}
