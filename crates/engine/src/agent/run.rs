//! The agent loop around the run engine: run the plan; when a step cannot be made to pass in its
//! attempts, ask the planner for the rest of the plan (the done steps are kept and never run
//! again), journal it as a new plan version and continue the same run under it. Replans are
//! bounded; two replans in a row that change no file are stagnation and end the run.

use std::collections::{HashMap, HashSet};

use pev_lint::CompiledPolicy;
use pev_protocol::event::now_rfc3339;
use pev_protocol::run::{Reason, ReasonCode, RunResult, RunStatus, StepResult, StepStatus};
use pev_protocol::{Plan, Step, StepId};
use pev_store::{Journal, Record};

use crate::agent::planner::{DoneStep, Failure, PlanContext, PlanError, Planner, WorkspaceSummary};
use crate::engine::{Engine, EngineError};
use crate::scheduler::{ResumeInput, RunInput};

/// The most characters of a done step's output a replan shows.
const OUTPUT_SUMMARY_CHARS: usize = 600;

/// One agent run.
pub struct AgentLoop<'a> {
    /// An engine with models (`EngineConfig::models`).
    pub engine: &'a Engine,
    pub planner: &'a Planner,
    pub policy: &'a CompiledPolicy,
    /// The journal file; the run must already exist in it.
    pub db: &'a pev_store::Location,
    pub max_replans: u32,
}

impl AgentLoop<'_> {
    /// Runs `plan` as run `run_id`, replanning as needed, and returns the final result.
    pub async fn run(&self, run_id: String, plan: Plan) -> Result<RunResult, EngineError> {
        let journal = Journal::start(self.db)?;
        // The final events are announced once, when no replan can follow.
        let mut quiet = self.engine.clone();
        quiet.config.final_events = false;
        let engine = &quiet;
        let mut result = engine
            .run(RunInput { run_id: run_id.clone(), plan: plan.clone(), journal: journal.clone() })
            .await?;
        // Every step id any version of the plan has had.
        let mut used_ids: HashSet<String> =
            plan.steps.iter().map(|s| s.id.as_str().to_owned()).collect();
        let mut current = plan;
        let mut version = 1u32;
        let mut replans = 0u32;
        let mut idle_replans = 0u32;
        loop {
            let Some(failed) =
                result.steps.iter().find(|s| s.status == StepStatus::Failed).cloned()
            else {
                break;
            };
            let stopped = result
                .reasons
                .iter()
                .any(|r| matches!(r.code, ReasonCode::BudgetExhausted | ReasonCode::Cancelled));
            if stopped {
                break;
            }
            if replans >= self.max_replans {
                if self.max_replans > 0 {
                    self.annotate(
                        &mut result,
                        None,
                        format!(
                            "step `{}` still fails and the {} replan(s) allowed are spent",
                            failed.id, self.max_replans
                        ),
                    )
                    .await?;
                }
                break;
            }
            replans += 1;
            let done = done_steps(&current, &result.steps);
            let failure = failure_of(&failed);
            let workspace = WorkspaceSummary::scan(&self.engine.ctx.workspace, 200)
                .map_err(|e| EngineError::Plan(format!("cannot scan the workspace: {e}")))?;
            // The planner writes plans, which name tools by plan name (`file.patch`).
            let mut tools = self.engine.registry.definitions();
            tools.retain(|d| self.policy.tool_allowed(d.name));
            let ctx = PlanContext {
                goal: &current.goal,
                workspace: &workspace,
                tools: &tools,
                policy: self.policy,
            };
            // A person's stop abandons the planner's call: nothing of the new plan has run.
            let outcome = tokio::select! {
                outcome = self.planner.replan(&ctx, &done, &failure, &current) => Some(outcome),
                () = self.engine.config.cancel.cancelled() => None,
            };
            let Some(outcome) = outcome else {
                let reason = Reason {
                    code: ReasonCode::Cancelled,
                    step: None,
                    message: "stopped by a person while the planner was rewriting the plan"
                        .to_owned(),
                };
                self.annotate(&mut result, Some(reason), String::new()).await?;
                break;
            };
            let remaining = match outcome {
                Ok(outcome) => outcome.plan.steps,
                Err(PlanError::Budget(why)) => {
                    let reason = Reason {
                        code: ReasonCode::BudgetExhausted,
                        step: None,
                        message: format!("the budget ran out while replanning: {why}"),
                    };
                    self.annotate(&mut result, Some(reason), String::new()).await?;
                    break;
                }
                Err(e) => {
                    self.annotate(&mut result, None, format!("replanning failed: {e}")).await?;
                    break;
                }
            };
            let next = revised_plan(&current, &result.steps, remaining, (replans, &used_ids));
            used_ids.extend(next.steps.iter().map(|s| s.id.as_str().to_owned()));
            version += 1;
            let reason = format!(
                "replan {replans}: step `{}` failed after {} attempt(s): {}",
                failed.id,
                failed.attempts,
                failed.error.as_deref().unwrap_or("no error recorded")
            );
            journal.record_durable(Record::PlanVersion {
                run_id: run_id.clone(),
                version,
                plan: serde_json::to_value(&next)
                    .map_err(|e| EngineError::Plan(format!("cannot store the new plan: {e}")))?,
                reason: reason.clone(),
                created_at: now_rfc3339(),
            })?;
            let id = run_id.clone();
            let record = crate::journal_read::read(self.db, move |s| s.load_run(&id)).await?;
            let changed_before = changed_files(&result);
            result = engine
                .resume(ResumeInput {
                    record,
                    journal: journal.clone(),
                    blobs: HashMap::new(),
                    warnings: result.warnings.clone(),
                    prior_usage: None,
                    revision: Some((version, reason)),
                })
                .await?;
            current = next;
            if changed_files(&result) == changed_before {
                idle_replans += 1;
            } else {
                idle_replans = 0;
            }
            if idle_replans >= 2 && result.status != RunStatus::Success {
                let reason = Reason {
                    code: ReasonCode::Stagnation,
                    step: None,
                    message: "two replans in a row changed no file; the run stops".to_owned(),
                };
                self.annotate(&mut result, Some(reason), String::new()).await?;
                break;
            }
        }
        // The `stop` hook sees the verdict before it is final; blocking it (or failing) keeps the
        // run from ending as a success.
        if let Some(hooks) = &self.engine.config.hooks
            && hooks.has(crate::hooks::HookKind::Stop)
        {
            let summary = format!(
                "{}: {}",
                crate::verdict::finish::status_name(result.status),
                serde_json::to_string(&result.reasons).unwrap_or_default()
            );
            let decision = hooks.stop(&run_id, &summary).await;
            if !decision.allowed() {
                let reason = Reason {
                    code: ReasonCode::JudgeRejected,
                    step: None,
                    message: format!(
                        "the stop hook blocked the finish: {}",
                        decision.reason_or_default(crate::hooks::HookKind::Stop)
                    ),
                };
                self.annotate(&mut result, Some(reason), String::new()).await?;
            }
        }
        journal.flush()?;
        let id = run_id.clone();
        let next_seq =
            crate::journal_read::read(self.db, move |s| Ok(s.load_run(&id)?.next_seq)).await?;
        self.engine.announce(journal.clone(), next_seq, &result).await?;
        journal.close()?;
        Ok(result)
    }

    /// Adds a reason or a warning to the final result and stores it.
    async fn annotate(
        &self,
        result: &mut RunResult,
        reason: Option<Reason>,
        warning: String,
    ) -> Result<(), EngineError> {
        if let Some(reason) = reason {
            result.reasons.push(reason);
            if result.status == RunStatus::Success {
                result.status = RunStatus::Partial;
            }
        }
        if !warning.is_empty() {
            result.warnings.push(warning);
        }
        let record = Record::RunStatus {
            run_id: result.run_id.clone(),
            status: crate::verdict::finish::status_name(result.status).to_owned(),
            result: Some(Box::new(result.clone())),
            updated_at: now_rfc3339(),
        };
        crate::journal_read::read(self.db, move |s| s.write(&record)).await
    }
}

/// Files changed so far (not counting no-op writes).
fn changed_files(result: &RunResult) -> usize {
    result.file_mutations.iter().filter(|m| !m.no_op).count()
}

/// The done steps of `plan`, as the replan prompt shows them.
fn done_steps(plan: &Plan, steps: &[StepResult]) -> Vec<DoneStep> {
    let done: HashMap<&str, &StepResult> =
        steps.iter().filter(|s| s.status == StepStatus::Done).map(|s| (s.id.as_str(), s)).collect();
    plan.steps
        .iter()
        .filter_map(|step| {
            let result = done.get(step.id.as_str())?;
            let output = result.output.as_ref().map(|o| o.to_string()).unwrap_or_default();
            Some(DoneStep {
                id: step.id.clone(),
                title: step.label().to_owned(),
                output_summary: output.chars().take(OUTPUT_SUMMARY_CHARS).collect(),
            })
        })
        .collect()
}

fn failure_of(failed: &StepResult) -> Failure {
    let mut evidence = failed.evidence.clone();
    for a in failed.assertions.iter().filter(|a| !a.passed) {
        evidence.push(format!("assertion {} failed: {}", a.kind, a.detail));
    }
    Failure {
        step: StepId::new(failed.id.clone()),
        error: failed.error.clone().unwrap_or_else(|| "failed".to_owned()),
        evidence,
        attempts: failed.attempts,
    }
}

/// The next plan version: the done steps of `current` as they were, then the planner's
/// remaining steps. A new step that reuses the id of a step that did not finish gets a fresh id
/// (`<id>-r<n>`), and the new steps' dependencies on it follow, so a failed step's journaled
/// state cannot be mistaken for the new step's.
/// `used` holds every step id of the run's earlier plan versions: the journal keeps their state,
/// so a returned step that reuses one (not done) is renamed, or it would inherit that state and
/// never run.
fn revised_plan(
    current: &Plan,
    steps: &[StepResult],
    remaining: Vec<Step>,
    (replan, used): (u32, &HashSet<String>),
) -> Plan {
    let done: HashSet<&str> =
        steps.iter().filter(|s| s.status == StepStatus::Done).map(|s| s.id.as_str()).collect();
    let mut old_ids: HashSet<&str> = current.steps.iter().map(|s| s.id.as_str()).collect();
    old_ids.extend(used.iter().map(String::as_str));
    let mut renamed: HashMap<String, String> = HashMap::new();
    for step in &remaining {
        let id = step.id.as_str();
        if old_ids.contains(id) && !done.contains(id) {
            renamed.insert(id.to_owned(), format!("{id}-r{replan}"));
        }
    }
    let mut steps: Vec<Step> =
        current.steps.iter().filter(|s| done.contains(s.id.as_str())).cloned().collect();
    for mut step in remaining {
        if done.contains(step.id.as_str()) {
            // The planner repeated a done step; it stays done as it was.
            continue;
        }
        if let Some(new) = renamed.get(step.id.as_str()) {
            step.id = StepId::new(new.clone());
        }
        for dep in &mut step.depends_on {
            if let Some(new) = renamed.get(dep.as_str()) {
                *dep = StepId::new(new.clone());
            }
        }
        step.index_references();
        steps.push(step);
    }
    Plan { steps, ..current.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pev_protocol::parse::{Format, parse_plan};

    fn plan(json: &str) -> Plan {
        parse_plan(json, Format::Json).unwrap().plan
    }

    fn result(id: &str, status: StepStatus) -> StepResult {
        StepResult {
            id: id.into(),
            status,
            attempts: 1,
            evidence: vec![],
            assertions: vec![],
            output: None,
            error: None,
            started_at: None,
            ended_at: None,
        }
    }

    #[test]
    fn a_revision_keeps_done_steps_and_renames_reused_failed_ids() {
        let current = plan(
            r#"{"goal":"g","steps":[{"id":"a","tool":"file.read","parameters":{"path":"x"}},
                {"id":"b","tool":"file.read","parameters":{"path":"y"},"depends_on":["a"]}],
                "postconditions":["p"]}"#,
        );
        let steps = [result("a", StepStatus::Done), result("b", StepStatus::Failed)];
        let remaining = plan(
            r#"{"goal":"g","steps":[{"id":"a","tool":"file.read","parameters":{"path":"z"}},
                {"id":"b","description":"fix it","depends_on":["a"]},
                {"id":"c","description":"then this","depends_on":["b"]}]}"#,
        )
        .steps;
        let next = revised_plan(&current, &steps, remaining, (1, &HashSet::new()));
        let ids: Vec<&str> = next.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["a", "b-r1", "c"]);
        // The done step is the original one, not the planner's repetition.
        assert_eq!(
            next.steps[0].parameters.get("path").and_then(pev_protocol::ValueRef::as_str),
            Some("x")
        );
        assert_eq!(next.steps[2].depends_on, [StepId::new("b-r1")]);
        assert_eq!(next.steps[1].depends_on, [StepId::new("a")]);
        assert_eq!(next.postconditions.len(), 1);
    }

    /// A replan that brings back an id from two versions ago (not in the current version) is
    /// renamed too: the journal still holds that step's failed state.
    #[test]
    fn an_id_from_an_earlier_version_is_renamed_too() {
        let current = plan(
            r#"{"goal":"g","steps":[{"id":"a","tool":"file.read","parameters":{"path":"x"}},
                {"id":"b-r1","description":"fix it","depends_on":["a"]}]}"#,
        );
        let steps = [result("a", StepStatus::Done), result("b-r1", StepStatus::Failed)];
        let remaining = plan(
            r#"{"goal":"g","steps":[{"id":"b","description":"fix it again","depends_on":["a"]},
                {"id":"c","description":"then this","depends_on":["b"]}]}"#,
        )
        .steps;
        let used: HashSet<String> = ["a", "b", "b-r1"].iter().map(|s| (*s).to_owned()).collect();
        let next = revised_plan(&current, &steps, remaining, (2, &used));
        let ids: Vec<&str> = next.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["a", "b-r2", "c"]);
        assert_eq!(next.steps[2].depends_on, [StepId::new("b-r2")]);
    }

    #[test]
    fn a_failure_carries_its_failed_assertions() {
        let mut failed = result("b", StepStatus::Failed);
        failed.error = Some("assertion file_contains failed: nope".into());
        failed.assertions.push(pev_protocol::assertion::AssertionResult {
            kind: "file_contains".into(),
            passed: false,
            detail: "pattern 'x' not found".into(),
        });
        let f = failure_of(&failed);
        assert_eq!(f.step.as_str(), "b");
        assert!(f.evidence.iter().any(|e| e.contains("pattern 'x' not found")), "{:?}", f.evidence);
        assert!(f.error.contains("file_contains"));
    }
}
