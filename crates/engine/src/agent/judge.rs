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

use pev_protocol::run::FileMutation;
use pev_providers::structured::{StructuredOptions, request_json};
use pev_providers::{ChatRequest, Message, ModelClient, ProviderError, TokenUsage};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::BoxFuture;
use crate::instruct::{
    Interruption, Judge, JudgeAnswer, JudgeRequest, JudgeVerdict, PostconditionRequest,
    PostconditionVerdicts,
};

/// How much of the answer the judge may write.
const MAX_TOKENS: u32 = 2048;
/// Calls for one verdict, invalid answers included.
const MAX_TRIES: u32 = 3;
/// Caps on what goes into the prompt, in bytes (cut on a char boundary).
pub(super) const MAX_CLAIM: usize = 4 * 1024;
const MAX_DIFF: usize = 16 * 1024;
const MAX_DIFFS_TOTAL: usize = 48 * 1024;
pub(super) const MAX_ITEM: usize = 2 * 1024;

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

/// The rules every judge prompt gives, whatever is judged.
pub(super) const RULES: &str = "Rules:
- The executor's claim is not evidence. Models often say \"done\" after doing part of the work, \
or none. Believe only the evidence the harness gathered itself: assertion results, the files \
changed (with byte and line counts), diffs, and tool warnings.
- If the evidence does not show something, assume it did not happen.
- Answer each question below with yes or no and a confidence from 0 to 1. Every question is \
phrased so that \"yes\" is the good answer.";

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
    client: Arc<dyn ModelClient>,
    model: String,
    options: JudgeOptions,
}

/// The verdict as the model writes it.
#[derive(Debug, Deserialize)]
pub(super) struct RawVerdict {
    pub(super) answers: Vec<JudgeAnswer>,
    pub(super) pass: bool,
    pub(super) confidence: f64,
    pub(super) feedback: String,
}

impl ModelJudge {
    pub fn new(
        client: Arc<dyn ModelClient>,
        model: impl Into<String>,
        options: JudgeOptions,
    ) -> Self {
        Self { client, model: model.into(), options }
    }

    /// The verifier's model name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The threshold of the confidence rule, made sane (0..1; 0.7 if not a number).
    pub(super) fn threshold(&self) -> f64 {
        let t = self.options.fail_threshold;
        if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.7 }
    }

    /// One structured question to the verifier: the JSON that matches `schema`, with the usage
    /// and calls it took.
    pub(super) async fn ask(
        &self,
        system: String,
        prompt: String,
        schema: &Value,
    ) -> Result<(Value, TokenUsage, u32), Interruption> {
        let mut chat = ChatRequest::new(self.model.clone(), vec![Message::user(prompt)]);
        chat.system = Some(system);
        chat.max_tokens = MAX_TOKENS;
        let options = StructuredOptions { max_tries: MAX_TRIES, what: "verdict".to_owned() };
        request_json(self.client.as_ref(), chat, schema, options).await.map_err(interruption)
    }

    async fn run(&self, request: &JudgeRequest) -> Result<JudgeVerdict, Interruption> {
        let (value, usage, tries) =
            self.ask(system_prompt(), prompt(request), &verdict_schema()).await?;
        let raw: RawVerdict = serde_json::from_value(value).map_err(|e| {
            Interruption::Provider(format!("the judge's verdict has the wrong shape: {e}"))
        })?;
        let mut verdict = decide(raw, self.options.fail_threshold);
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
        Box::pin(super::judge_post::run(self, request))
    }
}

/// The JSON Schema of a confidence (0..1).
pub(super) fn confidence_schema() -> Value {
    json!({"type": "number", "minimum": 0, "maximum": 1})
}

/// The JSON Schema of the decomposed answers (at least one).
pub(super) fn answers_schema() -> Value {
    json!({
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "required": ["question", "yes", "confidence"],
            "properties": {
                "question": {"type": "string"},
                "yes": {"type": "boolean"},
                "confidence": confidence_schema(),
            },
        },
    })
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

/// `Questions:` and the numbered questions, at the end of a system prompt.
pub(super) fn push_questions(system: &mut String, questions: &[&str]) {
    system.push_str("\n\nQuestions:");
    for (i, question) in questions.iter().enumerate() {
        let _ = write!(system, "\n{}. {question}", i.saturating_add(1));
    }
}

/// A provider failure as the engine wants it: out of budget, or the model failed.
fn interruption(error: ProviderError) -> Interruption {
    match error {
        ProviderError::BudgetExhausted(message) => Interruption::Budget(message),
        other => Interruption::Provider(other.to_string()),
    }
}

/// The verdict from the model's answer: a confident "no" fails the step whatever `pass` says.
pub(super) fn decide(raw: RawVerdict, fail_threshold: f64) -> JudgeVerdict {
    let threshold = if fail_threshold.is_finite() { fail_threshold.clamp(0.0, 1.0) } else { 0.7 };
    let answers: Vec<JudgeAnswer> = raw
        .answers
        .into_iter()
        .map(|a| JudgeAnswer { confidence: unit(a.confidence), ..a })
        .collect();
    let confident_no = answers
        .iter()
        .filter(|a| !a.yes && a.confidence >= threshold)
        .map(|a| a.confidence)
        .reduce(f64::max);
    let pass = raw.pass && confident_no.is_none();
    let mut confidence = unit(raw.confidence);
    if let Some(no) = confident_no {
        // The verdict is at least as sure as its surest "no", so the engine fails the step.
        confidence = confidence.max(no);
    }
    let mut feedback = raw.feedback.trim().to_owned();
    if !pass {
        let noes: Vec<String> = answers
            .iter()
            .filter(|a| !a.yes)
            .map(|a| format!("{} (no, confidence {:.2})", a.question, a.confidence))
            .collect();
        if !noes.is_empty() {
            if !feedback.is_empty() {
                feedback.push('\n');
            }
            feedback.push_str("Answered no: ");
            feedback.push_str(&noes.join("; "));
        } else if feedback.is_empty() {
            feedback.push_str("The judge rejected the step without saying why.");
        }
    }
    JudgeVerdict {
        pass,
        confidence,
        feedback,
        answers,
        model_calls: 0,
        usage: Default::default(),
        cost_usd: 0.0,
    }
}

/// `x` within 0..1 (NaN as 0).
fn unit(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

/// `s` cut to at most `max` bytes on a char boundary, with a note when cut.
pub(super) fn cap(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut = cut.saturating_sub(1);
    }
    format!("{}\n[… cut: {} of {} bytes shown]", s.get(..cut).unwrap_or(""), cut, s.len())
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

/// One line per file changed, with sizes and line counts, or `none` when there is none.
pub(super) fn push_mutations(p: &mut String, mutations: &[FileMutation], none: &str) {
    if mutations.is_empty() {
        let _ = writeln!(p, "{none}");
    }
    for m in mutations {
        let no_op = if m.no_op { " (no-op: the content is unchanged)" } else { "" };
        let _ = writeln!(
            p,
            "- {}: {} -> {} bytes, +{} -{} lines{no_op}",
            m.path, m.bytes_before, m.bytes_after, m.lines_added, m.lines_removed
        );
    }
}

/// `## Diffs`, each capped and all of them together capped; nothing when there are none.
pub(super) fn push_diffs(p: &mut String, diffs: &[String]) {
    if diffs.is_empty() {
        return;
    }
    p.push_str("\n## Diffs\n");
    let mut total = 0usize;
    for diff in diffs {
        if total >= MAX_DIFFS_TOTAL {
            p.push_str("[… more diffs left out]\n");
            break;
        }
        let shown = cap(diff, MAX_DIFF.min(MAX_DIFFS_TOTAL.saturating_sub(total)));
        total = total.saturating_add(shown.len());
        let _ = writeln!(p, "```diff\n{}\n```", shown.trim_end());
    }
}

/// A `## title` list of `items`, or nothing when there are none.
pub(super) fn section<'i>(p: &mut String, title: &str, items: impl Iterator<Item = &'i str>) {
    let mut items = items.peekable();
    if items.peek().is_none() {
        return;
    }
    let _ = writeln!(p, "\n## {title}");
    for item in items {
        let _ = writeln!(p, "- {item}");
    }
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
