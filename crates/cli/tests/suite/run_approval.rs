//! Human approval in its three modes: `--yes` approves everything; with no TTY the run stops
//! `awaiting_approval` (exit 4) until `pev approve RUN [STEP]` and `pev resume RUN`; on a TTY
//! the person is asked (driven here through a pseudo-terminal made by util-linux `script`).

use std::path::Path;

use serde_json::{Value, json};

use super::run_support::{Ws, at_step, pev_path, run_level};
use super::support::{Run, run};

/// A write that needs approval, and a read that depends on it.
fn approval_plan() -> Value {
    json!({"goal": "Write the release notes", "steps": [
        {"id": "write", "tool": "file.write", "requires_approval": true,
         "parameters": {"path": "notes.txt", "content": "v1\n"},
         "assertions": [{"type": "file_exists", "path": "notes.txt"}]},
        {"id": "check", "tool": "file.read", "depends_on": ["write"],
         "parameters": {"path": "notes.txt"},
         "assertions": [{"type": "output_contains", "pattern": "v1"}]}
    ]})
}

#[test]
fn yes_approves_every_step_without_asking() {
    let ws = Ws::new();
    let out = ws.run(&approval_plan(), &["--yes"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.status(), "success");
    assert_eq!(ws.read("notes.txt"), "v1\n");
    let granted = out.of("approval.granted");
    assert_eq!(granted.len(), 1, "{:?}", out.events);
    assert_eq!(granted[0]["step"], "write");
    assert_eq!(granted[0]["by"], "--yes");
    let granted_seq = granted[0]["seq"].as_u64().expect("seq");
    let started = out.first("tool.called", "write").expect("tool.called");
    assert!(started["seq"].as_u64().expect("seq") > granted_seq, "approved before it ran");
}

#[test]
fn without_a_tty_the_run_waits_then_approve_and_resume_finish_it() {
    let ws = Ws::new();
    let out = ws.run(&approval_plan(), &[]);
    assert_eq!(out.code, 4, "{out:?}");
    assert_eq!(out.status(), "awaiting_approval");
    assert!(out.reasons().contains(&at_step("approval_pending", "write")), "{:?}", out.reasons());
    assert!(out.reasons().contains(&run_level("steps_not_run")), "{:?}", out.reasons());
    assert_eq!(out.step_status("write"), "blocked");
    assert_eq!(out.step_status("check"), "pending");
    assert!(out.first("tool.called", "write").is_none());
    assert!(!ws.path().join("notes.txt").exists(), "nothing written before approval");
    let requested = out.of("approval.requested");
    assert_eq!(requested.len(), 1);
    assert_eq!(requested[0]["tool"], "file.write");
    let run_id = out.run_id();
    let pending = &out.result()["reasons"].as_array().expect("reasons").clone();
    let pending = pending.iter().find(|r| r["code"] == "approval_pending").expect("reason");
    let message = pending["message"].as_str().expect("message");
    assert!(message.contains("pev approve") && message.contains("pev resume"), "{message}");

    // Resuming without an approval waits again, and still writes nothing.
    let again = ws.resume(&run_id, &[]);
    assert_eq!(again.code, 4, "{again:?}");
    assert!(!ws.path().join("notes.txt").exists());

    let runs = ws.pev(&["runs", "--json"]);
    assert!(runs.stdout.contains("\"status\":\"awaiting_approval\""), "{}", runs.stdout);

    let prefix = &run_id[..run_id.len() - 2];
    let approved = ws.pev(&["approve", prefix]);
    assert_eq!(approved.code, 0, "{approved:?}");
    assert!(approved.stderr.contains("approved step `write`"), "{}", approved.stderr);
    assert!(approved.stderr.contains(&format!("pev resume {run_id}")), "{}", approved.stderr);

    let resumed = ws.resume(&run_id, &[]);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    assert_eq!(resumed.status(), "success");
    assert_eq!(resumed.run_id(), run_id);
    assert_eq!(ws.read("notes.txt"), "v1\n");
    assert_eq!(resumed.step_status("check"), "done");
    let shown = ws.show_json(&run_id);
    assert_eq!(shown["status"], "success");

    // Nothing waits any more.
    let approved = ws.pev(&["approve", &run_id]);
    assert_eq!(approved.code, 0, "{approved:?}");
    assert!(approved.stderr.contains("no step"), "{}", approved.stderr);
}

#[test]
fn approve_names_one_step_and_refuses_an_unknown_one() {
    let ws = Ws::new();
    let plan = json!({"goal": "Write two files", "steps": [
        {"id": "one", "tool": "file.write", "requires_approval": true,
         "parameters": {"path": "one.txt", "content": "1"},
         "assertions": [{"type": "file_exists", "path": "one.txt"}]},
        {"id": "two", "tool": "file.write", "requires_approval": true,
         "parameters": {"path": "two.txt", "content": "2"},
         "assertions": [{"type": "file_exists", "path": "two.txt"}]}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 4, "{out:?}");
    let run_id = out.run_id();

    let bad = ws.pev(&["approve", &run_id, "three"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("`three`"), "{}", bad.stderr);
    let waiting = bad.stderr.split("steps waiting:").nth(1).unwrap_or_default().to_owned();
    assert!(waiting.contains("one") && waiting.contains("two"), "{}", bad.stderr);

    assert_eq!(ws.pev(&["approve", &run_id, "one"]).code, 0);
    let resumed = ws.resume(&run_id, &[]);
    assert_eq!(resumed.code, 4, "`two` still waits: {resumed:?}");
    assert_eq!(resumed.step_status("one"), "done");
    assert_eq!(resumed.reasons(), vec![at_step("approval_pending", "two")]);
    assert!(ws.path().join("one.txt").exists());
    assert!(!ws.path().join("two.txt").exists());

    assert_eq!(ws.pev(&["approve", "last", "two"]).code, 0);
    let resumed = ws.resume("last", &[]);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    assert_eq!(ws.read("two.txt"), "2");
}

#[test]
fn a_policy_approve_tools_entry_makes_a_step_wait() {
    let ws = Ws::new();
    let policy = ws.root.path().join("policy.yaml");
    std::fs::write(&policy, "approve_tools: [\"shell.*\"]\n").expect("policy");
    let plan = json!({"goal": "Clean the build", "steps": [
        {"id": "read", "tool": "file.list", "parameters": {"path": "."}},
        {"id": "clean", "tool": "shell.exec", "parameters": {"argv": ["touch", "cleaned"]},
         "assertions": [{"type": "file_exists", "path": "cleaned"}]}
    ]});
    let out = ws.run(&plan, &["--policy", policy.to_str().expect("utf-8")]);
    assert_eq!(out.code, 4, "{out:?}");
    assert_eq!(out.step_status("read"), "done", "steps without approval still run");
    assert_eq!(out.step_status("clean"), "blocked");
    assert!(!ws.path().join("cleaned").exists());
    let out = ws.resume(&out.run_id(), &["--yes"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(ws.path().join("cleaned").exists());
}

/// `pev run PLAN --workspace WS` on a pseudo-terminal (stdin and stderr are a TTY), with
/// `answer` typed in. None when `script` is not installed.
fn run_on_a_tty(ws: &Ws, plan: &Path, answer: &str) -> Option<Run> {
    let script = Path::new("/usr/bin/script");
    if !script.exists() {
        eprintln!("util-linux `script` is missing: the TTY approval test cannot run here");
        return None;
    }
    let command = format!(
        "'{}' run '{}' --workspace '{}' --color never",
        pev_path().display(),
        plan.display(),
        ws.path().display()
    );
    let mut cmd = assert_cmd::Command::new(script);
    cmd.env_remove("NO_COLOR").write_stdin(answer.to_owned());
    Some(run(&mut cmd, &["-qec", &command, "/dev/null"]))
}

#[test]
fn on_a_tty_the_person_is_asked_and_yes_runs_the_step() {
    let ws = Ws::new();
    let plan = ws.plan_file(&approval_plan());
    let Some(r) = run_on_a_tty(&ws, &plan, "y\n") else { return };
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("approve step write?"), "the prompt: {}", r.stdout);
    assert_eq!(ws.read("notes.txt"), "v1\n");
    let shown = ws.show_json("last");
    assert_eq!(shown["status"], "success");
}

#[test]
fn on_a_tty_no_refuses_the_step_and_fails_the_run() {
    let ws = Ws::new();
    let plan = ws.plan_file(&approval_plan());
    let Some(r) = run_on_a_tty(&ws, &plan, "n\n") else { return };
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("refused"), "{}", r.stdout);
    assert!(!ws.path().join("notes.txt").exists(), "a refused step does not run");
    let shown = ws.show_json("last");
    assert_eq!(shown["status"], "failed");
    let steps = shown["steps"].as_array().expect("steps");
    assert_eq!(steps[0]["status"], "failed");
    assert_eq!(steps[1]["status"], "pending");
}
