//! The outcome of a client's run, decided by pev from the journal and the workspace as it is
//! now, never from what the client says. The steps of the client's plan count as done only as
//! `step_update` accepted them (their assertions passed then), and every assertion behind a done
//! step or a verified postcondition runs again now (`final_recheck`): work undone since is a
//! regression. What changed is the workspace against the snapshot taken with the plan, so a plan
//! marked done over an unchanged workspace is `no_effects`, not success. The status and reasons
//! come from `pev_verify::decide`, the same rule as every other run.

use pev_engine::agent::loop_mode::{
    LoopReport, ModelPostcondition, StepStatus as ModelStatus, TodoStatus, VerifiedBy,
};
use pev_engine::agent::loop_run::{as_plan, final_recheck};
use pev_protocol::run::FileMutation;
use pev_protocol::run::{
    PostconditionResult, Reason, ReasonCode, RunResult, RunStatus, StepResult, StepStatus, Usage,
};
use pev_protocol::{Plan, Step, StepId};
use pev_store::Store;
use pev_tools::ToolContext;
use serde_json::Value;

use crate::McpError;
use crate::session::{ClientCall, McpState, state_of};
use crate::snapshot::{self, Snapshot};

/// The verdict on `run_id` now.
pub async fn verdict(
    store: &Store,
    run_id: &str,
    ctx: &ToolContext,
) -> Result<RunResult, McpError> {
    let record = store.load_run(run_id)?;
    let journaled = state_of(store, run_id)?;
    let run = Run {
        goal: &record.goal,
        run_id,
        state: &journaled.state,
        snapshot: journaled.snapshot.as_ref(),
        options: &record.options,
    };
    let mut result = decide(&run, store, ctx, &journaled.client_tools).await;
    result.usage.tool_calls = journaled.calls;
    Ok(result)
}

/// What the journal holds of a client's run.
struct Run<'a> {
    goal: &'a str,
    run_id: &'a str,
    state: &'a McpState,
    snapshot: Option<&'a Snapshot>,
    /// The run's options (the oracle settings recorded with the plan).
    options: &'a serde_json::Value,
}

async fn decide(
    run: &Run<'_>,
    store: &Store,
    ctx: &ToolContext,
    calls: &[ClientCall],
) -> RunResult {
    let Run { goal, run_id, state, snapshot, options } = *run;
    let mut warnings = Vec::new();
    let changes = match snapshot {
        Some(snapshot) => snapshot::changes(snapshot, &ctx.workspace, Some(store)),
        None => snapshot::Changes {
            mutations: Vec::new(),
            unknown: Some("the run has no workspace snapshot".to_owned()),
        },
    };
    if let Some(why) = &changes.unknown {
        warnings.push(format!("{why}; the run is judged as if nothing changed"));
    }

    let model = state.book.plan.as_ref();
    let marks = state.book.marks();
    let mut changes = changes;
    let no_ops = no_op_writes(calls, &changes, snapshot, ctx);
    changes.mutations.extend(no_ops);
    let mut plan = match model {
        Some(p) => as_plan(goal, p),
        None => Plan { goal: goal.to_owned(), ..Plan::default() },
    };
    let order: Vec<&str> =
        model.map(|p| p.steps.iter().map(|s| s.id.as_str()).collect()).unwrap_or_default();
    let mut steps: Vec<StepResult> = model
        .map(|p| {
            p.steps
                .iter()
                .map(|s| StepResult {
                    id: s.id.clone(),
                    status: match s.status {
                        ModelStatus::Done => StepStatus::Done,
                        ModelStatus::InProgress => StepStatus::InProgress,
                        ModelStatus::Blocked => StepStatus::Blocked,
                        ModelStatus::Pending => StepStatus::Pending,
                    },
                    attempts: u32::from(s.status == ModelStatus::Done),
                    evidence: s
                        .evidence
                        .iter()
                        .cloned()
                        .chain(calls_behind(&s.id, &order, &marks, calls))
                        .collect(),
                    assertions: marks.step_results.get(&s.id).cloned().unwrap_or_default(),
                    output: None,
                    error: s.blocked_reason.clone(),
                    started_at: None,
                    ended_at: None,
                })
                .collect()
        })
        .unwrap_or_default();
    // The todo list is the client's own account: it can keep the run from success (an item
    // not completed), never make it one.
    for (i, item) in state.todo.iter().enumerate() {
        let id = format!("todo-{}", i.saturating_add(1));
        // (The id is what the outcome names; the item's words are in the run's events.)
        let mut step = Step { id: StepId::new(id.clone()), ..Step::default() };
        step.index_references();
        plan.steps.push(step);
        steps.push(StepResult {
            id,
            status: match item.status {
                TodoStatus::Completed => StepStatus::Done,
                TodoStatus::InProgress => StepStatus::InProgress,
                TodoStatus::Pending => StepStatus::Pending,
            },
            attempts: 0,
            evidence: Vec::new(),
            assertions: Vec::new(),
            output: None,
            error: None,
            started_at: None,
            ended_at: None,
        });
    }
    if !state.todo.is_empty() && model.is_none() {
        warnings.push(
            "the run has a todo list but no plan: the items are the client's own account, \
             checked by nothing but the workspace's changes"
                .to_owned(),
        );
    }
    let postconditions: Vec<PostconditionResult> =
        model.map(|p| p.postconditions.iter().map(postcondition).collect()).unwrap_or_default();

    // What the final re-check reads: the plan and where its evidence was taken.
    let report = LoopReport { plan: model.cloned(), evidence: marks, ..LoopReport::default() };
    let mut check = final_recheck(ctx, &report).await;
    let oracle_reasons = match snapshot {
        Some(snapshot) if !snapshot.truncated => {
            let at = (snapshot, options);
            crate::oracle::settle(at, (store, ctx), &report, &mut check, &mut warnings).await
        }
        _ => Vec::new(),
    };
    let mutation_steps = vec![String::new(); changes.mutations.len()];
    let goal_actions_executed = changes.mutations.iter().any(|m| !m.no_op);
    let input = pev_verify::OutcomeInput {
        plan: &plan,
        steps: &steps,
        postconditions: &postconditions,
        mutations: &changes.mutations,
        mutation_steps: &mutation_steps,
        goal_actions_executed,
        awaiting_approval: &[],
        cancelled: false,
        judge_rejected: &[],
        mismatched: &[],
        budget_exhausted: None,
        regressions: &check.regressed,
        oracle: &oracle_reasons,
    };
    let (mut status, mut reasons) = pev_verify::decide(&input);
    // A client's run has no goal-action steps of its own: "no step with a write effect" would
    // be wrong; what pev knows is that the workspace did not change.
    for reason in reasons.iter_mut().filter(|r| r.code == ReasonCode::NoEffects) {
        reason.message = format!(
            "the goal asks for a change (\"{}\"), but the workspace is exactly as it was when the \
             plan was made",
            pev_engine::agent::loop_mode::plan_tools::clip(goal, 120)
        );
    }
    // A rewrite that dropped steps is the client's choice, recorded; it is not evidence.
    let dropped: Vec<String> = state
        .book
        .revisions
        .iter()
        .flat_map(|r| &r.dropped)
        .map(|d| format!("`{}` ({})", d.id, d.reason))
        .collect();
    if !dropped.is_empty() {
        warnings.push(format!("the client dropped step(s) from its plan: {}", dropped.join(", ")));
    }
    // A todo list is the client's own account: without a plan the run is never `success`.
    if model.is_none() && !state.todo.is_empty() && status == RunStatus::Success {
        status = RunStatus::Partial;
        reasons.push(Reason {
            code: ReasonCode::StepsNotRun,
            step: None,
            message: "the run has a todo list but no plan: nothing pev could check shows the \
                      items were done (create a plan with assertions: plan_create)"
                .to_owned(),
        });
    }
    if model.is_none() && state.todo.is_empty() {
        status = RunStatus::Failed;
        if reasons.is_empty() {
            reasons.push(Reason {
                code: ReasonCode::StepsNotRun,
                step: None,
                message: "the run has no plan".to_owned(),
            });
        }
    }
    warnings.extend(check.checked_once.iter().map(pev_verify::checked_once_warning));
    RunResult {
        run_id: run_id.to_owned(),
        goal: goal.to_owned(),
        status,
        reasons,
        goal_actions_executed,
        steps,
        postconditions,
        file_mutations: changes.mutations,
        warnings,
        usage: Usage::default(),
        duration_ms: 0,
        final_check: Some(check),
    }
}

/// The client's own calls a done step's evidence rests on: those recorded after the previous
/// step's accepted evidence and before this step's, one line each (steps whose evidence was
/// accepted with no call between them: the calls go to the first in plan order).
fn calls_behind(
    step: &str,
    order: &[&str],
    marks: &pev_engine::agent::loop_mode::EvidenceMarks,
    calls: &[ClientCall],
) -> Vec<String> {
    // The accepted steps in the order their evidence came (ties in plan order); each step owns
    // the calls since the one before it.
    let position = |id: &str| order.iter().position(|o| *o == id).unwrap_or(usize::MAX);
    let mut accepted: Vec<(u64, usize, &str)> =
        marks.step_at.iter().map(|(id, m)| (*m, position(id), id.as_str())).collect();
    accepted.sort_unstable();
    let Some(i) = accepted.iter().position(|a| a.2 == step) else { return Vec::new() };
    let at = accepted.get(i).map_or(0, |a| a.0);
    let from = i.checked_sub(1).and_then(|p| accepted.get(p)).map_or(0, |a| a.0);
    let (from, at) = (usize::try_from(from).unwrap_or(0), usize::try_from(at).unwrap_or(0));
    let at = at.min(calls.len());
    calls
        .get(from.min(at)..at)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let what = ["command", "path"]
                .iter()
                .find_map(|k| c.summary.get(*k).and_then(Value::as_str))
                .unwrap_or_default();
            let exit = ["exit_code", "exitCode", "returnCode"]
                .iter()
                .find_map(|k| c.summary.get(*k))
                .map(|v| format!(" (exit {v})"))
                .unwrap_or_default();
            format!("client call: {} {what}{exit}", c.tool)
        })
        .collect()
}

/// Files the client wrote (its recorded calls name them) whose content is byte-for-byte what
/// the snapshot saw: no-op mutations, as a write that changes nothing is in any run.
fn no_op_writes(
    calls: &[ClientCall],
    changes: &snapshot::Changes,
    snapshot: Option<&Snapshot>,
    ctx: &ToolContext,
) -> Vec<FileMutation> {
    let Some(snapshot) = snapshot else { return Vec::new() };
    let root = ctx.workspace.root();
    let mut out: Vec<FileMutation> = Vec::new();
    for call in calls {
        // Only a write the client itself reports as leaving the file as it was: an edit undone
        // later, or a tool that only reads a path, is not a no-op write.
        if call.summary.get("no_op").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let Some(path) = call.summary.get("path").and_then(Value::as_str) else { continue };
        let relative = std::path::Path::new(path)
            .strip_prefix(root)
            .map_or_else(|_| path.to_owned(), |p| p.display().to_string());
        let Some(entry) = snapshot.files.get(&relative) else { continue };
        // Unchanged since the snapshot (the diff compared the hashes), counted once.
        let changed = changes.mutations.iter().any(|m| m.path == relative);
        if !changed && !out.iter().any(|m| m.path == relative) {
            out.push(FileMutation {
                path: relative,
                bytes_before: entry.bytes,
                bytes_after: entry.bytes,
                lines_added: 0,
                lines_removed: 0,
                no_op: true,
            });
        }
    }
    out
}

fn postcondition(pc: &ModelPostcondition) -> PostconditionResult {
    let by_harness = pc.verified && pc.verified_by == Some(VerifiedBy::Harness);
    let evidence = if by_harness {
        pc.evidence.clone().unwrap_or_default()
    } else if pc.assertions.is_empty() {
        match &pc.evidence {
            Some(e) => format!("no assertion; claimed by the client, not evidence: {e}"),
            None => "no assertion, and not verified".to_owned(),
        }
    } else {
        "not verified with postcondition_verify".to_owned()
    };
    PostconditionResult {
        description: pc.description.clone(),
        satisfied: by_harness,
        evidence,
        judge: None,
    }
}
