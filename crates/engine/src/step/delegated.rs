//! A delegated step's attempts: the child run is started under an id fixed by the parent step
//! and attempt (journaled first, so a resume finds it), its verdict and the step's own assertions
//! decide the step, and a change outside its scope fails it (the contract is `delegation.rs`).

use crate::call::StepMutation;
use crate::call::{Before, Call, CallEnd, watched_paths};
use crate::delegation::{DelegationError, DelegationRequest, child_run_id, in_scope};
use crate::state::step::{Shared, StepReport};
use pev_protocol::event::EventBody;
use pev_protocol::run::{RunResult, RunStatus, StepStatus};
use pev_protocol::tool::Effect;
use pev_protocol::{Delegation, Step};
use pev_store::{MutationRecord, Record, StoreError};
use serde_json::{Value, json};
use std::collections::HashMap;

/// The child's reasons, one line each, as the parent step's error and the next attempt's
/// feedback give them.
fn reasons_text(result: &RunResult) -> String {
    if result.reasons.is_empty() {
        return "no reason recorded".to_owned();
    }
    result
        .reasons
        .iter()
        .map(|r| {
            let code = serde_json::to_value(r.code)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            match &r.step {
                Some(step) => format!("{code} (step `{step}`): {}", r.message),
                None => format!("{code}: {}", r.message),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Runs the attempts of a delegated step.
pub(crate) async fn run(
    shared: &Shared,
    step: &Step,
    delegation: &Delegation,
    inputs: &HashMap<String, Value>,
    report: &mut StepReport,
) -> Result<(), StoreError> {
    let delegator = shared.engine.config.models.as_ref().and_then(|m| m.delegator.clone());
    let Some(delegator) = delegator else {
        crate::state::step::fail(
            &mut report.slot,
            "the step delegates to a sub-agent, which needs the models of `pev agent`",
        );
        return Ok(());
    };
    let id = step.id.as_str();
    let parent = shared.recorder.run_id().to_owned();
    let max_attempts = crate::state::step::max_attempts(step);
    let watched = watched_paths(step, None);
    let mut feedback: Vec<String> = Vec::new();
    loop {
        report.slot.attempts += 1;
        report.slot.status = StepStatus::InProgress;
        report.slot.error = None;
        report.slot.by_assertion = false;
        report.slot.evidence.clear();
        let attempt = report.slot.attempts;
        shared.recorder.record(Record::StepState(report.slot.to_stored(&parent, id)))?;
        shared.recorder.emit(EventBody::StepStarted { step: id.to_owned(), attempt })?;
        let child_run = child_run_id(&parent, id, attempt);
        let before = Before::take(&shared.engine, &watched);
        // `content_changed` compares with the files before the step's first child (journaled,
        // so a resume that finds the child done compares with the same).
        for assertion in &step.assertions {
            if let pev_protocol::Assertion::ContentChanged { path, .. } = assertion
                && !report.slot.baseline.contains_key(path)
                && let Some(sha) = before.hashes.get(path)
            {
                report.slot.baseline.insert(path.clone(), sha.clone());
                shared.recorder.record(Record::FileHash(pev_store::FileHashRecord {
                    run_id: parent.clone(),
                    step_id: id.to_owned(),
                    path: path.clone(),
                    phase: pev_store::HashPhase::Before,
                    sha256: sha.clone(),
                    bytes: None,
                    at: pev_protocol::event::now_rfc3339(),
                }))?;
            }
        }
        // Durable before the child exists: a resume that finds this event finds the child.
        started(shared, (id, attempt, &child_run), delegation, delegator.child_depth()).await?;
        let request = DelegationRequest {
            parent_run: parent.clone(),
            step: step.clone(),
            delegation: delegation.clone(),
            attempt,
            child_run: child_run.clone(),
            inputs: inputs.clone(),
            feedback: feedback.clone(),
        };
        // The child's steps count in the tree's activity, this step while it waits does not.
        let away = shared.activity.step_out();
        let outcome = delegator.delegate(&request).await;
        drop(away);
        if let Some(models) = &shared.engine.config.models {
            shared.recorder.emit(EventBody::Usage { usage: (models.usage)() })?;
        }
        let child = match outcome {
            Ok(child) => child,
            // Not this attempt's end: a resume goes on with the same child (same attempt).
            Err(DelegationError::Stopped) => {
                report.cancelled = true;
                report.slot.status = StepStatus::Pending;
                report.slot.attempts = attempt - 1;
                report.slot.error = Some("stopped by a person while its child run ran".into());
                return Ok(());
            }
            Err(DelegationError::Budget(why)) => {
                report.budget_exhausted = Some(why.clone());
                report.slot.status = StepStatus::Pending;
                report.slot.attempts = attempt - 1;
                report.slot.error = Some(format!("stopped: the budget ran out ({why})"));
                return Ok(());
            }
            Err(DelegationError::Refused(why)) => {
                crate::state::step::fail(
                    &mut report.slot,
                    &format!("the child run was not run: {why}"),
                );
                return Ok(());
            }
        };
        if child.status == RunStatus::AwaitingApproval {
            // The child waits for a person (`pev approve CHILD STEP`); so does this step, and
            // a resume goes on with the same child.
            report.slot.status = StepStatus::Blocked;
            report.slot.awaiting_approval = true;
            report.slot.attempts = attempt - 1;
            report.slot.started_at = None;
            report.slot.error =
                Some(format!("its child run {child_run} waits for a person's approval"));
            return Ok(());
        }
        let changed: Vec<String> =
            child.file_mutations.iter().filter(|m| !m.no_op).map(|m| m.path.clone()).collect();
        shared.recorder.emit(EventBody::DelegateFinished {
            step: id.to_owned(),
            attempt,
            child_run: child_run.clone(),
            status: child.status,
            reasons: child.reasons.clone(),
            changed: changed.clone(),
        })?;
        adopt_changes(shared, step, &child, report)?;
        let outside: Vec<&String> = changed
            .iter()
            .filter(|p| !in_scope(&shared.engine.ctx.workspace, p, delegation.scope.as_deref()))
            .collect();
        let verdict = crate::verdict::finish::status_name(child.status);
        report.slot.evidence.push(format!(
            "child run {child_run} ended {verdict}{}",
            if changed.is_empty() {
                String::new()
            } else {
                format!(", changing {}", changed.join(", "))
            }
        ));
        let unlisted = unlisted_commands(&child);
        let unconfined = shared.engine.ctx.sandbox.is_off();
        if !outside.is_empty() {
            let outside: Vec<&str> = outside.iter().map(|p| p.as_str()).collect();
            crate::state::step::fail(
                &mut report.slot,
                &format!(
                    "child run {child_run} changed files outside its scope `{}`: {}",
                    delegation.scope.as_deref().unwrap_or("."),
                    outside.join(", ")
                ),
            );
        } else if delegation.scope.is_some() && unconfined && unlisted > 0 {
            // Unconfined, a command can write anywhere; when what it changed could not be
            // listed, staying in the scope is not shown, so the step is not done.
            crate::state::step::fail(
                &mut report.slot,
                &format!(
                    "child run {child_run} ran {unlisted} command(s) without the kernel sandbox \
                     whose changes could not be listed (other steps ran at the same time, or the \
                     workspace is too large), so whether it kept to its scope `{}` is not known; \
                     run with the sandbox (sandbox = \"auto\") or --jobs 1",
                    delegation.scope.as_deref().unwrap_or(".")
                ),
            );
        } else if child.status != RunStatus::Success {
            crate::state::step::fail(
                &mut report.slot,
                &format!("child run {child_run} ended {verdict}: {}", reasons_text(&child)),
            );
        } else {
            // The child's verdict is evidence; the step's own assertions are checked against
            // the workspace it left, as for any step.
            let call = Call {
                step,
                tool: "delegate",
                effect: if child.goal_actions_executed { Effect::Write } else { Effect::Read },
                args: &Value::Null,
                watched: &watched,
                target: None,
            };
            let claims = delegator.claims(&child_run);
            let end = CallEnd::new(Ok(json!({
                "child_run": child_run,
                "status": verdict,
                "changed": changed,
                "child_claims": claims,
                "steps_done": child
                    .steps
                    .iter()
                    .filter(|s| s.status == StepStatus::Done)
                    .count(),
            })));
            crate::step::check::check_output(shared, &call, (&before, end), inputs, report).await?;
            if report.slot.status == StepStatus::Done {
                report.slot.goal_action |= child.goal_actions_executed;
                if let Some(models) = shared.engine.config.models.clone() {
                    let mutations = child.file_mutations.clone();
                    let claim = format!(
                        "child run {child_run} ended success: {} step(s) done",
                        child.steps.iter().filter(|s| s.status == StepStatus::Done).count()
                    );
                    crate::step::judge::judge(
                        shared,
                        &models,
                        step,
                        (claim, Vec::new(), mutations, Vec::new()),
                        report,
                    )
                    .await?;
                    if report.budget_exhausted.is_some() {
                        return Ok(());
                    }
                }
            }
        }
        if report.slot.status == StepStatus::Done
            || report.slot.attempts >= max_attempts
            || shared.engine.config.cancel.is_cancelled()
        {
            return Ok(());
        }
        let error = report.slot.error.clone().unwrap_or_else(|| "unknown error".to_owned());
        feedback.push(format!("Attempt {attempt} failed: {error}"));
        let message = format!(
            "step `{id}`: attempt {attempt} of {max_attempts} failed: {error}; delegating again"
        );
        shared
            .recorder
            .emit(EventBody::Warning { step: Some(id.to_owned()), message: message.clone() })?;
        report.warnings.push(message);
    }
}

/// A child run asked for by a model through the tool gate (loop mode's `delegate`), the `n`th
/// of this attempt: its id is `PARENT.STEP-dN.ATTEMPT`, so a continued loop that makes the
/// same call again meets the same child. Journaled like a delegated step's child; its changes
/// are the step's. `Err` inside: why it could not run, for the model.
pub(crate) async fn from_gate(
    shared: &Shared,
    step: &Step,
    (delegation, n): (Delegation, u32),
    report: &mut StepReport,
) -> Result<Result<crate::instruct::ChildVerdict, String>, StoreError> {
    let delegator = shared.engine.config.models.as_ref().and_then(|m| m.delegator.clone());
    let Some(delegator) = delegator else {
        return Ok(Err("delegation is not available in this run".to_owned()));
    };
    let id = step.id.as_str();
    let parent = shared.recorder.run_id().to_owned();
    let attempt = report.slot.attempts;
    let child_run = child_run_id(&parent, &format!("{id}-d{n}"), attempt);
    started(shared, (id, attempt, &child_run), &delegation, delegator.child_depth()).await?;
    let request = DelegationRequest {
        parent_run: parent,
        step: step.clone(),
        delegation: delegation.clone(),
        attempt,
        child_run: child_run.clone(),
        inputs: HashMap::new(),
        feedback: Vec::new(),
    };
    let away = shared.activity.step_out();
    let delegated = delegator.delegate(&request).await;
    drop(away);
    let mut child = match delegated {
        Ok(child) => child,
        Err(DelegationError::Refused(why) | DelegationError::Budget(why)) => {
            return Ok(Err(format!("the child run was not run: {why}")));
        }
        Err(DelegationError::Stopped) => {
            return Ok(Err("the run was stopped while the child ran".to_owned()));
        }
    };
    let changed: Vec<String> =
        child.file_mutations.iter().filter(|m| !m.no_op).map(|m| m.path.clone()).collect();
    let outside: Vec<String> = changed
        .iter()
        .filter(|p| !in_scope(&shared.engine.ctx.workspace, p, delegation.scope.as_deref()))
        .cloned()
        .collect();
    if !outside.is_empty() && child.status == RunStatus::Success {
        // Its verdict cannot stand: it changed what it was not given.
        child.status = RunStatus::Failed;
        child.reasons.push(pev_protocol::run::Reason {
            code: pev_protocol::run::ReasonCode::StepFailed,
            step: None,
            message: format!("changed files outside its scope: {}", outside.join(", ")),
        });
    }
    shared.recorder.emit(EventBody::DelegateFinished {
        step: id.to_owned(),
        attempt,
        child_run,
        status: child.status,
        reasons: child.reasons.clone(),
        changed,
    })?;
    adopt_changes(shared, step, &child, report)?;
    report.slot.goal_action |= child.status == RunStatus::Success && child.goal_actions_executed;
    let claims = if child.status == RunStatus::Success {
        delegator.claims(&child.run_id)
    } else {
        Vec::new()
    };
    Ok(Ok(crate::instruct::ChildVerdict { result: child, claims }))
}

/// Journals `delegate.started` and waits until it is on disk: a resume that finds it finds
/// the child, and never starts a second one.
async fn started(
    shared: &Shared,
    (step, attempt, child_run): (&str, u32, &str),
    delegation: &Delegation,
    depth: u32,
) -> Result<(), StoreError> {
    shared.recorder.emit(EventBody::DelegateStarted {
        step: step.to_owned(),
        attempt,
        child_run: child_run.to_owned(),
        mode: delegation.mode.as_str().to_owned(),
        scope: delegation.scope.clone(),
        depth,
    })?;
    shared.recorder.flush().await
}

/// How many of a child's steps ran a command whose changes could not be listed (`check.rs`'s
/// evidence says so).
fn unlisted_commands(child: &RunResult) -> usize {
    child
        .steps
        .iter()
        .filter(|s| s.evidence.iter().any(|e| e.contains(" changed are not listed")))
        .count()
}

/// The child's changes, journaled as the parent step's: the parent's result lists them, and
/// `no_effects` and the parent's summary count them. A change an earlier session already
/// journaled for the step (`earlier`: a resume that met the same finished child again) is
/// the step's evidence again but not journaled or counted twice.
fn adopt_changes(
    shared: &Shared,
    step: &Step,
    child: &RunResult,
    report: &mut StepReport,
) -> Result<(), StoreError> {
    let id = step.id.as_str();
    for mutation in &child.file_mutations {
        if let Some(i) = report.earlier_mutations.iter().position(|m| m == mutation) {
            report.earlier_mutations.remove(i);
            report.already_counted.push(report.mutations.len());
            report.mutations.push(StepMutation { step: id.to_owned(), mutation: mutation.clone() });
            continue;
        }
        shared.recorder.record(Record::Mutation(MutationRecord {
            run_id: shared.recorder.run_id().to_owned(),
            step_id: id.to_owned(),
            mutation: mutation.clone(),
            before_sha256: None,
            after_sha256: None,
        }))?;
        report.mutations.push(StepMutation { step: id.to_owned(), mutation: mutation.clone() });
    }
    Ok(())
}
