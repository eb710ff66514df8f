//! The end of a run: postconditions checked against the workspace (those without assertions by
//! the judge, when nothing else stands in the way of success: `unasserted`), every done step's
//! evidence checked again against it (`final_check`), the outcome decided by `pev-verify`
//! (never by the steps themselves), the result journaled and announced.

use std::collections::HashMap;
use std::time::Instant;

use pev_protocol::Plan;
use pev_protocol::assertion::AssertionResult;
use pev_protocol::event::{EventBody, now_rfc3339};
use pev_protocol::run::{
    FileMutation, FinalCheck, PostconditionResult, RunResult, RunStatus, StepResult, StepStatus,
};
use pev_store::Record;
use pev_verify::{CheckEnv, OutcomeInput};

use crate::engine::EngineError;
use crate::instruct::{PostconditionRequest, StepEvidence};
use crate::state::run::RunState;
use crate::state::step::Shared;
use crate::verdict::unasserted::Verifier;

pub(crate) async fn finish(
    shared: &Shared,
    state: &mut RunState,
    started: Instant,
) -> Result<RunResult, EngineError> {
    let plan = &shared.plan;
    let outputs: HashMap<String, serde_json::Value> = plan
        .steps
        .iter()
        .zip(&state.slots)
        .filter(|(_, slot)| slot.status == StepStatus::Done)
        .filter_map(|(step, slot)| slot.output.clone().map(|o| (step.id.as_str().to_owned(), o)))
        .collect();
    let env = CheckEnv {
        ctx: &shared.engine.ctx,
        step: None,
        outputs: &outputs,
        before: &state.run_before,
    };
    let checked = pev_verify::check_postconditions(plan, &env).await;
    let mut postconditions = Vec::with_capacity(checked.len());
    for (result, assertions) in checked {
        for a in assertions {
            shared.recorder.emit(EventBody::AssertionChecked {
                step: None,
                postcondition: Some(result.description.clone()),
                result: a,
            })?;
        }
        postconditions.push(result);
    }

    let mut oracle_reasons = Vec::new();
    let final_check = if state.cancelled || state.slots.iter().any(|s| s.awaiting_approval) {
        // Stopped early: the run is not success either way, and a person stopped it.
        None
    } else {
        let mut check = recheck(shared, state, &outputs).await?;
        if !shared.oracle.is_empty() {
            let at = (&outputs, postconditions.as_slice());
            oracle_reasons = settle_oracle(shared, state, at, &mut check).await?;
        }
        Some(check)
    };

    // A sandbox weaker than asked is said in the result, not only in the journal.
    let enforced = shared.engine.ctx.sandbox.enforced();
    if enforced.mode != pev_tools::SandboxMode::Off && enforced.is_weaker_than_full() {
        let message = format!(
            "commands ran in a {} sandbox ({}): {}",
            enforced.level.as_str(),
            enforced.summary(),
            enforced.gaps.join("; ")
        );
        if !state.warnings.contains(&message) {
            shared.recorder.emit(EventBody::Warning { step: None, message: message.clone() })?;
            state.warnings.push(message);
        }
    }

    // Acceptance criteria are for a judge model; tier 1 cannot check them and says so.
    let judged = shared.engine.config.models.as_ref().is_some_and(|m| m.judge.is_some());
    for step in plan.steps.iter().filter(|s| !judged && !s.acceptance_criteria.is_empty()) {
        let message = format!(
            "step `{}` has {} acceptance criteria that only a judge model can check (pev agent); \
             they were not checked",
            step.id,
            step.acceptance_criteria.len()
        );
        if !state.warnings.contains(&message) {
            shared.recorder.emit(EventBody::Warning {
                step: Some(step.id.as_str().to_owned()),
                message: message.clone(),
            })?;
            state.warnings.push(message);
        }
    }
    let steps: Vec<_> = plan
        .steps
        .iter()
        .zip(&state.slots)
        .map(|(step, slot)| slot.to_result(step.id.as_str()))
        .collect();
    let awaiting: Vec<String> = plan
        .steps
        .iter()
        .zip(&state.slots)
        .filter(|(_, slot)| slot.awaiting_approval)
        .map(|(step, _)| step.id.as_str().to_owned())
        .collect();
    let goal_actions_executed =
        state.slots.iter().any(|s| s.goal_action && s.status == StepStatus::Done);
    let file_mutations: Vec<FileMutation> =
        state.mutations.iter().map(|m| m.mutation.clone()).collect();
    let mutation_steps: Vec<String> = state.mutations.iter().map(|m| m.step.clone()).collect();
    let regressions = final_check.as_ref().map_or(&[][..], |c| c.regressed.as_slice());
    let judge_rejected = state.judge_rejected.clone();
    // From the slots, so a step failed this way in an earlier session of the run counts too.
    let mismatched: Vec<String> = plan
        .steps
        .iter()
        .zip(&state.slots)
        .filter(|(_, slot)| slot.mismatched)
        .map(|(step, _)| step.id.as_str().to_owned())
        .collect();
    let cancelled = state.cancelled;
    let outcome = |postconditions: &[PostconditionResult], budget: Option<&str>| {
        pev_verify::decide(&OutcomeInput {
            plan,
            steps: &steps,
            postconditions,
            mutations: &file_mutations,
            mutation_steps: &mutation_steps,
            goal_actions_executed,
            awaiting_approval: &awaiting,
            cancelled,
            judge_rejected: &judge_rejected,
            mismatched: &mismatched,
            budget_exhausted: budget,
            regressions,
            oracle: &oracle_reasons,
        })
    };
    // Postconditions without assertions go to the judge, but only when nothing else keeps the
    // run from success: a judge's yes never outweighs other evidence, and is not paid for when
    // it could not change the outcome.
    let unasserted: Vec<usize> = plan
        .postconditions
        .iter()
        .enumerate()
        .filter(|(_, p)| p.assertions.is_empty())
        .map(|(i, _)| i)
        .collect();
    if !unasserted.is_empty() {
        let mut assumed = postconditions.clone();
        for &i in &unasserted {
            if let Some(r) = assumed.get_mut(i) {
                r.satisfied = true;
            }
        }
        let could_succeed =
            outcome(&assumed, state.budget_exhausted.as_deref()).0 == RunStatus::Success;
        let models = shared.engine.config.models.as_ref();
        let verifier = match (crate::verdict::unasserted::why_no_judge(models), models) {
            (Some(why), _) => Some(Verifier::Unavailable(why)),
            // Nothing was done whose evidence a judge could weigh: its yes would be its word.
            (None, Some(_)) if plan.steps.is_empty() => Some(Verifier::Unavailable(
                "the plan has no steps, so there is no evidence for a judge to weigh".to_owned(),
            )),
            (None, Some(m)) if could_succeed => m.judge.as_deref().map(Verifier::Judge),
            _ => None,
        };
        if let Some(verifier) = verifier {
            let asked = matches!(verifier, Verifier::Judge(_));
            let request = if asked {
                judge_request(shared, &steps, &file_mutations, &state.warnings, &unasserted).await?
            } else {
                PostconditionRequest {
                    postconditions: descriptions(plan, &unasserted),
                    ..PostconditionRequest::default()
                }
            };
            let decided = crate::verdict::unasserted::decide(verifier, &request).await;
            if asked && let Some(m) = models {
                shared.recorder.emit(EventBody::Usage { usage: (m.usage)() })?;
            }
            if let Some(why) = decided.budget_exhausted {
                state.budget_exhausted.get_or_insert(why);
            }
            for result in decided.results.iter().filter(|r| r.judge.is_some()) {
                shared.recorder.emit(EventBody::AssertionChecked {
                    step: None,
                    postcondition: Some(result.description.clone()),
                    result: AssertionResult {
                        kind: "judge".to_owned(),
                        passed: result.satisfied,
                        detail: result.evidence.clone(),
                    },
                })?;
            }
            crate::verdict::unasserted::replace(&mut postconditions, &unasserted, decided.results);
        }
    }
    let (status, reasons) = outcome(&postconditions, state.budget_exhausted.as_deref());
    let duration_ms = state
        .prior_duration_ms
        .saturating_add(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
    let result = RunResult {
        run_id: shared.recorder.run_id().to_owned(),
        goal: plan.goal.clone(),
        status,
        reasons: reasons.clone(),
        goal_actions_executed,
        steps,
        postconditions,
        file_mutations,
        warnings: state.warnings.clone(),
        usage: {
            let now = shared.engine.config.models.as_ref().map(|m| (m.usage)()).unwrap_or_default();
            let mut usage = state.prior_usage.clone();
            usage.add_models(&now);
            usage.tool_calls = state.tool_calls;
            usage
        },
        duration_ms,
        final_check,
    };
    if shared.engine.config.final_events {
        shared.recorder.emit(EventBody::VerifyFinished { status, reasons })?;
    }
    // Without the final events, the caller (the agent loop) decides the run's outcome and
    // announces it (`Engine::announce`): until then the run is still running, so a kill before
    // the announcement leaves a run `pev resume` continues, not this inner result as its final
    // one (issue 31: a loop run's bare inner result was kept, and could say `success`).
    let journaled = if shared.engine.config.final_events { status_name(status) } else { "running" };
    shared.recorder.record(Record::RunStatus {
        run_id: result.run_id.clone(),
        status: journaled.to_owned(),
        result: Some(Box::new(result.clone())),
        updated_at: now_rfc3339(),
    })?;
    if shared.engine.config.final_events {
        shared.recorder.emit(EventBody::RunFinished { result: Box::new(result.clone()) })?;
    }
    shared.recorder.flush().await?;
    Ok(result)
}

/// The final re-check of the done steps' evidence: regressions named with the later calls the
/// journal holds and journaled as failed assertion checks; what could be checked only once
/// becomes a warning.
async fn recheck(
    shared: &Shared,
    state: &mut RunState,
    outputs: &HashMap<String, serde_json::Value>,
) -> Result<FinalCheck, EngineError> {
    let mut check = crate::verdict::final_check::recheck_steps(
        &shared.plan,
        &state.slots,
        &shared.engine.ctx,
        outputs,
    )
    .await;
    if !check.regressed.is_empty() || !check.checked_once.is_empty() {
        shared.recorder.flush().await?;
        let id = shared.recorder.run_id().to_owned();
        let location = shared.recorder.journal().location();
        let record = crate::journal_read::read(location, move |s| s.load_run(&id)).await?;
        let calls = &record.tool_calls;
        crate::verdict::final_check::name_later_calls(&mut check.regressed, calls, |of| {
            of.step().and_then(|id| crate::verdict::final_check::after_last_call_of(calls, id))
        });
        // Evidence not run again stands only while nothing it depends on changed after it.
        let stale = crate::verdict::final_check::stale_once(
            &check.checked_once,
            calls,
            &record.mutations,
            &record.steps,
        );
        check.regressed.extend(stale);
    }
    for r in &check.regressed {
        shared.recorder.emit(EventBody::AssertionChecked {
            step: r.of.step().map(str::to_owned),
            postcondition: r.of.postcondition().map(str::to_owned),
            result: AssertionResult {
                kind: r.kind.clone(),
                passed: false,
                detail: format!("final re-check: {}", r.now),
            },
        })?;
    }
    for once in &check.checked_once {
        let message = pev_verify::checked_once_warning(once);
        if !state.warnings.contains(&message) {
            let step = once.of.step().map(str::to_owned);
            shared.recorder.emit(EventBody::Warning { step, message: message.clone() })?;
            state.warnings.push(message);
        }
    }
    Ok(check)
}

/// The run's oracle at its end: what changed in it; when something changed without
/// permission, the done steps' evidence checked again on a copy of the final workspace with the
/// oracle as recorded (what fails there is a regression, whatever the changed tests said); the
/// hidden checks. Returns the oracle's reasons; the report goes into `check.oracle`.
async fn settle_oracle(
    shared: &Shared,
    state: &mut RunState,
    (outputs, postconditions): (&HashMap<String, serde_json::Value>, &[PostconditionResult]),
    check: &mut FinalCheck,
) -> Result<Vec<pev_protocol::run::Reason>, EngineError> {
    let oracle = &shared.oracle;
    let ctx = &shared.engine.ctx;
    let changes = oracle.changes(&ctx.workspace, &shared.plan);
    let mut report = oracle.report(changes.clone());
    let mut reasons = Vec::new();
    if crate::oracle::needs_pristine(&changes) {
        match oracle.pristine(ctx, &crate::oracle::undone(&changes)) {
            Ok((scratch, copy)) => {
                let pristine = crate::verdict::final_check::recheck_steps(
                    &shared.plan,
                    &state.slots,
                    &copy,
                    outputs,
                )
                .await;
                // The postconditions too: a suite run as a postcondition is a check like any.
                let env = CheckEnv { ctx: &copy, step: None, outputs, before: &state.run_before };
                let posts = pev_verify::check_postconditions(&shared.plan, &env).await;
                drop(scratch);
                report.pristine_recheck = true;
                pev_verify::oracle::add_pristine_regressions(check, pristine.regressed);
                let regressed =
                    postconditions.iter().zip(&posts).filter_map(|(then, (now, results))| {
                        let failed = results.iter().find(|r| !r.passed)?;
                        then.satisfied.then(|| pev_protocol::run::Regression {
                            of: pev_protocol::run::EvidenceOf::Postcondition(
                                then.description.clone(),
                            ),
                            kind: failed.kind.clone(),
                            path: None,
                            then: then.evidence.clone(),
                            now: if now.satisfied {
                                failed.detail.clone()
                            } else {
                                now.evidence.clone()
                            },
                            changed_by: Vec::new(),
                        })
                    });
                let regressed: Vec<_> = regressed.collect();
                pev_verify::oracle::add_pristine_regressions(check, regressed);
            }
            Err(why) => {
                report.problems.push(format!(
                    "the evidence could not be re-checked on the pristine oracle: {why}"
                ));
                // Without the pristine re-check, a created test file is a change like any other.
                reasons.extend(crate::oracle::created_reasons(&changes));
            }
        }
        if let Some(message) = crate::oracle::created_warning(&changes)
            && !state.warnings.contains(&message)
        {
            shared.recorder.emit(EventBody::Warning { step: None, message: message.clone() })?;
            state.warnings.push(message);
        }
    }
    report.hidden = oracle.hidden(ctx, &changes, &mut report.problems).await;
    for hidden in &report.hidden {
        shared.recorder.emit(EventBody::AssertionChecked {
            step: None,
            postcondition: Some(format!("hidden check: {}", hidden.name)),
            result: AssertionResult {
                kind: "hidden_check".to_owned(),
                passed: hidden.passed,
                detail: hidden.detail.clone(),
            },
        })?;
    }
    let mut all = crate::oracle::reasons(&report);
    all.extend(reasons);
    check.oracle = Some(report);
    Ok(all)
}

/// The descriptions of the plan's postconditions at `indexes`.
fn descriptions(plan: &Plan, indexes: &[usize]) -> Vec<String> {
    indexes
        .iter()
        .filter_map(|&i| plan.postconditions.get(i))
        .map(|p| p.description.clone())
        .collect()
}

/// What the judge is shown to decide the postconditions at `indexes`: every step with what the
/// harness recorded, the run's file changes with their diffs, the journaled calls, the
/// warnings, and the executors' summaries as claims.
async fn judge_request(
    shared: &Shared,
    steps: &[StepResult],
    mutations: &[FileMutation],
    warnings: &[String],
    indexes: &[usize],
) -> Result<PostconditionRequest, EngineError> {
    let plan = &shared.plan;
    shared.recorder.flush().await?;
    let id = shared.recorder.run_id().to_owned();
    let workspace = shared.engine.ctx.workspace.clone();
    let (diffs, calls) =
        crate::journal_read::read(shared.recorder.journal().location(), move |s| {
            let record = s.load_run(&id)?;
            Ok(crate::verdict::unasserted::journal_evidence(s, &record, &workspace))
        })
        .await?;
    let mut claims = Vec::new();
    let steps = plan
        .steps
        .iter()
        .zip(steps)
        .map(|(step, result)| {
            let summary = result.output.as_ref().and_then(|o| o.get("summary"));
            if step.tool.is_none()
                && let Some(summary) = summary.and_then(serde_json::Value::as_str)
            {
                claims.push(format!("executor of step '{}': {summary}", step.id));
            }
            let task = match (&step.title, &step.description) {
                (Some(t), Some(d)) => format!("{t}: {d}"),
                (Some(t), None) => t.clone(),
                (None, Some(d)) => d.clone(),
                (None, None) => step.tool.clone().unwrap_or_default(),
            };
            let mut evidence = result.evidence.clone();
            if let Some(error) = &result.error {
                evidence.push(format!("error: {error}"));
            }
            StepEvidence {
                id: result.id.clone(),
                task,
                status: serde_json::to_value(result.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                evidence,
                assertions: result.assertions.clone(),
            }
        })
        .collect();
    Ok(PostconditionRequest {
        run_goal: plan.goal.clone(),
        postconditions: descriptions(plan, indexes),
        steps,
        mutations: mutations.to_vec(),
        diffs,
        calls,
        warnings: warnings.to_vec(),
        claims,
        budget_note: shared.engine.config.models.as_ref().and_then(|m| (m.budget_note)()),
    })
}

/// The status as stored and printed.
pub fn status_name(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Success => "success",
        RunStatus::Partial => "partial",
        RunStatus::Failed => "failed",
        RunStatus::AwaitingApproval => "awaiting_approval",
    }
}
