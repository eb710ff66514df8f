//! The assertions about processes: `output_contains` and `exit_code_eq` on the recorded output
//! of a step, and `command_succeeds`, which runs a check command in the workspace sandbox.
//!
//! `output_contains` searches the text a person would call the output (`stdout`, `stderr`,
//! `content`, `body`) when the output has those fields, and the compact JSON of the output
//! otherwise (a custom tool's result), so that a pattern like `"ok": true` still works there.
//! `command_succeeds` goes through the same `run_command` as `shell.exec`: the workspace as cwd,
//! the scrubbed environment, a timeout that kills the whole process group, capped output.

use std::collections::BTreeMap;
use std::time::Duration;

use pev_tools::{CommandSpec, Program, ToolContext, run_command};
use serde_json::Value;

use crate::CheckEnv;
use crate::assert::{Matcher, Verdict};
use crate::text::{CLIP, clip, human_size, last_lines, line_at};

/// The fields of an output that hold its text, in the order they are searched.
const TEXT_FIELDS: &[&str] = &["stdout", "stderr", "content", "body"];

/// `command_succeeds`' timeout when the assertion gives none.
pub(crate) const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// How many lines of a failed command's output a detail quotes.
const TAIL_LINES: usize = 3;

/// The output of `step`, or why there is none to look at.
fn output_of<'e>(
    env: &'e CheckEnv<'_>,
    step: Option<&str>,
) -> Result<(&'e Value, String), Verdict> {
    let Some(step) = step else {
        return Err(Verdict::fail(
            "no step to look at: a postcondition's assertion must name its `step`",
        ));
    };
    match env.outputs.get(step) {
        Some(output) => Ok((output, step.to_owned())),
        None => Err(Verdict::fail(format!("step '{step}' has no output (it is not done)"))),
    }
}

pub(crate) fn output_contains(
    env: &CheckEnv<'_>,
    step: Option<&str>,
    pattern: &str,
    regex: bool,
) -> Verdict {
    let (output, step) = match output_of(env, step) {
        Ok(found) => found,
        Err(verdict) => return verdict,
    };
    let matcher = match Matcher::new(pattern, regex) {
        Ok(m) => m,
        Err(verdict) => return verdict,
    };
    let what = matcher.describe();
    let fields: Vec<(&str, &str)> = match output {
        Value::String(text) => vec![("text", text.as_str())],
        _ => TEXT_FIELDS
            .iter()
            .filter_map(|name| output.get(name).and_then(Value::as_str).map(|t| (*name, t)))
            .collect(),
    };
    if fields.is_empty() {
        let json = serde_json::to_string(output).unwrap_or_default();
        return match matcher.find(&json) {
            Some(_) => Verdict::pass(format!("{what} found in the JSON output of step '{step}'")),
            None => Verdict::fail(format!(
                "{what} not found in the JSON output of step '{step}' ({}): `{}`",
                human_size(u64::try_from(json.len()).unwrap_or(u64::MAX)),
                clip(&json, CLIP)
            )),
        };
    }
    for (name, text) in &fields {
        if let Some(at) = matcher.find(text) {
            let (line, content) = line_at(text, at);
            return Verdict::pass(format!(
                "{what} found in the {name} of step '{step}' at line {line}: `{}`",
                clip(content.trim(), CLIP)
            ));
        }
    }
    let searched: Vec<String> = fields
        .iter()
        .map(|(name, text)| {
            let size = human_size(u64::try_from(text.len()).unwrap_or(u64::MAX));
            // file.read calls its flag `truncated`; the others `<field>_truncated`.
            let flag = if *name == "content" {
                "truncated".to_owned()
            } else {
                format!("{name}_truncated")
            };
            let cut = output.get(&flag).and_then(Value::as_bool) == Some(true);
            if cut {
                format!("{name} {size}, truncated at the cap")
            } else {
                format!("{name} {size}")
            }
        })
        .collect();
    Verdict::fail(format!(
        "{what} not found in the output of step '{step}' ({})",
        searched.join(", ")
    ))
}

pub(crate) fn exit_code_eq(env: &CheckEnv<'_>, step: Option<&str>, code: i32) -> Verdict {
    let (output, step) = match output_of(env, step) {
        Ok(found) => found,
        Err(verdict) => return verdict,
    };
    match output.get("exit_code") {
        Some(Value::Number(n)) => match n.as_i64() {
            Some(seen) if seen == i64::from(code) => {
                Verdict::pass(format!("step '{step}' exited with code {seen}"))
            }
            Some(seen) => {
                let stderr = output.get("stderr").and_then(Value::as_str).unwrap_or_default();
                let tail = last_lines(stderr, TAIL_LINES);
                let tail =
                    if tail.is_empty() { String::new() } else { format!("; stderr: {tail}") };
                Verdict::fail(format!(
                    "step '{step}' exited with code {seen}; expected {code}{tail}"
                ))
            }
            None => Verdict::fail(format!("step '{step}' has a non-integer exit_code {n}")),
        },
        Some(Value::Null) => {
            let why = if output.get("timed_out").and_then(Value::as_bool) == Some(true) {
                "it timed out and was killed".to_owned()
            } else if let Some(signal) = output.get("signal").and_then(Value::as_i64) {
                format!("it was ended by signal {signal}")
            } else {
                "it did not exit normally".to_owned()
            };
            Verdict::fail(format!("step '{step}' has no exit code: {why}; expected {code}"))
        }
        Some(other) => {
            Verdict::fail(format!("step '{step}' has an exit_code that is not a number: {other}"))
        }
        None => Verdict::fail(format!(
            "the output of step '{step}' has no exit_code (it did not run a process)"
        )),
    }
}

pub(crate) async fn command_succeeds(
    ctx: &ToolContext,
    command: &str,
    timeout_s: Option<f64>,
) -> Verdict {
    let shown = clip(command, 80);
    let timeout = match timeout_s {
        None => DEFAULT_COMMAND_TIMEOUT,
        Some(s) => match Duration::try_from_secs_f64(s) {
            Ok(t) if s > 0.0 => t,
            _ => {
                return Verdict::fail(format!(
                    "invalid timeout_s {s} for `{shown}`: give a positive number of seconds"
                ));
            }
        },
    };
    let spec =
        CommandSpec { program: Program::Shell(command.to_owned()), timeout, env: BTreeMap::new() };
    let out = match run_command(ctx, &spec).await {
        Ok(out) => out,
        Err(e) => return Verdict::fail(format!("cannot run `{shown}`: {}", e.message())),
    };
    if out.succeeded() {
        return Verdict::pass(format!("`{shown}` exited 0 in {} ms", out.duration_ms));
    }
    let ended = if out.timed_out {
        format!("timed out after {} s and was killed", timeout.as_secs_f64())
    } else if let Some(code) = out.exit_code {
        format!("exited with code {code}")
    } else if let Some(signal) = out.signal {
        format!("was ended by signal {signal}")
    } else {
        "did not exit normally".to_owned()
    };
    // Many tools (test runners, linters) report on stdout; quote it when stderr is silent.
    let tail = match (last_lines(&out.stderr, TAIL_LINES), last_lines(&out.stdout, TAIL_LINES)) {
        (err, _) if !err.is_empty() => format!("; stderr: {err}"),
        (_, out) if !out.is_empty() => format!("; stderr empty, stdout: {out}"),
        _ => "; no output".to_owned(),
    };
    Verdict::fail(format!("`{shown}` {ended}{tail}"))
}

#[cfg(test)]
#[path = "assert_proc_tests.rs"]
mod tests;
