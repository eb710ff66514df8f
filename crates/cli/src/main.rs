//! `pev`, the command-line front end: argument parsing (clap) and the commands' wiring.
//!
//! This is the only crate that prints. Each command reads what it needs, calls the library
//! crates, renders the result (text for people, JSON or SARIF for tools) and returns an exit
//! code; nothing here panics on any input, and every failure is one message on stderr.

mod explain;
mod input;
mod lint_cmd;
mod locate;
mod locate_yaml;
mod sarif;
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
        Command::Schema { kind } => {
            let mut out = BufWriter::new(stdout.lock());
            let code = print_schema(kind, &mut out);
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
