//! The run's side of hooks: when a step calls [`Hooks`] (before and after each call, and when the
//! step reaches its status), and what their answers become (evidence, warnings, a denial).

use pev_protocol::Step;
use pev_protocol::event::EventBody;
use pev_store::StoreError;
use serde_json::Value;

use crate::hooks::{HookDecision, HookEvent, HookKind, Hooks};
use crate::state::slot::Slot;
use crate::state::step::{Shared, StepReport};

/// `pre_tool_use` for a call `step` is about to make: the reason when the call is denied (it
/// must not be made). Failures are journaled as warnings, a denial as the step's evidence.
pub(crate) async fn before_call(
    shared: &Shared,
    step: &Step,
    (tool, args): (&str, &Value),
    report: &mut StepReport,
) -> Result<Option<String>, StoreError> {
    let Some(hooks) = configured(shared, HookKind::PreToolUse) else { return Ok(None) };
    let event = HookEvent::pre_tool_use(shared.recorder.run_id(), step.id.as_str(), tool, args);
    let decision = hooks.run(&event).await;
    warn(shared, step, &decision.failures, &mut report.warnings)?;
    if let Some(context) = &decision.context {
        report.slot.evidence.push(format!("pre_tool_use hook on {tool}: {context}"));
    }
    if decision.allowed() {
        return Ok(None);
    }
    let reason = decision.reason_or_default(HookKind::PreToolUse);
    report.slot.evidence.push(format!("pre_tool_use hook denied {tool}: {reason}"));
    Ok(Some(reason))
}

/// `post_tool_use` after a call `step` made. Failures are journaled as warnings, a denial as
/// evidence; what to do with the context and a denial is the caller's (it differs between a
/// tool step and an executor's call).
pub(crate) async fn after_call(
    shared: &Shared,
    step: &Step,
    call: (&str, &Value),
    result: &Result<Value, String>,
    report: &mut StepReport,
) -> Result<HookDecision, StoreError> {
    let Some(hooks) = configured(shared, HookKind::PostToolUse) else {
        return Ok(HookDecision::default());
    };
    let event = HookEvent::post_tool_use(shared.recorder.run_id(), step.id.as_str(), call, result);
    let decision = hooks.run(&event).await;
    warn(shared, step, &decision.failures, &mut report.warnings)?;
    if !decision.allowed() {
        let reason = decision.reason_or_default(HookKind::PostToolUse);
        report.slot.evidence.push(format!("post_tool_use hook denied {}: {reason}", call.0));
    }
    Ok(decision)
}

/// [`after_call`] for a tool step's call: the context becomes the step's evidence; returns the
/// reason when a hook denied the call (the attempt then fails, though the call was made).
pub(crate) async fn after_step_call(
    shared: &Shared,
    step: &Step,
    call: (&str, &Value),
    result: &Result<Value, String>,
    report: &mut StepReport,
) -> Result<Option<String>, StoreError> {
    let decision = after_call(shared, step, call, result, report).await?;
    if let Some(context) = &decision.context {
        report.slot.evidence.push(format!("post_tool_use hook: {context}"));
    }
    Ok((!decision.allowed()).then(|| decision.reason_or_default(HookKind::PostToolUse)))
}

/// `step_finished` for a step that reached its status: its context becomes evidence; a
/// refusal cannot undo the step, so it is evidence and a warning.
pub(crate) async fn step_finished(
    shared: &Shared,
    step: &Step,
    slot: &mut Slot,
    warnings: &mut Vec<String>,
) -> Result<(), StoreError> {
    let Some(hooks) = configured(shared, HookKind::StepFinished) else { return Ok(()) };
    let status = serde_json::to_value(slot.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let event = HookEvent::step_finished(
        shared.recorder.run_id(),
        step.id.as_str(),
        step.tool.as_deref(),
        (&status, slot.error.as_deref()),
    );
    let decision = hooks.run(&event).await;
    let mut messages = decision.failures.clone();
    if let Some(context) = &decision.context {
        slot.evidence.push(format!("step_finished hook: {context}"));
    }
    if !decision.allowed() {
        let reason = decision.reason_or_default(HookKind::StepFinished);
        slot.evidence.push(format!("step_finished hook objected: {reason}"));
        messages.push(format!("the step_finished hook objected: {reason}"));
    }
    warn(shared, step, &messages, warnings)
}

/// The run's hooks, when `kind` has commands.
fn configured(shared: &Shared, kind: HookKind) -> Option<&Hooks> {
    shared.engine.config.hooks.as_deref().filter(|h| h.has(kind))
}

/// Journals each of `messages` as a warning of `step`.
fn warn(
    shared: &Shared,
    step: &Step,
    messages: &[String],
    warnings: &mut Vec<String>,
) -> Result<(), StoreError> {
    for message in messages {
        let message = format!("step `{}`: {message}", step.id);
        shared.recorder.emit(EventBody::Warning {
            step: Some(step.id.as_str().to_owned()),
            message: message.clone(),
        })?;
        warnings.push(message);
    }
    Ok(())
}
