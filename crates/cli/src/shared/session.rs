//! The session of one run: its runtime, engine, observer, approval mode, sandbox and traces,
//! built from the command line, the policy and the `pev.toml` files (`Session::open`), and the
//! outcome printed and mapped to an exit code (`Session::report`). `pev run`, `pev resume` and
//! `pev agent` (both modes) open one; [`RunPolicy`] is what of the policy applies while it runs.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pev_engine::{ApprovalMode, Cancel, Engine, EngineConfig, EngineError, Observer};
use pev_lint::CompiledPolicy;
use pev_protocol::run::RunResult;
use pev_store::Journal;
use pev_tools::{Registry, ToolContext, ToolPolicy, Workspace};
use serde_json::Value;

use crate::shared::approve_tty::TtyApprover;
use crate::shared::sandbox_setup::{self, SandboxPolicy};
use crate::view::run_view::{JsonLines, LiveView, PlainView};
use crate::view::style::{ColorChoice, Style};

use crate::args::values::Common;
use crate::shared::exit::{EXIT_FAILED, Fail, exit_code};
use crate::shared::workspace::file_config;

/// The runtime, engine and view of one `run` or `resume`.
pub(crate) struct Session {
    runtime: tokio::runtime::Runtime,
    pub(crate) engine: Engine,
    db: pev_store::Location,
    json: bool,
    events: Option<Arc<JsonLines>>,
    live: Option<Arc<LiveView>>,
    color: ColorChoice,
    /// Traces of the run, live, when an OTLP endpoint is configured.
    tracing: crate::shared::telemetry::Tracing,
}

/// The oracle settings: `[oracle]` of the files with the command line's flags. A hidden
/// check's directory must exist and lie outside the workspace (inside it, the models could read
/// it).
pub(crate) fn oracle_settings(
    config: &pev_providers::config::Config,
    args: &crate::args::values::OracleArgs,
    policy: Option<&pev_protocol::oracle::PlanOracle>,
    workspace: &Path,
) -> Result<Option<pev_protocol::oracle::OracleSettings>, Fail> {
    if args.no_oracle {
        return Ok(None);
    }
    let mut settings = config.oracle().clone();
    if let Some(policy) = policy {
        settings.protect.extend(policy.protect.iter().cloned());
        settings.allow.extend(policy.allow.iter().cloned());
    }
    settings.protect.extend(args.protect.iter().cloned());
    settings.allow.extend(args.allow_oracle.iter().cloned());
    let dir = args.hidden_tests.as_ref().map(|d| d.display().to_string());
    for command in &args.hidden_check {
        settings.hidden.push(pev_protocol::oracle::HiddenCheck {
            name: None,
            command: command.clone(),
            dir: dir.clone(),
            at: None,
            timeout_s: None,
        });
    }
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    for check in &mut settings.hidden {
        let Some(dir) = &check.dir else { continue };
        let path = Path::new(dir).canonicalize().map_err(|e| {
            Fail::input(format!("the hidden check `{}`: its directory {dir}: {e}", check.label()))
        })?;
        if !path.is_dir() {
            return Err(Fail::input(format!(
                "the hidden check `{}`: {dir} is not a directory",
                check.label()
            )));
        }
        if path.starts_with(&ws) {
            return Err(Fail::input(format!(
                "the hidden check `{}`: {dir} is inside the workspace, where the models can read \
                 it; keep held-out tests outside the workspace",
                check.label()
            )));
        }
        check.dir = Some(path.display().to_string());
    }
    for glob in settings.protect.iter().chain(&settings.allow) {
        if let Err(e) = glob::Pattern::new(glob) {
            return Err(Fail::input(format!("the oracle glob `{glob}` is not valid: {e}")));
        }
    }
    Ok(Some(settings))
}

/// The oracle settings of a resumed run: what it started with (`options.oracle`), with the
/// checks the resume adds (`protect`, hidden checks). What loosens them (`allow`, no
/// conventions, `--no-oracle`) counts only from the start: a resume cannot loosen a run's checks.
/// A run journaled before pev had oracles takes the resume's settings.
pub(crate) fn resumed_oracle(
    stored: Option<&Value>,
    now: Option<pev_protocol::oracle::OracleSettings>,
) -> Option<pev_protocol::oracle::OracleSettings> {
    let stored = match stored {
        None => return now,
        Some(Value::Null) => return None,
        Some(v) => {
            match serde_json::from_value::<pev_protocol::oracle::OracleSettings>(v.clone()) {
                Ok(s) => s,
                // Unreadable: the resume's, which are at least the defaults' conventions.
                Err(_) => return now.or_else(|| Some(Default::default())),
            }
        }
    };
    let mut merged = stored;
    if let Some(now) = now {
        for glob in now.protect {
            if !merged.protect.contains(&glob) {
                merged.protect.push(glob);
            }
        }
        for check in now.hidden {
            if !merged.hidden.contains(&check) {
                merged.hidden.push(check);
            }
        }
    }
    Some(merged)
}

/// `common` with the held-out test directories a stored run started with added to what its
/// commands may not see.
pub(crate) fn with_stored_hidden(common: &Common, options: &Value) -> Common {
    let mut common = common.clone();
    let stored = options.get("oracle").and_then(|o| o.get("hidden")).and_then(Value::as_array);
    common.oracle.also_hide.extend(
        stored
            .into_iter()
            .flatten()
            .filter_map(|h| h.get("dir").and_then(Value::as_str))
            .map(PathBuf::from),
    );
    common
}

/// The `[hooks]` of the files, if any (see `pev_engine::hooks` for which run confined).
fn hooks_for(
    config: &pev_providers::config::Config,
    ctx: &Arc<ToolContext>,
) -> Option<Arc<pev_engine::hooks::Hooks>> {
    let hooks = config.hooks();
    (!hooks.is_empty())
        .then(|| Arc::new(pev_engine::hooks::Hooks::new(hooks.clone(), Arc::clone(ctx))))
}

/// What of the policy applies while a run runs.
pub(crate) struct RunPolicy {
    pub approve_tools: Vec<String>,
    pub allow_hosts: Vec<String>,
    pub sandbox: SandboxPolicy,
    /// The policy's `oracle` (a resumed run has its settings in its options instead).
    pub oracle: Option<pev_protocol::oracle::PlanOracle>,
    /// The whole policy, which every child run's plan is linted by.
    pub lint: Arc<CompiledPolicy>,
}

impl Session {
    pub(crate) fn open(
        common: &Common,
        workspace: &Path,
        db: &pev_store::Location,
        RunPolicy { approve_tools, allow_hosts, sandbox, oracle: policy_oracle, lint: _ }: RunPolicy,
        models: Option<pev_engine::ModelHooks>,
    ) -> Result<Self, Fail> {
        let ws = Workspace::open(workspace).map_err(|e| Fail::input(e.to_string()))?;
        let config = file_config(workspace)?;
        let oracle = oracle_settings(&config, &common.oracle, policy_oracle.as_ref(), workspace)?;
        // Held-out tests are hidden from every command (under bubblewrap); the models' tools
        // cannot leave the workspace anyway.
        let mut hide = db.local_sockets();
        let dirs = oracle.iter().flat_map(|o| &o.hidden).filter_map(|h| h.dir.as_ref());
        hide.extend(dirs.map(PathBuf::from));
        hide.extend(common.oracle.also_hide.iter().cloned());
        let sandbox = sandbox_setup::build(
            sandbox.resolve(config.sandbox()),
            db.file().map(|db| (workspace, db)),
            &hide,
        );
        let ctx = Arc::new(ToolContext {
            workspace: ws,
            policy: ToolPolicy { allow_hosts, ..ToolPolicy::default() },
            sandbox,
        });
        let hooks = hooks_for(&config, &ctx);
        let tracing = crate::shared::telemetry::Tracing::start(&config, db, &mut std::io::stderr());
        let stderr_tty = std::io::stderr().is_terminal();
        let style = Style::for_stderr(common.color);
        let live = (!common.json && stderr_tty).then(|| Arc::new(LiveView::stderr(style)));
        let events = common.json.then(|| Arc::new(JsonLines::stdout()));
        let observer: Arc<dyn Observer> = match (&live, &events) {
            (_, Some(events)) => Arc::clone(events) as Arc<dyn Observer>,
            (Some(live), None) => Arc::clone(live) as Arc<dyn Observer>,
            (None, None) => Arc::new(PlainView::stderr(style)),
        };
        let approval = if common.yes {
            ApprovalMode::All
        } else if std::io::stdin().is_terminal() && stderr_tty {
            ApprovalMode::Ask(Arc::new(TtyApprover::new(live.clone(), style)))
        } else {
            ApprovalMode::Defer
        };
        // `--jobs N` bounds every step; without it, one a core, and more while only file steps
        // run (`pev_engine::LIGHT_JOBS`; see the engine's `lanes`).
        let (jobs, light_jobs) = match common.jobs {
            Some(n) => (n.max(1), n.max(1)),
            None => {
                let cores = std::thread::available_parallelism().map_or(2, usize::from);
                (cores, cores.max(pev_engine::LIGHT_JOBS))
            }
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(std::thread::available_parallelism().map_or(2, usize::from).min(4))
            .enable_all()
            .build()
            .map_err(|e| Fail(EXIT_FAILED, format!("cannot start the runtime: {e}")))?;
        let cancel = Arc::new(Cancel::default());
        let on_signal = Arc::clone(&cancel);
        // The first Ctrl-C stops new steps and lets running ones finish (the run can be resumed);
        // a second one ends the process at once, as a crash would: the journal is safe either way.
        runtime.spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                on_signal.cancel();
                let mut err = std::io::stderr();
                let _ = writeln!(
                    err,
                    "pev: stopping: no new step starts; running steps finish (Ctrl-C again to \
                     stop now; `pev resume` continues either way)"
                );
                if tokio::signal::ctrl_c().await.is_ok() {
                    let _ = writeln!(err, "pev: stopped");
                    std::process::exit(130);
                }
            }
        });
        let engine = Engine {
            registry: Arc::new(Registry::builtin()),
            ctx,
            observer,
            config: EngineConfig {
                jobs,
                light_jobs,
                approval,
                approve_tools,
                cancel,
                models,
                cache: common.cache,
                final_events: true,
                hooks,
                activity: None,
                write_locks: None,
                oracle,
                // `pev agent` says otherwise: its plans are a model's.
                plan_from_user: true,
                permit_goal: None,
            },
        };
        Ok(Self {
            runtime,
            engine,
            db: db.clone(),
            json: common.json,
            events,
            live,
            color: common.color,
            tracing,
        })
    }

    /// Traces follow run `run_id` (new, or `resumed`), when traces are exported.
    pub(crate) fn trace(&self, run_id: &str, resumed: bool) {
        self.tracing.follow(run_id, resumed);
    }

    /// The run options' `sandbox` entry: the settings this run's commands are confined by.
    pub(crate) fn sandbox_options(&self) -> Value {
        sandbox_setup::to_options(self.engine.ctx.sandbox.settings())
    }

    /// The live view on the terminal, when the run draws one.
    pub(crate) fn live(&self) -> Option<Arc<LiveView>> {
        self.live.clone()
    }

    pub(crate) fn journal(&self) -> Result<Journal, Fail> {
        Journal::start(&self.db).map_err(|e| Fail(EXIT_FAILED, e.to_string()))
    }

    pub(crate) fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    pub(crate) fn report(
        mut self,
        outcome: Result<RunResult, EngineError>,
        err: &mut dyn Write,
    ) -> Result<u8, Fail> {
        if let Some(live) = &self.live {
            live.finish();
        }
        self.tracing.finish(err);
        let result = match outcome {
            Ok(result) => result,
            Err(EngineError::Plan(message)) => return Err(Fail::input(message)),
            // The journal's writer refused a run whose record was changed behind pev's back:
            // no resume builds on it.
            Err(e) if e.to_string().contains("changed outside pev") => {
                return Err(Fail(
                    EXIT_FAILED,
                    format!("{e}\nthe run's record is not evidence; `pev resume` refuses it"),
                ));
            }
            Err(e) => {
                return Err(Fail(
                    EXIT_FAILED,
                    format!(
                        "{e}\nwhat was journaled before the failure is kept; `pev resume` can \
                         continue the run"
                    ),
                ));
            }
        };
        if let Some(error) = self.events.as_ref().and_then(|e| e.error()) {
            return Err(Fail(EXIT_FAILED, format!("cannot write the event stream: {error}")));
        }
        if !self.json {
            let mut out = std::io::stdout().lock();
            let style = Style::for_stdout(self.color);
            let at =
                crate::view::run_summary::location_args(self.engine.ctx.workspace.root(), &self.db);
            let _ = write!(
                out,
                "{}",
                crate::view::run_summary::render_summary_at(&result, &style, &at)
            );
            let _ = out.flush();
        }
        let _ = err.flush();
        Ok(exit_code(result.status))
    }
}
