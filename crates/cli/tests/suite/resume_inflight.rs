//! A command in flight when the run was killed (issue 31): it may have run, and nothing outside
//! can tell what it did. A step marked `repeatable: false` (a push, a migration) is therefore not
//! run again by a resume, not even with `--yes`: the run stops awaiting a person's approval of
//! that step, and runs it once more only after `pev approve`. An approval from before the kill
//! does not count.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::agent_support::pev_clean;
use super::run_support::pev_path;
use super::support::run;

/// The step's command: it logs a push, and the first time it runs it then sleeps, long enough
/// for the test to kill `pev` while it runs; a run after the kill (the one a resume makes) does
/// not sleep again, so the tests do not wait out three seconds more for nothing.
const PUSH: &str = r#"echo push >> pushes.log; [ "$(wc -l < pushes.log)" -gt 1 ] || sleep 3"#;

/// Starts `pev run PLAN` in `ws` and kills it once the command has started (its first line is in
/// `pushes.log`).
fn run_then_kill(ws: &std::path::Path, plan: &std::path::Path) {
    let mut child = Command::new(pev_path())
        .args(["run", &plan.display().to_string(), "--workspace", &ws.display().to_string()])
        .args(["--json", "--yes"])
        .env_clear()
        .env("PATH", super::support::path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pev run");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    for line in lines.by_ref() {
        let event: Value = serde_json::from_str(&line.expect("a line")).expect("JSON");
        if event["event"] == "tool.called" && event["tool"] == "shell.exec" {
            break;
        }
    }
    // Keep reading: a closed stdout is a reason of its own for pev to stop, not a crash.
    let drain = std::thread::spawn(move || lines.for_each(drop));
    // Wait for the line, not the file: `>>` creates the file before `echo` writes to it, and a
    // kill between the two would leave no push to count.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while pushes(ws) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL pev");
    child.wait().expect("wait for pev");
    drain.join().expect("the reader");
    assert_eq!(pushes(ws), 1, "the command ran once before the kill");
}

fn pushes(ws: &std::path::Path) -> usize {
    std::fs::read_to_string(ws.join("pushes.log")).map_or(0, |s| s.lines().count())
}

#[test]
fn a_command_that_may_have_run_is_not_run_again_without_approval() {
    held_until_approved(false);
}

/// The same step also needing approval, approved by `--yes` before the kill: that approval is
/// of the first run of the command, not of running it again.
#[test]
fn an_approval_from_before_the_kill_does_not_release_the_hold() {
    held_until_approved(true);
}

fn held_until_approved(requires_approval: bool) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let plan = json!({"goal": "Push the release", "steps": [
        {"id": "push", "tool": "shell.exec", "repeatable": false,
         "requires_approval": requires_approval,
         "parameters": {"command": PUSH},
         "assertions": [{"type": "file_contains", "path": "pushes.log", "pattern": "push"}]}]});
    let plan_path = dir.path().join("plan.json");
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    run_then_kill(&ws, &plan_path);

    let ws_arg = ws.display().to_string();
    for _ in 0..2 {
        let out = run(&mut pev_clean(), &["resume", "last", "--workspace", &ws_arg, "--yes"]);
        assert_eq!(out.code, 4, "awaiting approval, --yes notwithstanding: {out:?}");
        assert!(out.stdout.contains("awaiting") || out.stderr.contains("approv"), "{out:?}");
        assert_eq!(pushes(&ws), 1, "not run again without a person's yes");
    }
    let show = run(&mut pev_clean(), &["show", "last", "--workspace", &ws_arg, "--format", "json"]);
    assert_eq!(show.code, 0, "{show:?}");

    let approve = run(&mut pev_clean(), &["approve", "last", "push", "--workspace", &ws_arg]);
    assert_eq!(approve.code, 0, "{approve:?}");
    let out = run(&mut pev_clean(), &["resume", "last", "--workspace", &ws_arg]);
    assert_eq!(out.code, 0, "approved, it runs once more and the run ends success: {out:?}");
    assert_eq!(pushes(&ws), 2);
}

#[test]
fn a_step_without_the_mark_runs_its_command_again_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let plan = json!({"goal": "Build", "steps": [
        {"id": "build", "tool": "shell.exec",
         "parameters": {"command": PUSH}}]});
    let plan_path = dir.path().join("plan.json");
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    run_then_kill(&ws, &plan_path);
    let ws_arg = ws.display().to_string();
    let out = run(&mut pev_clean(), &["resume", "last", "--workspace", &ws_arg]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(pushes(&ws), 2, "run again");
    assert!(out.stderr.contains("runs again") || out.stdout.contains("runs again"), "{out:?}");
}

/// The mark of an exec call's start: "started" once its process spawned (the kill above came
/// after). A call whose mark still says "intent" (the kill came between its journaled intent and
/// the spawn) never started, so a resume runs it, repeatable or not, without asking.
#[test]
fn a_command_that_never_started_runs_on_resume_without_approval() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let plan = json!({"goal": "Push the release", "steps": [
        {"id": "push", "tool": "shell.exec", "repeatable": false,
         "parameters": {"command": PUSH}}]});
    let plan_path = dir.path().join("plan.json");
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    run_then_kill(&ws, &plan_path);
    let marks: Vec<std::path::PathBuf> = std::fs::read_dir(ws.join(".pev/inflight"))
        .unwrap()
        .flatten()
        .flat_map(|run| std::fs::read_dir(run.path()).unwrap().flatten().map(|m| m.path()))
        .collect();
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert_eq!(std::fs::read_to_string(&marks[0]).unwrap(), "started");
    // As if the kill had come before the spawn.
    std::fs::write(&marks[0], "intent").unwrap();
    std::fs::write(ws.join("pushes.log"), "").unwrap();
    let ws_arg = ws.display().to_string();
    let out = run(&mut pev_clean(), &["resume", "last", "--workspace", &ws_arg]);
    assert_eq!(out.code, 0, "it never started: it runs, no approval asked: {out:?}");
    assert_eq!(pushes(&ws), 1);
    assert!(!out.stderr.contains("cannot be checked from outside"), "no warning: {out:?}");
}
