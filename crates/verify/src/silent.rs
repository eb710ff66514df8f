//! The silent-failure scan: tool calls that returned normally but whose output says something
//! went wrong. These become warnings on the run, not reasons: the step's own assertions decide
//! whether it failed, and a warning is a pointer for the person reading the result.
//!
//! The rules are kept narrow on purpose, because a warning on every quiet command teaches people
//! to ignore warnings:
//! - a process that exited 0 while its stderr shows an error (`error:`, `No such file or
//!   directory`, `Permission denied`, a Python traceback, `command not found`): the first such
//!   line is quoted, and how many more there were;
//! - an HTTP exchange that returned normally with status 400 or more;
//! - a tool that returned nothing at all (`null`, `{}`, `[]`, `""`). Empty *content* is fine:
//!   an empty file read, a listing with no entries, a 204, a command that prints nothing.

use serde_json::Value;

use crate::text::{CLIP, clip};

/// Case-sensitive markers of a failure on stderr (`error:` is matched case-insensitively).
const STDERR_MARKERS: &[&str] = &[
    "No such file or directory",
    "Permission denied",
    "Traceback (most recent call last)",
    "command not found",
];

/// Warnings for `tool`'s `output` (see the module comment for the rules).
pub fn silent_failures(tool: &str, output: &Value) -> Vec<String> {
    let mut warnings = Vec::new();
    if is_empty(output) {
        warnings.push(format!("{tool} returned an empty result ({output}): nothing to check"));
        return warnings;
    }
    let exit_code = output.get("exit_code").and_then(Value::as_i64);
    let stderr = output.get("stderr").and_then(Value::as_str);
    // Any tool shaped like a process (an MCP shell, say) gets the same scan as shell.exec.
    if let (Some(0), Some(stderr)) = (exit_code, stderr) {
        warnings.extend(scan_stderr(tool, stderr));
    }
    if tool == "http.request"
        && let Some(status) = output.get("status").and_then(Value::as_u64).filter(|s| *s >= 400)
    {
        let body = output.get("body").and_then(Value::as_str).unwrap_or_default();
        let first = body.lines().map(str::trim).find(|l| !l.is_empty());
        warnings.push(match first {
            Some(line) => format!(
                "http.request returned status {status} without failing the step; the \
                 body begins: `{}`",
                clip(line, CLIP)
            ),
            None => format!(
                "http.request returned status {status} without failing the step (empty body)"
            ),
        });
    }
    warnings
}

/// The warning for a stderr that shows an error although the exit code is 0.
fn scan_stderr(tool: &str, stderr: &str) -> Option<String> {
    let mut hits = stderr.lines().enumerate().filter(|(_, line)| is_error_line(line));
    let (number, first) = hits.next()?;
    let more = hits.count();
    let more = match more {
        0 => String::new(),
        1 => " (and 1 more line like it)".to_owned(),
        n => format!(" (and {n} more lines like it)"),
    };
    Some(format!(
        "{tool} exited 0, but stderr line {} says: `{}`{more}",
        number.saturating_add(1),
        clip(first.trim(), CLIP)
    ))
}

fn is_error_line(line: &str) -> bool {
    STDERR_MARKERS.iter().any(|m| line.contains(m)) || contains_ignore_case(line, "error:")
}

/// ASCII case-insensitive substring search, without allocating a lower-case copy.
fn contains_ignore_case(haystack: &str, needle: &str) -> bool {
    let needle = needle.as_bytes();
    haystack.as_bytes().windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

/// `null`, `{}`, `[]` or `""`.
fn is_empty(output: &Value) -> bool {
    match output {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

#[cfg(test)]
#[path = "silent_tests.rs"]
mod tests;
