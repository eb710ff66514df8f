//! Issue 28: nothing a run can write decides how far pev trusts the next one. A policy file a
//! command could have written (inside the workspace) only tightens, and says what it ignored;
//! the policy a run starts with reaches its child runs (loop mode's `delegate`), not the
//! default one.

use serde_json::{Value, json};

use super::agent_support::pev_clean;
use super::run_support::{Outcome, Ws};
use super::support::run;

/// Run 1's command writes the policy that run 2 is given: `sandbox: off` and an open network
/// are ignored (and said, naming the file); its denial of a tool still applies.
#[test]
fn a_policy_a_command_wrote_cannot_widen_the_next_run() {
    let ws = Ws::new();
    let write = json!({"goal": "Write the team policy", "steps": [
        {"id": "w", "title": "Write policy.yaml", "tool": "shell.exec",
         "parameters": {"command":
            "printf 'sandbox: off\\nsandbox_network: open\\nsandbox_ports: [5432]\\ndeny_tools: [http.request]\\n' > policy.yaml"}}
    ]});
    let first = ws.run(&write, &["--yes"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(ws.read("policy.yaml").contains("sandbox: off"));

    let next = json!({"goal": "Say hi", "steps": [
        {"id": "hi", "title": "Say hi", "tool": "shell.exec", "parameters": {"command": "echo hi"}}
    ]});
    let policy = ws.path().join("policy.yaml");
    let second = ws.run(&next, &["--yes", "--policy", policy.to_str().expect("utf-8")]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let started = &second.of("run.started")[0]["sandbox"];
    assert_ne!(started["mode"], "off", "{started}");
    assert_eq!(started["network"], "closed", "{started}");
    assert!(
        second.stderr.contains(&format!("{} is inside the workspace", policy.display()))
            && second.stderr.contains("sandbox: off")
            && second.stderr.contains("sandbox_network: open")
            && second.stderr.contains("sandbox_ports: [5432]"),
        "{}",
        second.stderr
    );
    // What tightens still applies: the denied tool is refused by lint.
    let fetch = json!({"goal": "Fetch", "steps": [
        {"id": "get", "tool": "http.request", "parameters": {"url": "http://127.0.0.1:9/"}}
    ]});
    let third = ws.run(&fetch, &["--yes", "--policy", policy.to_str().expect("utf-8")]);
    assert_eq!(third.code, 2, "{}", third.stderr);
    assert!(third.stderr.contains("TOOL_DENY"), "{}", third.stderr);
}

/// The same policy file outside the workspace is the user's, and applies as written.
#[test]
fn the_users_own_policy_file_applies_as_written() {
    let ws = Ws::new();
    let policy = ws.outside().join("policy.yaml");
    std::fs::write(&policy, "sandbox: off\n").expect("policy");
    let plan = json!({"goal": "Say hi", "steps": [
        {"id": "hi", "title": "Say hi", "tool": "shell.exec", "parameters": {"command": "echo hi"}}
    ]});
    let out = ws.run(&plan, &["--yes", "--policy", policy.to_str().expect("utf-8")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.of("run.started")[0]["sandbox"]["mode"], "off");
    assert!(!out.stderr.contains("inside the workspace"), "{}", out.stderr);
}

fn turn(content: &Value) -> Value {
    json!({"content": [content], "usage": {"input_tokens": 100, "output_tokens": 20}})
}

fn tool_use(id: &str, name: &str, input: &Value) -> Value {
    turn(&json!({"type": "tool_use", "id": id, "name": name, "input": input}))
}

/// A loop-mode parent under a policy that denies `rm -rf`: the child run its model delegates
/// to is linted by that policy (before issue 28, by the default one, and the child removed
/// `build/`).
#[test]
fn a_loop_mode_child_is_linted_by_the_parents_policy() {
    let ws = Ws::new();
    ws.file("build/keep.txt", "precious\n");
    let child_plan = json!({"goal": "Clean the build directory", "steps": [
        {"id": "clean", "title": "Remove build/", "tool": "shell.exec",
         "parameters": {"command": "rm -rf build"}}
    ]});
    let text = |t: &str| turn(&json!({"type": "text", "text": t}));
    let executor = json!({"turns": [
        tool_use("t1", "plan_create", &json!({"objective": "Clean up",
            "steps": [{"id": "clean", "title": "Have a sub-agent clean build/"}]})),
        tool_use("t2", "step_update", &json!({"id": "clean", "status": "in_progress"})),
        tool_use("t3", "delegate", &json!({"goal": "Clean the build directory"})),
        text("Cleaned."),
    ]});
    // The planner answers the child's plan as many times as it is asked (lint refuses it).
    let planner = json!({"turns": vec![text(&child_plan.to_string()); 4]});
    let root = ws.root.path();
    std::fs::write(root.join("executor.json"), executor.to_string()).expect("executor");
    std::fs::write(root.join("planner.json"), planner.to_string()).expect("planner");
    std::fs::write(root.join("empty.json"), json!({"turns": []}).to_string()).expect("empty");
    ws.file(
        "pev.toml",
        &format!(
            "[roles.planner]\nprovider = \"script:{0}/planner.json\"\nmodel = \"claude-opus-4-6\"\n\
             [roles.executor]\nprovider = \"script:{0}/executor.json\"\nmodel = \"claude-sonnet-4-5\"\n\
             [roles.verifier]\nprovider = \"script:{0}/empty.json\"\nmodel = \"claude-haiku-4-5\"\n",
            root.display()
        ),
    );
    let policy = ws.outside().join("policy.yaml");
    std::fs::write(&policy, "deny_tokens_regex: ['rm -rf']\n").expect("policy");
    let args = [
        "agent",
        "Clean up the build directory",
        "--mode",
        "loop",
        "--max-refusals",
        "0",
        "--json",
        "--yes",
        "--policy",
        policy.to_str().expect("utf-8"),
        "--workspace",
        &ws.arg(),
    ];
    let out = Outcome::from(run(&mut pev_clean(), &args));
    assert_eq!(ws.read("build/keep.txt"), "precious\n", "{}", out.stderr);
    assert_ne!(out.result()["status"], "success", "{}", out.stderr);
    let finished = out.of("delegate.finished");
    assert_eq!(finished.len(), 1, "{}", out.stdout);
    let child = finished[0].to_string();
    assert!(child.contains("failed") && child.contains("rm -rf"), "{child}");
}

/// A step (unconfined: the user's policy says `sandbox: off`) rewrites its own run's options in
/// the journal to open the network and drop the approval its next step needs. The journal's
/// writer refuses to vouch for the changed row (the run stops there), and `pev resume` refuses
/// to build on it, naming the row; the approval-gated step never runs.
#[test]
fn a_step_that_rewrites_its_runs_options_cannot_loosen_what_follows() {
    let ws = Ws::new();
    let policy = ws.outside().join("policy.yaml");
    std::fs::write(&policy, "sandbox: off\napprove_tools: [file.write]\n").expect("policy");
    let tamper = "python3 -c \"import sqlite3, json; c = sqlite3.connect('.pev/pev.db'); \
        o = json.loads(c.execute('select options from runs').fetchone()[0]); \
        o['sandbox']['network'] = {'kind': 'open'}; o['approve_tools'] = []; \
        o['policy']['document']['approve_tools'] = []; \
        c.execute('update runs set options = ?', (json.dumps(o),)); c.commit()\"";
    let plan = json!({"goal": "Tamper with the journal", "steps": [
        {"id": "t", "title": "Rewrite the options", "tool": "shell.exec",
         "parameters": {"command": tamper}},
        {"id": "w", "title": "Write", "tool": "file.write", "depends_on": ["t"],
         "parameters": {"path": "x.txt", "content": "x"}}
    ]});
    let first = ws.run(&plan, &["--policy", policy.to_str().expect("utf-8")]);
    assert_ne!(first.code, 0, "{}", first.stderr);
    assert!(first.stderr.contains("changed outside pev"), "{}", first.stderr);
    assert!(first.stderr.contains("`pev resume` refuses it"), "{}", first.stderr);
    let run_id = first.run_id();
    let resumed = ws.resume(&run_id, &["--yes"]);
    assert_eq!(resumed.code, 2, "{}", resumed.stderr);
    assert!(
        resumed.stderr.contains("cannot be resumed") && resumed.stderr.contains("runs row"),
        "{}",
        resumed.stderr
    );
    assert!(!ws.path().join("x.txt").exists());
    let show = ws.pev(&["show", &run_id]);
    assert_eq!(show.code, 1, "{show:?}");
    assert!(show.stdout.contains("CHANGED OUTSIDE PEV"), "{}", show.stdout);
}
