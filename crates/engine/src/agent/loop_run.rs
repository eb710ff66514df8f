//! `pev agent --mode loop`: one model in a tool loop, with the plan as tools and a finalization
//! gate (`loop_mode`). The engine runs it as a one-step plan (so every workspace call is
//! journaled like any other); afterwards the model's own plan decides what the run may claim:
//! steps that are not done, postconditions the harness did not verify, a multi-step goal worked
//! without a plan, or a gate that had to end the loop are reasons, never a silent pass. Every
//! `plan_create` is journaled as a plan version, so `pev show` lists what each rewrite dropped.
//!
//! Evidence the plan tools accepted along the way is point-in-time: when the loop is over, the
//! assertions of every done step and every verified postcondition run again against the final
//! workspace (`final_recheck`), and what no longer holds keeps the run from `success`, naming
//! the calls made after the evidence was taken.

use std::collections::HashMap;
use std::sync::Arc;

use pev_protocol::event::now_rfc3339;
use pev_protocol::run::{
    EvidenceOf, FinalCheck, Reason, ReasonCode, RunResult, RunStatus, StepResult, StepStatus,
};
use pev_protocol::{Plan, Step, StepId};
use pev_store::{Journal, Record, Store};

use crate::agent::loop_mode::{
    LoopExecutor, LoopReport, ModelPlan, ModelPostcondition, PlanRevision, StepStatus as StepState,
    VerifiedBy,
};
use crate::engine::{Engine, EngineError};
use crate::instruct::{Judge, PostconditionRequest, StepEvidence};
use crate::scheduler::RunInput;
use crate::verdict::final_check::name_later_calls;
use crate::verdict::unasserted::{Verifier, decide};

/// The id of the one engine step that hosts the loop.
pub const LOOP_STEP: &str = "loop";

/// The plan the engine runs for a loop-mode goal: one instruction step, one attempt (the gate,
/// not a retry, is what keeps the model at it).
pub fn loop_plan(goal: &str) -> Plan {
    let mut step = Step {
        id: StepId::new(LOOP_STEP),
        title: Some("Work on the goal in a tool loop".to_owned()),
        description: Some(goal.to_owned()),
        max_attempts: Some(1),
        ..Step::default()
    };
    step.index_references();
    Plan { goal: goal.to_owned(), steps: vec![step], ..Plan::default() }
}

/// One loop-mode run.
pub struct LoopRun<'a> {
    /// An engine whose models' executor is `executor`.
    pub engine: &'a Engine,
    pub executor: Arc<LoopExecutor>,
    pub db: &'a pev_store::Location,
    /// The verifier that decides the postconditions the model declared without assertions, or
    /// why there is none (they then stay unverified, and the reason says so).
    pub verifier: Result<Arc<dyn Judge>, String>,
}

impl LoopRun<'_> {
    pub async fn run(&self, run_id: String, goal: &str) -> Result<RunResult, EngineError> {
        let journal = Journal::start(self.db)?;
        let mut quiet = self.engine.clone();
        quiet.config.final_events = false;
        let result = quiet
            .run(RunInput {
                run_id: run_id.clone(),
                plan: loop_plan(goal),
                journal: journal.clone(),
            })
            .await?;
        self.finish(run_id, goal, result, journal).await
    }

    /// Resumes a loop-mode run (`pev resume`): its one step is run again, the journaled model
    /// turns and finished tool calls answered from the journal while the model asks for them
    /// (the caller's client and the engine's continuation), so the loop's plan, gate and
    /// evidence are rebuilt as they were and the loop goes on from where it stopped. The
    /// caller reopens the step if the killed session had finished it.
    pub async fn resume(
        &self,
        input: crate::scheduler::ResumeInput,
    ) -> Result<RunResult, EngineError> {
        let run_id = input.record.run_id.clone();
        let goal = input.record.goal.clone();
        let journal = input.journal.clone();
        let mut quiet = self.engine.clone();
        quiet.config.final_events = false;
        let result = quiet.resume(input).await?;
        self.finish(run_id, &goal, result, journal).await
    }

    /// What both `run` and `resume` do once the loop ended: the model's plan decides what the
    /// run may claim, its postconditions are judged, the evidence is re-checked, the outcome
    /// announced.
    async fn finish(
        &self,
        run_id: String,
        goal: &str,
        mut result: RunResult,
        journal: Journal,
    ) -> Result<RunResult, EngineError> {
        let report = self.executor.report();
        // A resumed loop rebuilds the same revisions from its conversation: those a killed
        // session journaled already are not written again.
        let id = run_id.clone();
        let versions = crate::journal_read::read(self.db, move |s| s.plan_versions(&id)).await?;
        let journaled = versions.iter().map(|v| v.0).max().unwrap_or(1);
        journal_revisions(&journal, &run_id, goal, &report, journaled)?;
        let judged = self.judge_postconditions(goal, &report, &result, &journal).await?;
        judge_loop(goal, &report, &judged, &mut result);
        record_gate(&report, &mut result);
        let mut check = final_recheck(&self.engine.ctx, &report).await;
        journal.flush()?;
        // Read off the runtime: the Postgres client blocks.
        let journaled = crate::oracle::load(self.db.clone(), run_id.clone(), true).await?;
        // The engine's end of the run found what changed in the oracle; the model's plan's
        // evidence is re-checked on the pristine oracle here.
        check.oracle = result.final_check.as_ref().and_then(|c| c.oracle.clone());
        // The files the model's own checks run, changed by the run: its checks, bent.
        let commands: Vec<&str> = report
            .plan
            .iter()
            .flat_map(|p| {
                p.steps
                    .iter()
                    .flat_map(|s| &s.assertions)
                    .chain(p.postconditions.iter().flat_map(|c| &c.assertions))
            })
            .filter_map(|a| match a {
                pev_protocol::Assertion::CommandSucceeds { command, .. } => Some(command.as_str()),
                _ => None,
            })
            .collect();
        let bent = crate::oracle::loop_check_changes(self.engine, &journaled, (goal, &commands));
        let extra: Vec<_> = bent.iter().map(|(f, _)| f.clone()).collect();
        if !bent.is_empty() {
            let changes: Vec<_> = bent.iter().map(|(_, c)| c.clone()).collect();
            result.reasons.extend(pev_verify::oracle::changed_reasons(&changes));
            if result.status == RunStatus::Success {
                result.status = if result.goal_actions_executed {
                    RunStatus::Partial
                } else {
                    RunStatus::Failed
                };
            }
            check.oracle.get_or_insert_with(Default::default).changed.extend(changes);
        }
        if let Some(oracle) = check.oracle.as_mut() {
            let undone = crate::oracle::undone(&oracle.changed);
            if !undone.is_empty() {
                let ctx = &self.engine.ctx;
                match crate::oracle::pristine_from_journal(ctx, &journaled, &extra, &undone) {
                    Ok((scratch, copy)) => {
                        let found = final_recheck(&copy, &report).await;
                        drop(scratch);
                        oracle.pristine_recheck = true;
                        pev_verify::oracle::add_pristine_regressions(&mut check, found.regressed);
                    }
                    Err(why) => oracle.problems.push(format!(
                        "the model's evidence could not be re-checked on the pristine oracle: {why}"
                    )),
                }
            }
        }
        let Some(record) = journaled.record else {
            return Err(EngineError::Resume(format!("run {run_id} is not in the journal")));
        };
        name_later_calls(&mut check.regressed, &record.tool_calls, |of| {
            let at = match of {
                EvidenceOf::Step(id) => report.evidence.step_at.get(id),
                EvidenceOf::Postcondition(d) => report.evidence.postcondition_at.get(d),
            };
            at.and_then(|&n| usize::try_from(n).ok())
        });
        apply_final_check(check, &mut result);
        let next_seq = record.next_seq;
        self.engine.announce(journal.clone(), next_seq, &result).await?;
        journal.close()?;
        Ok(result)
    }
}

impl LoopRun<'_> {
    /// The postconditions of the model's plan that have no assertions, decided by the verifier
    /// when nothing else keeps the run from `success` (a judge's yes outweighs nothing), or
    /// marked with why no verifier could decide them. Keyed by description.
    async fn judge_postconditions(
        &self,
        goal: &str,
        report: &LoopReport,
        result: &RunResult,
        journal: &Journal,
    ) -> Result<Judged, EngineError> {
        let Some(plan) = &report.plan else { return Ok(Judged::new()) };
        let unasserted: Vec<String> = plan
            .postconditions
            .iter()
            .filter(|p| p.assertions.is_empty())
            .map(|p| p.description.clone())
            .collect();
        if unasserted.is_empty() {
            return Ok(Judged::new());
        }
        // Work the model dropped from its plan is work nobody checked: a judge's yes about the
        // outcome cannot stand in for it.
        let dropped: Vec<String> = report
            .revisions
            .iter()
            .flat_map(|r| &r.dropped)
            .map(|d| format!("`{}` ({})", d.id, d.reason))
            .collect();
        let unavailable = match &self.verifier {
            _ if !dropped.is_empty() => Some(format!(
                "not put to a judge, because the model dropped step(s) {} from its plan",
                dropped.join(", ")
            )),
            Err(why) => Some(format!("no verifier model: {why}")),
            Ok(_) => None,
        };
        if let Some(why) = unavailable {
            let request = PostconditionRequest { postconditions: unasserted, ..Default::default() };
            let decided = decide(Verifier::Unavailable(why), &request).await;
            return Ok(keyed(decided.results));
        }
        let Ok(judge) = &self.verifier else { return Ok(Judged::new()) };
        // Would the run succeed if these held? If not, the judge could change nothing.
        let assumed: Judged = unasserted
            .iter()
            .map(|d| {
                let result = pev_protocol::run::PostconditionResult {
                    description: d.clone(),
                    satisfied: true,
                    evidence: "assumed".to_owned(),
                    judge: None,
                };
                (d.clone(), result)
            })
            .collect();
        let mut probe = result.clone();
        judge_loop(goal, report, &assumed, &mut probe);
        if probe.status != RunStatus::Success {
            return Ok(Judged::new());
        }
        journal.flush()?;
        let store = Store::open_existing(self.db)?;
        let record = store.load_run(&result.run_id)?;
        let (diffs, calls) = crate::verdict::unasserted::journal_evidence(
            &store,
            &record,
            &self.engine.ctx.workspace,
        );
        let marks = &report.evidence;
        let mut claims: Vec<String> = plan
            .steps
            .iter()
            .filter_map(|s| s.evidence.as_ref().map(|e| format!("step '{}': {e}", s.id)))
            .collect();
        claims.extend(plan.postconditions.iter().filter_map(|p| {
            p.evidence.as_ref().map(|e| format!("postcondition '{}': {e}", p.description))
        }));
        claims.extend(report.final_answer.iter().map(|a| format!("final answer: {a}")));
        let request = PostconditionRequest {
            run_goal: goal.to_owned(),
            postconditions: unasserted,
            steps: plan
                .steps
                .iter()
                .map(|s| StepEvidence {
                    id: s.id.clone(),
                    task: s.title.clone(),
                    status: s.status.as_str().to_owned(),
                    evidence: Vec::new(),
                    assertions: marks.step_results.get(&s.id).cloned().unwrap_or_default(),
                })
                .collect(),
            mutations: result.file_mutations.clone(),
            diffs,
            calls,
            warnings: result.warnings.clone(),
            claims,
            budget_note: self.engine.config.models.as_ref().and_then(|m| (m.budget_note)()),
        };
        let decided = decide(Verifier::Judge(judge.as_ref()), &request).await;
        Ok(keyed(decided.results))
    }
}

/// Postcondition results by description.
type Judged = HashMap<String, pev_protocol::run::PostconditionResult>;

fn keyed(results: Vec<pev_protocol::run::PostconditionResult>) -> Judged {
    results.into_iter().map(|r| (r.description.clone(), r)).collect()
}

/// What a postcondition of the model's plan comes to in the run result: verified by the harness
/// (its assertions passed), decided by the judge, or only claimed.
fn postcondition_result(
    pc: &ModelPostcondition,
    report: &LoopReport,
    judged: &Judged,
) -> pev_protocol::run::PostconditionResult {
    if let Some(result) = judged.get(&pc.description).filter(|_| pc.assertions.is_empty()) {
        return result.clone();
    }
    let evidence = if verified_by_harness(pc) {
        let results = report.evidence.postcondition_results.get(&pc.description);
        let checks: Vec<String> =
            results.into_iter().flatten().map(|r| format!("{}: {}", r.kind, r.detail)).collect();
        checks.join("; ")
    } else if pc.assertions.is_empty() {
        match &pc.evidence {
            Some(e) => format!("no assertion; claimed by the model, not evidence: {e}"),
            None => "no assertion, and not verified".to_owned(),
        }
    } else {
        "its assertions were not run and passed by the harness".to_owned()
    };
    pev_protocol::run::PostconditionResult {
        description: pc.description.clone(),
        satisfied: verified_by_harness(pc),
        evidence,
        judge: None,
    }
}

/// Runs the assertions of the model's done steps and harness-verified postconditions again
/// against the workspace as the loop left it.
pub async fn final_recheck(ctx: &pev_tools::ToolContext, report: &LoopReport) -> FinalCheck {
    let none = std::collections::HashMap::new();
    let outputs = std::collections::HashMap::new();
    let marks = &report.evidence;
    let plan = report.plan.as_ref();
    let steps: Vec<(EvidenceOf, &crate::agent::loop_mode::ModelStep)> = plan
        .into_iter()
        .flat_map(|p| &p.steps)
        .filter(|s| s.status == StepState::Done && !s.assertions.is_empty())
        .map(|s| (EvidenceOf::Step(s.id.clone()), s))
        .collect();
    let posts: Vec<(EvidenceOf, &ModelPostcondition)> = plan
        .into_iter()
        .flat_map(|p| &p.postconditions)
        .filter(|p| verified_by_harness(p))
        .map(|p| (EvidenceOf::Postcondition(p.description.clone()), p))
        .collect();
    // What the children the model delegated verified (`delegate`): held to the workspace the
    // loop left too, as the step they were delegated for (the loop's own, if none was).
    let children: Vec<(EvidenceOf, &crate::agent::loop_mode::ChildClaims)> = report
        .child_claims
        .iter()
        .map(|c| (EvidenceOf::Step(c.step.clone().unwrap_or_else(|| LOOP_STEP.to_owned())), c))
        .collect();
    let env = |step: Option<&'static str>, before| pev_verify::CheckEnv {
        ctx,
        step,
        outputs: &outputs,
        before,
    };
    let claims: Vec<pev_verify::Claim<'_>> = steps
        .iter()
        .map(|(of, s)| pev_verify::Claim {
            of,
            assertions: &s.assertions,
            earlier: marks.step_results.get(&s.id).map_or(&[], Vec::as_slice),
            env: env(None, marks.step_before.get(&s.id).unwrap_or(&none)),
        })
        .chain(posts.iter().map(|(of, p)| pev_verify::Claim {
            of,
            assertions: &p.assertions,
            earlier: marks.postcondition_results.get(&p.description).map_or(&[], Vec::as_slice),
            env: env(None, &marks.first_seen),
        }))
        .chain(children.iter().map(|(of, c)| pev_verify::Claim {
            of,
            assertions: &c.claims,
            earlier: &[],
            env: env(None, &none),
        }))
        .collect();
    pev_verify::recheck(&claims).await
}

/// Adds what the final re-check found to a loop run's result: each regression is a reason, and
/// a run with one is not `success`.
pub fn apply_final_check(check: FinalCheck, result: &mut RunResult) {
    result.warnings.extend(check.checked_once.iter().map(pev_verify::checked_once_warning));
    if !check.regressed.is_empty() {
        result.reasons.extend(check.regressed.iter().map(pev_verify::regression_reason));
        if result.status == RunStatus::Success {
            result.status =
                if result.goal_actions_executed { RunStatus::Partial } else { RunStatus::Failed };
        }
    }
    result.final_check = Some(check);
}

/// Puts the gate's counts into the loop step's output (`output.gate`), for `pev eval` and
/// anyone reading the result: how often the model tried to finish early, how many of those the
/// gate refused, whether it ran out of refusals, and whether a final answer was accepted (the
/// model's claim of completion, which the run's status may contradict). A loop step without
/// output (the gate ended it, or the provider failed) gets an object holding only `gate`.
pub fn record_gate(report: &LoopReport, result: &mut RunResult) {
    let Some(step) = result.steps.iter_mut().find(|s| s.id == LOOP_STEP) else { return };
    let gate = serde_json::json!({
        "refusals": report.refusals,
        "premature_finalizations": report.premature_finalizations,
        "gate_exhausted": report.gate_exhausted,
        "rounds": report.rounds,
        "plan_tool_calls": report.plan_tool_calls,
        "multi_step_goal": report.multi_step_goal,
        "final_answer_accepted": report.final_answer.is_some(),
        "revisions": report.revisions.len(),
    });
    match &mut step.output {
        Some(serde_json::Value::Object(map)) => {
            map.insert("gate".to_owned(), gate);
        }
        Some(_) | None => step.output = Some(serde_json::json!({ "gate": gate })),
    }
}

/// The model's plan as a CONTRACTS plan (its steps are instructions; their assertions and the
/// postconditions' assertions are kept), for the journal and `pev show`.
pub fn as_plan(goal: &str, plan: &ModelPlan) -> Plan {
    let steps = plan
        .steps
        .iter()
        .map(|s| {
            let mut step = Step {
                id: StepId::new(s.id.clone()),
                title: Some(s.title.clone()),
                assertions: s.assertions.clone(),
                ..Step::default()
            };
            step.index_references();
            step
        })
        .collect();
    let postconditions = plan
        .postconditions
        .iter()
        .map(|p| pev_protocol::Postcondition {
            description: p.description.clone(),
            assertions: p.assertions.clone(),
            ..pev_protocol::Postcondition::default()
        })
        .collect();
    Plan { goal: goal.to_owned(), steps, postconditions, ..Plan::default() }
}

/// Journals each `plan_create` as a plan version (version 1 is the one-step loop plan).
fn journal_revisions(
    journal: &Journal,
    run_id: &str,
    goal: &str,
    report: &LoopReport,
    journaled: u32,
) -> Result<(), EngineError> {
    for (i, revision) in report.revisions.iter().enumerate() {
        let version = u32::try_from(i).unwrap_or(u32::MAX).saturating_add(2);
        if version <= journaled {
            continue;
        }
        let plan = serde_json::to_value(as_plan(goal, &revision.plan))
            .map_err(|e| EngineError::Plan(format!("cannot store the model's plan: {e}")))?;
        journal.record(Record::PlanVersion {
            run_id: run_id.to_owned(),
            version,
            plan,
            reason: describe(revision),
            created_at: now_rfc3339(),
        })?;
    }
    Ok(())
}

/// The journal's reason for a plan version: which `plan_create` it was and what it dropped.
fn describe(revision: &PlanRevision) -> String {
    let mut out = format!("plan_create #{} by the model", revision.number);
    if !revision.dropped.is_empty() {
        let dropped: Vec<String> =
            revision.dropped.iter().map(|d| format!("`{}` ({})", d.id, d.reason)).collect();
        out.push_str(&format!("; dropped {}", dropped.join(", ")));
    }
    out
}

/// A postcondition counts only when the harness ran its assertions and they passed.
fn verified_by_harness(pc: &ModelPostcondition) -> bool {
    pc.verified && pc.verified_by == Some(VerifiedBy::Harness)
}

/// Adds what the model's plan says to the engine's result: its steps and postconditions, and
/// the reasons the run may not claim success. `judged` holds what the verifier decided about
/// the postconditions without assertions (by description); a postcondition counts when the
/// harness verified it, or it has no assertion and the judge says it holds.
pub(crate) fn judge_loop(goal: &str, report: &LoopReport, judged: &Judged, result: &mut RunResult) {
    let mut reasons: Vec<Reason> = Vec::new();
    match &report.plan {
        None if crate::agent::loop_mode::goal_is_multi_step(goal) => reasons.push(Reason {
            code: ReasonCode::StepsNotRun,
            step: None,
            message: "the goal has several parts, but the model never created a plan \
                      (plan_create), so nothing shows they were all done"
                .to_owned(),
        }),
        None => {}
        Some(plan) => {
            let open: Vec<String> = plan
                .steps
                .iter()
                .filter(|s| s.status != StepState::Done)
                .map(|s| match (&s.status, &s.blocked_reason) {
                    (StepState::Blocked, Some(why)) => format!("'{}' (blocked: {why})", s.id),
                    (state, _) => format!("'{}' ({})", s.id, state.as_str()),
                })
                .collect();
            if !open.is_empty() {
                reasons.push(Reason {
                    code: ReasonCode::StepsNotRun,
                    step: None,
                    message: format!(
                        "{} step(s) of the model's plan are not done: {}",
                        open.len(),
                        open.join(", ")
                    ),
                });
            }
            for pc in &plan.postconditions {
                let decided = judged.get(&pc.description).filter(|_| pc.assertions.is_empty());
                if verified_by_harness(pc) || decided.is_some_and(|r| r.satisfied) {
                    continue;
                }
                let why = match decided {
                    Some(r) => format!(": {}", r.evidence),
                    None if pc.assertions.is_empty() => {
                        " (it has no assertion; the model's word is not evidence)".to_owned()
                    }
                    None => String::new(),
                };
                reasons.push(Reason {
                    code: ReasonCode::PostconditionUnverified,
                    step: None,
                    message: format!(
                        "postcondition '{}' was not verified by the harness{why}",
                        pc.description
                    ),
                });
            }
            result.postconditions = plan
                .postconditions
                .iter()
                .map(|pc| postcondition_result(pc, report, judged))
                .collect();
            for s in &plan.steps {
                result.steps.push(StepResult {
                    id: format!("plan:{}", s.id),
                    status: match s.status {
                        StepState::Done => StepStatus::Done,
                        StepState::InProgress => StepStatus::InProgress,
                        StepState::Blocked => StepStatus::Blocked,
                        StepState::Pending => StepStatus::Pending,
                    },
                    attempts: 0,
                    evidence: s.evidence.iter().cloned().collect(),
                    assertions: Vec::new(),
                    output: None,
                    error: s.blocked_reason.clone(),
                    started_at: None,
                    ended_at: None,
                });
            }
        }
    }
    if report.gate_exhausted {
        // The gate ending the loop is not a failure of the loop step: it is the run stopping
        // unfinished, which is `partial` (never a silent pass), with the plan's gaps as reasons.
        let message = format!(
            "the finalization gate refused {} final answer(s) and ended the loop",
            report.refusals
        );
        result.reasons.retain(|r| {
            !(r.code == ReasonCode::StepFailed && r.step.as_deref() == Some(LOOP_STEP))
        });
        if let Some(step) = result.steps.iter_mut().find(|s| s.id == LOOP_STEP) {
            step.status = StepStatus::Blocked;
            step.error = Some(message.clone());
        }
        result.warnings.push(message);
        result.reasons.extend(reasons);
        result.status = RunStatus::Partial;
        return;
    }
    if reasons.is_empty() {
        return;
    }
    result.reasons.extend(reasons);
    if result.status == RunStatus::Success {
        result.status =
            if result.goal_actions_executed { RunStatus::Partial } else { RunStatus::Failed };
    }
}
