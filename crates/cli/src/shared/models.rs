//! The models of an agent run: the three role clients built from `pev.toml` and the
//! environment, each stacked by `pev_engine::agent::roles::Stack` around a provider or a
//! recording, paid from one budget ([`build_models`]); the tools they are offered ([`tool_registry`]); the call log
//! attached to the run and closed; and what a resumed run may still spend. `pev agent`, `pev
//! resume` and `pev replay` build their models here.

use std::io::Write;
use std::sync::Arc;

use pev_engine::ModelHooks;
use pev_engine::agent::budget::{Budget, BudgetState};
use pev_engine::agent::call_log::CallLog;
use pev_engine::agent::delegate::{ChildRuns, DEFAULT_MAX_DEPTH, RoleClient, Roles};
use pev_engine::agent::executor::{ExecutorOptions, ModelExecutor};
use pev_engine::agent::judge::{JudgeOptions, ModelJudge};
use pev_engine::agent::planner::{Planner, PlannerOptions};
use pev_engine::agent::replay::{Recording, ReplayClient};
use pev_engine::agent::roles::Stack;
use pev_lint::CompiledPolicy;
use pev_providers::config::{Config, Role};

use crate::shared::exit::{EXIT_BAD_INPUT, Fail};
use crate::view::call_notice::Notices;

/// The judge's "no" fails a step from this confidence up.
pub(crate) const JUDGE_THRESHOLD: f64 = 0.7;

/// Where a run's model calls are answered from, besides the models.
#[derive(Clone, Copy, Default)]
pub(crate) enum Recorded<'a> {
    /// The models answer everything.
    #[default]
    Nothing,
    /// `pev replay`: the recording answers everything, the models nothing.
    Replay(&'a Arc<Recording>),
    /// `pev resume`: the interrupted attempts' calls come from the recording while they match.
    Resume(&'a Arc<Recording>),
}

/// The role clients of a run, each paying from one budget.
pub(crate) struct Models {
    pub planner: Planner,
    pub hooks: ModelHooks,
    pub state: Arc<BudgetState>,
    /// Where every call of these clients is journaled, once the run is named.
    pub calls: Arc<CallLog>,
    /// The role clients, for the child runs of delegated steps.
    pub roles: Roles,
    pub prices: pev_providers::cost::PriceTable,
}

impl Models {
    /// Lets `engine` run delegated steps: their child runs, in the journal `db`, paid from this
    /// run's budget.
    pub(crate) fn attach_delegator(
        &self,
        engine: &mut pev_engine::Engine,
        db: &pev_store::Location,
        (policy, max_replans): (&CompiledPolicy, u32),
    ) {
        // One activity for the tree: a command's changes are credited only when nothing else
        // in it ran.
        engine.config.activity.get_or_insert_with(Default::default);
        // One writer of a file at a time in the whole tree.
        engine.config.write_locks.get_or_insert_with(Default::default);
        let mut config = engine.config.clone();
        config.models = None;
        let Some(hooks) = engine.config.models.as_mut() else { return };
        let children = ChildRuns {
            db: db.clone(),
            registry: Arc::clone(&engine.registry),
            ctx: Arc::clone(&engine.ctx),
            config,
            roles: self.roles.clone(),
            prices: self.prices.clone(),
            budget: Arc::clone(&self.state),
            policy: Arc::new(policy.clone()),
            calls: Some(Arc::clone(&self.calls)),
            depth: 1,
            max_depth: DEFAULT_MAX_DEPTH,
            max_replans,
            judge_threshold: JUDGE_THRESHOLD,
            allowed_tools: hooks.allowed_tools.clone(),
        };
        hooks.delegator = Some(Arc::new(children));
    }
}

/// `role`'s own client (the innermost of its [`Stack`]), reporting through `notices` a call that
/// waits long and each retry (journaled through `calls` with the call it belongs to); with a
/// recording, the calls are answered from it.
pub(crate) fn client_for(
    config: &Config,
    role: Role,
    (notices, calls, replay): (&Arc<Notices>, &Arc<CallLog>, Option<&Arc<Recording>>),
) -> Result<Arc<dyn pev_providers::ModelClient>, Fail> {
    let inner: Arc<dyn pev_providers::ModelClient> = match replay {
        Some(recording) => Arc::new(ReplayClient::new(role.name(), Arc::clone(recording))),
        None => {
            // Retries are shown (the notices) and journaled with the call they belong to.
            let shown = notice_sink(config, role, notices);
            let log = Arc::clone(calls);
            let name = role.name();
            let sink: pev_providers::notice::NoticeSink = Arc::new(move |notice| {
                if let pev_providers::notice::CallNotice::Retrying {
                    attempt, after, error, ..
                } = &notice
                {
                    log.note_retry(
                        name,
                        format!(
                            "attempt {} failed ({error}); retried after {} ms",
                            attempt.saturating_sub(1),
                            after.as_millis()
                        ),
                    );
                }
                shown(notice);
            });
            config
                .client_with_notice(role, Some(sink))
                .map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?
        }
    };
    Ok(inner)
}

/// Notices of `role`'s calls: "pev: planner (claude-opus-4-6) has waited 30s for an answer
/// (attempt 1 of 3)".
pub(crate) fn notice_sink(
    config: &Config,
    role: Role,
    notices: &Arc<Notices>,
) -> pev_providers::notice::NoticeSink {
    let who =
        format!("{} ({})", role.name(), crate::view::style::clean(&config.role(role).model.value));
    notices.sink(who)
}

/// Builds the planner, executor and judge from the workspace's `pev.toml` and the environment.
/// The built-in tools and those of the MCP servers in the user's `pev.toml` (started now, in the
/// workspace; they stop when the registry is dropped at the end of the run).
pub(crate) fn tool_registry(
    config_dir: &std::path::Path,
    workspace: &std::path::Path,
    err: &mut dyn Write,
) -> Result<pev_tools::Registry, Fail> {
    let mut registry = pev_tools::Registry::builtin();
    let config = Config::from_env(config_dir).map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?;
    if config.mcp_servers().is_empty() {
        return Ok(registry);
    }
    let (tools, warnings) = pev_mcp::client::connect(config.mcp_servers(), workspace)
        .map_err(|e| Fail(EXIT_BAD_INPUT, e))?;
    for warning in warnings {
        let _ = writeln!(err, "pev: {warning}");
    }
    for server in config.mcp_servers() {
        let prefix = format!("mcp__{}__", server.name);
        let n = tools.iter().filter(|t| t.name().starts_with(&prefix)).count();
        let _ = writeln!(err, "pev: MCP server `{}`: {n} tool(s) ({prefix}*)", server.name);
    }
    for tool in tools {
        registry.register(tool).map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?;
    }
    Ok(registry)
}

/// The tools of a resumed run: the built-in ones and, when the run was started with tools of
/// MCP servers (`mcp__NAME__…` among the tools its policy allowed), those servers again, started
/// from the user's `pev.toml` as `pev agent` starts them. A tool the run was started with that
/// no server offers now is named on `err`; the model is then told it is unknown, as for any
/// tool that is not there.
pub(crate) fn resumed_registry(
    workspace: &std::path::Path,
    allowed: &[String],
    err: &mut dyn Write,
) -> Result<pev_tools::Registry, Fail> {
    if !allowed.iter().any(|t| t.starts_with("mcp__")) {
        return Ok(pev_tools::Registry::builtin());
    }
    let registry = tool_registry(workspace, workspace, err)?;
    let missing: Vec<&str> = allowed
        .iter()
        .filter(|t| t.starts_with("mcp__") && registry.get(t).is_none())
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        let _ = writeln!(
            err,
            "pev: warning: the run was started with MCP tools that no server in your pev.toml \
             offers now: {}",
            missing.join(", ")
        );
    }
    Ok(registry)
}

pub(crate) fn build_models(
    workspace: &std::path::Path,
    notices: &Arc<Notices>,
    budget: Budget,
    (policy, registry): (&CompiledPolicy, &pev_tools::Registry),
    recorded: Recorded<'_>,
) -> Result<Models, Fail> {
    let replay = match recorded {
        Recorded::Replay(r) => Some(r),
        _ => None,
    };
    let config = Config::from_env(workspace).map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?;
    let prices = config.prices().clone();
    let state = Arc::new(BudgetState::new(budget, prices.clone()));
    let calls = CallLog::priced(prices.clone());
    let stack = stack(&prices, &state, &calls, recorded);
    let model = |role: Role| config.role(role).model.value.clone();
    let role = |role: Role| -> Result<RoleClient, Fail> {
        let inner = client_for(&config, role, (notices, &calls, replay))?;
        Ok(stack.role(role.name(), inner, model(role)))
    };
    let verifier = role(Role::Verifier)?;
    let judge = ModelJudge::new(
        Arc::clone(&verifier.client),
        model(Role::Verifier),
        JudgeOptions::default(),
    );
    let roles = Roles {
        planner: role(Role::Planner)?,
        executor: role(Role::Executor)?,
        verifier: Some(verifier),
    };
    let planner = Planner::new(
        Arc::clone(&roles.planner.client),
        model(Role::Planner),
        PlannerOptions::default(),
    );
    let executor = ModelExecutor::new(
        Arc::clone(&roles.executor.client),
        model(Role::Executor),
        ExecutorOptions::default(),
    );
    let note_state = Arc::clone(&state);
    let usage_state = Arc::clone(&state);
    let hooks = ModelHooks {
        executor: Arc::new(executor),
        judge: Some(Arc::new(judge)),
        judge_threshold: JUDGE_THRESHOLD,
        budget_note: Arc::new(move || Some(note_state.note())),
        usage: Arc::new(move || usage_state.snapshot()),
        allowed_tools: registry
            .iter()
            .map(|t| t.name())
            .filter(|name| policy.tool_allowed(name))
            .map(str::to_owned)
            .collect(),
        delegator: None,
    };
    Ok(Models { planner, hooks, state, calls, roles, prices })
}

/// The layers of a run's role clients: journaled through `calls`, paid from `state` and, in a
/// resumed run, answered from the recording while the interrupted attempts match.
pub(crate) fn stack(
    prices: &pev_providers::cost::PriceTable,
    state: &Arc<BudgetState>,
    calls: &Arc<CallLog>,
    recorded: Recorded<'_>,
) -> Stack {
    Stack {
        prices: prices.clone(),
        state: Arc::clone(state),
        calls: Some(Arc::clone(calls)),
        resume: match recorded {
            Recorded::Resume(recording) => Some(Arc::clone(recording)),
            _ => None,
        },
    }
}

/// Model calls are journaled as `run_id`'s from now on; a journal that refuses is a warning
/// (the run's effects are journaled by the engine regardless).
pub(crate) fn attach_calls(
    calls: &CallLog,
    db: &pev_store::Location,
    run_id: &str,
    err: &mut dyn Write,
) {
    if let Err(e) = calls.attach(db, run_id) {
        let _ = writeln!(err, "pev: warning: model calls will not be journaled: {e}");
    }
}

/// Lets the call log's journal go, saying if calls stopped being journaled.
pub(crate) fn close_calls(calls: &CallLog, err: &mut dyn Write) {
    calls.close();
    if let Some(e) = calls.error() {
        let _ = writeln!(err, "pev: warning: {e}");
    }
}

/// The ceilings an agent run started with, less what its earlier sessions spent: what a
/// `pev resume` of it may still spend.
pub(crate) fn remaining_budget(
    options: &serde_json::Value,
    spent: Option<&pev_protocol::run::Usage>,
) -> Budget {
    let budget = options.get("budget");
    let get = |key: &str| budget.and_then(|b| b.get(key));
    let spent = spent.cloned().unwrap_or_default();
    let tokens = spent.input_tokens.saturating_add(spent.output_tokens);
    Budget {
        max_usd: get("max_usd")
            .and_then(serde_json::Value::as_f64)
            .map(|m| (m - spent.cost_usd).max(0.0)),
        max_tokens: get("max_tokens")
            .and_then(serde_json::Value::as_u64)
            .map(|m| m.saturating_sub(tokens)),
        max_turns: get("max_turns")
            .and_then(serde_json::Value::as_u64)
            .map(|m| u32::try_from(m.saturating_sub(spent.llm_calls)).unwrap_or(u32::MAX)),
        deadline: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_resume_may_spend_only_what_is_left() {
        let options = json!({"budget": {"max_usd": 1.0, "max_tokens": 10_000, "max_turns": 20}});
        let spent = pev_protocol::run::Usage {
            llm_calls: 5,
            input_tokens: 3000,
            output_tokens: 1000,
            cost_usd: 0.25,
            tool_calls: 9,
            ..Default::default()
        };
        let b = remaining_budget(&options, Some(&spent));
        assert_eq!(b.max_usd, Some(0.75));
        assert_eq!(b.max_tokens, Some(6000));
        assert_eq!(b.max_turns, Some(15));
        let none = remaining_budget(&json!({}), Some(&spent));
        assert_eq!((none.max_usd, none.max_tokens, none.max_turns), (None, None, None));
        let over = pev_protocol::run::Usage { cost_usd: 2.0, ..spent };
        assert_eq!(remaining_budget(&options, Some(&over)).max_usd, Some(0.0));
    }
}
