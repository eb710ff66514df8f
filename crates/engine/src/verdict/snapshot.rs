//! The result of a run that has not finished (still running, or interrupted by a crash), built
//! from the journal alone: what `pev show` prints for it. Nothing is checked again; the
//! postconditions are reported unverified, since they are only checked at the end.

use pev_protocol::Plan;
use pev_protocol::run::{PostconditionResult, RunResult, StepResult, StepStatus, Usage};
use pev_store::RunRecord;
use pev_verify::OutcomeInput;

use crate::state::slot::Slot;

/// The run as the journal has it now. A stored result is returned as it is.
pub fn snapshot(record: &RunRecord) -> RunResult {
    if let Some(result) = &record.result {
        return result.clone();
    }
    let plan: Plan = serde_json::from_value(record.plan.clone()).unwrap_or_default();
    let steps: Vec<StepResult> = plan
        .steps
        .iter()
        .map(|step| {
            record.steps.iter().find(|s| s.step_id == step.id.as_str()).map_or_else(
                || Slot::default().to_result(step.id.as_str()),
                |s| Slot::from_stored(s).to_result(step.id.as_str()),
            )
        })
        .collect();
    let postconditions: Vec<PostconditionResult> = plan
        .postconditions
        .iter()
        .map(|pc| PostconditionResult {
            description: pc.description.clone(),
            satisfied: false,
            evidence: "not checked: the run has not finished".to_owned(),
            judge: None,
        })
        .collect();
    let goal_actions_executed = record.tool_calls.iter().any(|c| {
        matches!(
            c.status,
            pev_store::ToolCallStatus::Finished | pev_store::ToolCallStatus::Recovered
        ) && pev_verify::is_goal_action(&c.tool, c.effect, &c.arguments)
            && steps.iter().any(|s| s.id == c.step_id && s.status == StepStatus::Done)
    });
    let file_mutations: Vec<_> = record.mutations.iter().map(|m| m.mutation.clone()).collect();
    let mutation_steps: Vec<String> = record.mutations.iter().map(|m| m.step_id.clone()).collect();
    let awaiting: Vec<String> =
        steps.iter().filter(|s| s.status == StepStatus::Blocked).map(|s| s.id.clone()).collect();
    let (status, reasons) = pev_verify::decide(&OutcomeInput {
        plan: &plan,
        steps: &steps,
        postconditions: &postconditions,
        mutations: &file_mutations,
        mutation_steps: &mutation_steps,
        goal_actions_executed,
        awaiting_approval: &awaiting,
        cancelled: false,
        judge_rejected: &[],
        mismatched: &[],
        budget_exhausted: None,
        regressions: &[],
        oracle: &[],
    });
    RunResult {
        run_id: record.run_id.clone(),
        goal: record.goal.clone(),
        status,
        reasons,
        goal_actions_executed,
        steps,
        postconditions,
        file_mutations,
        warnings: Vec::new(),
        usage: Usage { tool_calls: record.tool_calls.len() as u64, ..Usage::default() },
        duration_ms: 0,
        final_check: None,
    }
}
