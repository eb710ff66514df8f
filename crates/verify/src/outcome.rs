//! The outcome rule of CONTRACTS.md §4: from what happened in a run to its status and the
//! reasons for it. Success is claimed only with evidence: every step done (or skipped behind an
//! `on_fail: continue` failure), every assertion passed, every postcondition satisfied by an
//! assertion, and no other reason.
//!
//! Reasons, in this order:
//! - each failed step: `assertion_failed` when one of its assertions failed, else
//!   `plan_execution_mismatch` when it changed none of the files it named, `judge_rejected`
//!   when a judge's confident "no" failed it, else `step_failed` (also `assertion_failed` for a
//!   step marked done with a failed assertion, which the engine should never produce but must
//!   never become success);
//! - one `steps_not_run` for all steps left pending, in progress or blocked (or never reported)
//!   that are not themselves waiting for approval; `skipped` steps are not a reason;
//! - each postcondition not satisfied, not checked, or "satisfied" without evidence:
//!   `postcondition_unverified`;
//! - each piece of evidence that held when it was gathered and fails on the final workspace:
//!   `evidence_regressed` (see [`crate::recheck`]);
//! - `no_effects` when the goal asks for a change and no goal action ran;
//! - each no-op file mutation: `no_op_mutation`;
//! - each step waiting for approval: `approval_pending`; then `cancelled`.
//!
//! Status: no reasons is `success`. A run stopped only to wait for approval is
//! `awaiting_approval`: besides `approval_pending` its reasons may only be the consequences of
//! not having finished yet (`steps_not_run`, `postcondition_unverified`, `no_effects`), which
//! `pev resume` will revisit. Otherwise `failed` when a failed step's `on_fail` is not
//! `continue` or no step is done, else `partial`.

use std::collections::{HashMap, HashSet};

use pev_protocol::run::{
    FileMutation, PostconditionResult, Reason, ReasonCode, Regression, RunStatus, StepResult,
    StepStatus,
};
use pev_protocol::{OnFail, Plan};

use crate::goal::goal_asks_for_change;
use crate::text::{CLIP, clip, human_size};

/// How many step ids a `steps_not_run` message names.
const NAMED_STEPS: usize = 5;

/// Everything the outcome depends on.
#[derive(Debug, Clone, Copy)]
pub struct OutcomeInput<'a> {
    pub plan: &'a Plan,
    /// The state of each step (steps of the plan without one count as not run).
    pub steps: &'a [StepResult],
    /// One result per postcondition of the plan, in order.
    pub postconditions: &'a [PostconditionResult],
    pub mutations: &'a [FileMutation],
    /// The step that made each mutation (same index as `mutations`).
    pub mutation_steps: &'a [String],
    /// At least one goal action (see [`crate::is_goal_action`]) finished successfully.
    pub goal_actions_executed: bool,
    /// Steps that wait for a person's approval.
    pub awaiting_approval: &'a [String],
    /// The run was cancelled (Ctrl-C).
    pub cancelled: bool,
    /// Failed steps whose failure is a judge model's confident "no".
    pub judge_rejected: &'a [String],
    /// Failed steps that changed none of the files they named (see [`crate::mismatch`]).
    pub mismatched: &'a [String],
    /// The run stopped because its budget could not pay for the next model call.
    pub budget_exhausted: Option<&'a str>,
    /// Evidence that held when it was gathered and fails on the final workspace.
    pub regressions: &'a [Regression],
    /// The oracle's reasons (`oracle_changed`, `hidden_check_failed`; see [`crate::oracle`]).
    pub oracle: &'a [Reason],
}

/// The status of a run and the reasons it is not `success` (empty exactly for success).
pub fn decide(input: &OutcomeInput<'_>) -> (RunStatus, Vec<Reason>) {
    let mut reasons = Vec::new();
    step_reasons(input, &mut reasons);
    not_run_reason(input, &mut reasons);
    postcondition_reasons(input, &mut reasons);
    reasons.extend(input.regressions.iter().map(crate::regression_reason));
    reasons.extend(input.oracle.iter().cloned());
    // `no_effects` is for a run that changed nothing. A run whose failed step did change files
    // (they are listed) already has the reason it failed; a run waiting for approval has not
    // had its effects yet (`approval_pending` says so). Either way the run is not `success`.
    let changed_files = input.mutations.iter().any(|m| !m.no_op);
    let explained = (changed_files && !reasons.is_empty()) || !input.awaiting_approval.is_empty();
    if !input.goal_actions_executed && !explained && goal_asks_for_change(&input.plan.goal) {
        reasons.push(Reason {
            code: ReasonCode::NoEffects,
            step: None,
            message: format!(
                "the goal asks for a change (\"{}\"), but no step with a write or exec effect, or \
                 a non-GET http.request, finished successfully",
                clip(&input.plan.goal, CLIP)
            ),
        });
    }
    for (i, m) in input.mutations.iter().enumerate().filter(|(_, m)| m.no_op) {
        let step = input.mutation_steps.get(i).cloned();
        let by = step.as_deref().map_or_else(String::new, |s| format!("step '{s}' "));
        reasons.push(Reason {
            code: ReasonCode::NoOpMutation,
            message: format!(
                "{by}wrote {} but left it byte-for-byte unchanged ({})",
                m.path,
                human_size(m.bytes_after)
            ),
            step,
        });
    }
    for step in input.awaiting_approval {
        reasons.push(Reason {
            code: ReasonCode::ApprovalPending,
            step: Some(step.clone()),
            message: format!(
                "step '{step}' waits for approval: approve it with `pev approve`, then continue \
                 with `pev resume`"
            ),
        });
    }
    // Success needs evidence: a plan with no steps and no postconditions has none.
    if input.plan.steps.is_empty() && input.plan.postconditions.is_empty() {
        reasons.push(Reason {
            code: ReasonCode::StepsNotRun,
            step: None,
            message: "the plan has no steps and no postconditions: nothing was done or checked"
                .to_owned(),
        });
    }
    if let Some(why) = input.budget_exhausted {
        reasons.push(Reason {
            code: ReasonCode::BudgetExhausted,
            step: None,
            message: format!("the run stopped before its budget ran out: {why}"),
        });
    }
    if input.cancelled {
        reasons.push(Reason {
            code: ReasonCode::Cancelled,
            step: None,
            message: "the run was cancelled before it finished".to_owned(),
        });
    }
    let status = status(input, &reasons);
    (status, reasons)
}

/// `assertion_failed` / `step_failed` for each failed step, in the order given.
fn step_reasons(input: &OutcomeInput<'_>, reasons: &mut Vec<Reason>) {
    let tools: HashMap<&str, &str> = input
        .plan
        .steps
        .iter()
        .filter_map(|s| s.tool.as_deref().map(|t| (s.id.as_str(), t)))
        .collect();
    for step in input.steps {
        let failed_assertions: Vec<_> = step.assertions.iter().filter(|a| !a.passed).collect();
        let label = match tools.get(step.id.as_str()) {
            Some(tool) => format!("step '{}' ({tool})", step.id),
            None => format!("step '{}'", step.id),
        };
        let reason = match (step.status, failed_assertions.split_first()) {
            (StepStatus::Failed | StepStatus::Done, Some((first, rest))) => {
                let more = match rest.len() {
                    0 => String::new(),
                    n => format!(" (and {n} more failed assertion{})", plural(n)),
                };
                Reason {
                    code: ReasonCode::AssertionFailed,
                    step: Some(step.id.clone()),
                    message: format!("{label}: {} failed: {}{more}", first.kind, first.detail),
                }
            }
            (StepStatus::Failed, None) if input.mismatched.contains(&step.id) => {
                let why = step.error.as_deref().unwrap_or("plan-execution mismatch");
                Reason {
                    code: ReasonCode::PlanExecutionMismatch,
                    step: Some(step.id.clone()),
                    message: format!("{label}: {}", clip(why, CLIP.saturating_mul(3))),
                }
            }
            (StepStatus::Failed, None) if input.judge_rejected.contains(&step.id) => {
                let why = step.error.as_deref().unwrap_or("the judge rejected the step");
                Reason {
                    code: ReasonCode::JudgeRejected,
                    step: Some(step.id.clone()),
                    message: format!("{label}: {}", clip(why, CLIP.saturating_mul(2))),
                }
            }
            (StepStatus::Failed, None) => {
                let attempts = match step.attempts {
                    0 | 1 => String::new(),
                    n => format!(" after {n} attempts"),
                };
                let why =
                    step.error.as_ref().or(step.evidence.last()).map_or_else(String::new, |e| {
                        format!(": {}", clip(e, CLIP.saturating_mul(2)))
                    });
                Reason {
                    code: ReasonCode::StepFailed,
                    step: Some(step.id.clone()),
                    message: format!("{label} failed{attempts}{why}"),
                }
            }
            _ => continue,
        };
        reasons.push(reason);
    }
}

/// One `steps_not_run` for the steps that never finished and do not wait for approval.
fn not_run_reason(input: &OutcomeInput<'_>, reasons: &mut Vec<Reason>) {
    let awaiting: HashSet<&str> = input.awaiting_approval.iter().map(String::as_str).collect();
    let reported: HashSet<&str> = input.steps.iter().map(|s| s.id.as_str()).collect();
    let unfinished = input.steps.iter().filter(|s| {
        matches!(s.status, StepStatus::Pending | StepStatus::InProgress | StepStatus::Blocked)
    });
    let not_run: Vec<&str> = unfinished
        .map(|s| s.id.as_str())
        .chain(input.plan.steps.iter().map(|s| s.id.as_str()).filter(|id| !reported.contains(id)))
        .filter(|id| !awaiting.contains(id))
        .collect();
    if not_run.is_empty() {
        return;
    }
    let named: Vec<String> = not_run.iter().take(NAMED_STEPS).map(|id| format!("'{id}'")).collect();
    let rest = not_run.len().saturating_sub(NAMED_STEPS);
    let more = if rest > 0 { format!(" and {rest} more") } else { String::new() };
    let count = not_run.len();
    reasons.push(Reason {
        code: ReasonCode::StepsNotRun,
        step: None,
        message: format!("{count} step{} did not run: {}{more}", plural(count), named.join(", ")),
    });
}

/// `postcondition_unverified` for each postcondition without evidence that it holds. Results
/// are matched to the plan's postconditions by position, or else by description.
fn postcondition_reasons(input: &OutcomeInput<'_>, reasons: &mut Vec<Reason>) {
    let results = input.postconditions;
    let mut used = vec![false; results.len()];
    let mut unverified = |message: String| {
        reasons.push(Reason { code: ReasonCode::PostconditionUnverified, step: None, message });
    };
    for (i, post) in input.plan.postconditions.iter().enumerate() {
        let same = |r: &PostconditionResult| r.description == post.description;
        let found = results
            .get(i)
            .filter(|r| same(r) && !used.get(i).copied().unwrap_or(true))
            .map(|r| (i, r))
            .or_else(|| {
                results
                    .iter()
                    .enumerate()
                    .find(|(j, r)| same(r) && !used.get(*j).copied().unwrap_or(true))
            });
        let Some((j, result)) = found else {
            unverified(format!(
                "postcondition \"{}\" was not checked",
                clip(&post.description, CLIP)
            ));
            continue;
        };
        if let Some(u) = used.get_mut(j) {
            *u = true;
        }
        if let Some(message) = unverified_message(result) {
            unverified(message);
        }
    }
    // Results for postconditions the plan does not list (a revised plan, a caller's own check)
    // count the same way.
    for (result, _) in results.iter().zip(&used).filter(|(_, used)| !**used) {
        if let Some(message) = unverified_message(result) {
            unverified(message);
        }
    }
}

/// Why `result` does not show its postcondition holds, if it does not.
fn unverified_message(result: &PostconditionResult) -> Option<String> {
    let description = clip(&result.description, CLIP);
    if !result.satisfied {
        Some(format!("postcondition \"{description}\" is not satisfied: {}", result.evidence))
    } else if result.evidence.trim().is_empty() {
        Some(format!("postcondition \"{description}\" was reported satisfied without evidence"))
    } else {
        None
    }
}

/// The status, from the reasons and the steps.
fn status(input: &OutcomeInput<'_>, reasons: &[Reason]) -> RunStatus {
    if reasons.is_empty() {
        return RunStatus::Success;
    }
    let waiting_only = !input.awaiting_approval.is_empty()
        && reasons.iter().all(|r| {
            matches!(
                r.code,
                ReasonCode::ApprovalPending
                    | ReasonCode::StepsNotRun
                    | ReasonCode::PostconditionUnverified
                    | ReasonCode::NoEffects
            )
        });
    if waiting_only {
        return RunStatus::AwaitingApproval;
    }
    let on_fail: HashMap<&str, OnFail> =
        input.plan.steps.iter().map(|s| (s.id.as_str(), s.on_fail)).collect();
    let hard_failure = input.steps.iter().any(|s| {
        s.status == StepStatus::Failed
            && on_fail.get(s.id.as_str()).copied().unwrap_or_default() != OnFail::Continue
    });
    let any_done = input.steps.iter().any(|s| s.status == StepStatus::Done);
    if hard_failure || !any_done { RunStatus::Failed } else { RunStatus::Partial }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
#[path = "outcome_tests.rs"]
mod tests;
