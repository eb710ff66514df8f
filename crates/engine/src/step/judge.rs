//! The judge of a step, when tier 1 passed but cannot check everything (acceptance criteria,
//! or warnings from its tool calls): a tool step, an instruction step and a delegated step all
//! end here, so it lives below the three.

use pev_protocol::Step;
use pev_protocol::event::EventBody;
use pev_protocol::run::{FileMutation, StepStatus};
use pev_store::StoreError;

use crate::engine::ModelHooks;
use crate::instruct::{Interruption, JudgeRequest};
use crate::state::step::{Shared, StepReport};

/// The judge, when tier 1 passed but cannot check everything: the step has acceptance criteria,
/// or its tool calls raised warnings.
pub(crate) async fn judge(
    shared: &Shared,
    models: &ModelHooks,
    step: &Step,
    (claim, warnings, mutations, diffs): (String, Vec<String>, Vec<FileMutation>, Vec<String>),
    report: &mut StepReport,
) -> Result<(), StoreError> {
    let Some(judge) = &models.judge else { return Ok(()) };
    if step.acceptance_criteria.is_empty() && warnings.is_empty() {
        return Ok(());
    }
    let id = step.id.as_str();
    let request = JudgeRequest {
        run_goal: shared.plan.goal.clone(),
        step: step.clone(),
        claim,
        assertions: report.slot.assertions.clone(),
        mutations,
        diffs,
        evidence: report.slot.evidence.clone(),
        warnings,
        budget_note: (models.budget_note)(),
    };
    // A person's stop abandons the judge's call too: it has no effect, and the step runs again.
    let verdict = tokio::select! {
        verdict = crate::model_scope::scoped(id, report.slot.attempts, judge.judge(&request)) => verdict,
        () = shared.engine.config.cancel.cancelled() => Err(Interruption::Stopped),
    };
    shared.recorder.emit(EventBody::Usage { usage: (models.usage)() })?;
    if let Ok(v) = &verdict {
        let outcome = if v.pass {
            "passed"
        } else if v.confidence >= models.judge_threshold {
            "failed"
        } else {
            "doubted"
        };
        shared.recorder.emit(EventBody::JudgeDecided {
            step: id.to_owned(),
            attempt: report.slot.attempts,
            pass: v.pass,
            confidence: v.confidence,
            outcome: outcome.to_owned(),
            feedback: v.feedback.clone(),
            answers: v.answers.clone(),
        })?;
    }
    match verdict {
        Err(Interruption::Stopped) => {
            report.cancelled = true;
            report.slot.status = StepStatus::Pending;
            report.slot.error = Some("stopped by a person before the step was judged".into());
        }
        Ok(verdict) if verdict.pass => {
            report.slot.evidence.push(format!(
                "judge: passed (confidence {:.2}){}",
                verdict.confidence,
                if verdict.feedback.is_empty() {
                    String::new()
                } else {
                    format!(": {}", verdict.feedback)
                }
            ));
        }
        Ok(verdict) if verdict.confidence >= models.judge_threshold => {
            report.slot.status = StepStatus::Failed;
            report.slot.judge_rejected = true;
            report.slot.error = Some(format!(
                "the judge rejected the step (confidence {:.2}): {}",
                verdict.confidence, verdict.feedback
            ));
        }
        Ok(verdict) => {
            let message = format!(
                "step `{id}`: the judge doubts it (confidence {:.2}, below the {:.2} needed to \
                 fail it): {}",
                verdict.confidence, models.judge_threshold, verdict.feedback
            );
            shared
                .recorder
                .emit(EventBody::Warning { step: Some(id.to_owned()), message: message.clone() })?;
            report.warnings.push(message);
        }
        Err(Interruption::Budget(why)) => {
            report.budget_exhausted = Some(why.clone());
            report.slot.status = StepStatus::Pending;
            report.slot.error = Some(format!("stopped before judging: the budget ran out ({why})"));
        }
        Err(other) => {
            let why = match other {
                Interruption::Provider(w) | Interruption::Budget(w) => w,
                Interruption::TurnLimit(n) => format!("turn limit {n}"),
                Interruption::Stopped => "the run was stopped".to_owned(),
            };
            if step.acceptance_criteria.is_empty() {
                // Only warnings were to be judged: they stay warnings.
                let message = format!("step `{id}`: the judge could not be asked ({why})");
                shared.recorder.emit(EventBody::Warning {
                    step: Some(id.to_owned()),
                    message: message.clone(),
                })?;
                report.warnings.push(message);
            } else {
                // Criteria nobody checked are not evidence: the step is not done.
                report.slot.status = StepStatus::Failed;
                report.slot.error = Some(format!(
                    "the judge could not be asked ({why}), so the step's acceptance criteria \
                     are unverified"
                ));
            }
        }
    }
    Ok(())
}
