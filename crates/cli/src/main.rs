//! `pev`, the command-line front end: argument parsing (clap) and the commands' wiring.
//!
//! This is the only crate that prints. Each command reads what it needs, calls the library
//! crates, renders the result (text for people, JSON or SARIF for tools) and returns an exit
//! code; nothing here panics on any input, and every failure is one message on stderr.

mod args;
mod commands;
mod input;
mod shared;
mod view;

use std::io::{BufWriter, IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use pev_protocol::schema::{SchemaKind, schema_of};

/// With `--features mimalloc`, mimalloc rather than glibc's malloc: on `pev lint` of a
/// 100,000-step plan (some 2.4 million small allocations alive at once) it keeps less per
/// allocation and allocates faster (BENCHMARKS.md, issue 32).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub(crate) use crate::args::OutputFormat;
use crate::args::{Cli, Command, GateAction, SchemaArg, ShowFormat};
use crate::commands::lint::{EXIT_BAD_INPUT, EXIT_OK, Env, LintRequest};

fn main() -> ExitCode {
    // `pev __sandbox …` is pev re-executing itself as the sandbox helper (see pev-sandbox).
    if let Some(code) = pev_sandbox::helper_main() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
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
                format: if args.json { OutputFormat::Json } else { args.format },
                fail_risk: args.fail_risk,
                explain: args.explain,
            };
            // Buffered: a result with 100,000 findings is not 100,000 write calls.
            let mut out = BufWriter::new(stdout.lock());
            let code = crate::commands::lint::run(&req, &env, &mut out, &mut stderr.lock());
            finish(code, out.flush())
        }
        Command::Run(args) => {
            let req = crate::commands::run::RunRequest {
                plan: args.plan,
                policy: args.policy,
                scratch: args.scratch,
                common: args.common.common(),
            };
            let json = req.common.json;
            report_events(crate::commands::run::run(&req, &mut std::io::stderr()), json)
        }
        Command::Agent(args) => {
            let req = crate::commands::agent::AgentRequest {
                goal: args.goal,
                policy: args.policy,
                scratch: args.scratch,
                approve_plan: args.approve_plan,
                budget: crate::commands::agent::BudgetArgs {
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
                replay: None,
            };
            let json = req.common.json;
            report_events(crate::commands::agent::run(&req, &mut std::io::stderr()), json)
        }
        Command::Replay { run, policy, from, goal, common } => {
            let req = crate::commands::replay::ReplayRequest {
                run,
                policy,
                from,
                goal,
                common: common.common(),
            };
            report(crate::commands::replay::replay(&req, &mut std::io::stderr()))
        }
        Command::Resume { run, common } => {
            let common = common.common();
            report_events(
                crate::commands::run::resume(&run, &common, &mut std::io::stderr()),
                common.json,
            )
        }
        Command::Runs { journal } => {
            let mut out = BufWriter::new(stdout.lock());
            let code =
                report(crate::commands::journal::runs(&journal.common(None, false), &mut out));
            finish(code, out.flush())
        }
        Command::Show {
            run,
            format: ShowFormat::Recording,
            journal,
            conversation: false,
            follow: false,
            ..
        } => {
            let mut out = BufWriter::new(stdout.lock());
            let code = report(crate::commands::journal::recording(
                &run,
                &journal.common(None, false),
                &mut out,
            ));
            finish(code, out.flush())
        }
        Command::Show { run, step, conversation: true, full, format, journal, .. } => {
            let mut common = journal.common(None, false);
            common.json |= format == ShowFormat::Json;
            let mut out = BufWriter::new(stdout.lock());
            let code = report(crate::commands::conversation::show(
                &run,
                step.as_deref(),
                full,
                &common,
                &mut out,
            ));
            finish(code, out.flush())
        }
        Command::Show { run, format, journal, follow: true, .. } => {
            let mut common = journal.common(None, false);
            common.json |= format == ShowFormat::Json;
            let mut out = stdout.lock();
            report(crate::commands::follow::follow(&run, &common, &mut out, &mut stderr.lock()))
        }
        Command::Show { run, format, journal, .. } => {
            let mut common = journal.common(None, false);
            common.json |= format == ShowFormat::Json;
            let mut out = BufWriter::new(stdout.lock());
            let code = report(crate::commands::journal::show(&run, &common, &mut out));
            finish(code, out.flush())
        }
        Command::Approve { run, step, journal } => report(crate::commands::journal::approve(
            &run,
            step.as_deref(),
            &journal.common(None, false),
            &mut stdout.lock(),
            &mut stderr.lock(),
        )),
        Command::Check { assertions, outputs, policy, place } => {
            let mut out = BufWriter::new(stdout.lock());
            let req = crate::commands::check::CheckRequest {
                place: place.place(),
                assertions: &assertions,
                outputs: outputs.as_deref(),
                policy: policy.as_deref(),
            };
            let code = report(crate::commands::check::check(&req, &mut out, &mut stderr.lock()));
            finish(code, out.flush())
        }
        Command::Schema { kind } => {
            let mut out = BufWriter::new(stdout.lock());
            let code = print_schema(kind, &mut out);
            finish(code, out.flush())
        }
        Command::Eval {
            action: Some(args::EvalAction::Merge { files, json, allow_partial }),
            ..
        } => {
            let mut out = BufWriter::new(stdout.lock());
            let flags = (json, allow_partial);
            let code = report(crate::commands::eval::scale::merge(
                &files,
                flags,
                &mut out,
                &mut std::io::stderr(),
            ));
            finish(code, out.flush())
        }
        Command::Eval { action: None, suite, json, gate, keep, record, jobs, shard } => match suite
        {
            None => report(Err(crate::shared::exit::Fail(
                crate::shared::exit::EXIT_BAD_INPUT,
                "give a suite directory (pev eval SUITE_DIR) or `pev eval merge FILE...`".into(),
            ))),
            Some(suite) => {
                let jobs = usize::from(jobs.unwrap_or(1).max(1));
                let req = crate::commands::eval::EvalRequest {
                    suite,
                    json,
                    gate,
                    keep,
                    record,
                    jobs,
                    shard,
                };
                let mut out = BufWriter::new(stdout.lock());
                let code =
                    report(crate::commands::eval::run(&req, &mut out, &mut std::io::stderr()));
                finish(code, out.flush())
            }
        },
        Command::Gc { older_than, dry_run, journal } => {
            let common = journal.common(None, false);
            let mut out = BufWriter::new(stdout.lock());
            let code = report(crate::commands::journal::gc(older_than, dry_run, &common, &mut out));
            finish(code, out.flush())
        }
        Command::Export { runs, otlp, capture_content, journal } => {
            let common = journal.common(None, false);
            let mut out = BufWriter::new(stdout.lock());
            let req = crate::shared::telemetry::ExportRequest { runs, url: otlp, capture_content };
            let code = report(crate::shared::telemetry::export(&req, &common, &mut out));
            finish(code, out.flush())
        }
        Command::Report { run, output, journal } => {
            let common = journal.common(None, false);
            let mut out = BufWriter::new(stdout.lock());
            let code = report(crate::commands::journal::report(
                &run,
                &common,
                output.as_deref(),
                &mut out,
            ));
            finish(code, out.flush())
        }
        Command::Mcp { place, http } => report(crate::commands::mcp::mcp(
            &place.place(),
            http.as_deref(),
            &mut std::io::stderr(),
        )),
        Command::Gate { action: Some(GateAction::Status { session, run, place }), .. } => {
            let mut out = BufWriter::new(stdout.lock());
            let code = report(crate::commands::mcp::gate_status(
                &place.place(),
                session.as_deref(),
                run.as_deref(),
                &mut out,
            ));
            finish(code, out.flush())
        }
        Command::Gate {
            action: None,
            place,
            max_refusals,
            from_transcript,
            require_plan,
            record,
            deadline,
        } => {
            let options = pev_mcp::gate::GateOptions {
                max_refusals,
                from_transcript,
                require_plan,
                deadline: std::time::Duration::from_secs(deadline.max(1)),
            };
            let mut out = BufWriter::new(stdout.lock());
            let code =
                report(crate::commands::mcp::gate(&place.place(), &options, record, &mut out));
            finish(code, out.flush())
        }
        Command::Integrate { client, user, project: _, plugin, print, workspace } => {
            let req =
                crate::commands::mcp::IntegrateRequest { client, user, plugin, print, workspace };
            let mut out = BufWriter::new(stdout.lock());
            let code =
                report(crate::commands::mcp::integrate(&req, &mut out, &mut std::io::stderr()));
            finish(code, out.flush())
        }
        Command::Doctor { workspace, json, ping } => {
            let req = crate::commands::doctor::DoctorRequest { workspace, json, ping };
            let mut out = BufWriter::new(stdout.lock());
            let code = report(crate::commands::doctor::run(&req, &mut out));
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
/// [`report`] for the commands whose `--json` output is a stream of events: a failure is also
/// one last line on stdout, `{"event": "error", "exit_code": N, "message": "…"}`, so a
/// machine reading stdout gets an answer in every case.
fn report_events(outcome: Result<u8, crate::shared::exit::Fail>, json: bool) -> u8 {
    if json && let Err(crate::shared::exit::Fail(code, message)) = &outcome {
        let line = serde_json::json!({"event": "error", "exit_code": code, "message": message});
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
    report(outcome)
}

fn report(outcome: Result<u8, crate::shared::exit::Fail>) -> u8 {
    match outcome {
        Ok(code) => code,
        Err(crate::shared::exit::Fail(code, message)) => {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "pev: error: {message}");
            code
        }
    }
}
