//! The judge: a verifier model for what tier 1 cannot check (semantic criteria, tool warnings).
//!
//! It is told to be skeptical: the executor's claim is not evidence, the harness's own evidence
//! is (assertion results, the files changed with their sizes and line counts, diffs, warnings).
//! It answers decomposed yes/no questions, each phrased so that "yes" is the good answer, each
//! with a confidence, and gives an overall verdict through structured output. The verdict it
//! returns cannot be kinder than its own answers: a "no" at or above the fail threshold makes
//! the verdict a fail with at least that confidence, whatever the model's overall `pass` says.
//! A fail below the threshold is returned as it is; the engine records it as a warning.
//!
//! The same judge decides a run's postconditions that have no assertions
//! (`judge_postconditions`, in `judge_post.rs`): the same rules, the same evidence sections and
//! the same confidence rule, with questions about the workspace the run left instead of one
//! step. The pieces both prompts share live here.
//!
//! Cost is counted by the [`super::budget::BudgetedClient`] the judge is given, so the verdict's
//! `cost_usd` stays 0 here.

use std::fmt::Write as _;
use std::sync::Arc;

use pev_providers::ModelClient;
use serde_json::{Value, json};

use super::judge_rules::{
    Asker, MAX_CLAIM, MAX_ITEM, RULES, RawVerdict, answers_schema, cap, confidence_schema, decide,
    push_diffs, push_mutations, push_questions, section,
};
use crate::instruct::{
    Interruption, Judge, JudgeRequest, JudgeVerdict, PostconditionRequest, PostconditionVerdicts,
};
use pev_providers::BoxFuture;

/// The questions every step is judged by, phrased so that "yes" is the good answer.
pub const QUESTIONS: [&str; 4] = [
    "Did the step change the right target: the files or resources it is about, and only those?",
    "Is the new content right: does it do what the description and every acceptance criterion \
     ask?",
    "Is the step free of unwanted side effects: no unrelated file changed, nothing removed or \
     broken that should have stayed?",
    "Is the step complete: is every part of it done, not just some?",
];

const SYSTEM: &str = "You are a skeptical reviewer in an automated harness. An executor model \
was given one step of a plan and claims it has done it. Your job is to decide, from evidence, \
whether the step is really done and done right.";

const STEP_RULES: &str = "- Add more questions (same form) when an acceptance criterion needs \
its own check.
- \"pass\" is true only if every answer is yes. \"confidence\" is how sure you are of the \
verdict as a whole.
- \"feedback\" says specifically what is wrong or missing and how to fix it (file, content, \
criterion), for the executor's next attempt; when the step passes, say briefly why.";

/// How the judge's verdict is used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JudgeOptions {
    /// A "no" at or above this confidence fails the step (0..1).
    pub fail_threshold: f64,
}

impl Default for JudgeOptions {
    fn default() -> Self {
        Self { fail_threshold: 0.7 }
    }
}

/// A [`Judge`] backed by a model.
pub struct ModelJudge {
    asker: Asker,
}

impl ModelJudge {
    pub fn new(
        client: Arc<dyn ModelClient>,
        model: impl Into<String>,
        options: JudgeOptions,
    ) -> Self {
        Self {
            asker: Asker { client, model: model.into(), fail_threshold: options.fail_threshold },
        }
    }

    /// The verifier's model name.
    pub fn model(&self) -> &str {
        &self.asker.model
    }

    async fn run(&self, request: &JudgeRequest) -> Result<JudgeVerdict, Interruption> {
        let (value, usage, tries) =
            self.asker.ask(system_prompt(), prompt(request), &verdict_schema()).await?;
        let raw: RawVerdict = serde_json::from_value(value).map_err(|e| {
            Interruption::Provider(format!("the judge's verdict has the wrong shape: {e}"))
        })?;
        let mut verdict = decide(raw, self.asker.fail_threshold);
        verdict.model_calls = tries;
        verdict.usage = usage;
        Ok(verdict)
    }
}

impl Judge for ModelJudge {
    fn judge<'a>(
        &'a self,
        request: &'a JudgeRequest,
    ) -> BoxFuture<'a, Result<JudgeVerdict, Interruption>> {
        Box::pin(self.run(request))
    }

    fn judge_postconditions<'a>(
        &'a self,
        request: &'a PostconditionRequest,
    ) -> BoxFuture<'a, Result<PostconditionVerdicts, Interruption>> {
        Box::pin(super::judge_post::run(&self.asker, request))
    }
}

/// The JSON Schema of the verdict the model writes.
pub fn verdict_schema() -> Value {
    json!({
        "type": "object",
        "required": ["answers", "pass", "confidence", "feedback"],
        "properties": {
            "answers": answers_schema(),
            "pass": {"type": "boolean"},
            "confidence": confidence_schema(),
            "feedback": {"type": "string"},
        },
    })
}

fn system_prompt() -> String {
    let mut system = format!("{SYSTEM}\n\n{RULES}\n{STEP_RULES}");
    push_questions(&mut system, &QUESTIONS);
    system
}

/// The user message: the step, then the harness's evidence, then the claim, last and labelled.
fn prompt(request: &JudgeRequest) -> String {
    let step = &request.step;
    let mut p = String::new();
    let title = step.title.as_deref().unwrap_or("(untitled)");
    let _ = writeln!(p, "# Step under review: {} ({title})", step.id.as_str());
    let _ = writeln!(p, "\nRun goal, for context only: {}", request.run_goal);
    if let Some(description) = &step.description {
        let _ = writeln!(p, "\n## What the step had to do\n{description}");
    }
    if let Some(tool) = &step.tool {
        let _ = writeln!(p, "\nThe step called the tool `{tool}` directly.");
    }
    section(&mut p, "Acceptance criteria", step.acceptance_criteria.iter().map(String::as_str));

    p.push_str("\n## Assertions checked by the harness\n");
    if request.assertions.is_empty() {
        p.push_str("None: nothing about this step was checked mechanically.\n");
    }
    for result in &request.assertions {
        let mark = if result.passed { "PASS" } else { "FAIL" };
        let _ = writeln!(p, "- [{mark}] {}: {}", result.kind, cap(&result.detail, MAX_ITEM));
    }
    if !step.assertions.is_empty() {
        p.push_str("As the plan wrote them:\n");
        for assertion in &step.assertions {
            let text = serde_json::to_string(assertion).unwrap_or_default();
            let _ = writeln!(p, "- {}", cap(&text, MAX_ITEM));
        }
    }

    p.push_str("\n## Files the step changed (measured by the harness)\n");
    push_mutations(&mut p, &request.mutations, "None: the step changed no file.");
    push_diffs(&mut p, &request.diffs);
    let capped = |items: &[String]| items.iter().map(|e| cap(e, MAX_ITEM)).collect::<Vec<_>>();
    let evidence = capped(&request.evidence);
    section(&mut p, "Other evidence", evidence.iter().map(String::as_str));
    let warnings = capped(&request.warnings);
    section(&mut p, "Tool warnings", warnings.iter().map(String::as_str));

    let _ = writeln!(
        p,
        "\n## What the executor claims (a claim, not evidence)\n{}",
        cap(request.claim.trim(), MAX_CLAIM)
    );
    if let Some(note) = &request.budget_note {
        let _ = writeln!(p, "\nBudget: {note}");
    }
    p.push_str("\nAnswer the questions from the evidence and give your verdict.");
    p
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
