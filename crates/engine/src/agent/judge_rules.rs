//! What the step judge (`judge.rs`) and the postcondition judge (`judge_post.rs`) share: the
//! [`Asker`] that puts one structured question to the verifier model, the rules and evidence
//! sections of both prompts, and the confidence rule (`decide`). Both judges import this; it
//! imports neither.

use std::fmt::Write as _;
use std::sync::Arc;

use pev_protocol::run::FileMutation;
use pev_providers::structured::{StructuredOptions, request_json};
use pev_providers::{ChatRequest, Message, ModelClient, ProviderError, TokenUsage};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::instruct::{Interruption, JudgeAnswer, JudgeVerdict};

/// How much of the answer the judge may write.
const MAX_TOKENS: u32 = 2048;

/// Calls for one verdict, invalid answers included.
const MAX_TRIES: u32 = 3;

/// Caps on what goes into the prompt, in bytes (cut on a char boundary).
pub(super) const MAX_CLAIM: usize = 4 * 1024;

const MAX_DIFF: usize = 16 * 1024;

const MAX_DIFFS_TOTAL: usize = 48 * 1024;

pub(super) const MAX_ITEM: usize = 2 * 1024;

/// The rules every judge prompt gives, whatever is judged.
pub(super) const RULES: &str = "Rules:
- The executor's claim is not evidence. Models often say \"done\" after doing part of the work, \
or none. Believe only the evidence the harness gathered itself: assertion results, the files \
changed (with byte and line counts), diffs, and tool warnings.
- If the evidence does not show something, assume it did not happen.
- Answer each question below with yes or no and a confidence from 0 to 1. Every question is \
phrased so that \"yes\" is the good answer.";

/// The verifier model, as both judges ask it.
pub(super) struct Asker {
    pub(super) client: Arc<dyn ModelClient>,
    pub(super) model: String,
    pub(super) fail_threshold: f64,
}

impl Asker {
    /// The verifier's model name.
    pub(super) fn model(&self) -> &str {
        &self.model
    }

    /// The threshold of the confidence rule, made sane (0..1; 0.7 if not a number).
    pub(super) fn threshold(&self) -> f64 {
        let t = self.fail_threshold;
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
}

/// The verdict as the model writes it.
#[derive(Debug, Deserialize)]
pub(super) struct RawVerdict {
    pub(super) answers: Vec<JudgeAnswer>,
    pub(super) pass: bool,
    pub(super) confidence: f64,
    pub(super) feedback: String,
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
