//! `pev agent` killed mid-run (SIGKILL) and `pev resume` (issues 5 and 16): the done step is not
//! run again, and the interrupted instruction step's attempt is continued, not started over: its
//! executor's journaled answer is not asked (or paid for) again, the command that was running
//! when the kill came runs again, and the run ends `success`.
//!
//! Fixture: `tests/fixtures/agent/crash/`. Its first executor script makes step 2
//! (`record-build`) run `sleep 3` through `shell.exec`; the test kills `pev` while that runs.
//! A script is read from its first turn by every process, so before resuming the test swaps in
//! `resume.toml` as `pev.toml`, whose executor script (`resume-executor.json`) holds only the
//! turns after the `sleep`, and whose first turn `expect`s the prompt of `record-build` with the
//! `sleep`'s result as the last message: a resume that ran `patch-css` again, or that started
//! the attempt over (asking the model its first turn again), would fail that turn.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::agent_support::{
    GREEN_GOAL, Scenario, assert_no_dark_green, assert_one_run_finished, assert_stream_shape,
    names, pev_clean, started_attempts,
};
use super::run_support::{Outcome, pev_path};
use super::support::run;

/// Runs `pev agent` on the crash fixture with `extra` arguments, kills it (SIGKILL) while step 2
/// runs its `sleep`, and returns the events it had printed.
fn agent_then_kill(s: &Scenario, extra: &[&str]) -> Vec<Value> {
    let goal = format!("{GREEN_GOAL} and record the build");
    let ws = s.arg();
    let mut args = vec!["agent", goal.as_str(), "--workspace", ws.as_str(), "--json"];
    args.extend_from_slice(extra);
    let mut child = Command::new(pev_path())
        .args(&args)
        .env_clear()
        .env("PATH", super::support::path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pev agent");
    let stdout = child.stdout.take().expect("stdout");
    let mut before: Vec<Value> = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let event: Value = serde_json::from_str(&line.expect("read line")).expect("JSON line");
        let sleeping = event["event"] == "tool.called" && event["tool"] == "shell.exec";
        before.push(event);
        if sleeping {
            break;
        }
    }
    wait_until_started(&s.path());
    child.kill().expect("SIGKILL pev");
    let status = child.wait().expect("wait for pev");
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "{status:?}");
    let last = before.last().cloned().unwrap_or_default();
    assert_eq!(
        (last["step"].as_str(), last["tool"].as_str()),
        (Some("record-build"), Some("shell.exec"))
    );
    before
}

/// Waits until the command in flight has started (its start mark, issue 31, says so), so that
/// the kill comes while it runs, not between its journaled intent and its spawn (a command that
/// never started is simply run on resume, which is another case).
fn wait_until_started(ws: &std::path::Path) {
    let started = || {
        std::fs::read_dir(ws.join(".pev/inflight"))
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|run| std::fs::read_dir(run.path()).into_iter().flatten().flatten())
            .any(|m| std::fs::read_to_string(m.path()).is_ok_and(|v| v == "started"))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !started() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Swaps in `resume.toml` and runs `pev resume last --workspace WS --json`.
fn resume(s: &Scenario) -> Outcome {
    std::fs::copy(s.path().join("resume.toml"), s.path().join("pev.toml")).expect("swap pev.toml");
    let ws = s.arg();
    Outcome::from(run(&mut pev_clean(), &["resume", "last", "--workspace", ws.as_str(), "--json"]))
}

#[test]
fn a_run_killed_mid_step_resumes_without_running_the_done_step_again() {
    let s = Scenario::new("crash");
    let before = agent_then_kill(&s, &[]);

    // What the killed process had done: patch-css finished, record-build was in its command.
    let kinds: Vec<&str> = before.iter().map(|e| e["event"].as_str().unwrap_or("?")).collect();
    let done = before
        .iter()
        .find(|e| e["event"] == "step.finished" && e["step"] == "patch-css")
        .unwrap_or_else(|| panic!("patch-css did not finish before the kill: {kinds:?}"));
    assert_eq!(done["status"], "done");
    assert!(!kinds.contains(&"run.finished"), "{kinds:?}");
    let patched = s.read("style.css");
    assert!(patched.contains("background: #013220;"), "{patched}");
    let last_seq = before.last().and_then(|e| e["seq"].as_u64()).expect("seq");

    let out = resume(&s);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.status(), "success");
    assert_eq!(out.codes(), Vec::<String>::new());
    assert_eq!(out.run_id(), before[0]["run_id"].as_str().expect("run_id"));
    // The journal's seq goes on from the events of the killed process. The last event it printed
    // (`tool.called`, emitted after the call's intent was made durable) may still have been
    // queued, not written, when SIGKILL landed (crates/engine/src/recorder.rs), so the journal
    // ends at it or just before it; everything before it was flushed with that intent.
    let first_seq = out.events[0]["seq"].as_u64().expect("seq");
    assert!(first_seq == last_seq || first_seq == last_seq + 1, "{first_seq} after {last_seq}");
    assert_stream_shape(&out, first_seq, true);
    assert_one_run_finished(&out);
    assert_no_dark_green(&out);

    // The done step did not run again; the interrupted attempt was continued under its number:
    // the command in flight at the kill ran again, then the write the model asked for next.
    assert!(started_attempts(&out, "patch-css").is_empty(), "{:?}", names(&out));
    assert_eq!(started_attempts(&out, "record-build"), [1]);
    let tools: Vec<(&str, &str)> = out
        .of("tool.called")
        .iter()
        .map(|e| (e["step"].as_str().unwrap_or("?"), e["tool"].as_str().unwrap_or("?")))
        .collect();
    assert_eq!(tools, [("record-build", "shell.exec"), ("record-build", "file.write")]);
    // The run's model calls: the killed session's 4 (planner, 3 executor turns) and the resumed
    // session's 3 (2 executor turns, and the judge, asked because the command ran twice); the
    // turn answered from the journal is not counted (or paid) twice.
    assert_eq!(out.result()["usage"]["llm_calls"], 7, "{}", out.result()["usage"]);
    let warnings = out.result()["warnings"].to_string();
    assert!(warnings.contains("runs again"), "the command ran twice, and says so: {warnings}");
    assert_eq!(out.step_status("patch-css"), "done");
    assert_eq!(out.step("patch-css")["attempts"], 1);
    assert_eq!(out.step_status("record-build"), "done");

    // The patch was applied exactly once, and step 2's file is there.
    assert_eq!(s.read("style.css"), patched);
    assert_eq!(
        patched,
        Scenario::original("crash", "style.css")
            .replace("background: #ffffff;", "background: #013220;")
    );
    assert_eq!(s.read("build.txt"), "built: dark green\n");
    let postconditions = &out.result()["postconditions"];
    assert_eq!(postconditions[0]["satisfied"], true, "{postconditions}");
}

// Regression (fixed: usage is journaled as a `usage` event before each tool call and after each
// attempt): after a crash, `pev resume` of an agent run forgot what the killed session spent. Since
// 8b94102 the ceilings are journaled in the run's options and a resume gets them less the spend
// in `record.result.usage`, but a session killed by SIGKILL never wrote a result, so the resume
// starts with the whole budget again, and its result's `usage` counts only its own model calls
// (its `tool_calls` do count the whole run's, from the journal). Ran: `pev agent GOAL
// --max-turns 5 --json` on the crash fixture, killed after 4 model calls (planner, 3 executor
// turns), then `pev resume last --json`: it ended `success` with `usage` {"llm_calls": 2,
// "cost_usd": 0.0063, "tool_calls": 3}. Expected: the resume may make only the 1 call left (the
// executor's write), is refused the next, and ends `partial` with `budget_exhausted`, the result
// counting the run's 5 model calls (which needs each model call's usage journaled as it happens,
// not only in the final result).
#[test]
fn a_resumed_agent_run_keeps_its_ceilings_and_counts_the_whole_runs_usage() {
    let s = Scenario::new("crash");
    let before = agent_then_kill(&s, &["--max-turns", "5"]);
    assert!(before.iter().any(|e| e["event"] == "step.finished" && e["step"] == "patch-css"));
    let out = resume(&s);
    let usage = &out.result()["usage"];
    assert_eq!(usage["llm_calls"], 5, "the run's model calls: {usage}");
    assert_eq!(out.code, 3, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.status(), "partial");
    assert!(out.codes().contains(&"budget_exhausted".to_owned()), "{:?}", out.codes());
}

/// A continued attempt (issue 16): the killed session's executor had written `notes.txt` and
/// was running a command. On resume the model's journaled turns are answered from the journal,
/// the write it had finished is answered with its journaled result (not made again), the
/// command in flight runs again, and the model's next turn is asked for real. The write stays
/// the step's evidence (its assertion and the run's file changes hold it, once).
#[test]
fn a_continued_attempt_does_not_make_its_finished_calls_again() {
    let s = Scenario::new("crash-write");
    let goal = "Take notes and record the build";
    let ws = s.arg();
    let mut child = Command::new(pev_path())
        .args(["agent", goal, "--workspace", ws.as_str(), "--json"])
        .env_clear()
        .env("PATH", super::support::path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pev agent");
    let stdout = child.stdout.take().expect("stdout");
    for line in BufReader::new(stdout).lines() {
        let event: Value = serde_json::from_str(&line.expect("line")).expect("JSON");
        if event["event"] == "tool.called" && event["tool"] == "shell.exec" {
            break;
        }
    }
    wait_until_started(&s.path());
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    assert_eq!(s.read("notes.txt"), "notes: taken\n", "the first session's write");

    let out = resume(&s);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.status(), "success", "{:?}", out.codes());
    assert_eq!(started_attempts(&out, "record-build"), [1]);
    let tools: Vec<String> = out
        .of("tool.called")
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["tool"].as_str().unwrap_or("?"),
                e["arguments"]["path"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        tools,
        ["shell.exec ", "file.write build.txt"],
        "the finished write was not made again"
    );
    let warnings = out.result()["warnings"].to_string();
    assert!(
        warnings.contains("1 tool call(s) it had finished were answered from the journal"),
        "{warnings}"
    );
    // The restored write is the step's evidence and the run's change, counted once.
    let changed: Vec<&str> = out.result()["file_mutations"]
        .as_array()
        .expect("file_mutations")
        .iter()
        .filter_map(|m| m["path"].as_str())
        .collect();
    assert_eq!(changed.iter().filter(|p| **p == "notes.txt").count(), 1, "{changed:?}");
    assert!(changed.contains(&"build.txt"), "{changed:?}");
    assert_eq!(out.result()["goal_actions_executed"], true);
    assert_eq!(s.read("build.txt"), "built\n");
    // 3 calls in the killed session (planner, 2 executor turns), 3 after (2 executor turns and
    // the judge, asked because the command ran twice; the note about the journal's answers is
    // not what it is asked about): the two turns answered from the journal are not counted.
    assert_eq!(out.result()["usage"]["llm_calls"], 6, "{}", out.result()["usage"]);
}
