//! `pev`, the command-line front end: argument parsing (clap) and the commands' wiring.
//!
//! This is the only crate that prints. Each command reads what it needs, calls the library
//! crates, renders the result (text for people, JSON or SARIF for tools) and returns an exit
//! code; nothing here panics on any input, and every failure is one message on stderr.

mod agent_cmd;
mod approve_tty;
mod doctor_cmd;
mod eval_cmd;
mod explain;
mod input;
mod journal_cmd;
mod lint_cmd;
mod locate;
mod locate_yaml;
mod run_cmd;
mod run_summary;
mod run_view;
mod sarif;
mod scratch;
mod show_view;
mod style;
mod text;

use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use pev_protocol::schema::{SchemaKind, schema_of};

use crate::lint_cmd::{EXIT_BAD_INPUT, EXIT_OK, Env, LintRequest};

const EXIT_CODES: &str = "\
Exit codes:
  0  the plan passes, or has only warnings
  1  the plan has errors (or its risk score reaches the threshold)
  2  bad input or usage: a plan or policy that cannot be read or parsed, a plan that does not
     match the schema, an unknown option";

const LINT_HELP: &str = "\
Examples:
  pev lint plan.json
  pev lint examples/lint/refund.yaml --policy examples/lint/policy.yaml
  cat plan.json | pev lint - --format json
  pev lint plan.yaml --format sarif > pev.sarif
  pev lint --explain SQL_INJECTION
  pev lint --explain all

Exit codes:
  0  pass, or only warnings
  1  errors (or the risk score reaches the threshold)
  2  bad input: unreadable file, invalid JSON or YAML (with line and column), a plan that does
     not match the schema (reported as SCHEMA_INVALID findings), a bad policy";

const RUN_HELP: &str = "\
Examples:
  pev run examples/dark-green/plan.json --workspace examples/dark-green/site --scratch
  pev run plan.yaml --policy policy.yaml --jobs 8
  pev run plan.json --json | jq -c 'select(.event == \"step.finished\")'
  pev run plan.json --yes            # approve every step that needs approval
  pev run plan.json --cache          # reuse the verified results of unchanged steps

Exit codes:
  0  success: every step done, every assertion and postcondition verified
  1  failed: a step failed (or nothing was done), or the journal failed
  2  bad input: unreadable or invalid plan, lint errors, a step without a tool, bad workspace
  3  partial: some work was done, but the evidence is incomplete (see the reasons)
  4  awaiting approval: `pev approve RUN` then `pev resume RUN`";

const AGENT_HELP: &str = "\
Examples:
  pev agent \"Change the site background to dark green\" --workspace site --max-usd 0.50
  pev agent \"Add a CHANGELOG entry for 1.2\" --approve-plan --max-replans 1
  pev agent \"Fix the failing test\" --json > events.jsonl

Offline: point the roles at scripted models in pev.toml (provider = \"script:FILE\"), see
examples/agent/. Exit codes are those of `pev run`.";

const RESUME_HELP: &str = "\
Examples:
  pev resume 20261121-142233-3fa9c1
  pev resume last --yes
  pev resume 2026112 --workspace site      # a unique prefix is enough

Steps the journal shows done are not run again. A write or patch that was under way when the
run stopped is checked by content hash: applied already (recorded, not applied twice), not
applied (run now), or changed by someone else (the step fails). Other interrupted calls run
again. Exit codes are those of `pev run`.";

const DOCTOR_HELP: &str = "\
Examples:
  pev doctor
  pev doctor --workspace site --json
  pev doctor --ping                  # sends each role a one-token request

Configuration: WORKSPACE/pev.toml, then $XDG_CONFIG_HOME/pev/pev.toml (or
~/.config/pev/pev.toml), under the environment: PEV_PROVIDER, PEV_<ROLE>_PROVIDER,
PEV_<ROLE>_MODEL (ROLE: PLANNER, EXECUTOR, VERIFIER), ANTHROPIC_BASE_URL, OPENAI_BASE_URL.
Keys come from ANTHROPIC_API_KEY, OPENAI_API_KEY or the variable api_key_env names; their
values are never printed.

Exit codes:
  0  every role can build its client (and answered, with --ping)
  1  some role cannot (the reason is shown per role)
  2  a pev.toml cannot be read or parsed (file:line:column), a bad environment variable or
     workspace";

const EVAL_HELP: &str = "\
Examples:
  pev eval evals
  pev eval evals --gate on --json | jq '.totals'
  pev eval evals --keep          # keep each run's workspace copy (pev show last -w COPY)

A suite is a directory of scenarios: SCENARIO/scenario.toml (goal, mode, expect), its fixture
SCENARIO/workspace/ and its scripted models (see evals/README.md).

Exit codes:
  0  every gate-on run ended as expected
  1  some gate-on run did not, or a run left no result
  2  a bad suite (the file and field are named)";

const SCHEMA_HELP: &str = "\
Examples:
  pev schema plan > plan.schema.json
  pev schema lint | jq '.properties | keys'";

/// pev: a Plan-Execute-Verify harness for LLM agents.
#[derive(Debug, Parser)]
#[command(
    name = "pev",
    version,
    about = "pev: a Plan-Execute-Verify harness for LLM agents",
    long_about = "pev: a Plan-Execute-Verify harness for LLM agents.\n\n\
        A plan is a goal and a list of steps (JSON or YAML, see `pev schema plan`). \
        `pev lint` checks a plan before anything runs: its structure, its references between \
        steps, the tools it calls against a policy, secrets, injection and data leaving through \
        external tools.",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
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
        /// Output format (`json` prints the run result, `pev schema result`)
        #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
        format: ShowFormat,
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
    Eval {
        /// The suite: a directory of scenario directories
        #[arg(value_name = "SUITE_DIR")]
        suite: PathBuf,
        /// Print one JSON document (rows, totals, overhead) instead of the table
        #[arg(long)]
        json: bool,
        /// Which gate settings to run loop-mode scenarios with
        #[arg(long, value_enum, default_value_t = eval_cmd::GateChoice::Both)]
        gate: eval_cmd::GateChoice,
        /// Keep each run's copy of the fixture (with its journal) instead of deleting it
        #[arg(long)]
        keep: bool,
    },
}

#[derive(Debug, Args)]
struct AgentArgs {
    /// What to achieve, in words
    #[arg(value_name = "GOAL")]
    goal: String,
    /// A policy (as for `pev lint`): the plan must pass it; approve_tools and allow_hosts apply
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Run on a fresh temporary copy of the workspace (printed), leaving the original untouched
    #[arg(long)]
    scratch: bool,
    /// Show the plan and wait for a yes before anything runs
    #[arg(long)]
    approve_plan: bool,
    /// Spend at most this many US dollars on model calls
    #[arg(long, value_name = "USD")]
    max_usd: Option<f64>,
    /// Use at most this many tokens (input + output) over all model calls
    #[arg(long, value_name = "N")]
    max_tokens: Option<u64>,
    /// Make at most this many model calls
    #[arg(long, value_name = "N")]
    max_turns: Option<u32>,
    /// Start no model call after this many seconds
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
    /// How many times the planner may rewrite the rest of the plan after a step fails
    #[arg(long, value_name = "N", default_value_t = 2)]
    max_replans: u32,
    /// `pev`: planner, executor and judge models around the harness; `loop`: one model in a
    /// tool loop with the plan as tools and a finalization gate
    #[arg(long, value_enum, default_value_t = agent_cmd::Mode::Pev)]
    mode: agent_cmd::Mode,
    /// Loop mode: accept the model's first final answer (to measure what the gate catches)
    #[arg(long)]
    no_gate: bool,
    /// Loop mode: final answers the gate refuses before it ends the run as partial
    #[arg(long, value_name = "N", default_value_t = 3)]
    max_refusals: u32,
    /// Loop mode: remind the model of its plan after this many rounds without a plan or todo
    /// update
    #[arg(long, value_name = "N", default_value_t = 10)]
    reminder_every: u32,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The plan file (JSON or YAML); `-` reads standard input
    #[arg(value_name = "PLAN")]
    plan: String,
    /// A policy (as for `pev lint`); its approve_tools and allow_hosts also apply at run time
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Run on a fresh temporary copy of the workspace (printed), leaving the original untouched
    #[arg(long)]
    scratch: bool,
    #[command(flatten)]
    common: CommonArgs,
}

/// Options of `pev run` and `pev resume`.
#[derive(Debug, Args)]
struct CommonArgs {
    /// How many steps may run at once [default: the number of cores]
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    jobs: Option<u16>,
    /// Approve every step that needs approval, without asking
    #[arg(long, short = 'y')]
    yes: bool,
    /// Reuse the verified result of a step whose definition, inputs and the workspace files it
    /// reads are unchanged (entries in WORKSPACE/.pev/cache; exec and network steps and steps
    /// that need approval always run)
    #[arg(long)]
    cache: bool,
    #[command(flatten)]
    journal: JournalArgs,
}

/// Where the journal is, and how to print.
#[derive(Debug, Args)]
struct JournalArgs {
    /// The workspace directory [default: the current directory]
    #[arg(long, short = 'w', value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// The journal file [default: WORKSPACE/.pev/pev.db]
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
    /// Print JSON: events as JSON lines (run, resume), one object per run (runs), the result (show)
    #[arg(long)]
    json: bool,
    /// When to colour the output
    #[arg(long, value_enum, default_value_t = style::ColorChoice::Auto, value_name = "WHEN")]
    color: style::ColorChoice,
}

impl JournalArgs {
    fn common(self, jobs: Option<u16>, yes: bool) -> run_cmd::Common {
        run_cmd::Common {
            workspace: self.workspace,
            store: self.store,
            jobs: jobs.map(usize::from),
            yes,
            cache: false,
            json: self.json,
            color: self.color,
        }
    }
}

impl CommonArgs {
    fn common(self) -> run_cmd::Common {
        let cache = self.cache;
        run_cmd::Common { cache, ..self.journal.common(self.jobs, self.yes) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ShowFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
struct LintArgs {
    /// The plan file (JSON or YAML); `-` reads standard input
    #[arg(value_name = "PLAN", required_unless_present = "explain")]
    plan: Option<String>,
    /// A policy: YAML (allow_tools, bounds, deny_tokens_regex, rego, …) or a .rego file
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
    /// Fail when the risk score reaches X (0..1); overrides the policy's fail_risk_threshold
    #[arg(long, value_name = "X", value_parser = parse_fail_risk)]
    fail_risk: Option<f64>,
    /// Explain a lint code (level, severity, meaning, fix) and exit; `all` lists every code
    #[arg(long, value_name = "CODE")]
    explain: Option<String>,
}

/// How `pev lint` prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people: findings with step, path, line and fix
    Text,
    /// The lint result (`pev schema lint`), and nothing else
    Json,
    /// SARIF 2.1.0, for code-scanning tools
    Sarif,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SchemaArg {
    /// A plan (the input of lint, run and agent)
    Plan,
    /// The result of `pev lint --format json`
    Lint,
    /// A lint policy
    Policy,
    /// The result of a run
    Result,
}

fn parse_fail_risk(text: &str) -> Result<f64, String> {
    let value: f64 = text.trim().parse().map_err(|_| format!("`{text}` is not a number"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is not between 0 and 1"))
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help and version on stdout (exit 0) and usage errors on stderr.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_BAD_INPUT } else { EXIT_OK });
        }
    };
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let code = match cli.command {
        Command::Lint(args) => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
            let env = Env {
                max_input_bytes: input::max_bytes(
                    std::env::var("PEV_MAX_INPUT_BYTES").ok().as_deref(),
                ),
                color: stdout.is_terminal() && !no_color,
            };
            let req = LintRequest {
                plan: args.plan,
                policy: args.policy,
                format: args.format,
                fail_risk: args.fail_risk,
                explain: args.explain,
            };
            // Buffered: a result with 100,000 findings is not 100,000 write calls.
            let mut out = BufWriter::new(stdout.lock());
            let code = lint_cmd::run(&req, &env, &mut out, &mut stderr.lock());
            finish(code, out.flush())
        }
        Command::Run(args) => {
            let req = run_cmd::RunRequest {
                plan: args.plan,
                policy: args.policy,
                scratch: args.scratch,
                common: args.common.common(),
            };
            report(run_cmd::run(&req, &mut std::io::stderr()))
        }
        Command::Agent(args) => {
            let req = agent_cmd::AgentRequest {
                goal: args.goal,
                policy: args.policy,
                scratch: args.scratch,
                approve_plan: args.approve_plan,
                budget: agent_cmd::BudgetArgs {
                    max_usd: args.max_usd,
                    max_tokens: args.max_tokens,
                    max_turns: args.max_turns,
                    timeout_secs: args.timeout,
                },
                max_replans: args.max_replans,
                mode: args.mode,
                gate: !args.no_gate,
                max_refusals: args.max_refusals,
                reminder_every: args.reminder_every,
                common: args.common.common(),
            };
            report(agent_cmd::run(&req, &mut std::io::stderr()))
        }
        Command::Resume { run, common } => {
            report(run_cmd::resume(&run, &common.common(), &mut std::io::stderr()))
        }
        Command::Runs { journal } => {
            let mut out = BufWriter::new(stdout.lock());
            let code = report(journal_cmd::runs(&journal.common(None, false), &mut out));
            finish(code, out.flush())
        }
        Command::Show { run, format, journal } => {
            let mut common = journal.common(None, false);
            common.json |= format == ShowFormat::Json;
            let mut out = BufWriter::new(stdout.lock());
            let code = report(journal_cmd::show(&run, &common, &mut out));
            finish(code, out.flush())
        }
        Command::Approve { run, step, journal } => report(journal_cmd::approve(
            &run,
            step.as_deref(),
            &journal.common(None, false),
            &mut stdout.lock(),
            &mut stderr.lock(),
        )),
        Command::Schema { kind } => {
            let mut out = BufWriter::new(stdout.lock());
            let code = print_schema(kind, &mut out);
            finish(code, out.flush())
        }
        Command::Eval { suite, json, gate, keep } => {
            let req = eval_cmd::EvalRequest { suite, json, gate, keep };
            let mut out = BufWriter::new(stdout.lock());
            let code = report(eval_cmd::run(&req, &mut out, &mut std::io::stderr()));
            finish(code, out.flush())
        }
        Command::Doctor { workspace, json, ping } => {
            let req = doctor_cmd::DoctorRequest { workspace, json, ping };
            let mut out = BufWriter::new(stdout.lock());
            let code = report(doctor_cmd::run(&req, &mut out));
            finish(code, out.flush())
        }
    };
    ExitCode::from(code)
}

/// The exit code once the buffered output is flushed: a closed pipe is fine, another write
/// error is reported (the output is incomplete).
fn finish(code: u8, flushed: std::io::Result<()>) -> u8 {
    match flushed {
        Ok(()) => code,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => code,
        Err(e) => {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "pev: error: cannot write the output: {}", input::describe(&e));
            EXIT_BAD_INPUT
        }
    }
}

fn print_schema(kind: SchemaArg, out: &mut dyn Write) -> u8 {
    let kind = match kind {
        SchemaArg::Plan => SchemaKind::Plan,
        SchemaArg::Lint => SchemaKind::Lint,
        SchemaArg::Policy => SchemaKind::Policy,
        SchemaArg::Result => SchemaKind::Result,
    };
    let written = serde_json::to_string_pretty(&schema_of(kind))
        .map_err(std::io::Error::other)
        .and_then(|text| writeln!(out, "{text}"));
    match written {
        Ok(()) => EXIT_OK,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => EXIT_OK,
        Err(_) => EXIT_BAD_INPUT,
    }
}

/// The exit code of a command, with its failure (if any) printed on stderr.
fn report(outcome: Result<u8, run_cmd::Fail>) -> u8 {
    match outcome {
        Ok(code) => code,
        Err(run_cmd::Fail(code, message)) => {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "pev: error: {message}");
            code
        }
    }
}
