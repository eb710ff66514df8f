//! The command line: clap's definitions of every subcommand and option, and the help texts
//! that teach them. `main.rs` dispatches on what is parsed here.

pub(crate) mod help;
pub(crate) mod values;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::args::help::{
    AGENT_HELP, DOCTOR_HELP, EVAL_HELP, EXIT_CODES, EXPORT_HELP, GATE_HELP, INTEGRATE_HELP,
    LINT_HELP, MCP_HELP, REPLAY_HELP, REPORT_HELP, RESUME_HELP, RUN_HELP, SCHEMA_HELP,
};
use crate::view::style;

/// pev: a Plan-Execute-Verify harness for LLM agents.
#[derive(Debug, Parser)]
#[command(
    name = "pev",
    version,
    about = "pev: a Plan-Execute-Verify harness for LLM agents",
    long_about = "pev: a Plan-Execute-Verify harness for LLM agents.\n\n\
        A plan is a goal and a list of steps (JSON or YAML, see `pev schema plan`) that the \
        harness owns and checks. `pev lint` checks a plan before anything runs. `pev run` runs \
        a plan's tool steps as a DAG in a sandboxed workspace, verifies each step itself \
        (assertions, effects, file changes) and reports `success` only with evidence, \
        journaling everything so `pev show` can explain the verdict and `pev resume` can finish \
        after a crash. `pev agent` puts models around the same harness: a planner, an executor \
        with tools, a skeptical judge, budgets that are ceilings, or one model in a loop with \
        the plan as tools and a finalization gate.",
    after_help = EXIT_CODES
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Check a plan against a policy without running it
    #[command(
        long_about = "Check a plan against a policy without running it.\n\n\
            Reads PLAN (JSON or YAML; `-` for standard input), runs every check \
            (`pev lint --explain all` lists them) under the policy (YAML with plan-lint's keys plus pev's, or a bare \
            .rego file), and prints each finding with its step, its JSON path and line, and a \
            one-line fix. The status is `error` when any finding is an error or the risk score \
            (the sum of the weights of the codes found, capped at 1) reaches the threshold; \
            `warn` when there are only warnings; `pass` otherwise.",
        after_help = LINT_HELP
    )]
    Lint(LintArgs),
    /// Run a plan: its tool steps as a DAG in the workspace, verified by the harness
    #[command(
        long_about = "Run a plan: its tool steps as a DAG in the workspace, verified by the harness.\n\n\
            The plan is linted first (a plan with lint errors does not run). Steps run when the \
            steps they depend on (through depends_on or ${id.result...} references) are done, up \
            to --jobs at a time, each tool confined to the workspace. After each step its \
            assertions are checked; at the end the postconditions. The outcome is `success` only \
            with evidence: every step done, every assertion and postcondition verified, and some \
            effect run when the goal asks for a change. Everything is journaled in \
            .pev/pev.db in the workspace, so `pev show` can explain the outcome and \
            `pev resume` can finish a run that was interrupted.",
        after_help = RUN_HELP
    )]
    Run(RunArgs),
    /// Plan, execute and verify a goal with models: planner, executor and judge
    #[command(
        long_about = "Plan, execute and verify a goal with models.\n\n\
            The planner model writes a plan (linted; lint errors go back to it), the harness runs \
            it like `pev run`, and steps without a tool are carried out by the executor model \
            with the built-in tools. Each step is verified by the harness (assertions, effects, \
            mutations) and, where its criteria are semantic, by a skeptical judge model. A failed \
            step is retried with specific feedback, then replanned (done steps are kept). The \
            budget (--max-usd, --max-tokens, --max-turns, --timeout) is a ceiling: a call the \
            budget cannot pay for is not sent. Models come from pev.toml and the environment \
            (`pev doctor` shows the role table).",
        after_help = AGENT_HELP
    )]
    Agent(AgentArgs),
    /// Finish a run that was interrupted or is waiting for approval
    #[command(after_help = RESUME_HELP)]
    Resume {
        /// The run: its id, a unique prefix of it, or `last`
        #[arg(value_name = "RUN")]
        run: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Run a recorded agent run again with every model call answered from the journal
    #[command(after_help = REPLAY_HELP)]
    Replay {
        /// The run: its id, a unique prefix of it, or `last`
        #[arg(value_name = "RUN")]
        run: String,
        /// The policy the run was made with (it decides which tools the models were offered)
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// Start from a copy of DIR instead of the run's workspace put back as it was
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
        /// Replay with this goal instead of the recorded one (what changes is then shown as
        /// divergences)
        #[arg(long, value_name = "TEXT")]
        goal: Option<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// List the runs journaled in the workspace, newest first
    Runs {
        #[command(flatten)]
        journal: JournalArgs,
    },
    /// Show a run: plan, step states, evidence, assertions, diffs and outcome
    Show {
        /// The run: its id, a unique prefix of it, or `last`
        #[arg(value_name = "RUN")]
        run: String,
        /// With --conversation: only this step's model calls
        #[arg(value_name = "STEP", requires = "conversation")]
        step: Option<String>,
        /// Print the model conversations instead: every call's new messages, tool calls and
        /// results (long ones folded) and the answer, as the journal recorded them
        #[arg(long)]
        conversation: bool,
        /// With --conversation: print messages whole instead of folding long ones
        #[arg(long, requires = "conversation")]
        full: bool,
        /// Print the run's events as they are journaled, wherever it is driven from, until it
        /// finishes (with a shared journal, from any machine); `--format json`: one event per
        /// line
        #[arg(long, conflicts_with = "conversation")]
        follow: bool,
        /// Output format (`json` prints the run result, `pev schema result`; `recording` the run
        /// as a text recording for `pev replay last --store FILE.jsonl`)
        #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
        format: ShowFormat,
        #[command(flatten)]
        journal: JournalArgs,
    },
    /// Write a run as one self-contained HTML file: verdict, plan graph, timeline, evidence, diffs
    #[command(after_help = REPORT_HELP)]
    Report {
        /// The run: its id, a unique prefix of it, or `last`
        #[arg(value_name = "RUN")]
        run: String,
        /// Where to write it (`-` for stdout) [default: pev-report-RUN.html here]
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        journal: JournalArgs,
    },
    /// Delete runs last updated before a time, with their child runs and the blobs nothing else
    /// uses
    #[command(after_help = "Examples:\n  pev gc --older-than 30d --dry-run   # what would go\n  \
        pev gc --older-than 30d\n\nA run still `running` (under way, or interrupted and \
        resumable) is kept; a child run goes with its parent. DURATION: a number and a unit, \
        s, m, h, d or w (90m, 12h, 30d).")]
    Gc {
        /// Delete runs last updated more than this long ago (30d, 12h, 2w, …)
        #[arg(long, value_name = "DURATION", value_parser = crate::args::values::parse_age)]
        older_than: std::time::Duration,
        /// Say what would be deleted, and delete nothing
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        journal: JournalArgs,
    },
    /// Send finished runs as OpenTelemetry traces to an OTLP/HTTP endpoint (Phoenix, Jaeger, …)
    #[command(after_help = EXPORT_HELP)]
    Export {
        /// The runs: ids, unique prefixes, or `last`
        #[arg(value_name = "RUN", required = true)]
        runs: Vec<String>,
        /// The collector's URL (`http://localhost:4318`; `/v1/traces` is appended unless there)
        /// [default: OTEL_EXPORTER_OTLP_ENDPOINT, or the user's pev.toml [telemetry]]
        #[arg(long, value_name = "URL")]
        otlp: Option<String>,
        /// Put the goal, tool arguments and outputs, plans and judge feedback in the spans
        #[arg(long)]
        capture_content: bool,
        #[command(flatten)]
        journal: JournalArgs,
    },
    /// Approve a step that waits for approval (all waiting steps if STEP is left out)
    Approve {
        /// The run: its id, a unique prefix of it, or `last`
        #[arg(value_name = "RUN")]
        run: String,
        /// The step to approve
        #[arg(value_name = "STEP")]
        step: Option<String>,
        #[command(flatten)]
        journal: JournalArgs,
    },
    /// Check assertions against a workspace now, outside any run (JSON out; exit 0 all passed,
    /// 1 one failed)
    #[command(
        long_about = "Check assertions against a workspace now, outside any run.\n\n\
            ASSERTIONS is a JSON or YAML file (or `-` for stdin) holding one assertion or an \
            array of them, as a plan's `assertions` hold them (docs/reference.md \u{a7}2). They \
            are checked by the same code as in a run, commands in the same sandbox. The answer \
            is JSON on stdout: {\"passed\": bool, \"results\": [{\"type\", \"passed\", \
            \"detail\"}]}. content_changed needs a run and fails here.",
        after_help = "Examples:\n  \
            echo '[{\"type\": \"file_exists\", \"path\": \"README.md\"}]' | pev check -\n  \
            pev check checks.yaml --workspace site\n\n\
            Exit codes: 0 all passed, 1 one failed, 2 bad input."
    )]
    Check {
        /// A JSON or YAML file holding one assertion or an array of them; `-` reads stdin
        #[arg(value_name = "ASSERTIONS")]
        assertions: String,
        /// Step outputs for output_contains and exit_code_eq: a JSON object of step id to output
        #[arg(long, value_name = "FILE")]
        outputs: Option<PathBuf>,
        /// A policy file: its allow_hosts apply to http_status (one inside the workspace only
        /// narrows)
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        #[command(flatten)]
        place: PlaceArgs,
    },
    /// Print the JSON Schema of a plan, a lint result, a policy or a run result
    #[command(
        long_about = "Print the JSON Schema of one of pev's documents.\n\n\
            The schemas are derived from the Rust types pev reads and writes, so they are \
            exactly what pev accepts (`plan`, `policy`) and produces (`lint`, `result`). Use \
            them to validate plans written by a model or to generate client types.",
        after_help = SCHEMA_HELP
    )]
    Schema {
        /// The document whose schema to print
        #[arg(value_enum)]
        kind: SchemaArg,
    },
    /// Show the model providers, key variables and role table pev would use
    #[command(
        long_about = "Show the model providers, key variables and role table pev would use.\n\n\
            Lists the pev.toml files found, which key variables are set (never their values), \
            the providers in use, and for each role (planner, executor, verifier) its provider, \
            model, base URL and price per million tokens, with where each value came from. \
            Then checks that each role's client can be built; --ping also sends each a \
            one-token request.",
        after_help = DOCTOR_HELP
    )]
    Doctor {
        /// The workspace directory whose pev.toml to read [default: the current directory]
        #[arg(long, short = 'w', value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Print the report as one JSON object
        #[arg(long)]
        json: bool,
        /// Send each role a one-token request (uses the network and the keys)
        #[arg(long)]
        ping: bool,
    },
    /// Serve pev's plan tools to an MCP client (Claude Code, Codex, …) over stdio
    #[command(
        long_about = "Serve pev's plan tools to an MCP client over stdio.\n\n\
            Tools: plan_create (create or revise the plan; dropped steps need a reason), \
            plan_show, step_update (done needs evidence; pev runs the step's assertions and \
            refuses the update if one fails), postcondition_verify, todo_write and lint_plan. \
            The state is the journal, so `pev show`, `pev gate` and a restarted server see the \
            same run. The first plan_create snapshots the workspace: what the client changes is \
            measured by pev, not taken from the model's word. Both MCP eras are answered \
            (initialize, and the stateless 2026-07-28 server/discover).",
        after_help = MCP_HELP
    )]
    Mcp {
        #[command(flatten)]
        place: PlaceArgs,
        /// Serve HTTP on this loopback address instead of stdio (POST /mcp; stateless: every
        /// call names its run with run_id)
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
    },
    /// The stop hook for Claude Code and Codex: refuse a stop while the plan is unfinished
    #[command(
        long_about = "The stop hook for Claude Code and Codex.\n\n\
            On Stop, the session's run is re-checked now against the workspace (every done \
            step's assertions, every postcondition, what changed since the plan was made): \
            success lets the client stop; anything else refuses the stop with the reasons, up \
            to --max-refusals times in a row, after which the client is stopped and the run is \
            recorded unfinished. SubagentStop is refused only when verified work was undone. \
            SessionStart pins the session for the MCP server; PostToolUse (--record) journals \
            the client's own tool calls.",
        after_help = GATE_HELP,
        args_conflicts_with_subcommands = true
    )]
    Gate {
        #[command(subcommand)]
        action: Option<GateAction>,
        #[command(flatten)]
        place: PlaceArgs,
        /// Refusals in a row before the client is let go (and the run recorded unfinished)
        #[arg(long, value_name = "N", default_value_t = pev_mcp::gate::DEFAULT_MAX_REFUSALS)]
        max_refusals: u32,
        /// Without a pev plan, the client's own todo list (TodoWrite, TaskCreate/TaskUpdate,
        /// Codex's update_plan in the transcript) must be finished
        #[arg(long)]
        from_transcript: bool,
        /// Without a pev plan (or a checklist), refuse the stop: a plan is owed
        #[arg(long)]
        require_plan: bool,
        /// Record the client's tool call (a PostToolUse hook); never blocks
        #[arg(long)]
        record: bool,
        /// Seconds the check may take before the stop is refused (keep it under the hook's
        /// timeout: a hook that times out lets the stop through)
        #[arg(long, value_name = "SECS", default_value_t = pev_mcp::gate::DEFAULT_DEADLINE.as_secs())]
        deadline: u64,
    },
    /// Wire pev into Claude Code or Codex: the MCP server and the gate's hooks
    #[command(after_help = INTEGRATE_HELP)]
    Integrate {
        /// The client
        #[arg(value_enum)]
        client: crate::args::values::Client,
        /// For every project of the user (~/.claude, ~/.codex) instead of this one
        #[arg(long, conflicts_with = "project")]
        user: bool,
        /// For this project (the default)
        #[arg(long)]
        project: bool,
        /// Claude Code: write a plugin directory (for `claude --plugin-dir DIR`) instead
        #[arg(long, value_name = "DIR")]
        plugin: Option<PathBuf>,
        /// Print the files instead of writing them
        #[arg(long)]
        print: bool,
        /// The project directory [default: the current directory]
        #[arg(long, short = 'w', value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Run a suite of agent scenarios with the finalization gate on and off, and tabulate them
    #[command(
        long_about = "Run a suite of agent scenarios with the finalization gate on and off, and \
            tabulate them.\n\n\
            Each scenario (a goal, a fixture workspace, scripted models, the expected outcome) \
            runs as `pev agent --mode loop --json` on a fresh copy of its fixture, once with the \
            gate and once without. The table shows whether each outcome was right, whether the \
            model's claim of completion slipped through, how many premature final answers the \
            gate caught, and the turns, tokens, cost and wall time; then the totals per gate \
            setting and the gate's overhead on the honest scenarios.",
        after_help = EVAL_HELP
    )]
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Eval {
        #[command(subcommand)]
        action: Option<EvalAction>,
        /// The suite: a directory of scenario directories
        #[arg(value_name = "SUITE_DIR", required = true)]
        suite: Option<PathBuf>,
        /// Print one JSON document (rows, totals, overhead) instead of the table
        #[arg(long)]
        json: bool,
        /// Which gate settings to run loop-mode scenarios with
        #[arg(long, value_enum, default_value_t = values::GateChoice::Both)]
        gate: values::GateChoice,
        /// Keep each run's copy of the fixture (with its journal) instead of deleting it
        #[arg(long)]
        keep: bool,
        /// Run against the models pev.toml and the environment configure (real ones), ignoring
        /// scripts, and keep each run's journal as the scenario's recording
        /// (SCENARIO/recording/*.db); later runs of the suite replay it offline
        #[arg(long)]
        record: bool,
        /// Scenario runs at once (each a `pev agent` process) [default: 1]
        #[arg(long, short = 'j', value_name = "N")]
        jobs: Option<u16>,
        /// Run only shard K of N: the scenarios a stable hash of their name assigns to it
        /// (adding a scenario moves no other); join the shards' --json with `pev eval merge`
        #[arg(long, value_name = "K/N")]
        shard: Option<values::Shard>,
    },
}

/// `pev eval merge`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum EvalAction {
    /// Join the `--json` documents of `pev eval --shard K/N` runs into the table (or, with
    /// --json, the document) of one unsharded run
    Merge {
        /// The shards' `pev eval --json` outputs
        #[arg(value_name = "FILE", required = true)]
        files: Vec<PathBuf>,
        /// Print one JSON document instead of the table
        #[arg(long)]
        json: bool,
        /// Tabulate the files given even when they are not the whole suite (a shard or a
        /// scenario missing is then a warning, not an error)
        #[arg(long)]
        allow_partial: bool,
    },
}

#[derive(Debug, Args)]
pub(crate) struct AgentArgs {
    /// What to achieve, in words
    #[arg(value_name = "GOAL")]
    pub(crate) goal: String,
    /// A policy (as for `pev lint`): the plan must pass it; approve_tools and allow_hosts apply
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// Run on a fresh temporary copy of the workspace (printed), leaving the original untouched
    #[arg(long)]
    pub(crate) scratch: bool,
    /// Show the plan and wait for a yes before anything runs
    #[arg(long)]
    pub(crate) approve_plan: bool,
    /// Spend at most this many US dollars on model calls
    #[arg(long, value_name = "USD")]
    pub(crate) max_usd: Option<f64>,
    /// Use at most this many tokens (input + output) over all model calls
    #[arg(long, value_name = "N")]
    pub(crate) max_tokens: Option<u64>,
    /// Make at most this many model calls
    #[arg(long, value_name = "N")]
    pub(crate) max_turns: Option<u32>,
    /// End the run's model work after this many seconds, calls in flight included
    ///
    /// A call still waiting when the time is up is abandoned (and charged at its worst case); the
    /// run ends with what is recorded, `budget_exhausted`. Without it, each model call has its own
    /// limits (pev.toml `[providers.*]`): 300 s for an answer, 60 s of silence inside a stream,
    /// 10 s to connect, 3 attempts with at most 60 s of waiting between them; a call that waits
    /// is reported on the terminal after 15 s, 30 s, 1 min and then every 2 min.
    #[arg(long, value_name = "SECS")]
    pub(crate) timeout: Option<u64>,
    /// How many times the planner may rewrite the rest of the plan after a step fails
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub(crate) max_replans: u32,
    /// `pev`: planner, executor and judge models around the harness; `loop`: one model in a
    /// tool loop with the plan as tools and a finalization gate
    #[arg(long, value_enum, default_value_t = values::Mode::Pev)]
    pub(crate) mode: values::Mode,
    /// Loop mode: accept the model's first final answer (to measure what the gate catches)
    #[arg(long)]
    pub(crate) no_gate: bool,
    /// Loop mode: final answers the gate refuses before it ends the run as partial
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub(crate) max_refusals: u32,
    /// Loop mode: remind the model of its plan after this many rounds without a plan or todo
    /// update
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub(crate) reminder_every: u32,
    #[command(flatten)]
    pub(crate) common: CommonArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The plan file (JSON or YAML); `-` reads standard input
    #[arg(value_name = "PLAN")]
    pub(crate) plan: String,
    /// A policy (as for `pev lint`); its approve_tools and allow_hosts also apply at run time
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// Run on a fresh temporary copy of the workspace (printed), leaving the original untouched
    #[arg(long)]
    pub(crate) scratch: bool,
    #[command(flatten)]
    pub(crate) common: CommonArgs,
}

/// Options of `pev run` and `pev resume`.
#[derive(Debug, Args)]
pub(crate) struct CommonArgs {
    /// How many steps may run at once [default: one a core; while only file steps run (file
    /// tools, file checks, no hooks, each on paths of its own), 8 or one a core if more]
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) jobs: Option<u16>,
    /// Approve every step that needs approval, without asking
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
    /// Reuse the verified result of a step whose definition, inputs and the workspace files it
    /// reads are unchanged (entries in WORKSPACE/.pev/cache; exec and network steps and steps
    /// that need approval always run)
    #[arg(long)]
    pub(crate) cache: bool,
    #[command(flatten)]
    pub(crate) oracle: OracleArgs,
    #[command(flatten)]
    pub(crate) journal: JournalArgs,
}

pub(crate) use crate::args::values::OracleArgs;

/// Where the journal is, and how to print.
/// `pev gate status`.
#[derive(Debug, Subcommand)]
pub(crate) enum GateAction {
    /// Print the session's run result as JSON; exit 0 success, 3 partial, 1 failed
    Status {
        /// The client's session id (Claude Code's and Codex's `session_id`)
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// The run instead: its id, a unique prefix, or `last`
        #[arg(long, value_name = "RUN", conflicts_with = "session")]
        run: Option<String>,
        #[command(flatten)]
        place: PlaceArgs,
    },
}

/// `--store` of `pev mcp` and `pev gate`: a journal file. They keep their session state beside
/// it, so a URL (a shared Postgres journal included) is refused rather than taken for a path
/// (which would create a `postgres:` directory tree); only its scheme is repeated, never the
/// rest (it may hold a password).
fn store_arg(value: &str) -> Result<PathBuf, String> {
    match pev_store::Location::parse(value) {
        Ok(pev_store::Location::File(path)) => Ok(path),
        Err(why) if value.is_empty() => Err(why),
        _ => Err("`pev mcp` and `pev gate` journal in a SQLite file beside their session \
                  state: give its path (e.g. --store .pev/pev.db), not a URL"
            .to_owned()),
    }
}

/// `--store` of the journal commands: a SQLite file's path or a `postgres://…` URL.
fn journal_arg(value: &str) -> Result<pev_store::Location, String> {
    pev_store::Location::parse(value)
}

/// A `--store` parser whose error is ours alone: clap's own would quote the value, password
/// and all.
#[derive(Debug, Clone, Copy)]
struct StoreArg;

impl clap::builder::TypedValueParser for StoreArg {
    type Value = PathBuf;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<PathBuf, clap::Error> {
        let Some(text) = value.to_str() else { return Ok(PathBuf::from(value)) };
        store_arg(text).map_err(|why| store_error(&why))
    }
}

/// [`journal_arg`] as clap's parser.
#[derive(Debug, Clone, Copy)]
struct JournalArg;

impl clap::builder::TypedValueParser for JournalArg {
    type Value = pev_store::Location;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<pev_store::Location, clap::Error> {
        let Some(text) = value.to_str() else {
            return Ok(pev_store::Location::File(PathBuf::from(value)));
        };
        journal_arg(text).map_err(|why| store_error(&why))
    }
}

fn store_error(why: &str) -> clap::Error {
    clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("--store: {why}\n"))
}

/// Where `pev mcp` and `pev gate` find the workspace and the journal.
#[derive(Debug, Args)]
pub(crate) struct PlaceArgs {
    /// The workspace [default: --workspace, $CLAUDE_PROJECT_DIR, the hook's cwd, the current
    /// directory]
    #[arg(long, short = 'w', value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// The journal file [default: WORKSPACE/.pev/pev.db]
    #[arg(long, value_name = "FILE", value_parser = StoreArg)]
    pub(crate) store: Option<PathBuf>,
}

impl PlaceArgs {
    pub(crate) fn place(self) -> crate::args::values::Place {
        crate::args::values::Place { workspace: self.workspace, store: self.store }
    }
}

#[derive(Debug, Args)]
pub(crate) struct JournalArgs {
    /// The workspace directory [default: the current directory]
    #[arg(long, short = 'w', value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// The journal: a SQLite file, or a Postgres database every machine shares
    /// (`postgres://user@host/db`; the password from PGPASSWORD or ~/.pgpass) [default:
    /// $PEV_STORE, `store` in your ~/.config/pev/pev.toml, WORKSPACE/.pev/pev.db]
    #[arg(long, value_name = "FILE|URL", value_parser = JournalArg)]
    pub(crate) store: Option<pev_store::Location>,
    /// Print JSON instead of text: events as JSON lines (run, agent, resume; a failure ends
    /// with an `error` event), one object per run (runs), the run result (show)
    #[arg(long)]
    pub(crate) json: bool,
    /// When to colour the output
    #[arg(long, value_enum, default_value_t = style::ColorChoice::Auto, value_name = "WHEN")]
    pub(crate) color: style::ColorChoice,
}

impl JournalArgs {
    pub(crate) fn common(self, jobs: Option<u16>, yes: bool) -> values::Common {
        values::Common {
            workspace: self.workspace,
            store: self.store,
            jobs: jobs.map(usize::from),
            yes,
            cache: false,
            oracle: OracleArgs::default(),
            json: self.json,
            color: self.color,
        }
    }
}

impl CommonArgs {
    pub(crate) fn common(self) -> values::Common {
        let cache = self.cache;
        let oracle = self.oracle;
        values::Common { cache, oracle, ..self.journal.common(self.jobs, self.yes) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ShowFormat {
    Text,
    Json,
    /// The run and its child runs as a text recording (JSON lines) `pev replay --store
    /// FILE.jsonl` reads
    Recording,
}

#[derive(Debug, Args)]
pub(crate) struct LintArgs {
    /// The plan file (JSON or YAML); `-` reads standard input
    #[arg(value_name = "PLAN", required_unless_present = "explain")]
    pub(crate) plan: Option<String>,
    /// A policy: YAML (allow_tools, bounds, deny_tokens_regex, rego, …) or a .rego file
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub(crate) format: OutputFormat,
    /// Print the lint result as JSON (the same as `--format json`, and the flag every other
    /// command takes)
    #[arg(long, conflicts_with = "format")]
    pub(crate) json: bool,
    /// Fail when the risk score reaches X (0..1); overrides the policy's fail_risk_threshold
    #[arg(long, value_name = "X", value_parser = parse_fail_risk)]
    pub(crate) fail_risk: Option<f64>,
    /// Explain a lint code (level, severity, meaning, fix) and exit; `all` lists every code
    #[arg(long, value_name = "CODE")]
    pub(crate) explain: Option<String>,
}

/// How `pev lint` prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    /// For people: findings with step, path, line and fix
    Text,
    /// The lint result (`pev schema lint`), and nothing else
    Json,
    /// SARIF 2.1.0, for code-scanning tools
    Sarif,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SchemaArg {
    /// A plan (the input of lint, run and agent)
    Plan,
    /// The result of `pev lint --format json`
    Lint,
    /// A lint policy
    Policy,
    /// The result of a run
    Result,
}

pub(crate) fn parse_fail_risk(text: &str) -> Result<f64, String> {
    let value: f64 = text.trim().parse().map_err(|_| format!("`{text}` is not a number"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is not between 0 and 1"))
    }
}

#[cfg(test)]
mod store_arg_tests {
    use super::{journal_arg, store_arg};

    #[test]
    fn a_store_url_is_refused_without_repeating_its_credentials() {
        for url in ["sqlite:journal.db", "https://example.com/x", "mysql://u:s3cret@h/db"] {
            let err = journal_arg(url).expect_err(url);
            assert!(!err.contains("s3cret") && !err.contains("example"), "{err}");
            assert!(err.contains("SQLite file"), "{err}");
        }
        for url in ["postgresql:///db?host=/tmp", "postgres://pev:s3cret@db.example/pev"] {
            let err = store_arg(url).expect_err(url);
            assert!(!err.contains("s3cret") && !err.contains("example"), "{err}");
            assert!(err.contains("SQLite file"), "{err}");
        }
        assert_eq!(store_arg(".pev/pev.db").unwrap(), std::path::PathBuf::from(".pev/pev.db"));
        assert_eq!(store_arg("odd:name.db").unwrap(), std::path::PathBuf::from("odd:name.db"));
        assert!(store_arg("").is_err());
        assert!(journal_arg("").is_err());
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn a_postgres_url_is_a_shared_journal_shown_without_its_password() {
        let at = journal_arg("postgres://pev:s3cret@db.example:5433/runs").unwrap();
        assert!(at.is_shared());
        assert_eq!(at.to_string(), "postgres://pev@db.example:5433/runs");
    }
}
