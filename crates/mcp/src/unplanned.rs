//! A session that changed files without a pev plan does not end silently.
//!
//! `pev integrate` wires `pev gate --record` to the client's edits and `pev gate` to its Stop.
//! When a session edits files and never calls `plan_create`, nothing checks its work; the
//! record hook notes each such edit (per session, in the gate's directory), and at the first
//! Stop the gate refuses once, saying so and what to do: make a plan (and the work is then
//! checked), or stop again, which is let through with a message that the work went unchecked.
//! `pev gate --require-plan` refuses every plan-less Stop instead (under the refusal cap).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::gate::Reply;
use crate::snapshot::sha256_hex;

/// The client tools that change files (Claude Code's and Codex's names).
const EDITS: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch", "write_file"];

/// How many of the edits are named in the refusal.
const SHOWN: usize = 5;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Noted {
    edits: u64,
    files: Vec<String>,
    /// The Stop hook refused once already.
    warned: bool,
}

fn path(dir: &Path, session: Option<&str>) -> PathBuf {
    dir.join(format!("unplanned-{}.json", sha256_hex(session.unwrap_or("").as_bytes())))
}

fn read(path: &Path) -> Option<Noted> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn write(path: &Path, noted: &Noted) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    if let Ok(text) = serde_json::to_string(noted)
        && std::fs::write(&tmp, text).is_ok()
    {
        let _ = std::fs::rename(&tmp, path);
    }
}

/// Notes `tool` (with its `summary`, as `tool_summary` made it) when it changes files.
pub fn note(dir: &Path, session: Option<&str>, tool: &str, summary: &Value) {
    if !EDITS.contains(&tool) || summary.get("no_op") == Some(&Value::Bool(true)) {
        return;
    }
    let path = path(dir, session);
    let mut noted = read(&path).unwrap_or_default();
    noted.edits = noted.edits.saturating_add(1);
    let file = summary.get("path").and_then(Value::as_str).unwrap_or(tool).to_owned();
    if !noted.files.contains(&file) {
        noted.files.push(file);
    }
    write(&path, &noted);
}

/// The Stop hook's answer for a session without a plan: `None` when it changed nothing.
pub fn at_stop(dir: &Path, session: Option<&str>) -> Option<Reply> {
    let path = path(dir, session);
    let mut noted = read(&path)?;
    let shown: Vec<&str> = noted.files.iter().take(SHOWN).map(String::as_str).collect();
    let more = noted.files.len().saturating_sub(shown.len());
    let files =
        if more > 0 { format!("{} and {more} more", shown.join(", ")) } else { shown.join(", ") };
    if noted.warned {
        let _ = std::fs::remove_file(&path);
        let message = format!(
            "pev: this session changed files ({files}) without a pev plan: nothing checked that \
             the work is done"
        );
        return Some(Reply::json(json!({"systemMessage": message})));
    }
    noted.warned = true;
    write(&path, &noted);
    let reason = format!(
        "pev: this session changed files ({files}; {} edits) without a pev plan, so nothing has \
         checked that the work is done. Call plan_create (pev's MCP tools) with the task's steps \
         and assertions and record each step with step_update, so pev can check it; or, if this \
         change needs no check, stop again and pev lets the session end, noting it unchecked.",
        noted.edits
    );
    Some(Reply::json(json!({"decision": "block", "reason": reason})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_without_a_plan_is_refused_once_then_let_through_with_a_note() {
        let dir = tempfile::tempdir().expect("tmp");
        let d = dir.path();
        assert!(at_stop(d, Some("s1")).is_none(), "nothing changed, nothing said");
        note(d, Some("s1"), "Read", &json!({"path": "a.py"}));
        note(d, Some("s1"), "Write", &json!({"path": "a.py", "no_op": true}));
        assert!(at_stop(d, Some("s1")).is_none(), "reads and no-op writes change nothing");
        note(d, Some("s1"), "Edit", &json!({"path": "src/a.py"}));
        note(d, Some("s1"), "Write", &json!({"path": "src/b.py"}));
        // Another session's edits are its own.
        assert!(at_stop(d, Some("s2")).is_none());
        let first = at_stop(d, Some("s1")).expect("refused").stdout.expect("json");
        assert_eq!(first["decision"], "block");
        let reason = first["reason"].as_str().expect("reason");
        assert!(reason.contains("src/a.py, src/b.py; 2 edits") && reason.contains("plan_create"));
        let second = at_stop(d, Some("s1")).expect("noted").stdout.expect("json");
        assert!(second.get("decision").is_none(), "{second}");
        assert!(second["systemMessage"].as_str().expect("message").contains("nothing checked"));
        assert!(at_stop(d, Some("s1")).is_none(), "said once");
    }
}
