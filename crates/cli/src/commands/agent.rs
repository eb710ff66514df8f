//! `pev agent GOAL`: build the three role clients from `pev.toml` (each paid from one budget),
//! have the planner write the plan, optionally show it for approval, then run it with the
//! executor and judge models, replanning as needed, and report like `pev run`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pev_engine::ModelHooks;
use pev_engine::agent::budget::{Budget, BudgetState};
use pev_engine::agent::call_log::CallLog;
use pev_engine::agent::call_marks::CallMarks;
use pev_engine::agent::delegate::{ChildRuns, DEFAULT_MAX_DEPTH, RoleClient, Roles};
use pev_engine::agent::judge::{JudgeOptions, ModelJudge};
use pev_engine::agent::planner::{PlanContext, PlanError, WorkspaceSummary};
use pev_engine::agent::replay::{Recording, ReplayClient};
use pev_engine::agent::run::AgentLoop;
use pev_lint::CompiledPolicy;
use pev_protocol::Plan;
use pev_protocol::event::now_rfc3339;
use pev_providers::config::{Config, Role};
use pev_store::{NewRun, Store};
use serde_json::json;

use crate::args::values::Common;
use crate::shared::exit::{EXIT_BAD_INPUT, EXIT_FAILED, Fail};
use crate::shared::models::{
    JUDGE_THRESHOLD, Recorded, attach_calls, build_models, client_for, close_calls, notice_sink,
    stack, tool_registry,
};
use crate::shared::scratch;
use crate::shared::session::{RunPolicy, Session};
use crate::shared::workspace::{lock_run, store_path, workspace_dir};
use crate::view::call_notice::Notices;

/// The exit code of a run a person stopped before anything ran (the shell's code for SIGINT).
const EXIT_INTERRUPTED: u8 = 130;

/// `pev agent GOAL`.
#[derive(Debug, Clone)]
pub struct AgentRequest {
    pub goal: String,
    pub policy: Option<PathBuf>,
    pub scratch: bool,
    pub approve_plan: bool,
    pub budget: BudgetArgs,
    pub max_replans: u32,
    pub mode: Mode,
    /// Loop mode: the finalization gate is on.
    pub gate: bool,
    /// Loop mode: refusals before the gate ends the run.
    pub max_refusals: u32,
    /// Loop mode: rounds without a plan update before a reminder.
    pub reminder_every: u32,
    pub common: Common,
    /// `pev replay`: every model call is answered from this recording instead of a model.
    pub replay: Option<Arc<Recording>>,
}

pub use crate::args::values::Mode;

/// The ceilings given on the command line.
#[derive(Debug, Clone, Copy, Default)]
pub struct BudgetArgs {
    pub max_usd: Option<f64>,
    pub max_tokens: Option<u64>,
    pub max_turns: Option<u32>,
    pub timeout_secs: Option<u64>,
}

pub fn run(req: &AgentRequest, err: &mut dyn Write) -> Result<u8, Fail> {
    crate::input::check_goal(&req.goal).map_err(|e| Fail(EXIT_BAD_INPUT, e))?;
    if req.goal.trim().is_empty() {
        return Err(Fail(EXIT_BAD_INPUT, "the goal is empty".to_owned()));
    }
    let mut workspace = workspace_dir(req.common.workspace.as_deref())?;
    let floor = crate::shared::workspace::file_config(&workspace)?.sandbox();
    let policy = crate::shared::policy_source::load(req.policy.as_deref(), &workspace, floor, err)?;
    let config_dir = workspace.clone();
    if req.scratch {
        workspace = scratch::announced_copy(&workspace, err)?;
    }
    let registry = Arc::new(tool_registry(&config_dir, &workspace, err)?);
    let budget = Budget {
        max_usd: req.budget.max_usd,
        max_tokens: req.budget.max_tokens,
        max_turns: req.budget.max_turns,
        deadline: req.budget.timeout_secs.map(|s| Instant::now() + Duration::from_secs(s)),
    };
    if req.mode == Mode::Loop {
        return run_loop(req, (&policy, &registry), (&config_dir, &workspace), budget, err);
    }
    // pev.toml is read from the workspace the user named (a scratch copy has it too, but a
    // script path in it is resolved against the original).
    let notices = Notices::new();
    let recorded = req.replay.as_ref().map_or(Recorded::Nothing, Recorded::Replay);
    let models = build_models(&config_dir, &notices, budget, (&policy, &registry), recorded)?;
    let db = store_path(&req.common, &workspace)?;
    let run_policy = RunPolicy {
        approve_tools: policy.policy.approve_tools.clone(),
        allow_hosts: policy.policy.allow_hosts.clone(),
        sandbox: crate::shared::sandbox_setup::SandboxPolicy::from_policy(&policy.policy),
        oracle: policy.policy.oracle.clone(),
        lint: Arc::new(policy.clone()),
    };
    let mut session =
        Session::open(&req.common, &workspace, &db, run_policy, Some(models.hooks.clone()))?;
    session.engine.registry = Arc::clone(&registry);
    // The plan is the planner's: it grants no leave to change the checks by itself; only the
    // user's goal can (and the child runs inherit that goal, not the one they are given).
    session.engine.config.plan_from_user = false;
    session.engine.config.permit_goal = Some(req.goal.clone());
    models.attach_delegator(&mut session.engine, &db, (&policy, req.max_replans));
    notices.attach(session.live());

    let summary = WorkspaceSummary::scan(&session.engine.ctx.workspace, 200)
        .map_err(|e| Fail(EXIT_FAILED, format!("cannot scan the workspace: {e}")))?;
    // The planner writes plans, which name tools by plan name (`file.patch`); the executor is
    // offered the same tools under their wire names by the engine.
    let mut tools = session.engine.registry.definitions();
    tools.retain(|d| policy.tool_allowed(d.name));
    let ctx = PlanContext { goal: &req.goal, workspace: &summary, tools: &tools, policy: &policy };
    let _ = writeln!(err, "pev: planning…");
    // Nothing has been run yet: the first Ctrl-C ends the run here, whatever the planner is
    // waiting for.
    let planned = session.block_on(async {
        tokio::select! {
            planned = models.planner.plan(&ctx) => Some(planned),
            _ = tokio::signal::ctrl_c() => None,
        }
    });
    let Some(planned) = planned else {
        let _ = writeln!(err, "pev: interrupted while planning; nothing was run");
        return Ok(EXIT_INTERRUPTED);
    };
    let outcome = match planned {
        Ok(outcome) => outcome,
        Err(PlanError::Budget(why)) => {
            return Err(Fail(
                EXIT_FAILED,
                format!("the budget ran out before a plan was written: {why}"),
            ));
        }
        Err(e) => return Err(Fail(EXIT_FAILED, e.to_string())),
    };
    let mut plan = outcome.plan;
    plan.goal.clone_from(&req.goal);
    let _ = writeln!(
        err,
        "pev: the planner wrote {} step(s) in {} tr{} ({})",
        plan.steps.len(),
        outcome.tries,
        if outcome.tries == 1 { "y" } else { "ies" },
        models.state.note()
    );
    for w in &outcome.lint_warnings {
        let _ = writeln!(err, "pev: plan warning: {} {}", w.code, w.msg);
    }
    if req.approve_plan && !approve_plan(&plan, err)? {
        let _ = writeln!(err, "pev: plan not approved; nothing was run");
        return Ok(EXIT_FAILED);
    }
    session.engine.check_plan(&plan).map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?;

    let store = Store::open(&db).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let run_id = pev_store::new_run_id();
    let _lock = lock_run(&db, &run_id)?;
    store
        .create_run(&NewRun {
            run_id: run_id.clone(),
            goal: plan.goal.clone(),
            workspace: workspace.display().to_string(),
            plan: serde_json::to_value(&plan).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?,
            options: json!({
                "agent": true,
                "approve_tools": policy.policy.approve_tools,
                "allow_hosts": policy.policy.allow_hosts,
                "max_replans": req.max_replans,
                "budget": {
                    "max_usd": req.budget.max_usd,
                    "max_tokens": req.budget.max_tokens,
                    "max_turns": req.budget.max_turns,
                },
                "allowed_tools": models.hooks.allowed_tools,
                "scratch": req.scratch,
                "sandbox": session.sandbox_options(),
                "oracle": session.engine.config.oracle,
                "policy": crate::shared::policy_source::to_options(&policy),
            }),
            created_at: now_rfc3339(),
        })
        .map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    drop(store);
    attach_calls(&models.calls, &db, &run_id, err);
    models.state.mark_calls_in(CallMarks::new(&workspace, &run_id));
    session.trace(&run_id, false);
    let _ = writeln!(err, "pev: run {run_id} (journal {})", db);
    let agent = AgentLoop {
        engine: &session.engine,
        planner: &models.planner,
        policy: &policy,
        db: &db,
        max_replans: req.max_replans,
    };
    let outcome = session.block_on(agent.run(run_id, plan));
    close_calls(&models.calls, err);
    session.report(outcome, err)
}

/// Shows the plan and asks for a yes on the terminal.
fn approve_plan(plan: &Plan, err: &mut dyn Write) -> Result<bool, Fail> {
    if !std::io::stdin().is_terminal() {
        return Err(Fail(
            EXIT_BAD_INPUT,
            "--approve-plan needs a terminal to ask on (stdin is not one)".to_owned(),
        ));
    }
    let _ = writeln!(err, "\nplan: {}", plan.goal);
    for (i, step) in plan.steps.iter().enumerate() {
        let what = step.tool.as_deref().unwrap_or("instruction");
        let deps = if step.depends_on.is_empty() {
            String::new()
        } else {
            let ids: Vec<&str> = step.depends_on.iter().map(|d| d.as_str()).collect();
            format!("  after {}", ids.join(", "))
        };
        let _ = writeln!(err, "  {:>2}. {}  [{what}]{deps}  {}", i + 1, step.id, step.label());
        for a in &step.assertions {
            let _ = writeln!(err, "        checks: {}", a.kind());
        }
    }
    for pc in &plan.postconditions {
        let _ = writeln!(err, "  postcondition: {}", pc.description);
    }
    let stdin = std::io::stdin();
    for _ in 0..3 {
        let _ = write!(err, "run this plan? [y/n] ");
        let _ = err.flush();
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => return Ok(false),
            Ok(_) => match line.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => return Ok(true),
                "n" | "no" => return Ok(false),
                _ => {}
            },
        }
    }
    Ok(false)
}

/// `pev agent --mode loop`: one model (the executor role's) in a tool loop with the plan tools
/// and the finalization gate.
/// What a loop-mode run runs with: the session, the one model's executor, the verifier for
/// postconditions without assertions, and the log of its model calls.
struct LoopParts {
    session: Session,
    executor: Arc<pev_engine::agent::loop_mode::LoopExecutor>,
    verifier: Result<Arc<dyn pev_engine::instruct::Judge>, String>,
    calls: Arc<CallLog>,
}

/// The options a loop run was started with (journaled in its options, for `pev resume`).
struct LoopSettings {
    gate: bool,
    max_refusals: u32,
    reminder_every: u32,
}

/// Builds a loop-mode run's parts. `recorded` answers model calls from a journal (`pev replay`,
/// or `pev resume` continuing the interrupted loop).
fn loop_parts(
    common: &Common,
    (run_policy, allowed_tools, registry): (RunPolicy, Vec<String>, &Arc<pev_tools::Registry>),
    (config_dir, workspace): (&std::path::Path, &std::path::Path),
    (budget, settings, run_id, goal): (Budget, &LoopSettings, &str, &str),
    recorded: Recorded<'_>,
) -> Result<LoopParts, Fail> {
    use pev_engine::agent::loop_mode::{LoopExecutor, LoopOptions};

    let replay = match recorded {
        Recorded::Replay(r) => Some(r),
        _ => None,
    };
    let config = Config::from_env(config_dir).map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?;
    let prices = config.prices().clone();
    let state = Arc::new(BudgetState::new(budget, prices.clone()));
    state.mark_calls_in(CallMarks::new(workspace, run_id));
    let notices = Notices::new();
    let calls = CallLog::priced(prices.clone());
    // Only the executor's calls are answered from a resumed run's recording.
    let stack = stack(&prices, &state, &calls, recorded);
    let inner = client_for(&config, Role::Executor, (&notices, &calls, replay))?;
    let client = stack.client("executor", inner);
    let stack = stack.live();
    let model = config.role(Role::Executor).model.value.clone();
    // The verifier decides the postconditions the model declares without assertions; without
    // one they stay unverified, and the run's reason says why.
    let verifier = match replay {
        Some(recording) => Ok(Arc::new(ReplayClient::new("verifier", Arc::clone(recording)))
            as Arc<dyn pev_providers::ModelClient>),
        None => config.client_with_notice(
            Role::Verifier,
            Some(notice_sink(&config, Role::Verifier, &notices)),
        ),
    };
    let verifier_client = verifier.map(|inner| {
        stack.role("verifier", inner, config.role(Role::Verifier).model.value.clone())
    });
    let verifier = verifier_client
        .as_ref()
        .map(|v| -> Arc<dyn pev_engine::instruct::Judge> {
            Arc::new(ModelJudge::new(
                Arc::clone(&v.client),
                v.model.clone(),
                JudgeOptions::default(),
            ))
        })
        .map_err(|e| e.to_string());
    // A child run of loop mode's `delegate` is planned by the planner role (pev mode) and
    // worked by the executor role, each paid from this run's budget.
    let planner_client = match replay {
        // The recorded run delegated only if it could: the replay offers what it offered.
        Some(recording) => {
            let delegated =
                recording.offered(pev_engine::agent::loop_mode::delegate_tool::DELEGATE);
            delegated.then(|| {
                Arc::new(ReplayClient::new("planner", Arc::clone(recording)))
                    as Arc<dyn pev_providers::ModelClient>
            })
        }
        None => config
            .client_with_notice(Role::Planner, Some(notice_sink(&config, Role::Planner, &notices)))
            .ok(),
    }
    .map(|inner| stack.role("planner", inner, config.role(Role::Planner).model.value.clone()));
    let db = store_path(common, workspace)?;
    let lint = Arc::clone(&run_policy.lint);
    let mut session = Session::open(common, workspace, &db, run_policy, None)?;
    session.engine.registry = Arc::clone(registry);
    session.engine.config.plan_from_user = false;
    // Only the user's goal grants leave to change tests; the child runs inherit it (set before
    // the children's configuration is cloned below).
    session.engine.config.permit_goal = Some(goal.to_owned());
    notices.attach(session.live());
    let options = LoopOptions {
        gate: settings.gate,
        max_refusals: settings.max_refusals,
        reminder_every: settings.reminder_every,
        ..LoopOptions::default()
    };
    let mut executor = LoopExecutor::new(
        Arc::clone(&client),
        model.clone(),
        options,
        Arc::clone(&session.engine.ctx),
    );
    if let Some(hooks) = session.engine.config.hooks.clone()
        && hooks.has(pev_engine::hooks::HookKind::Stop)
    {
        let id = run_id.to_owned();
        executor = executor.with_stop_hook(Arc::new(move |answer: String| {
            let hooks = Arc::clone(&hooks);
            let id = id.clone();
            Box::pin(async move {
                let decision = hooks.stop(&id, &answer).await;
                (!decision.allowed())
                    .then(|| decision.reason_or_default(pev_engine::hooks::HookKind::Stop))
            })
        }));
    }
    let executor = Arc::new(executor);
    session.engine.config.activity.get_or_insert_with(Default::default);
    session.engine.config.write_locks.get_or_insert_with(Default::default);
    let delegator = planner_client.map(|planner| -> Arc<dyn pev_engine::delegation::Delegator> {
        let mut inherited = session.engine.config.clone();
        inherited.models = None;
        Arc::new(ChildRuns {
            db: db.clone(),
            registry: Arc::clone(&session.engine.registry),
            ctx: Arc::clone(&session.engine.ctx),
            config: inherited,
            roles: Roles {
                planner,
                executor: RoleClient { client: Arc::clone(&client), model: model.clone() },
                verifier: verifier_client.ok(),
            },
            prices: prices.clone(),
            budget: Arc::clone(&state),
            policy: lint,
            calls: Some(Arc::clone(&calls)),
            depth: 1,
            max_depth: DEFAULT_MAX_DEPTH,
            max_replans: 2,
            judge_threshold: JUDGE_THRESHOLD,
            allowed_tools: allowed_tools.clone(),
        })
    });
    let note_state = Arc::clone(&state);
    let usage_state = Arc::clone(&state);
    session.engine.config.models = Some(ModelHooks {
        executor: Arc::clone(&executor) as Arc<dyn pev_engine::instruct::InstructionExecutor>,
        judge: None,
        judge_threshold: JUDGE_THRESHOLD,
        budget_note: Arc::new(move || Some(note_state.note())),
        usage: Arc::new(move || usage_state.snapshot()),
        allowed_tools,
        delegator,
    });
    Ok(LoopParts { session, executor, verifier, calls })
}

fn run_loop(
    req: &AgentRequest,
    (policy, registry): (&CompiledPolicy, &Arc<pev_tools::Registry>),
    (config_dir, workspace): (&std::path::Path, &std::path::Path),
    budget: Budget,
    err: &mut dyn Write,
) -> Result<u8, Fail> {
    use pev_engine::agent::loop_run::{LoopRun, loop_plan};

    let run_policy = RunPolicy {
        approve_tools: policy.policy.approve_tools.clone(),
        allow_hosts: policy.policy.allow_hosts.clone(),
        sandbox: crate::shared::sandbox_setup::SandboxPolicy::from_policy(&policy.policy),
        oracle: policy.policy.oracle.clone(),
        lint: Arc::new(policy.clone()),
    };
    let allowed: Vec<String> = registry
        .iter()
        .map(|t| t.name())
        .filter(|name| policy.tool_allowed(name))
        .map(str::to_owned)
        .collect();
    let run_id = pev_store::new_run_id();
    let settings = LoopSettings {
        gate: req.gate,
        max_refusals: req.max_refusals,
        reminder_every: req.reminder_every,
    };
    let recorded = req.replay.as_ref().map_or(Recorded::Nothing, Recorded::Replay);
    let LoopParts { session, executor, verifier, calls } = loop_parts(
        &req.common,
        (run_policy, allowed.clone(), registry),
        (config_dir, workspace),
        (budget, &settings, &run_id, &req.goal),
        recorded,
    )?;
    let db = store_path(&req.common, workspace)?;
    let plan = loop_plan(&req.goal);
    let store = Store::open(&db).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let _lock = lock_run(&db, &run_id)?;
    store
        .create_run(&NewRun {
            run_id: run_id.clone(),
            goal: req.goal.clone(),
            workspace: workspace.display().to_string(),
            plan: serde_json::to_value(&plan).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?,
            options: json!({
                "agent": true,
                "mode": "loop",
                "gate": req.gate,
                "max_refusals": req.max_refusals,
                "reminder_every": req.reminder_every,
                "allowed_tools": allowed,
                "approve_tools": policy.policy.approve_tools,
                "allow_hosts": policy.policy.allow_hosts,
                "sandbox": session.sandbox_options(),
                "oracle": session.engine.config.oracle,
                "policy": crate::shared::policy_source::to_options(policy),
                "budget": {
                    "max_usd": req.budget.max_usd,
                    "max_tokens": req.budget.max_tokens,
                    "max_turns": req.budget.max_turns,
                },
            }),
            created_at: now_rfc3339(),
        })
        .map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    drop(store);
    attach_calls(&calls, &db, &run_id, err);
    session.trace(&run_id, false);
    let _ = writeln!(
        err,
        "pev: run {run_id} (loop mode, gate {}; journal {})",
        if req.gate { "on" } else { "off" },
        db
    );
    let looped = LoopRun { engine: &session.engine, executor, db: &db, verifier };
    let outcome = session.block_on(looped.run(run_id, &req.goal));
    close_calls(&calls, err);
    session.report(outcome, err)
}

/// What `pev resume` hands a loop-mode run (read from the journal by `run::resume`).
pub(crate) struct LoopResume {
    pub record: pev_store::RunRecord,
    pub blobs: std::collections::HashMap<String, Vec<u8>>,
    pub warnings: Vec<String>,
    pub prior_usage: Option<pev_protocol::run::Usage>,
    pub budget: Budget,
    pub run_policy: RunPolicy,
    /// The interrupted loop's model turns, to answer from the journal.
    pub recording: Option<Arc<Recording>>,
}

/// `pev resume` of a loop-mode run: the loop is run again with its journaled model turns and
/// finished tool calls answered from the journal (the model's plan, the gate's refusals, the
/// reminders and the evidence marks are rebuilt by replaying them), then goes on for real from
/// where the killed session stopped. The caller holds the run's lock.
pub(crate) fn resume_loop(
    resume: LoopResume,
    common: &Common,
    err: &mut dyn Write,
) -> Result<u8, Fail> {
    use pev_engine::agent::loop_run::LoopRun;

    let LoopResume { record, blobs, warnings, prior_usage, budget, run_policy, recording } = resume;
    let option = |key: &str| record.options.get(key);
    let settings = LoopSettings {
        gate: option("gate").and_then(serde_json::Value::as_bool).unwrap_or(true),
        max_refusals: option("max_refusals")
            .and_then(serde_json::Value::as_u64)
            .map_or(3, |n| u32::try_from(n).unwrap_or(3)),
        reminder_every: option("reminder_every")
            .and_then(serde_json::Value::as_u64)
            .map_or(10, |n| u32::try_from(n).unwrap_or(10)),
    };
    let workspace = std::path::PathBuf::from(&record.workspace);
    let workspace = common.workspace.clone().unwrap_or(workspace);
    let stored: Option<Vec<String>> = option("allowed_tools")
        .and_then(serde_json::Value::as_array)
        .map(|names| names.iter().filter_map(|n| n.as_str()).map(str::to_owned).collect());
    // The MCP servers the run was started with come back with it.
    let registry = Arc::new(crate::shared::models::resumed_registry(
        &workspace,
        stored.as_deref().unwrap_or_default(),
        err,
    )?);
    let allowed: Vec<String> =
        stored.unwrap_or_else(|| registry.iter().map(|t| t.name().to_owned()).collect());
    let recorded = recording.as_ref().map_or(Recorded::Nothing, Recorded::Resume);
    let common = &crate::shared::session::with_stored_hidden(common, &record.options);
    let LoopParts { mut session, executor, verifier, calls } = loop_parts(
        common,
        (run_policy, allowed, &registry),
        (&workspace, &workspace),
        (budget, &settings, &record.run_id, &record.goal),
        recorded,
    )?;
    session.engine.config.oracle = crate::shared::session::resumed_oracle(
        record.options.get("oracle"),
        session.engine.config.oracle.take(),
    );
    let db = store_path(common, &workspace)?;
    attach_calls(&calls, &db, &record.run_id, err);
    session.trace(&record.run_id, true);
    let looped = LoopRun { engine: &session.engine, executor, db: &db, verifier };
    let journal = session.journal()?;
    let input =
        pev_engine::ResumeInput { record, journal, blobs, warnings, prior_usage, revision: None };
    let outcome = session.block_on(looped.resume(input));
    close_calls(&calls, err);
    session.report(outcome, err)
}
