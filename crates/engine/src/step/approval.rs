//! Approval: whether a step needs a person's yes (`requires_approval`, or a tool the policy's
//! `approve_tools` lists), and asking for it as the run's mode says (`--yes`, a terminal, or
//! nobody: the run waits), with the request and a yes journaled.

use std::sync::Arc;

use pev_protocol::Step;
use pev_protocol::event::{EventBody, now_rfc3339};
use pev_store::{ApprovalRecord, Record, StoreError};
use serde_json::Value;

use crate::engine::{Approval, ApprovalMode, ApprovalRequest};
use crate::state::step::Shared;

/// Why `step` needs approval, if it does.
pub(crate) fn approval_reason(shared: &Shared, step: &Step, tool: &str) -> Option<String> {
    if step.requires_approval {
        return Some("the step sets requires_approval".to_owned());
    }
    shared
        .approve_globs
        .iter()
        .find(|g| g.matches(tool))
        .map(|g| format!("the policy's approve_tools lists `{}`", g.as_str()))
}

/// Asks for approval as the run's mode says, journaling the request and a yes.
pub(crate) async fn ask_approval(
    shared: &Shared,
    step: &Step,
    tool: &str,
    args: &Value,
    reason: String,
) -> Result<Approval, StoreError> {
    ask(shared, step, (tool, args, reason), true).await
}

/// [`ask_approval`] for what `--yes` may not answer (a command that may have run before a crash,
/// of a step marked not repeatable): without a person to ask, the run stops for approval.
pub(crate) async fn ask_explicit_approval(
    shared: &Shared,
    step: &Step,
    tool: &str,
    args: &Value,
    reason: String,
) -> Result<Approval, StoreError> {
    ask(shared, step, (tool, args, reason), false).await
}

async fn ask(
    shared: &Shared,
    step: &Step,
    (tool, args, reason): (&str, &Value, String),
    yes_answers: bool,
) -> Result<Approval, StoreError> {
    let id = step.id.as_str().to_owned();
    let (answer, by) = match &shared.engine.config.approval {
        ApprovalMode::All if yes_answers => (Approval::Yes, "--yes"),
        ApprovalMode::All => {
            shared
                .recorder
                .emit(EventBody::ApprovalRequested { step: id, tool: Some(tool.to_owned()) })?;
            return Ok(Approval::Defer);
        }
        ApprovalMode::Defer => {
            shared
                .recorder
                .emit(EventBody::ApprovalRequested { step: id, tool: Some(tool.to_owned()) })?;
            return Ok(Approval::Defer);
        }
        ApprovalMode::Ask(approver) => {
            shared.recorder.emit(EventBody::ApprovalRequested {
                step: id.clone(),
                tool: Some(tool.to_owned()),
            })?;
            let request = ApprovalRequest {
                step: id.clone(),
                title: step.label().to_owned(),
                tool: Some(tool.to_owned()),
                arguments: args.clone(),
                reason,
            };
            let approver = Arc::clone(approver);
            let _one_at_a_time = shared.approval_lock.lock().await;
            let answer = tokio::task::spawn_blocking(move || approver.decide(&request))
                .await
                .unwrap_or(Approval::Defer);
            (answer, "tty")
        }
    };
    if answer == Approval::Yes {
        shared.recorder.record(Record::Approval(ApprovalRecord {
            run_id: shared.recorder.run_id().to_owned(),
            step_id: id.clone(),
            by: by.to_owned(),
            at: now_rfc3339(),
        }))?;
        shared.recorder.emit(EventBody::ApprovalGranted { step: id, by: by.to_owned() })?;
    }
    Ok(answer)
}
