//! What a run is configured with and reports to: [`Engine`] and [`EngineConfig`], the observer,
//! approval and cancellation, the model hooks, and the errors a run can end with.

use pev_protocol::event::Event;
use pev_store::StoreError;
use pev_tools::{Registry, ToolContext};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

use crate::{delegation, hooks, instruct, inventory};

/// Receives every event of a run, in `seq` order, as it is recorded. The CLI's live view and
/// its `--json` printer are observers.
pub trait Observer: Send + Sync {
    fn on_event(&self, event: &Event);
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct Silent;

impl Observer for Silent {
    fn on_event(&self, _event: &Event) {}
}

/// A step that needs a person's yes before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    pub step: String,
    pub title: String,
    pub tool: Option<String>,
    /// The resolved arguments the tool would be called with.
    pub arguments: Value,
    /// Why approval is needed: `requires_approval` or the policy's `approve_tools`.
    pub reason: String,
}

/// A person's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    Yes,
    No,
    /// Nobody can answer now (no TTY): the run stops `awaiting_approval`.
    Defer,
}

/// Asks for approval. Called from a blocking thread, one request at a time.
pub trait Approver: Send + Sync {
    fn decide(&self, request: &ApprovalRequest) -> Approval;
}

/// How approval is obtained in this run.
#[derive(Clone, Default)]
pub enum ApprovalMode {
    /// `--yes`: every step is approved, and the approval is journaled as `--yes`.
    All,
    /// Ask a person.
    Ask(Arc<dyn Approver>),
    /// Nobody to ask: steps that need approval wait, and the run ends `awaiting_approval`.
    #[default]
    Defer,
}

impl std::fmt::Debug for ApprovalMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::All => "All",
            Self::Ask(_) => "Ask",
            Self::Defer => "Defer",
        })
    }
}

/// A flag the CLI raises on Ctrl-C: no new step starts, running steps finish, the run ends with
/// reason `cancelled` and can be resumed.
#[derive(Debug, Default)]
pub struct Cancel {
    flag: AtomicBool,
    notify: Notify,
}

impl Cancel {
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Resolves once [`Cancel::cancel`] has been called.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// The models of an agent run: who carries out instruction steps, who judges, and what the
/// budget looks like. `None` in `pev run`, which has no model.
#[derive(Clone)]
pub struct ModelHooks {
    pub executor: Arc<dyn instruct::InstructionExecutor>,
    pub judge: Option<Arc<dyn instruct::Judge>>,
    /// A judge's "no" at or above this confidence fails the step; below it, it is a warning.
    pub judge_threshold: f64,
    /// The remaining budget in words, shown to the models.
    pub budget_note: Arc<dyn Fn() -> Option<String> + Send + Sync>,
    /// What the models consumed so far, for the run result.
    pub usage: Arc<dyn Fn() -> pev_protocol::run::Usage + Send + Sync>,
    /// The tools the executor may call (the policy's allow/deny applied); empty means all.
    pub allowed_tools: Vec<String>,
    /// Runs the child runs of delegated steps; `None`: a plan with one cannot run.
    pub delegator: Option<Arc<dyn delegation::Delegator>>,
}

impl std::fmt::Debug for ModelHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelHooks")
            .field("judge", &self.judge.is_some())
            .field("judge_threshold", &self.judge_threshold)
            .finish_non_exhaustive()
    }
}

/// The default of [`EngineConfig::light_jobs`]: with eight file steps at a time their durable
/// intents share commits (BENCHMARKS.md, issue 32's `file.write` steps).
pub const LIGHT_JOBS: usize = 8;

/// Settings of one run.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Steps that may run at once (at least 1).
    pub jobs: usize,
    /// Steps that may run at once while only file steps run (steps of pev's own file tools,
    /// with file checks and paths no other step names; the `lanes` module); never fewer than
    /// `jobs`. Default [`LIGHT_JOBS`]; set it to `jobs` for a hard limit on every step.
    pub light_jobs: usize,
    pub approval: ApprovalMode,
    /// Tools whose steps need approval (exact names or globs, from the policy's `approve_tools`).
    pub approve_tools: Vec<String>,
    pub cancel: Arc<Cancel>,
    /// Models for instruction steps and judging (`pev agent`).
    pub models: Option<ModelHooks>,
    /// `--cache`: a step whose definition, inputs and the files it reads are unchanged reuses
    /// its verified result from `<workspace>/.pev/cache` (see `cache`).
    pub cache: bool,
    /// Emit `verify.finished` and `run.finished` when a run or resume ends. The agent loop turns
    /// this off while it may still replan, and announces the final result once
    /// ([`Engine::announce`]).
    pub final_events: bool,
    /// `pev.toml`'s `[hooks]`: commands run before and after each tool call, when a step
    /// finishes, and (for the agent loop) on its final answer. See [`hooks`].
    pub hooks: Option<Arc<hooks::Hooks>>,
    /// Which steps run, across a run and its child runs (delegated steps'): set it, and hand
    /// the same to the children's engines, so a command's changes are credited to it only
    /// when nothing else in the tree ran. `None`: the run's own.
    pub activity: Option<Arc<inventory::Activity>>,
    /// One writer of a file at a time, across a run and its child runs: set it, and hand the
    /// same to the children's engines (as `activity`). `None`: the run's own (`write_locks`).
    pub write_locks: Option<Arc<crate::write_locks::WriteLocks>>,
    /// The oracle settings (`[oracle]`, `--protect`, `--allow-oracle`, `--hidden-check`);
    /// `None`: no oracle at all (`--no-oracle`, for comparison).
    pub oracle: Option<pev_protocol::oracle::OracleSettings>,
    /// The plan is the user's own (`pev run`): its `may_change_oracle` and `oracle.allow` are the
    /// user's permission. `false` for a plan a model wrote (`pev agent`).
    pub plan_from_user: bool,
    /// The goal in the user's own words, which alone decides whether a model's plan may change
    /// tests (`pev agent` sets it; child runs inherit it, so a parent model cannot grant its
    /// child leave by the goal it delegates). `None`: the plan's goal.
    pub permit_goal: Option<String>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            jobs: std::thread::available_parallelism().map_or(2, usize::from),
            light_jobs: LIGHT_JOBS,
            approval: ApprovalMode::Defer,
            approve_tools: Vec::new(),
            cancel: Arc::new(Cancel::default()),
            models: None,
            cache: false,
            final_events: true,
            hooks: None,
            activity: None,
            write_locks: None,
            oracle: Some(pev_protocol::oracle::OracleSettings::default()),
            plan_from_user: true,
            permit_goal: None,
        }
    }
}

/// Everything a run needs besides the plan.
#[derive(Clone)]
pub struct Engine {
    pub registry: Arc<Registry>,
    pub ctx: Arc<ToolContext>,
    pub observer: Arc<dyn Observer>,
    pub config: EngineConfig,
}

/// Why a run could not be carried out (as opposed to a run that ended `failed`, which is a
/// result).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The plan cannot be run as written (an instruction step, an unknown tool).
    #[error("{0}")]
    Plan(String),
    /// The journal failed: the run stopped, and what was recorded before is intact.
    #[error("journal: {0}")]
    Journal(#[from] StoreError),
    /// The stored run cannot be resumed.
    #[error("{0}")]
    Resume(String),
}

/// Checks that every step can be run: each names a tool the registry has, or (with an executor
/// model, `with_models`) is an instruction.
pub fn check_runnable(plan: &pev_protocol::Plan, registry: &Registry) -> Result<(), EngineError> {
    check_steps(plan, registry, (false, false))
}

fn check_steps(
    plan: &pev_protocol::Plan,
    registry: &Registry,
    (with_models, with_delegator): (bool, bool),
) -> Result<(), EngineError> {
    let mut problems = Vec::new();
    for step in &plan.steps {
        if step.delegate.is_some() {
            if step.tool.is_some() {
                problems.push(format!(
                    "step `{}` sets both `tool` and `delegate`: a step is a tool call, an \
                     instruction or a delegation",
                    step.id
                ));
            } else if !with_delegator {
                problems.push(format!(
                    "step `{}` delegates to a sub-agent, which needs the models of `pev agent`",
                    step.id
                ));
            }
            continue;
        }
        match &step.tool {
            None if with_models => {}
            None => problems.push(format!(
                "step `{}` has no `tool`: it is an instruction for an executor model, which \
                 `pev run` does not have (use `pev agent`)",
                step.id
            )),
            Some(tool) if registry.get(tool).is_none() => {
                let known: Vec<&str> = registry.iter().map(|t| t.name()).collect();
                problems.push(format!(
                    "step `{}` names tool `{tool}`, which pev does not have (known: {})",
                    step.id,
                    known.join(", ")
                ));
            }
            Some(_) => {}
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(EngineError::Plan(problems.join("\n"))) }
}

impl Engine {
    /// [`check_runnable`], allowing instruction steps when this engine has an executor model.
    pub fn check_plan(&self, plan: &pev_protocol::Plan) -> Result<(), EngineError> {
        let models = self.config.models.as_ref();
        let delegator = models.is_some_and(|m| m.delegator.is_some());
        check_steps(plan, &self.registry, (models.is_some(), delegator))?;
        // An agent run's tools are those its policy allowed when it started: a plan version
        // (a replan, a child's plan) that names another is not run.
        if let Some(allowed) = models.map(|m| &m.allowed_tools).filter(|a| !a.is_empty()) {
            let denied: Vec<String> = plan
                .steps
                .iter()
                .filter_map(|s| s.tool.as_deref().map(|t| (s, t)))
                .filter(|(_, t)| !allowed.iter().any(|a| a == t))
                .map(|(s, t)| format!("step `{}` names `{t}`", s.id))
                .collect();
            if !denied.is_empty() {
                return Err(EngineError::Plan(format!(
                    "the run's policy does not allow these tools: {}",
                    denied.join(", ")
                )));
            }
        }
        Ok(())
    }
}
