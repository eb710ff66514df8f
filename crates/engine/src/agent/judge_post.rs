//! The judge on a run's postconditions that have no assertions: prose like "the page background
//! is dark green", which tier 1 cannot check. The verifier model gets the evidence the harness
//! gathered over the whole run (each step's status and evidence, assertion results, the files
//! changed with their diffs from before the run, the journaled tool calls, warnings) and, last
//! and labelled, what models claimed. For each postcondition it answers decomposed yes/no
//! questions, each with a confidence, and a verdict.
//!
//! The confidence rule is the step judge's (`judge::decide`): a "no" at or above the threshold
//! makes the verdict a "no" whatever the model's overall answer says. A postcondition holds only
//! when the verdict is yes *and* at least that confident: here the judge is the only evidence,
//! so an unsure yes is not enough. A postcondition the model did not answer does not hold.

use std::fmt::Write as _;

use pev_protocol::run::PostconditionJudgment;
use serde::Deserialize;
use serde_json::{Value, json};

use super::judge_rules::{
    Asker, MAX_CLAIM, MAX_ITEM, RULES, RawVerdict, answers_schema, cap, confidence_schema, decide,
    push_diffs, push_mutations, push_questions, section,
};
use crate::instruct::{Interruption, JudgeAnswer, PostconditionRequest, PostconditionVerdicts};

/// The questions every postcondition is judged by, phrased so that "yes" is the good answer.
pub const POSTCONDITION_QUESTIONS: [&str; 3] = [
    "Does the harness's evidence show that the postcondition holds in the workspace as the run \
     left it?",
    "Does every part of it hold, not just some?",
    "Is it shown by what the harness observed (diffs, assertion results, tool outputs), not only \
     by what a model claimed?",
];

/// The most tool calls the prompt lists (the latest are kept).
const MAX_CALLS: usize = 60;

const SYSTEM: &str = "You are a skeptical reviewer in an automated harness. A plan has been \
carried out. Some of its postconditions (what must be true when the work is done) have no \
mechanical check, so you decide them, from evidence, one by one.";

const POST_RULES: &str = "- Ask the questions below of each postcondition. Add more \
questions (same form) when a postcondition has several parts, one per part.
- \"holds\" is true only if every answer about that postcondition is yes. \"confidence\" is how \
sure you are of that verdict.
- \"explanation\" names the evidence that shows it holds (a diff line, an assertion, a tool \
output), or says what is missing.
- Answer every postcondition, by its id (p1, p2, …).";

/// One postcondition's verdict as the model writes it.
#[derive(Debug, Deserialize)]
struct RawPostcondition {
    id: String,
    answers: Vec<JudgeAnswer>,
    holds: bool,
    confidence: f64,
    explanation: String,
}

#[derive(Debug, Deserialize)]
struct RawPostconditions {
    postconditions: Vec<RawPostcondition>,
}

/// Asks `judge` about every postcondition of `request` in one call.
pub(super) async fn run(
    judge: &Asker,
    request: &PostconditionRequest,
) -> Result<PostconditionVerdicts, Interruption> {
    let (value, usage, tries) = judge.ask(system_prompt(), prompt(request), &schema()).await?;
    let raw: RawPostconditions = serde_json::from_value(value).map_err(|e| {
        Interruption::Provider(format!(
            "the judge's postcondition verdicts have the wrong shape: {e}"
        ))
    })?;
    let threshold = judge.threshold();
    let mut judgments = vec![None; request.postconditions.len()];
    for answer in raw.postconditions {
        let Some(slot) = index_of(&answer.id).and_then(|i| judgments.get_mut(i)) else { continue };
        if slot.is_some() {
            continue;
        }
        let verdict = decide(
            RawVerdict {
                answers: answer.answers,
                pass: answer.holds,
                confidence: answer.confidence,
                feedback: answer.explanation,
            },
            threshold,
        );
        *slot = Some(PostconditionJudgment {
            model: judge.model().to_owned(),
            holds: verdict.pass && verdict.confidence >= threshold,
            confidence: verdict.confidence,
            answers: verdict.answers,
            explanation: verdict.feedback,
        });
    }
    Ok(PostconditionVerdicts { judgments, model_calls: tries, usage })
}

/// `p3` → 2.
fn index_of(id: &str) -> Option<usize> {
    let n: usize = id.trim().trim_start_matches(['p', 'P']).parse().ok()?;
    n.checked_sub(1)
}

/// The JSON Schema of the answer.
fn schema() -> Value {
    json!({
        "type": "object",
        "required": ["postconditions"],
        "properties": {
            "postconditions": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["id", "answers", "holds", "confidence", "explanation"],
                    "properties": {
                        "id": {"type": "string"},
                        "answers": answers_schema(),
                        "holds": {"type": "boolean"},
                        "confidence": confidence_schema(),
                        "explanation": {"type": "string"},
                    },
                },
            },
        },
    })
}

fn system_prompt() -> String {
    let rules = RULES.replace("The executor's claim is", "A model's claim is");
    let mut system = format!("{SYSTEM}\n\n{rules}\n{POST_RULES}");
    push_questions(&mut system, &POSTCONDITION_QUESTIONS);
    system
}

/// The user message: the postconditions, then the harness's evidence, then the claims.
fn prompt(request: &PostconditionRequest) -> String {
    let mut p = String::new();
    let _ = writeln!(p, "# Postconditions to decide\n\nRun goal: {}\n", request.run_goal);
    for (i, post) in request.postconditions.iter().enumerate() {
        let _ = writeln!(p, "- p{}: {}", i.saturating_add(1), cap(post, MAX_ITEM));
    }

    p.push_str("\n## Steps of the plan (status and evidence recorded by the harness)\n");
    if request.steps.is_empty() {
        p.push_str("None.\n");
    }
    for step in &request.steps {
        let _ = writeln!(p, "- {} [{}]: {}", step.id, step.status, cap(&step.task, MAX_ITEM));
        for e in &step.evidence {
            let _ = writeln!(p, "  - {}", cap(e, MAX_ITEM));
        }
        for a in &step.assertions {
            let mark = if a.passed { "PASS" } else { "FAIL" };
            let _ = writeln!(p, "  - [{mark}] {}: {}", a.kind, cap(&a.detail, MAX_ITEM));
        }
    }

    p.push_str("\n## Files the run changed (measured by the harness)\n");
    push_mutations(&mut p, &request.mutations, "None: the run changed no file.");
    push_diffs(&mut p, &request.diffs);

    if !request.calls.is_empty() {
        p.push_str("\n## Tool calls (journaled by the harness, oldest first)\n");
        let skipped = request.calls.len().saturating_sub(MAX_CALLS);
        if skipped > 0 {
            let _ = writeln!(p, "[… {skipped} earlier calls left out]");
        }
        for call in request.calls.iter().skip(skipped) {
            let _ = writeln!(p, "- {}", cap(call, MAX_ITEM));
        }
    }
    let warnings: Vec<String> = request.warnings.iter().map(|w| cap(w, MAX_ITEM)).collect();
    section(&mut p, "Tool warnings", warnings.iter().map(String::as_str));

    if !request.claims.is_empty() {
        p.push_str("\n## What models said they did (claims, not evidence)\n");
        let mut total = 0usize;
        for claim in &request.claims {
            let shown = cap(claim.trim(), MAX_ITEM);
            total = total.saturating_add(shown.len());
            if total > MAX_CLAIM.saturating_mul(2) {
                p.push_str("[… more claims left out]\n");
                break;
            }
            let _ = writeln!(p, "- {shown}");
        }
    }
    if let Some(note) = &request.budget_note {
        let _ = writeln!(p, "\nBudget: {note}");
    }
    p.push_str("\nAnswer the questions for every postcondition from the evidence.");
    p
}

#[cfg(test)]
#[path = "judge_post_tests.rs"]
mod tests;
