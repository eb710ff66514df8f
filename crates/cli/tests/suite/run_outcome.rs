//! The outcome rule (CONTRACTS.md §4) through `pev run`: each reason code the run produces, the
//! status it leads to, and the exit code (0 success, 1 failed, 3 partial; 4 awaiting approval is
//! in run_approval.rs), plus Ctrl-C (`cancelled`) and resuming after it.

use std::io::{BufRead, BufReader, Read};

use serde_json::json;

use super::run_support::{Outcome, Ws, at_step, interrupt, parse_events, run_level, spawn_pev};

#[test]
fn success_needs_every_step_done_every_assertion_and_postcondition_verified() {
    let ws = Ws::new();
    let plan = json!({"goal": "Write the greeting", "steps": [
        {"id": "write", "tool": "file.write",
         "parameters": {"path": "greeting.txt", "content": "hi\n"},
         "assertions": [{"type": "file_contains", "path": "greeting.txt", "pattern": "hi"}]}
    ], "postconditions": [
        {"description": "The greeting is there",
         "assertions": [{"type": "file_exists", "path": "greeting.txt"}]}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.status(), "success");
    assert_eq!(out.reasons(), vec![]);
    let post = &out.result()["postconditions"][0];
    assert_eq!(post["satisfied"], true);
    assert!(post["evidence"].as_str().expect("evidence").contains("greeting.txt"), "{post}");
    let verify = out.of("verify.finished");
    assert_eq!(verify.len(), 1);
    assert_eq!(verify[0]["status"], "success");
}

#[test]
fn a_failed_step_aborts_its_dependents_step_failed_and_steps_not_run_exit_1() {
    let ws = Ws::new();
    let plan = json!({"goal": "Copy the config", "steps": [
        {"id": "read", "tool": "file.read", "parameters": {"path": "config.toml"}},
        {"id": "copy", "tool": "file.write", "depends_on": ["read"],
         "parameters": {"path": "copy.toml", "content": "${read.result.content}"},
         "assertions": [{"type": "file_exists", "path": "copy.toml"}]},
        {"id": "check", "tool": "file.read", "depends_on": ["copy"],
         "parameters": {"path": "copy.toml"}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.status(), "failed");
    assert_eq!(
        out.reasons(),
        vec![at_step("step_failed", "read"), run_level("steps_not_run"), run_level("no_effects")]
    );
    let not_run = &out.result()["reasons"][1]["message"];
    let not_run = not_run.as_str().expect("message");
    assert!(not_run.contains("'copy'") && not_run.contains("'check'"), "{not_run}");
    assert!(not_run.contains('2'), "the count: {not_run}");
    assert!(out.step_error("read").contains("config.toml"), "{}", out.step_error("read"));
    assert_eq!(out.step_status("copy"), "pending");
    assert!(!ws.path().join("copy.toml").exists());
}

#[test]
fn a_failing_assertion_fails_the_step_assertion_failed_exit_1() {
    let ws = Ws::new();
    let plan = json!({"goal": "Write the version", "steps": [
        {"id": "write", "tool": "file.write",
         "parameters": {"path": "VERSION", "content": "1.2.3\n"},
         "assertions": [{"type": "file_contains", "path": "VERSION", "pattern": "2.0.0",
                         "recovery": "bump the version to 2.0.0"}]},
        {"id": "after", "tool": "file.read", "depends_on": ["write"],
         "parameters": {"path": "VERSION"}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.status(), "failed");
    // The write's step failed, so no goal action finished successfully, but the write did
    // change VERSION: the failed assertion is the reason, not `no_effects` (issue 13: the
    // summary listed the changed file beside "no effect ran").
    assert_eq!(
        out.reasons(),
        vec![at_step("assertion_failed", "write"), run_level("steps_not_run")]
    );
    let error = out.step_error("write");
    assert!(error.contains("file_contains") && error.contains("2.0.0"), "{error}");
    // What changed on disk is reported even though the step failed.
    assert_eq!(out.result()["file_mutations"][0]["path"], "VERSION");
    assert_eq!(ws.read("VERSION"), "1.2.3\n");
}

#[test]
fn an_unverified_postcondition_makes_the_run_partial_exit_3() {
    let ws = Ws::new();
    let plan = json!({"goal": "Write the greeting", "steps": [
        {"id": "write", "tool": "file.write",
         "parameters": {"path": "greeting.txt", "content": "hi\n"},
         "assertions": [{"type": "file_exists", "path": "greeting.txt"}]}
    ], "postconditions": [
        "The greeting is friendly",
        {"description": "It says hello",
         "assertions": [{"type": "file_contains", "path": "greeting.txt", "pattern": "hello"}]},
        {"description": "It exists",
         "assertions": [{"type": "file_exists", "path": "greeting.txt"}]}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.status(), "partial");
    assert_eq!(
        out.codes(),
        vec!["postcondition_unverified".to_owned(), "postcondition_unverified".to_owned()]
    );
    let posts = out.result()["postconditions"].as_array().expect("postconditions").clone();
    assert_eq!(posts.len(), 3);
    assert_eq!(posts[0]["description"], "The greeting is friendly");
    assert_eq!(posts[0]["satisfied"], false);
    assert!(posts[0]["evidence"].as_str().expect("e").contains("no assertion"), "{}", posts[0]);
    assert_eq!(posts[1]["satisfied"], false);
    assert!(posts[1]["evidence"].as_str().expect("e").contains("hello"), "{}", posts[1]);
    assert_eq!(posts[2]["satisfied"], true);
    let checked = out.of("assertion.checked");
    assert!(checked.iter().any(|e| e["postcondition"] == "It says hello"), "{checked:?}");
}

#[test]
fn a_goal_that_asks_for_a_change_but_only_reads_is_no_effects_exit_3() {
    let ws = Ws::new();
    ws.file("config.toml", "debug = false\n");
    let step = json!({"id": "read", "tool": "file.read", "parameters": {"path": "config.toml"},
                      "assertions": [{"type": "output_contains", "pattern": "debug"}]});
    let out = ws.run(&json!({"goal": "Enable debug mode in the config", "steps": [step]}), &[]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.status(), "partial");
    assert_eq!(out.reasons(), vec![run_level("no_effects")]);
    assert_eq!(out.result()["goal_actions_executed"], false);

    // The same steps for a goal that asks for no change: success.
    let out = ws.run(&json!({"goal": "Read the config", "steps": [step]}), &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.reasons(), vec![]);
}

#[test]
fn a_write_that_changes_nothing_is_a_no_op_mutation_exit_3() {
    let ws = Ws::new();
    ws.file("settings.json", "{\"debug\": true}\n");
    let plan = json!({"goal": "Turn debug on", "steps": [
        {"id": "write", "tool": "file.write",
         "parameters": {"path": "settings.json", "content": "{\"debug\": true}\n"},
         "assertions": [{"type": "file_contains", "path": "settings.json", "pattern": "true"}]},
        {"id": "patch", "tool": "file.patch", "depends_on": ["write"],
         "parameters": {"path": "settings.json", "edits": [{"old": "true", "new": "true"}]},
         "assertions": [{"type": "file_exists", "path": "settings.json"}]}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.status(), "partial");
    assert_eq!(
        out.reasons(),
        vec![at_step("no_op_mutation", "write"), at_step("no_op_mutation", "patch")]
    );
    let mutations = out.result()["file_mutations"].as_array().expect("mutations").clone();
    assert_eq!(mutations.len(), 2, "{mutations:?}");
    assert!(mutations.iter().all(|m| m["no_op"] == true && m["path"] == "settings.json"));
}

#[test]
fn a_failure_under_on_fail_continue_with_other_work_done_is_partial_and_alone_is_failed() {
    let ws = Ws::new();
    let plan = json!({"goal": "Write two files", "steps": [
        {"id": "bad", "tool": "file.read", "on_fail": "continue",
         "parameters": {"path": "missing.txt"}},
        {"id": "good", "tool": "file.write", "parameters": {"path": "ok.txt", "content": "ok"},
         "assertions": [{"type": "file_exists", "path": "ok.txt"}]}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.status(), "partial");
    assert_eq!(out.reasons(), vec![at_step("step_failed", "bad")]);

    let plan = json!({"goal": "Read a file", "steps": [
        {"id": "bad", "tool": "file.read", "on_fail": "continue",
         "parameters": {"path": "missing.txt"}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 1, "no step is done: {out:?}");
    assert_eq!(out.status(), "failed");
}

#[test]
fn ctrl_c_lets_the_running_step_finish_ends_cancelled_and_resume_completes_the_run() {
    let ws = Ws::new();
    let plan = json!({"goal": "Build in two stages", "steps": [
        {"id": "slow", "tool": "shell.exec",
         "parameters": {"argv": ["sh", "-c", "echo stage >> runs.txt; sleep 0.6"]},
         "assertions": [{"type": "exit_code_eq", "code": 0}]},
        {"id": "after", "tool": "file.read", "depends_on": ["slow"],
         "parameters": {"path": "runs.txt"},
         "assertions": [{"type": "output_contains", "pattern": "stage"}]}
    ]});
    let plan = ws.plan_file(&plan).to_string_lossy().into_owned();
    let ws_arg = ws.arg();
    let mut child = spawn_pev(&["run", &plan, "--workspace", &ws_arg, "--json"]);
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).expect("read a line");
        assert!(n > 0, "pev ended before `slow` started: {seen}");
        seen.push_str(&line);
        if line.contains("\"step.started\"") && line.contains("\"slow\"") {
            break;
        }
    }
    interrupt(child.id());
    reader.read_to_string(&mut seen).expect("read the rest");
    let status = child.wait().expect("wait");
    let out = Outcome {
        code: status.code().expect("exit code"),
        stdout: seen.clone(),
        stderr: String::new(),
        events: parse_events(&seen),
    };
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.status(), "partial");
    assert_eq!(out.reasons(), vec![run_level("steps_not_run"), run_level("cancelled")]);
    assert_eq!(out.step_status("slow"), "done", "the running step finished");
    assert_eq!(out.step_status("after"), "pending", "nothing new started");
    assert!(out.first("step.started", "after").is_none());

    let resumed = ws.resume(&out.run_id(), &[]);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    assert_eq!(resumed.status(), "success");
    assert_eq!(resumed.events[0]["event"], "run.started");
    assert_eq!(resumed.events[0]["resumed"], true);
    assert!(resumed.first("step.started", "slow").is_none(), "a done step is not run again");
    assert_eq!(resumed.step_status("after"), "done");
    assert_eq!(ws.read("runs.txt"), "stage\n");
}

// Regression (fixed): a shell.exec step whose command exits non-zero counts as done with the evidence
// "shell.exec returned without error", and a plan of only such steps is a `success` (exit 0).
// A non-zero exit is the command saying it failed: the step should fail (`step_failed`).
#[test]
fn a_command_that_exits_non_zero_without_an_assertion_is_not_a_success() {
    let ws = Ws::new();
    let plan = json!({"goal": "Run the tests", "steps": [
        {"id": "test", "tool": "shell.exec",
         "parameters": {"argv": ["sh", "-c", "echo 1 test failed >&2; exit 1"]}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.step("test")["output"]["exit_code"], 1);
    assert_ne!(out.status(), "success", "{}", out.result());
    assert_eq!(out.step_status("test"), "failed");
    assert!(out.reasons().contains(&at_step("step_failed", "test")), "{:?}", out.reasons());
    assert_eq!(out.code, 1);
}

// Regression (fixed): a shell.exec step killed by its timeout (timed_out: true, no exit code) counts as done
// and the run is a `success`. A command that did not finish should fail its step.
#[test]
fn a_command_killed_by_its_timeout_is_not_a_success() {
    let ws = Ws::new();
    let plan = json!({"goal": "Run the build", "steps": [
        {"id": "build", "tool": "shell.exec",
         "parameters": {"argv": ["sleep", "5"], "timeout_s": 0.2}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.step("build")["output"]["timed_out"], true);
    assert_ne!(out.status(), "success", "{}", out.result());
    assert_eq!(out.step_status("build"), "failed");
    assert!(out.step_error("build").contains("timed out"), "{}", out.step_error("build"));
    assert!(out.reasons().contains(&at_step("step_failed", "build")), "{:?}", out.reasons());
    assert_eq!(out.code, 1);
}

#[test]
fn a_zero_exit_with_an_error_on_stderr_is_reported_as_a_warning() {
    let ws = Ws::new();
    let script = "echo 'gzip: logs/app.log: No such file or directory' >&2";
    let plan = json!({"goal": "Compress the logs", "steps": [
        {"id": "gzip", "tool": "shell.exec",
         "parameters": {"argv": ["sh", "-c", script]},
         "assertions": [{"type": "exit_code_eq", "code": 0}]}
    ]});
    let out = ws.run(&plan, &[]);
    let warnings = out.result()["warnings"].as_array().expect("warnings").clone();
    assert_eq!(warnings.len(), 1, "{}", out.result());
    let warning = warnings[0].as_str().expect("text");
    assert!(warning.contains("gzip") && warning.contains("No such file"), "{warning}");
    let events = out.of("warning");
    assert_eq!(events.len(), 1, "{:?}", out.events);
    assert_eq!(events[0]["step"], "gzip");
}
