//! Issue 13, what a new user tripped on in the first hour: each test fails on the code before
//! the fix.

use serde_json::json;

use super::run_support::{Outcome, Ws};

#[test]
fn resume_of_a_finished_run_says_so_and_changes_nothing() {
    let ws = Ws::new();
    let plan = json!({"goal": "Check a file", "steps": [
        {"id": "check", "tool": "shell.exec", "args": {"command": "test -f missing.txt"}}]});
    let out = ws.run(&plan, &["--yes"]);
    assert_eq!(out.status(), "failed");
    let run_id = out.run_id();
    let events_before = ws.show_json(&run_id);
    let events = event_count(&ws);
    let resumed = ws.pev(&["resume", &run_id]);
    assert_eq!(resumed.code, 1, "the exit code is the run's outcome: {resumed:?}");
    assert!(
        resumed.stderr.contains(&format!("run {run_id} already finished: failed")),
        "{}",
        resumed.stderr
    );
    assert!(!resumed.stderr.contains("resuming run"), "{}", resumed.stderr);
    // Nothing was appended: the journal's result is the same, and --json answers with it.
    assert_eq!(ws.show_json(&run_id), events_before);
    let json: Outcome = ws.pev(&["resume", &run_id, "--json"]).into();
    assert_eq!(json.result()["status"], "failed");
    assert_eq!(event_count(&ws), events, "resume appended to the journal of a finished run");
}

/// How many events the workspace's journal holds (read with Python's sqlite3, not pev).
fn event_count(ws: &Ws) -> u64 {
    let db = ws.path().join(".pev/pev.db");
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import sqlite3; print(sqlite3.connect('{}').execute('select count(*) from events').fetchone()[0])",
            db.display()
        ))
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("a count")
}

#[test]
fn counts_are_singular_when_they_are_one() {
    let ws = Ws::new();
    let plan = json!({"goal": "Write one file", "steps": [
        {"id": "write", "tool": "file.write", "args": {"path": "a.txt", "content": "a\n"},
         "assertions": [{"type": "file_exists", "path": "a.txt"}]}]});
    let out = ws.run(&plan, &["--yes"]);
    let show = ws.pev(&["show", &out.run_id()]);
    assert!(show.stdout.contains("plan (1 step)"), "{}", show.stdout);
    assert!(!show.stdout.contains("1 steps"), "{}", show.stdout);
}
