//! Running one step: resolve its references, get approval if it needs it, hash the files it may
//! change, journal the intent (durably, before any effect), call the tool, then measure what
//! changed and check the step's assertions.
//!
//! The order matters for resume: the intent record (with the hash before and, for writes and
//! patches, the hash the call will produce) reaches the disk before the tool runs, so after a
//! crash `recover` can tell "not applied" from "applied" by looking at the file.

pub(crate) mod approval;
pub(crate) mod cache;
pub(crate) mod check;
pub(crate) mod delegated;
pub(crate) mod hooks;
pub(crate) mod instruction;
pub(crate) mod invoke;
pub(crate) mod judge;
pub(crate) mod recover;
pub(crate) mod spawn_mark;

use std::sync::Arc;

use pev_protocol::Step;
use pev_protocol::event::{EventBody, now_rfc3339};
use pev_protocol::run::StepStatus;
use pev_store::{Record, StoreError};
use serde_json::Value;

use crate::call::{Call, target_path, watched_paths};
use crate::engine::Approval;
use crate::resolve::resolve_parameters;
use crate::state::slot::Slot;
use crate::state::step::{Shared, StepJob, StepReport, fail, max_attempts};
use crate::step::approval::{approval_reason, ask_approval};
use crate::step::invoke::invoke;

pub(crate) async fn run_step(shared: Arc<Shared>, mut job: StepJob) -> StepReport {
    let _running = shared.activity.enter();
    let mut report = StepReport {
        idx: job.idx,
        slot: Slot {
            attempts: job.attempts_before,
            baseline: std::mem::take(&mut job.baseline),
            ..Slot::default()
        },
        mutations: Vec::new(),
        tool_calls: 0,
        warnings: Vec::new(),
        cancelled: false,
        budget_exhausted: None,
        cache: crate::cache::trace::Trace::default(),
        restored_mutations: 0,
        already_counted: Vec::new(),
        earlier_mutations: std::mem::take(&mut job.earlier_mutations),
    };
    let plan = Arc::clone(&shared.plan);
    let Some(step) = plan.steps.get(job.idx) else {
        fail(&mut report.slot, "internal error: no such step");
        return report;
    };
    let driven = match drive(&shared, step, &mut job, &mut report).await {
        Ok(()) => crate::step::cache::remember(&shared, step, &mut report),
        Err(e) => Err(e),
    };
    if let Err(e) = driven {
        fail(&mut report.slot, &format!("the journal failed: {e}"));
    }
    report
}

/// Asks for a step's approval; `false` when it may not run now (refused: the step failed;
/// deferred: it waits, blocked).
async fn approved(
    shared: &Shared,
    step: &Step,
    (what, args, reason): (&str, &Value, String),
    report: &mut StepReport,
) -> Result<bool, StoreError> {
    match ask_approval(shared, step, what, args, reason).await? {
        Approval::Yes => Ok(true),
        Approval::No => {
            fail(&mut report.slot, "a person refused approval");
            Ok(false)
        }
        Approval::Defer => {
            report.slot.status = StepStatus::Blocked;
            report.slot.awaiting_approval = true;
            report.slot.started_at = None;
            Ok(false)
        }
    }
}

async fn drive(
    shared: &Shared,
    step: &Step,
    job: &mut StepJob,
    report: &mut StepReport,
) -> Result<(), StoreError> {
    let engine = &shared.engine;
    let id = step.id.as_str();
    report.slot.started_at = Some(now_rfc3339());
    if let Some(delegation) = &step.delegate {
        if !job.approved && step.requires_approval {
            let args = serde_json::json!({ "delegate": delegation.goal });
            let reason = "the step sets requires_approval".to_owned();
            if !approved(shared, step, ("delegate", &args, reason), report).await? {
                return Ok(());
            }
        }
        report.cache.refuse("a delegated step runs a child run".to_owned());
        return crate::step::delegated::run(shared, step, delegation, &job.inputs, report).await;
    }
    if step.tool.is_none() {
        if crate::step::cache::try_reuse(shared, step, job, report, (None, None, false))? {
            return Ok(());
        }
        if !job.approved && step.requires_approval {
            let args = serde_json::json!({ "description": step.description });
            let reason = "the step sets requires_approval".to_owned();
            if !approved(shared, step, ("executor", &args, reason), report).await? {
                return Ok(());
            }
        }
        let continuation = job.continuation.take();
        return crate::step::instruction::run(shared, step, &job.inputs, continuation, report)
            .await;
    }
    let Some((tool_name, tool)) =
        step.tool.as_deref().and_then(|t| engine.registry.get(t).map(|tool| (t, Arc::clone(tool))))
    else {
        fail(&mut report.slot, "the step names no tool pev has");
        return Ok(());
    };
    let effect = tool.effect();
    let args = match resolve_parameters(&step.parameters.to_map(), &|s| job.inputs.get(s)) {
        Ok(map) => Value::Object(map),
        Err(e) => {
            fail(&mut report.slot, &e.to_string());
            return Ok(());
        }
    };

    if job.recovery.is_some() {
        report.cache.refuse("it was settled after an interruption".to_owned());
    } else {
        let needs_approval = approval_reason(shared, step, tool_name).is_some();
        let reuse = (Some(&args), Some(effect), needs_approval);
        if crate::step::cache::try_reuse(shared, step, job, report, reuse)? {
            return Ok(());
        }
    }
    if !job.approved
        && let Some(reason) = approval_reason(shared, step, tool_name)
        && !approved(shared, step, (tool_name, &args, reason), report).await?
    {
        return Ok(());
    }

    let target = target_path(effect, &args);
    if let Some(refused) = target
        .as_deref()
        .and_then(|t| shared.oracle.refusal(&engine.ctx.workspace, step, (tool_name, t, &args)))
    {
        report.slot.attempts += 1;
        fail(&mut report.slot, &refused);
        return Ok(());
    }
    let watched = watched_paths(step, target.as_deref());
    let call = Call {
        step,
        tool: tool_name,
        effect,
        args: &args,
        watched: &watched,
        target: target.as_deref(),
    };
    // A command (or request) that may have run before the run stopped is not run again by
    // itself when its step says it must not happen twice: a person approves it by name.
    if let Some(r) = &job.recovery
        && crate::step::recover::may_have_run(engine.ctx.workspace.root(), &r.call)
        && !step.repeatable()
        && !job.approved
    {
        let reason = format!(
            "the run stopped while {} of this step was running, so it may have run already, and \
             the step is marked not repeatable: approve the step to run it again",
            r.call.tool
        );
        let answer =
            crate::step::approval::ask_explicit_approval(shared, step, tool_name, &args, reason)
                .await?;
        match answer {
            Approval::Yes => {}
            Approval::No => {
                fail(&mut report.slot, "a person refused to run it again");
                return Ok(());
            }
            Approval::Defer => {
                report.slot.status = StepStatus::Blocked;
                report.slot.awaiting_approval = true;
                report.slot.started_at = None;
                return Ok(());
            }
        }
    }
    let max_attempts = max_attempts(step);
    let mut recovery = job.recovery.take();
    loop {
        report.slot.attempts += 1;
        report.slot.status = StepStatus::InProgress;
        report.slot.error = None;
        shared
            .recorder
            .record(Record::StepState(report.slot.to_stored(shared.recorder.run_id(), id)))?;
        shared
            .recorder
            .emit(EventBody::StepStarted { step: id.to_owned(), attempt: report.slot.attempts })?;

        let mutations_before = report.mutations.len();
        let settled = match recovery.take() {
            Some(r) => crate::step::recover::settle(shared, &call, r, report).await?,
            None => None,
        };
        let mut objection = None;
        let (before, end) = match settled {
            Some((before, mut end)) => {
                crate::step::check::record_changes(shared, &call, &before, &mut end, report)?;
                (before, end)
            }
            None => {
                let hooked = (tool_name, &args);
                if let Some(reason) =
                    crate::step::hooks::before_call(shared, step, hooked, report).await?
                {
                    // Denied: the call is not made, and asking again would be denied again.
                    fail(&mut report.slot, &format!("hook denied: {reason}"));
                    break;
                }
                let (before, mut end) = invoke(shared, &call, &*tool, report, None).await?;
                // The call's end and its changes are journaled before any hook runs: a kill
                // during a slow hook must not leave a finished command looking unfinished.
                crate::step::check::record_changes(shared, &call, &before, &mut end, report)?;
                objection =
                    crate::step::hooks::after_step_call(shared, step, hooked, &end.output, report)
                        .await?;
                (before, end)
            }
        };
        crate::step::check::check_output(shared, &call, (&before, end), &job.inputs, report)
            .await?;
        // The file's lock goes with it: a judge is not waited for by another writer.
        drop(before);
        if let Some(reason) = objection {
            // The call happened (its changes are recorded above), but the hook rejects it.
            fail(&mut report.slot, &format!("hook denied: {reason}"));
        }
        if report.slot.status == StepStatus::Done
            && let Some(models) = engine.config.models.clone()
        {
            let claim = report.slot.output.as_ref().map(Value::to_string).unwrap_or_default();
            let claim: String = claim.chars().take(4000).collect();
            let mutations = report
                .mutations
                .iter()
                .skip(mutations_before)
                .map(|m| m.mutation.clone())
                .collect();
            crate::step::judge::judge(
                shared,
                &models,
                step,
                (claim, Vec::new(), mutations, Vec::new()),
                report,
            )
            .await?;
            if report.budget_exhausted.is_some() {
                break;
            }
        }
        if report.slot.status == StepStatus::Done || report.slot.attempts >= max_attempts {
            break;
        }
        if engine.config.cancel.is_cancelled() {
            report.cancelled = true;
            break;
        }
        let message = format!(
            "step `{id}`: attempt {} of {max_attempts} failed: {}; trying again",
            report.slot.attempts,
            report.slot.error.as_deref().unwrap_or("unknown error")
        );
        shared
            .recorder
            .emit(EventBody::Warning { step: Some(id.to_owned()), message: message.clone() })?;
        report.warnings.push(message);
        report.cache.retry_warnings += 1;
    }
    Ok(())
}
