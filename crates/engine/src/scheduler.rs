//! The run loop: which step starts when.
//!
//! A step is ready when every step it waits for (through `depends_on` or a reference) is done.
//! Ready steps start in plan order, at most `jobs` at a time, or `light_jobs` while only file
//! steps on paths of their own run (`lanes`). When a step fails, its `on_fail`
//! decides: `abort` (and `retry` once its attempts are spent) starts nothing new but lets running
//! steps finish; `continue` skips the steps that wait for it, directly or not, and lets the rest
//! go on; `replan` needs a planner, which `pev run` does not have, so it stops like `abort`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use pev_lint::graph::StepGraph;
use pev_lint::policy::Glob;
use pev_protocol::event::{EventBody, now_rfc3339};
use pev_protocol::run::{RunResult, StepStatus};
use pev_protocol::{OnFail, Plan};
use pev_store::{FileHashRecord, HashPhase, Journal, Record, RunRecord, ToolCallStatus};
use tokio::task::JoinSet;

use crate::call::Recovery;
use crate::call::StepMutation;
use crate::call::snapshot;
use crate::digest::sha256_hex;
use crate::engine::{Engine, EngineError};
use crate::lanes::{self, Lanes, Weight};
use crate::recorder::Recorder;
pub(crate) use crate::state::run::RunState;
use crate::state::slot::Slot;
use crate::state::step::{Shared, StepJob, StepReport};
use crate::step::run_step;

/// A new run: its id (already created in the store), the plan and the journal to write.
pub struct RunInput {
    pub run_id: String,
    pub plan: Plan,
    pub journal: Journal,
}

/// A stored run to finish.
pub struct ResumeInput {
    pub record: RunRecord,
    pub journal: Journal,
    /// Blob contents by sha256, for the hashes [`ResumeInput::blobs_needed`] names.
    pub blobs: HashMap<String, Vec<u8>>,
    /// Warnings recorded by earlier sessions, in order.
    pub warnings: Vec<String>,
    /// What the models of earlier sessions consumed, when the caller knows better than the
    /// stored result (the last `usage` event of a killed session). `None`: the stored result's.
    pub prior_usage: Option<pev_protocol::run::Usage>,
    /// Set when this continues the run under a new plan version (a replan): the version and why.
    /// The done steps the new plan keeps (same ids) stay done.
    pub revision: Option<(u32, String)>,
}

impl ResumeInput {
    /// The blobs resume wants: the content before each write that was under way.
    pub fn blobs_needed(record: &RunRecord) -> Vec<String> {
        record.tool_calls.iter().filter_map(|c| c.pre_sha256.clone()).collect()
    }
}

/// Which steps can start: how many of its prerequisites each step still waits for, and the
/// steps waiting for none, in the order they became ready.
pub(crate) struct Frontier {
    graph: StepGraph,
    remaining: Vec<usize>,
    ready: VecDeque<usize>,
}

impl Engine {
    /// Runs a new plan to its end (or to a point where it waits for approval).
    pub async fn run(&self, input: RunInput) -> Result<RunResult, EngineError> {
        self.check_plan(&input.plan)?;
        // A bad glob in the plan's oracle is refused before anything is journaled.
        crate::oracle::RunOracle::check(self, &input.plan)?;
        let mut plan = input.plan;
        for step in &mut plan.steps {
            if step.refs.is_empty() {
                step.index_references();
            }
        }
        let n = plan.steps.len();
        let recorder = Recorder::new(input.run_id, 0, input.journal, Arc::clone(&self.observer));
        recorder.emit(EventBody::RunStarted {
            goal: plan.goal.clone(),
            workspace: self.ctx.workspace.root().display().to_string(),
            resumed: false,
            sandbox: serde_json::to_value(self.ctx.sandbox.enforced()).ok(),
        })?;
        recorder.emit(EventBody::PlanCreated { version: 1, steps: n })?;
        let oracle = crate::oracle::RunOracle::start(self, &plan, &recorder)?;
        let mut run_before = HashMap::new();
        for pc in &plan.postconditions {
            for a in &pc.assertions {
                if let pev_protocol::Assertion::ContentChanged { path, .. } = a
                    && let Some(state) = snapshot(self, path)
                {
                    let sha = state.as_deref().map(sha256_hex);
                    recorder.record(Record::FileHash(FileHashRecord {
                        run_id: recorder.run_id().to_owned(),
                        step_id: String::new(),
                        path: path.clone(),
                        phase: HashPhase::Before,
                        sha256: sha.clone(),
                        bytes: state.as_ref().map(|c| c.len() as u64),
                        at: now_rfc3339(),
                    }))?;
                    run_before.insert(path.clone(), sha);
                }
            }
        }
        let state = RunState {
            slots: vec![Slot::default(); n],
            recoveries: HashMap::new(),
            continuations: HashMap::new(),
            approved: HashSet::new(),
            mutations: Vec::new(),
            warnings: Vec::new(),
            tool_calls: 0,
            run_before,
            prior_duration_ms: 0,
            prior_usage: pev_protocol::run::Usage::default(),
            cancelled: false,
            judge_rejected: Vec::new(),
            budget_exhausted: None,
        };
        self.execute(Arc::new(plan), recorder, state, (0, oracle)).await
    }

    /// Finishes a stored run: done steps stay done, interrupted ones are settled (see
    /// `recover`), the rest run.
    pub async fn resume(&self, input: ResumeInput) -> Result<RunResult, EngineError> {
        let ResumeInput { record, journal, blobs, warnings, prior_usage, revision } = input;
        let mut plan: Plan = serde_json::from_value(record.plan.clone()).map_err(|e| {
            EngineError::Resume(format!(
                "the stored plan of run {} cannot be read: {e}",
                record.run_id
            ))
        })?;
        for step in &mut plan.steps {
            step.index_references();
        }
        self.check_plan(&plan)?;
        let index = plan.index();
        let mut slots = vec![Slot::default(); plan.steps.len()];
        for stored in &record.steps {
            if let Some(&i) = index.get(stored.step_id.as_str())
                && let Some(slot) = slots.get_mut(i)
            {
                *slot = Slot::from_stored(stored);
            }
        }
        // The last tool call of each step, in journal order.
        let mut last_call: HashMap<&str, &pev_store::ToolCallRecord> = HashMap::new();
        for call in &record.tool_calls {
            last_call.insert(call.step_id.as_str(), call);
        }
        // The steps that made a goal action (a finished write, exec or non-GET request) or
        // have changes journaled for them.
        let goal_steps: std::collections::HashSet<&str> = record
            .tool_calls
            .iter()
            .filter(|c| {
                matches!(c.status, ToolCallStatus::Finished | ToolCallStatus::Recovered)
                    && pev_verify::is_goal_action(&c.tool, c.effect, &c.arguments)
            })
            .map(|c| c.step_id.as_str())
            .chain(
                record.mutations.iter().filter(|m| !m.mutation.no_op).map(|m| m.step_id.as_str()),
            )
            .collect();
        // Each step's baseline for the final re-check: the earliest hash before it of each path.
        for h in record.file_hashes.iter().filter(|h| h.phase == HashPhase::Before) {
            if let Some(&i) = index.get(h.step_id.as_str())
                && let Some(slot) = slots.get_mut(i)
            {
                slot.baseline.entry(h.path.clone()).or_insert_with(|| h.sha256.clone());
            }
        }
        // What resume needs to settle an interrupted call of step `id`.
        let recovery_of = |id: &str, call: &pev_store::ToolCallRecord| Recovery {
            call: crate::step::recover::reopened(call),
            before_hashes: record
                .file_hashes
                .iter()
                .filter(|h| h.step_id == id && h.phase == HashPhase::Before)
                .map(|h| (h.path.clone(), h.sha256.clone()))
                .collect(),
            before_content: call.pre_sha256.as_ref().and_then(|s| blobs.get(s).cloned()),
        };
        let mut recoveries = HashMap::new();
        let mut continuations = HashMap::new();
        for (i, slot) in slots.iter_mut().enumerate() {
            let id = plan.steps[i].id.as_str();
            match slot.status {
                StepStatus::Done => {
                    // Any goal action the step made, not only its last call's (an instruction
                    // step that wrote and then read), or changes journaled for it (a delegated
                    // step's child's): a resumed run must not lose them and end `no_effects`.
                    slot.goal_action = goal_steps.contains(id);
                }
                StepStatus::InProgress => {
                    let direct = plan.steps[i].tool.is_some();
                    if !direct {
                        // An instruction step's interrupted attempt is continued, under its own
                        // number: the calls it finished are answered from the journal.
                        if let Some(c) = crate::continuation::Continuation::of(
                            &record,
                            id,
                            slot.attempts,
                            &blobs,
                        ) {
                            continuations.insert(i, c);
                        }
                        slot.attempts = slot.attempts.saturating_sub(1);
                    }
                    if let Some(call) =
                        last_call.get(id).filter(|c| direct && c.attempt == slot.attempts)
                    {
                        recoveries.insert(i, recovery_of(id, call));
                        // The attempt being settled is the one that was interrupted.
                        slot.attempts = slot.attempts.saturating_sub(1);
                    } else if direct {
                        // Cut off before its call's intent was journaled: the attempt made no
                        // call, so it is made again under its own number, not counted as one
                        // of the step's attempts (kills there could use them all up).
                        slot.attempts = slot.attempts.saturating_sub(1);
                    }
                    slot.status = StepStatus::Pending;
                }
                StepStatus::Blocked => {
                    // Held for approval because its interrupted call may have run (issue 31):
                    // that call is still unsettled, and is recovered as when it was cut off.
                    if let Some(call) = last_call.get(id).filter(|c| {
                        plan.steps[i].tool.is_some()
                            && c.status == ToolCallStatus::Started
                            && c.attempt == slot.attempts.saturating_add(1)
                    }) {
                        recoveries.insert(i, recovery_of(id, call));
                    }
                    slot.status = StepStatus::Pending;
                }
                _ => {}
            }
            slot.awaiting_approval = false;
        }
        let run_before = record
            .file_hashes
            .iter()
            .filter(|h| h.step_id.is_empty() && h.phase == HashPhase::Before)
            .map(|h| (h.path.clone(), h.sha256.clone()))
            .collect();
        let mut approved: HashSet<String> =
            record.approvals.iter().map(|a| a.step_id.clone()).collect();
        // A step held for approval because its interrupted effect may have run (issue 31) is
        // approved only by a yes to running that call again (`pev approve` records it under the
        // call's own key), not by the step's approval from before it.
        for (i, r) in &recoveries {
            let step = &plan.steps[*i];
            let held = crate::step::recover::may_have_run(self.ctx.workspace.root(), &r.call)
                && !step.repeatable();
            let key = pev_store::rerun_approval_key(step.id.as_str(), &r.call.call_id);
            if held && !record.approvals.iter().any(|a| a.step_id == key) {
                approved.remove(step.id.as_str());
            }
        }
        let mutations = record
            .mutations
            .iter()
            .map(|m| StepMutation { step: m.step_id.clone(), mutation: m.mutation.clone() })
            .collect();
        let prior_duration_ms = record.result.as_ref().map_or(0, |r| r.duration_ms);
        let prior_usage = match (&revision, prior_usage, &record.result) {
            (Some(_), _, _) => pev_protocol::run::Usage::default(),
            (None, Some(usage), _) => usage,
            (None, None, Some(result)) => result.usage.clone(),
            (None, None, None) => pev_protocol::run::Usage::default(),
        };
        let recorder = Recorder::new(
            record.run_id.clone(),
            record.next_seq,
            journal,
            Arc::clone(&self.observer),
        );
        match revision {
            Some((version, reason)) => recorder.emit(EventBody::PlanRevised {
                version,
                steps: plan.steps.len(),
                reason,
            })?,
            None => recorder.emit(EventBody::RunStarted {
                goal: plan.goal.clone(),
                workspace: self.ctx.workspace.root().display().to_string(),
                resumed: true,
                sandbox: serde_json::to_value(self.ctx.sandbox.enforced()).ok(),
            })?,
        }
        let state = RunState {
            slots,
            recoveries,
            continuations,
            approved,
            mutations,
            warnings,
            tool_calls: record.tool_calls.len() as u64,
            run_before,
            prior_duration_ms,
            prior_usage,
            cancelled: false,
            judge_rejected: Vec::new(),
            budget_exhausted: None,
        };
        let location = recorder.journal().location().clone();
        let journaled = crate::oracle::load(location, record.run_id.clone(), false).await?;
        let oracle = crate::oracle::RunOracle::resume(self, &plan, journaled)?;
        self.execute(Arc::new(plan), recorder, state, (record.next_seq, oracle)).await
    }

    /// Journals `result` as the run's final outcome and emits `verify.finished` and
    /// `run.finished` for it, numbered after the run's last event (`next_seq`).
    pub async fn announce(
        &self,
        journal: Journal,
        next_seq: u64,
        result: &RunResult,
    ) -> Result<(), EngineError> {
        let recorder =
            Recorder::new(result.run_id.clone(), next_seq, journal, Arc::clone(&self.observer));
        recorder.emit(EventBody::VerifyFinished {
            status: result.status,
            reasons: result.reasons.clone(),
        })?;
        recorder.record(Record::RunStatus {
            run_id: result.run_id.clone(),
            status: crate::verdict::finish::status_name(result.status).to_owned(),
            result: Some(Box::new(result.clone())),
            updated_at: now_rfc3339(),
        })?;
        recorder.emit(EventBody::RunFinished { result: Box::new(result.clone()) })?;
        recorder.flush().await?;
        Ok(())
    }

    async fn execute(
        &self,
        plan: Arc<Plan>,
        recorder: Recorder,
        mut state: RunState,
        (session, oracle): (u64, crate::oracle::RunOracle),
    ) -> Result<RunResult, EngineError> {
        let started = Instant::now();
        let graph = StepGraph::new(&plan);
        let n = plan.steps.len();
        let shared = Arc::new(Shared {
            engine: self.clone(),
            plan: Arc::clone(&plan),
            recorder,
            approve_globs: self.config.approve_tools.iter().map(|g| Glob::new(g)).collect(),
            approval_lock: tokio::sync::Mutex::new(()),
            write_locks: self.config.write_locks.clone().unwrap_or_default(),
            session,
            // Shared with the run's child runs (a command's changes are its own only if
            // nothing else in the tree ran with it).
            activity: self.config.activity.clone().unwrap_or_default(),
            oracle: Arc::new(oracle),
        });
        let remaining: Vec<usize> = (0..n)
            .map(|i| {
                graph
                    .edges(i)
                    .iter()
                    .filter(|e| state.slots[e.to].status != StepStatus::Done)
                    .count()
            })
            .collect();
        let ready: VecDeque<usize> =
            (0..n).filter(|&i| remaining[i] == 0 && !state.slots[i].is_settled()).collect();
        let mut frontier = Frontier { graph, remaining, ready };
        let hooks = self.config.hooks.is_some();
        let weights: Vec<Weight> = lanes::weights(&plan, &self.registry, hooks);
        let mut lanes = Lanes::new(self.config.jobs, self.config.light_jobs);
        // A step that failed and stops the run (abort, or retry/replan spent) keeps stopping it
        // after a resume: resume finishes an interrupted run, it does not undo an abort.
        let mut aborting = plan.steps.iter().zip(&state.slots).any(|(step, slot)| {
            slot.status == StepStatus::Failed && step.on_fail != OnFail::Continue
        });
        let mut running: JoinSet<StepReport> = JoinSet::new();
        let cancel = Arc::clone(&self.config.cancel);
        let index = plan.index();
        loop {
            if cancel.is_cancelled() {
                state.cancelled = true;
            }
            while !aborting && !state.cancelled {
                // In order: a step that must wait for room keeps the ones behind it waiting.
                let Some(&i) = frontier.ready.front() else { break };
                if !lanes.admits(weights[i]) {
                    break;
                }
                frontier.ready.pop_front();
                lanes.start(weights[i]);
                let job = job_for(&plan, &index, &mut state, i);
                // The step's model calls are journaled as this run's (a child run shares its
                // parent's clients).
                let run_id = shared.recorder.run_id().to_owned();
                running
                    .spawn(crate::model_scope::in_run(run_id, run_step(Arc::clone(&shared), job)));
            }
            if running.is_empty() {
                break;
            }
            tokio::select! {
                joined = running.join_next() => {
                    let report = match joined {
                        Some(Ok(report)) => report,
                        Some(Err(e)) => {
                            return Err(EngineError::Plan(format!("a step task ended abnormally: {e}")));
                        }
                        None => break,
                    };
                    lanes.end(weights[report.idx]);
                    let failed = self.settle(&shared, &mut state, report, &mut frontier).await?;
                    if let Some(on_fail) = failed {
                        match on_fail {
                            OnFail::Continue => {}
                            OnFail::Replan => {
                                let message = "on_fail: replan needs a planner model (pev agent); \
                                               the run stops as for abort".to_owned();
                                shared.recorder.emit(EventBody::Warning { step: None, message: message.clone() })?;
                                state.warnings.push(message);
                                aborting = true;
                            }
                            OnFail::Abort | OnFail::Retry => aborting = true,
                        }
                    }
                }
                () = cancel.cancelled(), if !state.cancelled => {
                    state.cancelled = true;
                }
            }
        }
        // A cancel that came after every step had settled changed nothing.
        state.cancelled |= cancel.is_cancelled() && state.slots.iter().any(|s| !s.is_settled());
        crate::verdict::finish::finish(&shared, &mut state, started).await
    }

    /// Takes a finished step task's report into the state; returns the `on_fail` of a failed
    /// step.
    async fn settle(
        &self,
        shared: &Shared,
        state: &mut RunState,
        report: StepReport,
        frontier: &mut Frontier,
    ) -> Result<Option<OnFail>, EngineError> {
        let i = report.idx;
        let step = &shared.plan.steps[i];
        let id = step.id.as_str();
        state.tool_calls += report.tool_calls;
        state.cancelled |= report.cancelled;
        if report.slot.judge_rejected {
            state.judge_rejected.push(id.to_owned());
        }
        if let Some(why) = &report.budget_exhausted {
            state.budget_exhausted.get_or_insert_with(|| why.clone());
        }
        state.warnings.extend(report.warnings);
        // What a continued attempt restored was counted by the session that made it.
        // and a finished child's changes met again were counted when first adopted.
        let (restored, counted) = (report.restored_mutations, report.already_counted);
        state.mutations.extend(
            report
                .mutations
                .into_iter()
                .enumerate()
                .filter(|(i, _)| *i >= restored && !counted.contains(i))
                .map(|(_, m)| m),
        );
        let cached = report.cache.reused;
        let mut slot = report.slot;
        // Before the state is recorded, so that what the hook adds is part of it. A step that
        // waits for approval, or that the budget stopped, has not finished.
        if slot.is_settled() {
            crate::step::hooks::step_finished(shared, step, &mut slot, &mut state.warnings).await?;
        }
        let run_id = shared.recorder.run_id();
        shared.recorder.record(Record::StepState(slot.to_stored(run_id, id)))?;
        let status = slot.status;
        if status != StepStatus::Blocked {
            shared.recorder.emit(EventBody::StepFinished {
                step: id.to_owned(),
                status,
                attempts: slot.attempts,
                error: slot.error.clone(),
                cached,
            })?;
        }
        state.slots[i] = slot;
        match status {
            StepStatus::Done => {
                for &d in frontier.graph.dependents(i) {
                    if let Some(r) = frontier.remaining.get_mut(d) {
                        *r = r.saturating_sub(1);
                        if *r == 0 && state.slots[d].status == StepStatus::Pending {
                            frontier.ready.push_back(d);
                        }
                    }
                }
                Ok(None)
            }
            StepStatus::Failed => {
                if step.on_fail == OnFail::Continue {
                    self.skip_dependents(shared, &frontier.graph, state, i)?;
                }
                Ok(Some(step.on_fail))
            }
            _ => Ok(None),
        }
    }

    /// Marks every step that waits for `failed`, directly or not, as skipped.
    fn skip_dependents(
        &self,
        shared: &Shared,
        graph: &StepGraph,
        state: &mut RunState,
        failed: usize,
    ) -> Result<(), EngineError> {
        let failed_id = shared.plan.steps[failed].id.as_str();
        let mut queue: VecDeque<usize> = graph.dependents(failed).iter().copied().collect();
        while let Some(d) = queue.pop_front() {
            let Some(slot) = state.slots.get_mut(d) else { continue };
            if slot.status != StepStatus::Pending {
                continue;
            }
            slot.status = StepStatus::Skipped;
            slot.error = Some(format!(
                "skipped: it waits for `{failed_id}`, which failed (on_fail: continue)"
            ));
            slot.ended_at = Some(now_rfc3339());
            let id = shared.plan.steps[d].id.as_str();
            shared
                .recorder
                .record(Record::StepState(slot.to_stored(shared.recorder.run_id(), id)))?;
            shared.recorder.emit(EventBody::StepFinished {
                step: id.to_owned(),
                status: StepStatus::Skipped,
                attempts: slot.attempts,
                error: slot.error.clone(),
                cached: false,
            })?;
            queue.extend(graph.dependents(d).iter().copied());
        }
        Ok(())
    }
}

/// The work for step `i`: the outputs it needs, whether it is approved, what to recover.
fn job_for(plan: &Plan, index: &HashMap<&str, usize>, state: &mut RunState, i: usize) -> StepJob {
    let step = &plan.steps[i];
    let mut inputs = HashMap::new();
    let mut wanted: Vec<&str> = step.refs.iter().map(|r| r.reference.step.as_str()).collect();
    // An instruction step's executor sees the outputs of what it depends on (and only those).
    if step.tool.is_none() {
        wanted.extend(step.depends_on.iter().map(|d| d.as_str()));
    }
    wanted.extend(step.assertions.iter().filter_map(|a| a.step().map(|s| s.as_str())));
    for id in wanted {
        if inputs.contains_key(id) {
            continue;
        }
        if let Some(output) = index
            .get(id)
            .copied()
            .and_then(|j| state.slots.get(j))
            .filter(|s| s.status == StepStatus::Done)
            .and_then(|s| s.output.clone())
        {
            inputs.insert(id.to_owned(), output);
        }
    }
    StepJob {
        idx: i,
        attempts_before: state.slots[i].attempts,
        baseline: state.slots[i].baseline.clone(),
        inputs,
        approved: state.approved.contains(step.id.as_str()),
        recovery: state.recoveries.remove(&i),
        continuation: state.continuations.remove(&i),
        earlier_mutations: if step.tool.is_none() {
            state
                .mutations
                .iter()
                .filter(|m| m.step == step.id.as_str())
                .map(|m| m.mutation.clone())
                .collect()
        } else {
            Vec::new()
        },
    }
}
