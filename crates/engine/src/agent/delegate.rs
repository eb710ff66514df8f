//! Child runs for delegated steps ([`crate::delegation`]): [`ChildRuns`] is the run's
//! [`Delegator`]. A child is a run of its own in the same journal (its options name its parent
//! run, step and attempt, its depth, scope and budget slice), planned by the planner role (pev
//! mode) or worked by the executor role with the plan tools and the finalization gate (loop
//! mode), and verified as any run is. It shares the parent's model clients, wrapped in a budget
//! of its own (the slice: what the step asked for, never more than the parent has left), so
//! every call counts against the child's slice and the parent's ceilings alike; its calls are
//! journaled as the child's. It may change files only inside its scope (the workspace's write
//! scope, and the sandbox's writable root). Its own delegated steps get a [`ChildRuns`] one
//! level deeper, up to the bound.

use std::collections::HashMap;
use std::sync::Arc;

use pev_lint::CompiledPolicy;
use pev_protocol::event::now_rfc3339;
use pev_protocol::run::{Reason, ReasonCode, RunResult, RunStatus};
use pev_protocol::{DelegateMode, Plan};
use pev_providers::cost::PriceTable;
use pev_store::{Journal, NewRun, Store};
use pev_tools::ToolContext;
use serde_json::json;

use crate::agent::budget::{Budget, BudgetState};
use crate::agent::call_log::CallLog;
use crate::agent::executor::{ExecutorOptions, ModelExecutor};
use crate::agent::judge::{JudgeOptions, ModelJudge};
use crate::agent::loop_mode::{LoopExecutor, LoopOptions};
use crate::agent::loop_run::{LoopRun, loop_plan};
use crate::agent::planner::{PlanContext, PlanError, Planner, PlannerOptions, WorkspaceSummary};
use crate::agent::run::AgentLoop;
use crate::delegation::{DelegationError, DelegationRequest, Delegator};
use crate::engine::{Engine, EngineConfig, ModelHooks};
use crate::scheduler::ResumeInput;
use pev_providers::BoxFuture;

/// How deep children may nest by default (a child's child is depth 2).
pub const DEFAULT_MAX_DEPTH: u32 = 2;

use super::roles::Stack;
pub use super::roles::{RoleClient, Roles};

/// The run's delegator.
#[derive(Clone)]
pub struct ChildRuns {
    pub db: pev_store::Location,
    /// What the children inherit: tools, workspace, sandbox, approval, cancel, hooks, jobs and
    /// light_jobs (each run of the tree has its own lanes; their `Activity` is shared).
    pub registry: Arc<pev_tools::Registry>,
    pub ctx: Arc<ToolContext>,
    pub config: EngineConfig,
    pub roles: Roles,
    pub prices: PriceTable,
    /// The budget the parent pays from: a child's slice is cut from what is left of it.
    pub budget: Arc<BudgetState>,
    pub policy: Arc<CompiledPolicy>,
    /// Where the role clients journal their calls (a child's planner calls are held until
    /// the child run exists).
    pub calls: Option<Arc<CallLog>>,
    /// The depth of the children this starts (1 for a top-level run's).
    pub depth: u32,
    pub max_depth: u32,
    pub max_replans: u32,
    pub judge_threshold: f64,
    pub allowed_tools: Vec<String>,
}

impl std::fmt::Debug for ChildRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildRuns")
            .field("depth", &self.depth)
            .field("max_depth", &self.max_depth)
            .finish_non_exhaustive()
    }
}

/// The most of each ceiling a child may have: what it asked for, capped by what is left.
pub fn slice(asked: &pev_protocol::BudgetSlice, left: &Budget) -> Budget {
    fn min<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
        match (a, b) {
            (Some(a), Some(b)) => Some(if a < b { a } else { b }),
            (a, b) => a.or(b),
        }
    }
    Budget {
        max_usd: min(asked.max_usd, left.max_usd),
        max_tokens: min(asked.max_tokens, left.max_tokens),
        max_turns: min(asked.max_turns, left.max_turns),
        deadline: left.deadline,
    }
}

impl Delegator for ChildRuns {
    fn child_depth(&self) -> u32 {
        self.depth
    }

    fn delegate<'a>(
        &'a self,
        request: &'a DelegationRequest,
    ) -> BoxFuture<'a, Result<RunResult, DelegationError>> {
        let run_id = request.child_run.clone();
        Box::pin(crate::model_scope::in_child_run(run_id, self.run_child(request)))
    }

    fn claims(&self, child_run: &str) -> Vec<pev_protocol::Assertion> {
        let Ok(record) = Store::open_existing(&self.db).and_then(|s| s.load_run(child_run)) else {
            return Vec::new();
        };
        let Ok(plan) = serde_json::from_value::<Plan>(record.plan) else { return Vec::new() };
        let done: std::collections::HashSet<&str> = record
            .steps
            .iter()
            .filter(|s| s.status == pev_protocol::run::StepStatus::Done)
            .map(|s| s.step_id.as_str())
            .collect();
        let satisfied: std::collections::HashSet<&str> = record
            .result
            .iter()
            .flat_map(|r| &r.postconditions)
            .filter(|p| p.satisfied)
            .map(|p| p.description.as_str())
            .collect();
        // A loop-mode child's plan steps are journaled as `plan:ID`.
        let steps = plan
            .steps
            .iter()
            .filter(|s| {
                done.contains(s.id.as_str()) || done.contains(format!("plan:{}", s.id).as_str())
            })
            .flat_map(|s| &s.assertions);
        let posts = plan
            .postconditions
            .iter()
            .filter(|p| satisfied.contains(p.description.as_str()))
            .flat_map(|p| &p.assertions);
        // What the child's own children verified, kept in its delegated steps' outputs.
        let nested: Vec<pev_protocol::Assertion> = record
            .steps
            .iter()
            .filter(|s| s.status == pev_protocol::run::StepStatus::Done)
            .flat_map(|s| crate::verdict::final_check::child_claims(s.output.as_ref()))
            .collect();
        let mut out: Vec<pev_protocol::Assertion> = Vec::new();
        for a in steps.chain(posts).chain(&nested) {
            // What depends only on the workspace: a step's output or its before-hashes are the
            // child's, not something the parent can check again.
            use pev_protocol::Assertion as A;
            let kept = matches!(
                a,
                A::FileExists { .. }
                    | A::FileNotExists { .. }
                    | A::FileContains { .. }
                    | A::FileNotContains { .. }
                    | A::FileSizeGt { .. }
            );
            if kept && !out.contains(a) {
                out.push(a.clone());
            }
        }
        out
    }
}

/// What a finished child's record says, or `None` while it can go on: still running (a
/// crash), stopped by a person, or waiting for an approval. A run's stored result is written
/// before its last checks (a loop's verifier and final re-check, a replan, the stop hook) can
/// still lower it, so only the result its `run.finished` event announced counts.
fn finished(record: &pev_store::RunRecord, events: &[pev_protocol::Event]) -> Option<RunResult> {
    let last_start = events
        .iter()
        .filter(|e| matches!(e.body, pev_protocol::EventBody::RunStarted { .. }))
        .map(|e| e.seq)
        .max();
    let announced = events.iter().rev().find_map(|e| match &e.body {
        pev_protocol::EventBody::RunFinished { result } => Some((e.seq, result.as_ref().clone())),
        _ => None,
    });
    let (seq, result) = announced?;
    if last_start.is_some_and(|start| start > seq) || record.status == "running" {
        return None;
    }
    // A stop, a wait for a person, or a budget that ran out (the parent's, perhaps larger on
    // resume; a child whose own slice is spent stops again at once, with its verdict).
    let resumable = result.status == RunStatus::AwaitingApproval
        || result
            .reasons
            .iter()
            .any(|r| matches!(r.code, ReasonCode::Cancelled | ReasonCode::BudgetExhausted));
    (!resumable).then_some(result)
}

/// What a child's journaled calls spent (a continued child's slice is what is left of it).
fn spent(calls: &[pev_store::ModelCallRecord]) -> (u32, u64, f64) {
    let turns = u32::try_from(calls.len()).unwrap_or(u32::MAX);
    let tokens = calls
        .iter()
        .map(|c| {
            c.input_tokens
                .saturating_add(c.cache_read_tokens)
                .saturating_add(c.cache_write_tokens)
                .saturating_add(c.output_tokens)
        })
        .sum();
    let usd = calls.iter().filter_map(|c| c.cost_usd).sum();
    (turns, tokens, usd)
}

impl ChildRuns {
    fn refused(e: impl std::fmt::Display) -> DelegationError {
        DelegationError::Refused(e.to_string())
    }

    async fn run_child(&self, request: &DelegationRequest) -> Result<RunResult, DelegationError> {
        if self.depth > self.max_depth {
            return Err(DelegationError::Refused(format!(
                "a child here would be nested {} deep, past the bound of {}",
                self.depth, self.max_depth
            )));
        }
        let store = Store::open_existing(&self.db).map_err(Self::refused)?;
        let existing = match store.load_run(&request.child_run) {
            Ok(record) => Some(record),
            Err(pev_store::StoreError::NotFound(_)) => None,
            // Not "no child yet": a child read wrongly would be planned and paid for again.
            Err(e) => return Err(Self::refused(e)),
        };
        let mut prior = (0, 0, 0.0);
        if let Some(record) = &existing {
            // The id is the step's and attempt's: a run under it that is not this step's child
            // is never taken as its verdict.
            let parent = record.options.get("parent");
            let field = |k: &str| parent.and_then(|p| p.get(k)).cloned();
            let expected = (
                Some(json!(request.parent_run)),
                Some(json!(request.step.id.as_str())),
                Some(json!(request.attempt)),
            );
            if (field("run"), field("step"), field("attempt")) != expected {
                return Err(DelegationError::Refused(format!(
                    "the journal holds a run {} that is not this step's child",
                    request.child_run
                )));
            }
            let events = store.events(&request.child_run).map_err(Self::refused)?;
            if let Some(result) = finished(record, &events) {
                // Finished before a crash: its verdict stands, nothing runs again.
                drop(store);
                return self.verdict(request, result, None);
            }
            prior = spent(&store.model_calls(&request.child_run).map_err(Self::refused)?);
        }
        drop(store);
        let delegation = &request.delegation;
        let scope = delegation.scope.as_deref().unwrap_or("");
        let workspace = self.ctx.workspace.scoped(scope).map_err(|e| {
            DelegationError::Refused(format!("its scope `{scope}` cannot be used: {e}"))
        })?;
        if self.budget.is_spent() {
            return Err(DelegationError::Budget(format!(
                "nothing is left to give a child run ({})",
                self.budget.note()
            )));
        }
        let mut budget = slice(&delegation.budget, &self.budget.remaining());
        // A continued child has spent part of its slice already (its journaled calls). What is
        // left of the parent's budget counts the parent's spend, not the slice's.
        if existing.is_some() {
            let (turns, tokens, usd) = prior;
            let own = slice(&delegation.budget, &Budget::default());
            budget.max_turns = match (own.max_turns, budget.max_turns) {
                (Some(asked), Some(left)) => Some(asked.saturating_sub(turns).min(left)),
                (_, left) => left,
            };
            budget.max_tokens = match (own.max_tokens, budget.max_tokens) {
                (Some(asked), Some(left)) => Some(asked.saturating_sub(tokens).min(left)),
                (_, left) => left,
            };
            budget.max_usd = match (own.max_usd, budget.max_usd) {
                (Some(asked), Some(left)) => Some((asked - usd).max(0.0).min(left)),
                (_, left) => left,
            };
        }
        let state = Arc::new(BudgetState::new(budget, self.prices.clone()));
        // The parent's clients are journaled already: the child's stack adds its budget slice.
        let stack = Stack {
            prices: self.prices.clone(),
            state: Arc::clone(&state),
            calls: None,
            resume: None,
        };
        let paid = |role: &RoleClient, name: &str| -> RoleClient {
            stack.role(name, Arc::clone(&role.client), role.model.clone())
        };
        let roles = Roles {
            planner: paid(&self.roles.planner, "planner"),
            executor: paid(&self.roles.executor, "executor"),
            verifier: self.roles.verifier.as_ref().map(|v| paid(v, "verifier")),
        };
        let ctx = Arc::new(ToolContext {
            workspace,
            policy: self.ctx.policy.clone(),
            sandbox: Arc::clone(&self.ctx.sandbox),
        });
        let grandchildren = ChildRuns {
            ctx: Arc::clone(&ctx),
            roles: roles.clone(),
            budget: Arc::clone(&state),
            depth: self.depth + 1,
            ..self.clone()
        };
        let judge = roles.verifier.as_ref().map(|v| -> Arc<dyn crate::instruct::Judge> {
            Arc::new(ModelJudge::new(
                Arc::clone(&v.client),
                v.model.clone(),
                JudgeOptions::default(),
            ))
        });
        let (note, usage) = (Arc::clone(&state), Arc::clone(&state));
        let mut hooks = ModelHooks {
            executor: Arc::new(ModelExecutor::new(
                Arc::clone(&roles.executor.client),
                roles.executor.model.clone(),
                ExecutorOptions::default(),
            )),
            judge: judge.clone(),
            judge_threshold: self.judge_threshold,
            budget_note: Arc::new(move || Some(note.note())),
            usage: Arc::new(move || usage.snapshot()),
            allowed_tools: self.allowed_tools.clone(),
            delegator: Some(Arc::new(grandchildren)),
        };
        let loop_executor = (delegation.mode == DelegateMode::Loop).then(|| {
            Arc::new(LoopExecutor::new(
                Arc::clone(&roles.executor.client),
                roles.executor.model.clone(),
                LoopOptions::default(),
                Arc::clone(&ctx),
            ))
        });
        if let Some(executor) = &loop_executor {
            hooks.executor = Arc::clone(executor) as Arc<dyn crate::instruct::InstructionExecutor>;
            hooks.judge = None;
        }
        let engine = Engine {
            registry: Arc::clone(&self.registry),
            ctx,
            observer: Arc::new(crate::engine::Silent),
            config: EngineConfig {
                models: Some(hooks),
                cache: false,
                final_events: true,
                ..self.config.clone()
            },
        };
        let verifier = judge.ok_or_else(|| "no verifier model is configured".to_owned());
        let result = match existing {
            Some(record) => self.continue_child(&engine, record, loop_executor, verifier).await,
            None => {
                let goal = child_goal(request);
                match loop_executor {
                    Some(executor) => {
                        self.create(request, &goal, &loop_plan(&goal), &budget)?;
                        let looped = LoopRun { engine: &engine, executor, db: &self.db, verifier };
                        looped.run(request.child_run.clone(), &goal).await
                    }
                    None => self.plan_and_run(&engine, request, &goal, (&roles, &budget)).await?,
                }
            }
        };
        let result = match result {
            Ok(result) => result,
            // The child ran and could not go on (its next plan refused, its journal failing):
            // it ends `failed` with what it did and why, so its record does not stay
            // `running` and the parent sees its changes.
            Err(e) => self
                .abandoned(&engine, &request.child_run, &e)
                .await
                .ok_or_else(|| Self::refused(&e))?,
        };
        self.verdict(request, result, Some(&state))
    }

    /// What the parent makes of a child's result: a stop, the parent's budget running out, or
    /// the child's verdict. `slice` is the child's own budget (`None`: a verdict read back).
    fn verdict(
        &self,
        request: &DelegationRequest,
        mut result: RunResult,
        slice: Option<&BudgetState>,
    ) -> Result<RunResult, DelegationError> {
        if result.reasons.iter().any(|r| r.code == ReasonCode::Cancelled) {
            return Err(DelegationError::Stopped);
        }
        let out_of_budget = result.reasons.iter().any(|r| r.code == ReasonCode::BudgetExhausted);
        // The parent's ceiling stopped the child when nothing is left of it, or when the
        // child's own slice still had room.
        let parents = self.budget.is_spent() || slice.is_some_and(|s| !s.is_spent());
        if out_of_budget && parents {
            return Err(DelegationError::Budget(format!(
                "child run {} stopped: the run's budget is used up ({})",
                request.child_run,
                self.budget.note()
            )));
        }
        if out_of_budget && result.status == RunStatus::Success {
            // Never: a run stopped by its budget is not a success. Kept as a guard.
            result.status = RunStatus::Partial;
        }
        Ok(result)
    }

    /// Creates the child's run record, linked to its parent step.
    fn create(
        &self,
        request: &DelegationRequest,
        goal: &str,
        plan: &Plan,
        budget: &Budget,
    ) -> Result<(), DelegationError> {
        let delegation = &request.delegation;
        let store = Store::open_existing(&self.db).map_err(Self::refused)?;
        store
            .create_run(&NewRun {
                run_id: request.child_run.clone(),
                goal: goal.to_owned(),
                workspace: self.ctx.workspace.root().display().to_string(),
                plan: serde_json::to_value(plan).map_err(Self::refused)?,
                options: json!({
                    "agent": true,
                    "mode": delegation.mode.as_str(),
                    "parent": {
                        "run": request.parent_run,
                        "step": request.step.id.as_str(),
                        "attempt": request.attempt,
                    },
                    "depth": self.depth,
                    "scope": delegation.scope,
                    "budget": {
                        "max_usd": budget.max_usd,
                        "max_tokens": budget.max_tokens,
                        "max_turns": budget.max_turns,
                    },
                    "allowed_tools": self.allowed_tools,
                    "max_replans": self.max_replans,
                }),
                created_at: now_rfc3339(),
            })
            .map_err(Self::refused)
    }

    /// A pev-mode child: its planner writes the plan (its calls held until the run exists),
    /// then the plan runs with replanning, as `pev agent` runs one.
    async fn plan_and_run(
        &self,
        engine: &Engine,
        request: &DelegationRequest,
        goal: &str,
        (roles, budget): (&Roles, &Budget),
    ) -> Result<Result<RunResult, crate::engine::EngineError>, DelegationError> {
        let child = request.child_run.as_str();
        if let Some(calls) = &self.calls {
            calls.hold(child);
        }
        let planner = Planner::new(
            Arc::clone(&roles.planner.client),
            roles.planner.model.clone(),
            PlannerOptions::default(),
        );
        let summary = match WorkspaceSummary::scan(&engine.ctx.workspace, 200) {
            Ok(summary) => summary,
            Err(e) => {
                self.drop_held(child);
                return Err(DelegationError::Refused(format!(
                    "cannot scan the workspace for its planner: {e}"
                )));
            }
        };
        let mut tools = engine.registry.definitions();
        tools.retain(|d| self.policy.tool_allowed(d.name));
        let ctx = PlanContext { goal, workspace: &summary, tools: &tools, policy: &self.policy };
        let planned = tokio::select! {
            planned = planner.plan(&ctx) => Some(planned),
            () = engine.config.cancel.cancelled() => None,
        };
        let failure = match &planned {
            // Stopped before it had a plan: no child run yet; a resume plans it afresh.
            None => {
                self.drop_held(child);
                return Err(DelegationError::Stopped);
            }
            Some(Ok(_)) => None,
            Some(Err(PlanError::Budget(why))) => {
                Some((ReasonCode::BudgetExhausted, format!("its budget ran out planning: {why}")))
            }
            Some(Err(e)) => Some((ReasonCode::StepFailed, format!("its planner failed: {e}"))),
        };
        let plan = match (&failure, planned) {
            (None, Some(Ok(outcome))) => {
                let mut plan = outcome.plan;
                plan.goal = goal.to_owned();
                plan
            }
            _ => Plan { goal: goal.to_owned(), ..Plan::default() },
        };
        let created = self.create(request, goal, &plan, budget);
        match (&self.calls, &created) {
            (Some(calls), Ok(())) => calls.release(child),
            // Its calls name a run the journal does not hold: they are dropped, not written.
            (Some(_), Err(_)) => self.drop_held(child),
            (None, _) => {}
        }
        created?;
        if let Some((code, message)) = failure {
            return Ok(Ok(self
                .unplanned(engine, child, goal, Reason { code, step: None, message })
                .await
                .map_err(Self::refused)?));
        }
        // A child may use only the tools its parent may (the planner was offered those; a
        // plan that names others is refused, whatever policy it was linted with).
        let denied: Vec<&str> = plan
            .steps
            .iter()
            .filter_map(|s| s.tool.as_deref())
            .filter(|t| {
                !self.allowed_tools.is_empty() && !self.allowed_tools.iter().any(|a| a == t)
            })
            .collect();
        if !denied.is_empty() {
            let reason = Reason {
                code: ReasonCode::StepFailed,
                step: None,
                message: format!(
                    "its plan uses tools the run does not allow: {}",
                    denied.join(", ")
                ),
            };
            return Ok(Ok(self
                .unplanned(engine, child, goal, reason)
                .await
                .map_err(Self::refused)?));
        }
        if let Err(e) = engine.check_plan(&plan) {
            let reason = Reason {
                code: ReasonCode::StepFailed,
                step: None,
                message: format!("its plan cannot run: {e}"),
            };
            return Ok(Ok(self
                .unplanned(engine, child, goal, reason)
                .await
                .map_err(Self::refused)?));
        }
        let agent = AgentLoop {
            engine,
            planner: &planner,
            policy: &self.policy,
            db: &self.db,
            max_replans: self.max_replans,
        };
        Ok(agent.run(child.to_owned(), plan).await)
    }

    /// Ends a child run the engine could not carry on with: its journaled state, `failed`,
    /// with why, announced as its result. `None` when even that cannot be written.
    async fn abandoned(
        &self,
        engine: &Engine,
        child: &str,
        error: &crate::engine::EngineError,
    ) -> Option<RunResult> {
        let record = Store::open_existing(&self.db).ok()?.load_run(child).ok()?;
        let mut result = crate::verdict::snapshot::snapshot(&record);
        result.status = RunStatus::Failed;
        result.reasons.push(Reason {
            code: ReasonCode::StepFailed,
            step: None,
            message: format!("the child run could not go on: {error}"),
        });
        let journal = Journal::start(&self.db).ok()?;
        let announced = engine.announce(journal.clone(), record.next_seq, &result).await;
        journal.close().ok()?;
        announced.ok().map(|()| result)
    }

    /// Forgets the calls held for a child run that will not be created.
    fn drop_held(&self, child: &str) {
        if let Some(calls) = &self.calls {
            calls.discard(child);
        }
    }

    /// The verdict of a child that never got a plan: `failed` (`cancelled` for a stop), with
    /// why, journaled as its result.
    async fn unplanned(
        &self,
        engine: &Engine,
        child: &str,
        goal: &str,
        reason: Reason,
    ) -> Result<RunResult, pev_store::StoreError> {
        let state = engine.config.models.as_ref().map(|m| (m.usage)()).unwrap_or_default();
        let result = RunResult {
            run_id: child.to_owned(),
            goal: goal.to_owned(),
            status: RunStatus::Failed,
            reasons: vec![reason],
            goal_actions_executed: false,
            steps: Vec::new(),
            postconditions: Vec::new(),
            file_mutations: Vec::new(),
            warnings: Vec::new(),
            usage: state,
            duration_ms: 0,
            final_check: None,
        };
        let journal = Journal::start(&self.db)?;
        // Announced like any run's end (`run.finished`), so a resume takes it as final.
        let next_seq = Store::open_existing(&self.db)?.load_run(child)?.next_seq;
        engine.announce(journal.clone(), next_seq, &result).await.map_err(|e| match e {
            crate::engine::EngineError::Journal(e) => e,
            other => {
                pev_store::StoreError::Invalid { path: self.db.clone(), message: other.to_string() }
            }
        })?;
        journal.close()?;
        Ok(result)
    }

    /// A child an earlier session started and did not finish: resumed as `pev resume` would.
    async fn continue_child(
        &self,
        engine: &Engine,
        mut record: pev_store::RunRecord,
        loop_executor: Option<Arc<LoopExecutor>>,
        verifier: Result<Arc<dyn crate::instruct::Judge>, String>,
    ) -> Result<RunResult, crate::engine::EngineError> {
        let store = Store::open_existing(&self.db)?;
        let mut blobs = HashMap::new();
        for sha in ResumeInput::blobs_needed(&record) {
            if let Ok(Some(content)) = store.blob(&sha) {
                blobs.insert(sha, content);
            }
        }
        let events = store.events(&record.run_id)?;
        drop(store);
        let mut warnings = Vec::new();
        let mut prior_usage = None;
        for event in events {
            match event.body {
                pev_protocol::EventBody::Warning { message, .. } => warnings.push(message),
                pev_protocol::EventBody::Usage { usage } => prior_usage = Some(usage),
                _ => {}
            }
        }
        let journal = Journal::start(&self.db)?;
        match loop_executor {
            Some(executor) => {
                for step in &mut record.steps {
                    if step.status == pev_protocol::run::StepStatus::Done {
                        step.status = pev_protocol::run::StepStatus::InProgress;
                    }
                }
                let input =
                    ResumeInput { record, journal, blobs, warnings, prior_usage, revision: None };
                LoopRun { engine, executor, db: &self.db, verifier }.resume(input).await
            }
            None => {
                let input = ResumeInput {
                    record,
                    journal: journal.clone(),
                    blobs,
                    warnings,
                    prior_usage,
                    revision: None,
                };
                let result = engine.resume(input).await;
                journal.close()?;
                result
            }
        }
    }
}

/// The child's goal: the step's, with what earlier attempts were told (their children's
/// reasons) and the outputs of the steps it depends on.
fn child_goal(request: &DelegationRequest) -> String {
    let mut goal = request.delegation.goal.trim().to_owned();
    if let Some(scope) = request.delegation.scope.as_deref().filter(|s| !s.trim().is_empty()) {
        goal.push_str(&format!(
            "\n\n(You may change files only inside `{scope}`; you may read anything in the \
             workspace.)"
        ));
    }
    if !request.inputs.is_empty() {
        let mut ids: Vec<&String> = request.inputs.keys().collect();
        ids.sort();
        goal.push_str("\n\nResults of the steps before this one:");
        for id in ids {
            let text = request.inputs[id].to_string();
            let text: String = text.chars().take(600).collect();
            goal.push_str(&format!("\n- {id}: {text}"));
        }
    }
    if !request.feedback.is_empty() {
        goal.push_str("\n\nEarlier attempts at this failed:");
        for f in &request.feedback {
            goal.push_str(&format!("\n- {f}"));
        }
    }
    goal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_is_never_more_than_what_is_left() {
        let left =
            Budget { max_usd: Some(0.5), max_tokens: None, max_turns: Some(4), deadline: None };
        let asked = pev_protocol::BudgetSlice {
            max_usd: Some(1.0),
            max_tokens: Some(1000),
            max_turns: Some(2),
        };
        let b = slice(&asked, &left);
        assert_eq!(b.max_usd, Some(0.5));
        assert_eq!(b.max_tokens, Some(1000));
        assert_eq!(b.max_turns, Some(2));
        let none = slice(&pev_protocol::BudgetSlice::default(), &left);
        assert_eq!((none.max_usd, none.max_tokens, none.max_turns), (Some(0.5), None, Some(4)));
    }
}
