//! `pev lint`: read a plan and a policy, lint, render, and choose the exit code.
//!
//! Exit codes (CONTRACTS.md §5): 0 when the plan passes or has only warnings, 1 when it has an
//! error (or its risk reaches the threshold), 2 when the input is bad: the plan or the policy
//! cannot be read or parsed, or the plan does not match the schema. Bad input gets one message
//! on stderr naming the file; a schema mismatch is a lint result of `SCHEMA_INVALID` findings,
//! rendered in the chosen format like any other.

use std::io::{self, Write};
use std::path::PathBuf;

use pev_lint::{CompiledPolicy, LintOptions, lint, schema_failure};
use pev_protocol::parse::{Format, ParseError, parse_plan};
use pev_protocol::{LintResult, LintStatus, Plan};

use crate::args::OutputFormat;
use crate::input::{self, Source};
use pev_lint::locate::Locations;
use pev_lint::locate_yaml;

use crate::view::{explain, lint_json, sarif, text};

/// Exit code: the plan passes (or has only warnings).
pub const EXIT_OK: u8 = 0;
/// Exit code: the plan has errors.
pub const EXIT_ERROR: u8 = 1;
/// Exit code: bad input or usage.
pub const EXIT_BAD_INPUT: u8 = 2;

/// The parsed `pev lint` arguments.
pub struct LintRequest {
    pub plan: Option<String>,
    pub policy: Option<PathBuf>,
    pub format: OutputFormat,
    pub fail_risk: Option<f64>,
    pub explain: Option<String>,
}

/// The environment the command runs in, read once by `main` (tests set it on the child).
pub struct Env {
    pub max_input_bytes: u64,
    pub color: bool,
}

/// Runs `pev lint`; returns the exit code. Messages for people go to `err`.
/// Plans up to this size keep their text for `--format json`, so findings carry their lines.
const JSON_LINES_MAX_TEXT: usize = 8 * 1024 * 1024;

pub fn run(req: &LintRequest, env: &Env, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    match run_inner(req, env, out, err) {
        Ok(code) => code,
        Err(Failure::Message(message)) => {
            let _ = writeln!(err, "pev: error: {message}");
            EXIT_BAD_INPUT
        }
        // A closed pipe (`pev lint … | head`) is not the linter's failure.
        Err(Failure::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => EXIT_OK,
        Err(Failure::Io(e)) => {
            let _ = writeln!(err, "pev: error: cannot write the output: {}", input::describe(&e));
            EXIT_BAD_INPUT
        }
    }
}

enum Failure {
    Message(String),
    Io(io::Error),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

fn run_inner(
    req: &LintRequest,
    env: &Env,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, Failure> {
    if let Some(name) = &req.explain {
        let codes = explain::codes(name).map_err(|e| Failure::Message(e.to_string()))?;
        explain::write(&codes, out)?;
        return Ok(EXIT_OK);
    }
    let Some(plan_arg) = req.plan.as_deref() else {
        return Err(Failure::Message("a PLAN file is required (or `-` for stdin)".into()));
    };
    let mut source =
        input::read(plan_arg, env.max_input_bytes).map_err(|e| Failure::Message(e.to_string()))?;

    let policy = match &req.policy {
        Some(path) => CompiledPolicy::load(path).map_err(|e| Failure::Message(e.to_string()))?,
        None => CompiledPolicy::default(),
    };
    for note in &policy.notes {
        writeln!(err, "pev: note: {note}")?;
    }

    let format = match (source.is_stdin, Format::from_path(&source.name)) {
        (false, Some(format)) => format,
        _ => Format::sniff(&source.text),
    };
    let options = LintOptions { fail_risk: req.fail_risk };
    let threshold = req.fail_risk.unwrap_or(policy.policy.fail_risk_threshold);
    let parsed = parse_plan(&source.text, format);
    if req.format == OutputFormat::Json && source.text.len() > JSON_LINES_MAX_TEXT {
        // The findings' lines need the text; past this size the JSON report goes without them:
        // the plan owns copies of what it needs, and a 28 MB plan's text is a tenth of the peak
        // during lint. Freed on a thread of its own: unmapping it took the main thread some
        // 5 ms the lint need not wait for (the thread is not joined; the process may end first).
        let text = std::mem::take(&mut source.text);
        let _ = std::thread::Builder::new().name("pev-free".into()).spawn(move || drop(text));
    }
    let (result, parsed, exit) = match parsed {
        Ok(parsed) => {
            let result = lint(&parsed, &policy, options);
            let exit = if result.status == LintStatus::Error { EXIT_ERROR } else { EXIT_OK };
            (result, Some(parsed), exit)
        }
        Err(ParseError::Syntax { format, line, column, message }) => {
            let at = if line == 0 {
                source.name.clone()
            } else {
                format!("{}:{line}:{column}", source.name)
            };
            return Err(Failure::Message(format!("{at}: invalid {format}: {message}")));
        }
        Err(ParseError::Schema(issues)) => {
            (schema_failure(&issues, &policy, options), None, EXIT_BAD_INPUT)
        }
    };
    let mut result = result;
    if req.format == OutputFormat::Json && !source.text.is_empty() {
        // Each finding gets the line and column the text and SARIF reports show.
        let pointers = result.errors.iter().chain(&result.warnings).map(|f| f.path.clone());
        let pointers: Vec<String> = pointers.collect();
        let locations = match format {
            Format::Json => Locations::json(&source.text, pointers.iter().map(String::as_str)),
            Format::Yaml => {
                locate_yaml::locations(&source.text, pointers.iter().map(String::as_str))
            }
        };
        for finding in result.errors.iter_mut().chain(result.warnings.iter_mut()) {
            if let Some(at) = locations.get(&finding.path) {
                finding.line = Some(at.line);
                finding.column = Some(at.column);
            }
        }
    }
    let plan = parsed.as_ref().map(|p| &p.plan);
    let rendering = Rendering { source: &source, format, result: &result, plan, threshold };
    rendering.write(req.format, env.color, out)?;
    // The process ends right after this; freeing a 100,000-step plan and its findings one
    // allocation at a time took a fifth of the run (BENCHMARKS.md), for memory the OS reclaims.
    std::mem::forget(result);
    std::mem::forget(parsed);
    std::mem::forget(source);
    Ok(exit)
}

/// Writes `result` as `pev lint` prints it in text: for `pev run`, which lints a plan first and
/// refuses to run one with errors.
pub fn write_text_report(
    source: &Source,
    format: Format,
    (result, plan, threshold): (&LintResult, &Plan, f64),
    color: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    let rendering = Rendering { source, format, result, plan: Some(plan), threshold };
    rendering.write(OutputFormat::Text, color, out)
}

/// A lint result and what its renderers need to know about the plan it came from.
struct Rendering<'a> {
    source: &'a Source,
    format: Format,
    result: &'a LintResult,
    plan: Option<&'a Plan>,
    threshold: f64,
}

impl Rendering<'_> {
    /// Positions of the findings' JSON pointers in the plan's text.
    fn locations(&self) -> Locations {
        let pointers =
            self.result.errors.iter().chain(&self.result.warnings).map(|f| f.path.as_str());
        match self.format {
            Format::Json => Locations::json(&self.source.text, pointers),
            Format::Yaml => locate_yaml::locations(&self.source.text, pointers),
        }
    }

    /// Writes the result in the chosen format.
    fn write(&self, output: OutputFormat, color: bool, out: &mut dyn Write) -> io::Result<()> {
        match output {
            OutputFormat::Json => {
                lint_json::write(self.result, out)?;
                writeln!(out)
            }
            OutputFormat::Sarif => {
                let locations = self.locations();
                let artifact = sarif::Artifact {
                    path: (!self.source.is_stdin).then_some(self.source.name.as_str()),
                    locations: &locations,
                };
                sarif::write(self.result, &artifact, out)
            }
            OutputFormat::Text => {
                let locations = self.locations();
                let report = text::Report {
                    name: &self.source.name,
                    result: self.result,
                    plan: self.plan,
                    locations: &locations,
                    threshold: self.threshold,
                    color,
                };
                report.write(out)
            }
        }
    }
}
