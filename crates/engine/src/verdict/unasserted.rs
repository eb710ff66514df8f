//! Postconditions without assertions ("the page background is dark green"): tier 1 cannot check
//! them, so they go to the verifier model as decomposed yes/no questions over the evidence the
//! harness gathered (see `agent::judge_post`). Both modes use this module: a plan's `finish`,
//! and loop mode's driver for the postconditions the model declared without assertions.
//!
//! A judge is the weakest evidence the harness has. It is asked only when everything else about
//! the run already allows `success` (the callers decide that), so a judge's yes can never
//! outweigh a failed check, a dropped step or the goal's `no_effects` rule; it can only stand
//! in for the assertion the postcondition lacks. A judge that cannot be asked (none configured,
//! `pev run` with no models, an error, the budget) leaves the postcondition unverified, and its
//! evidence says why.

use std::collections::HashMap;
use std::fmt::Write as _;

use pev_protocol::run::{PostconditionJudgment, PostconditionResult};
use pev_store::{RunRecord, Store, ToolCallStatus};
use pev_tools::Workspace;
use pev_verify::DiffTag;
use serde_json::Value;

use crate::instruct::{Interruption, Judge, PostconditionRequest};

/// The longest diff of one file shown to a judge, in lines.
pub(crate) const MAX_DIFF_LINES: usize = 80;
/// How much of a call's arguments or output its line shows, in characters.
const CALL_PART: usize = 240;
/// How much of the judge's explanation a postcondition's evidence keeps, in characters.
const EXPLANATION: usize = 600;

/// Who decides the unasserted postconditions, or why nobody can.
pub(crate) enum Verifier<'a> {
    Judge(&'a dyn Judge),
    Unavailable(String),
}

/// What deciding the unasserted postconditions gave.
pub(crate) struct Decided {
    /// One result per postcondition of the request, in its order.
    pub results: Vec<PostconditionResult>,
    /// The budget stopped the judge.
    pub budget_exhausted: Option<String>,
}

/// Asks the verifier about the postconditions of `request`; never fails: whatever stops it is
/// the evidence of an unverified postcondition.
pub(crate) async fn decide(verifier: Verifier<'_>, request: &PostconditionRequest) -> Decided {
    let posts = &request.postconditions;
    let unverified = |why: &str| Decided {
        results: posts.iter().map(|d| not_judged(d, why)).collect(),
        budget_exhausted: None,
    };
    let judge = match verifier {
        Verifier::Judge(judge) => judge,
        Verifier::Unavailable(why) => return unverified(&why),
    };
    match judge.judge_postconditions(request).await {
        Ok(verdicts) => {
            let results = posts
                .iter()
                .enumerate()
                .map(|(i, description)| match verdicts.judgments.get(i).cloned().flatten() {
                    Some(judgment) => judged(description, judgment),
                    None => not_judged(description, "the judge gave no answer about it"),
                })
                .collect();
            Decided { results, budget_exhausted: None }
        }
        Err(Interruption::Budget(why)) => Decided {
            budget_exhausted: Some(why.clone()),
            ..unverified(&format!("the judge could not be asked: the budget ran out ({why})"))
        },
        Err(Interruption::Provider(why)) => {
            unverified(&format!("the judge could not be asked: {why}"))
        }
        Err(Interruption::TurnLimit(n)) => {
            unverified(&format!("the judge could not be asked: turn limit {n}"))
        }
        Err(Interruption::Stopped) => {
            unverified("the judge could not be asked: the run was stopped")
        }
    }
}

/// The result of a postcondition the judge answered.
fn judged(description: &str, judgment: PostconditionJudgment) -> PostconditionResult {
    let verdict = if judgment.holds {
        "yes"
    } else if judgment.answers.iter().all(|a| a.yes) {
        "yes, but not confidently enough"
    } else {
        "no"
    };
    let explanation = one_line(&judgment.explanation, EXPLANATION);
    let mut evidence =
        format!("judged by {}: {verdict} (confidence {:.2})", judgment.model, judgment.confidence);
    if !explanation.is_empty() {
        let _ = write!(evidence, ": {explanation}");
    }
    PostconditionResult {
        description: description.to_owned(),
        satisfied: judgment.holds,
        evidence,
        judge: Some(judgment),
    }
}

/// The result of a postcondition no judge decided.
fn not_judged(description: &str, why: &str) -> PostconditionResult {
    PostconditionResult {
        description: description.to_owned(),
        satisfied: false,
        evidence: format!("no assertion, and no judge decided it: {why}"),
        judge: None,
    }
}

/// Why no judge can be asked in a run whose engine has these models.
pub(crate) fn why_no_judge(models: Option<&crate::engine::ModelHooks>) -> Option<String> {
    match models {
        None => Some(
            "`pev run` has no verifier model (give the postcondition assertions, or run the \
             goal with `pev agent`)"
                .to_owned(),
        ),
        Some(m) if m.judge.is_none() => Some("no verifier model is configured".to_owned()),
        Some(_) => None,
    }
}

/// What the journal adds to a judge's evidence: a diff of each file the run changed, from
/// before its first change to the workspace now, and one line per tool call.
pub(crate) fn journal_evidence(
    store: &Store,
    record: &RunRecord,
    workspace: &Workspace,
) -> (Vec<String>, Vec<String>) {
    let mut first_before: Vec<(&str, Option<&str>)> = Vec::new();
    for m in &record.mutations {
        if !first_before.iter().any(|(p, _)| *p == m.mutation.path) {
            first_before.push((m.mutation.path.as_str(), m.before_sha256.as_deref()));
        }
    }
    let diffs = first_before
        .into_iter()
        .filter_map(|(path, before)| {
            let before = before.and_then(|sha| store.blob(sha).ok().flatten()).unwrap_or_default();
            let after = workspace.read(path).unwrap_or_default();
            unified_diff(path, &before, &after)
        })
        .collect();
    let calls = record.tool_calls.iter().map(call_line).collect();
    (diffs, calls)
}

/// `file.patch {"path":"site/style.css",…} (step 'patch') -> ok: {…}`.
fn call_line(call: &pev_store::ToolCallRecord) -> String {
    let args = one_line(&call.arguments.to_string(), CALL_PART);
    let end = match call.status {
        ToolCallStatus::Finished | ToolCallStatus::Recovered => {
            let output = call.output.as_ref().map_or_else(String::new, |o| match o {
                Value::String(s) => one_line(s, CALL_PART),
                other => one_line(&other.to_string(), CALL_PART),
            });
            format!("ok: {output}")
        }
        ToolCallStatus::Failed => {
            format!("failed: {}", one_line(call.error.as_deref().unwrap_or(""), CALL_PART))
        }
        other => other.as_str().to_owned(),
    };
    format!("{} {args} (step '{}') -> {end}", call.tool, call.step_id)
}

/// A unified diff of `before` → `after`, at most [`MAX_DIFF_LINES`] lines; `None` when equal.
pub(crate) fn unified_diff(path: &str, before: &[u8], after: &[u8]) -> Option<String> {
    let before = String::from_utf8_lossy(before);
    let after = String::from_utf8_lossy(after);
    let lines = pev_verify::diff_lines(&before, &after);
    if lines.is_empty() {
        return None;
    }
    let mut out = format!("--- {path}\n+++ {path}\n");
    for line in lines.iter().take(MAX_DIFF_LINES) {
        let mark = match line.tag {
            DiffTag::Equal => ' ',
            DiffTag::Insert => '+',
            DiffTag::Delete => '-',
        };
        out.push(mark);
        out.push_str(&line.text);
        out.push('\n');
    }
    if lines.len() > MAX_DIFF_LINES {
        let _ = writeln!(out, "… {} more diff lines", lines.len() - MAX_DIFF_LINES);
    }
    Some(out)
}

/// `text` on one line, at most `max` characters, with `…` when cut.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.trim().chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max).collect();
    cut.push('…');
    cut
}

/// Puts the decided results in place of the unasserted postconditions' results (matched by
/// position in `indexes`).
pub(crate) fn replace(
    results: &mut [PostconditionResult],
    indexes: &[usize],
    decided: Vec<PostconditionResult>,
) {
    let by_index: HashMap<usize, PostconditionResult> =
        indexes.iter().copied().zip(decided).collect();
    for (i, result) in results.iter_mut().enumerate() {
        if let Some(new) = by_index.get(&i) {
            *result = new.clone();
        }
    }
}
