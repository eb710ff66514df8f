//! `pev check`: assertions (CONTRACTS.md §2) checked now against a workspace, outside any run, by
//! the same checkers a run uses (`pev_verify::check`) and in the same sandbox as `pev mcp` and
//! `pev gate` build from the workspace's `pev.toml`. For scripts, CI steps and the Python
//! package's `pev.verify`.
//!
//! The input is one assertion or an array of them, as JSON or YAML, from a file or `-` (stdin);
//! the `assert` key is read as `type`, as plans allow. The answer is always JSON on stdout:
//! `{"passed": bool, "results": [{"type", "passed", "detail"}, …]}`. Exit 0 when all passed, 1
//! when one failed, 2 on bad input (the message names the assertion's index and what is wrong).
//! `content_changed` has no "before" outside a run and fails saying so; `output_contains` and
//! `exit_code_eq` read the steps' outputs from `--outputs` (a JSON object of step id to output).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;

use pev_protocol::Assertion;
use pev_protocol::assertion::AssertionResult;
use pev_protocol::parse::{Format, parse_document};
use serde_json::{Value, json};

use crate::args::values::Place;
use crate::input;
use crate::shared::exit::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, Fail};
use crate::shared::policy_source;

/// Exit code when an assertion failed.
const EXIT_SOME_FAILED: u8 = 1;
/// The largest assertion document read.
const MAX_INPUT: u64 = 16 * 1024 * 1024;

/// What `pev check` is asked.
pub(crate) struct CheckRequest<'a> {
    pub place: Place,
    /// A file, or `-` for stdin.
    pub assertions: &'a str,
    pub outputs: Option<&'a Path>,
    pub policy: Option<&'a Path>,
}

pub(crate) fn check(
    req: &CheckRequest<'_>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, Fail> {
    let text = read(req.assertions)?;
    let name = if req.assertions == "-" { "standard input" } else { req.assertions };
    let format = Format::from_path(req.assertions).unwrap_or_else(|| Format::sniff(&text));
    let assertions = parse(&text, format, name)?;
    let outputs: HashMap<String, Value> = match req.outputs {
        None => HashMap::new(),
        Some(path) => {
            let text = read(&path.to_string_lossy())?;
            serde_json::from_str(&text).map_err(|e| {
                Fail::input(format!(
                    "{}: not a JSON object of step id to output: {e}",
                    path.display()
                ))
            })?
        }
    };
    let (ctx, _db) = req.place.open(None).map_err(|m| Fail(EXIT_BAD_INPUT, m))?;
    let mut ctx = (*ctx).clone();
    if req.policy.is_some() {
        // Only `allow_hosts` bears on assertions (`http_status`); a policy file inside the
        // workspace can only narrow it, as for `pev run`.
        let policy = policy_source::load(req.policy, ctx.workspace.root(), None, err)?;
        ctx.policy.allow_hosts.clone_from(&policy.policy.allow_hosts);
    }
    let before = HashMap::new();
    let env = pev_verify::CheckEnv { ctx: &ctx, step: None, outputs: &outputs, before: &before };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Fail(EXIT_FAILED, format!("cannot start the runtime: {e}")))?;
    let results: Vec<AssertionResult> = runtime.block_on(async {
        let mut results = Vec::with_capacity(assertions.len());
        for assertion in &assertions {
            results.push(match assertion {
                Assertion::ContentChanged { .. } => AssertionResult {
                    kind: assertion.kind().to_owned(),
                    passed: false,
                    detail: "content_changed needs a run: outside one there is no earlier hash"
                        .to_owned(),
                },
                _ => pev_verify::check(assertion, &env).await,
            });
        }
        results
    });
    let passed = results.iter().all(|r| r.passed);
    let text = serde_json::to_string_pretty(&json!({"passed": passed, "results": results}))
        .map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    writeln!(out, "{text}").map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    Ok(if passed { EXIT_OK } else { EXIT_SOME_FAILED })
}

/// The text of `source` (`-`: stdin), bounded.
fn read(source: &str) -> Result<String, Fail> {
    let mut bytes = Vec::new();
    let result = if source == "-" {
        std::io::stdin().lock().take(MAX_INPUT + 1).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(source).and_then(|f| f.take(MAX_INPUT + 1).read_to_end(&mut bytes))
    };
    let name = if source == "-" { "standard input" } else { source };
    result.map_err(|e| Fail::input(format!("cannot read {name}: {}", input::describe(&e))))?;
    if bytes.len() as u64 > MAX_INPUT {
        return Err(Fail::input(format!("{name} is over {MAX_INPUT} bytes")));
    }
    String::from_utf8(bytes).map_err(|_| Fail::input(format!("{name} is not UTF-8 text")))
}

/// One assertion or an array of them, in `format` (JSON or YAML); `source` names the input.
fn parse(text: &str, format: Format, source: &str) -> Result<Vec<Assertion>, Fail> {
    if text.trim().is_empty() {
        return Err(Fail::input(format!("{source}: no assertion (the input is empty)")));
    }
    let document =
        parse_document(text, format).map_err(|e| Fail::input(format!("{source}: {e}")))?;
    let items = match document {
        Value::Array(items) => items,
        one => vec![one],
    };
    if items.is_empty() {
        return Err(Fail::input(format!("{source}: no assertion (an empty list)")));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let item = match item {
                Value::Object(mut map) if !map.contains_key("type") => {
                    if let Some(kind) = map.remove("assert") {
                        map.insert("type".to_owned(), kind);
                    }
                    Value::Object(map)
                }
                other => other,
            };
            serde_json::from_value::<Assertion>(item)
                .map_err(|e| Fail::input(format!("{source}: assertion {i}: {e}")))
        })
        .collect()
}
