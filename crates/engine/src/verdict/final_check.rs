//! The final re-check of a finished run (the rule is `pev_verify::recheck`'s): the claims of
//! the plan's done steps, run again once every step has settled, and the journal's answer to
//! "which later call undid this evidence". `finish` uses both for a plan's run; loop mode
//! (`agent::loop_run`) makes claims of the model's plan and uses the journal half.

use std::collections::HashMap;

use pev_protocol::run::{CheckedOnce, EvidenceOf, FinalCheck, Regression, StepStatus};
use pev_protocol::tool::Effect;
use pev_store::{MutationRecord, StepState, ToolCallRecord};
use pev_verify::{CheckEnv, Claim};
use serde_json::Value;

use pev_protocol::Plan;

use pev_tools::ToolContext;

use crate::state::slot::Slot;

/// How many later calls a regression keeps.
const KEPT_CALLS: usize = 10;

/// Runs the assertions of every done step again against the workspace as it is now.
pub(crate) async fn recheck_steps(
    plan: &Plan,
    slots: &[Slot],
    ctx: &ToolContext,
    outputs: &HashMap<String, Value>,
) -> FinalCheck {
    let held = held_steps(plan, slots);
    // A delegated step's claim holds its own assertions and its child run's (kept in its
    // output): what the child verified must still hold when the parent ends.
    let assertions: Vec<Vec<pev_protocol::Assertion>> = held
        .iter()
        .map(|(_, i)| {
            let own = plan.steps.get(*i).map(|s| s.assertions.clone()).unwrap_or_default();
            let inherited =
                slots.get(*i).map(|s| child_claims(s.output.as_ref())).unwrap_or_default();
            own.into_iter().chain(inherited).collect()
        })
        .collect();
    let claims: Vec<Claim<'_>> = held
        .iter()
        .zip(&assertions)
        .filter_map(|((of, i), assertions)| {
            let step = plan.steps.get(*i)?;
            let slot = slots.get(*i)?;
            Some(Claim {
                of,
                assertions,
                earlier: &slot.assertions,
                env: CheckEnv {
                    ctx,
                    step: Some(step.id.as_str()),
                    outputs,
                    before: &slot.baseline,
                },
            })
        })
        .collect();
    pev_verify::recheck(&claims).await
}

/// The steps whose evidence the run relies on: done, with assertions. Each with its index.
fn held_steps(plan: &Plan, slots: &[Slot]) -> Vec<(EvidenceOf, usize)> {
    plan.steps
        .iter()
        .zip(slots)
        .enumerate()
        .filter(|(_, (step, slot))| {
            slot.status == StepStatus::Done
                && (!step.assertions.is_empty() || !child_claims(slot.output.as_ref()).is_empty())
        })
        .map(|(i, (step, _))| (EvidenceOf::Step(step.id.as_str().to_owned()), i))
        .collect()
}

/// The assertions a delegated step's child run relied on, as its output keeps them
/// (`child_claims`); empty for any other step.
pub(crate) fn child_claims(output: Option<&Value>) -> Vec<pev_protocol::Assertion> {
    output
        .and_then(|o| o.get("child_claims"))
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default()
}

/// Fills each regression's `changed_by` from the journal's tool calls (in journal order):
/// the calls after `mark(of)` (an index into `calls`; `None`: the whole run) that wrote the
/// assertion's path, or, when none did, the commands that may have; for an assertion that
/// reads no path, every write and command after the mark.
pub(crate) fn name_later_calls(
    regressions: &mut [Regression],
    calls: &[ToolCallRecord],
    mark: impl Fn(&EvidenceOf) -> Option<usize>,
) {
    for regression in regressions {
        let later = calls.get(mark(&regression.of).unwrap_or(0)..).unwrap_or_default();
        let writes = |c: &&ToolCallRecord| {
            c.effect == Effect::Write
                && match (&regression.path, &c.path) {
                    (Some(want), Some(wrote)) => same_path(want, wrote),
                    (None, _) => true,
                    (Some(_), None) => false,
                }
        };
        let mut named: Vec<&ToolCallRecord> = later.iter().filter(writes).collect();
        if named.is_empty() || regression.path.is_none() {
            named.extend(later.iter().filter(|c| c.effect == Effect::Exec));
        }
        regression.changed_by = named.into_iter().take(KEPT_CALLS).map(describe_call).collect();
    }
}

/// Evidence checked once (not run again at the end) that a later call may have undone, as
/// regressions (issue 31: such evidence stood with a warning whatever happened after it). A
/// step's checked-once assertion depends on the file it names, or else on the files the step
/// itself changed; a call made after the step's last call, by another step, that wrote one of
/// those files or ran a command that changed one (the journal's mutations say which) undoes it.
/// Evidence of a step that changed nothing and names no file (a deploy's health check) stands,
/// as does a postcondition's (checked at the run's end, or re-checked by loop mode itself).
/// A step that made no call in this run (reused from the cache) was checked when it ended:
/// the calls started from then on count (`steps` holds when each ended).
pub(crate) fn stale_once(
    once: &[CheckedOnce],
    calls: &[ToolCallRecord],
    mutations: &[MutationRecord],
    steps: &[StepState],
) -> Vec<Regression> {
    let mut out = Vec::new();
    for item in once {
        let Some(step) = item.of.step() else { continue };
        let Some(mark) =
            after_last_call_of(calls, step).or_else(|| after_end_of(calls, steps, step))
        else {
            continue;
        };
        let depends: Vec<&str> = match &item.path {
            Some(path) => vec![path.as_str()],
            None => mutations
                .iter()
                .filter(|m| m.step_id == step)
                .map(|m| m.mutation.path.as_str())
                .collect(),
        };
        // Every call after `mark` is another step's: `mark` is after the step's last call.
        let touches = |c: &ToolCallRecord| match c.effect {
            Effect::Write => {
                c.path.as_deref().is_some_and(|p| depends.iter().any(|d| same_path(d, p)))
            }
            Effect::Exec => mutations.iter().any(|m| {
                m.step_id == c.step_id && depends.iter().any(|d| same_path(d, &m.mutation.path))
            }),
            _ => false,
        };
        let later: Vec<String> = calls
            .get(mark..)
            .unwrap_or_default()
            .iter()
            .filter(|c| touches(c))
            .take(KEPT_CALLS)
            .map(describe_call)
            .collect();
        if later.is_empty() {
            continue;
        }
        out.push(Regression {
            of: item.of.clone(),
            kind: item.kind.clone(),
            path: item.path.clone(),
            then: format!("passed, checked once ({})", item.why),
            now: format!(
                "not run again, and {} changed after it was checked",
                if depends.len() == 1 {
                    depends[0].to_owned()
                } else {
                    "what it depends on".to_owned()
                }
            ),
            changed_by: later,
        });
    }
    out
}

/// The index in `calls` of the first call started when or after `step` ended (`calls.len()`
/// when none did; `None` when the step never ended). Times are the journal's RFC 3339 UTC
/// stamps, one clock and one width, so they order as text; a call started in the same
/// millisecond counts as after.
fn after_end_of(calls: &[ToolCallRecord], steps: &[StepState], step: &str) -> Option<usize> {
    let ended = steps.iter().find(|s| s.step_id == step)?.ended_at.as_deref()?;
    Some(calls.iter().position(|c| c.started_at.as_str() >= ended).unwrap_or(calls.len()))
}

/// The index in `calls` just after the last call of `step` (`None`: it made none).
pub(crate) fn after_last_call_of(calls: &[ToolCallRecord], step: &str) -> Option<usize> {
    calls.iter().rposition(|c| c.step_id == step).map(|i| i.saturating_add(1))
}

fn same_path(a: &str, b: &str) -> bool {
    let norm = |p: &str| p.trim_start_matches("./").trim_end_matches('/').to_owned();
    norm(a) == norm(b)
}

/// `file.write site/style.css (step 'undo')`, or a command clipped to a readable length.
fn describe_call(call: &ToolCallRecord) -> String {
    let what = match (&call.path, call.arguments.get("command").and_then(Value::as_str)) {
        (Some(path), _) => format!("{} {path}", call.tool),
        (None, Some(command)) => {
            let short: String = command.chars().take(60).collect();
            let more = if short.len() < command.len() { "…" } else { "" };
            format!("{} `{short}{more}`", call.tool)
        }
        (None, None) => call.tool.clone(),
    };
    format!("{what} (step '{}')", call.step_id)
}

#[cfg(test)]
#[path = "final_check_tests.rs"]
mod tests;
