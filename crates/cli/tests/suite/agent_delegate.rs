//! Delegated steps through `pev agent` (issue 17), offline with scripted models: a child run's
//! command that writes outside its scope is refused by the kernel sandbox where this machine
//! has it (and fails the parent step on the harness's own check where it does not); `pev runs`
//! lists the child under its parent and `pev show` names it with its verdict.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tempfile::TempDir;

use super::agent_support::pev_clean;
use super::run_support::Outcome;
use super::support::run;

const GOAL: &str = "Write the report into a/ with a sub-agent";

/// A workspace whose planner answers the parent's plan, then the child's.
struct Ws {
    dir: TempDir,
}

impl Ws {
    fn new(parent: &Value, child: &Value) -> Self {
        let dir = tempfile::tempdir().expect("tmp");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).expect("ws");
        let script = |plans: &[&Value]| {
            let turns: Vec<Value> = plans
                .iter()
                .map(|p| json!({"content": [{"type": "text", "text": p.to_string()}]}))
                .collect();
            json!({"turns": turns}).to_string()
        };
        std::fs::write(dir.path().join("planner.json"), script(&[parent, child])).expect("planner");
        std::fs::write(dir.path().join("empty.json"), json!({"turns": []}).to_string()).expect("x");
        let toml = format!(
            "[roles.planner]\nprovider = \"script:{0}/planner.json\"\nmodel = \"claude-opus-4-6\"\n\
             [roles.executor]\nprovider = \"script:{0}/empty.json\"\nmodel = \"claude-sonnet-4-5\"\n\
             [roles.verifier]\nprovider = \"script:{0}/empty.json\"\nmodel = \"claude-haiku-4-5\"\n",
            dir.path().display()
        );
        std::fs::write(ws.join("pev.toml"), toml).expect("pev.toml");
        Ws { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn pev(&self, args: &[&str]) -> super::support::Run {
        let ws = self.path();
        let mut all = args.to_vec();
        all.extend(["--workspace", ws.to_str().expect("utf-8")]);
        run(&mut pev_clean(), &all)
    }

    fn agent(&self) -> Outcome {
        Outcome::from(self.pev(&["agent", GOAL, "--json", "--max-replans", "0"]))
    }
}

fn exists(root: &Path, rel: &str) -> bool {
    root.join(rel).exists()
}

fn full_sandbox() -> bool {
    let r = run(&mut super::support::pev(), &["doctor", "--json"]);
    let report: Value = serde_json::from_str(&r.stdout).unwrap_or(Value::Null);
    report["sandbox"]["enforced"]["level"] == "full"
}

#[test]
fn a_childs_command_cannot_write_outside_its_scope_and_the_tree_is_shown() {
    let parent = json!({"goal": GOAL, "steps": [
        {"id": "report", "delegate": {"goal": "Write a/report.txt", "scope": "a"},
         "assertions": [{"type": "file_exists", "path": "a/report.txt"}]}
    ]});
    let child = json!({"goal": "child", "steps": [
        {"id": "write", "tool": "shell.exec",
         "parameters": {"command": "mkdir -p b && echo stolen > b/out.txt && echo ok > a/report.txt"}}
    ]});
    let ws = Ws::new(&parent, &child);
    let out = ws.agent();
    let root = ws.path();

    assert_ne!(out.status(), "success", "{}\n{}", out.stderr, out.stdout);
    let step = out.step("report");
    assert_eq!(step["status"], "failed", "{step}");
    let error = step["error"].as_str().unwrap_or_default().to_owned();
    if full_sandbox() {
        // The kernel refused the write: nothing outside the scope exists, and the command
        // failed, so the child did not succeed.
        assert!(!exists(&root, "b/out.txt"), "the write outside the scope happened");
        assert!(error.contains("ended failed") || error.contains("ended partial"), "{error}");
    } else {
        // Unconfined, the command could write; the harness's own check of the child's changes
        // fails the step whatever the child's verdict.
        eprintln!("note: no full sandbox here; checking the harness's scope check only");
        assert!(error.contains("outside its scope"), "{error}");
    }
    let run_id = out.result()["run_id"].as_str().expect("run id").to_owned();
    let child_id = format!("{run_id}.report.1");

    // `pev runs`: the child right under its parent, indented; `--json` names the parent.
    let runs = ws.pev(&["runs"]);
    assert_eq!(runs.code, 0, "{runs:?}");
    let lines: Vec<&str> = runs.stdout.lines().collect();
    let parent_line = lines.iter().position(|l| l.starts_with(&run_id)).expect("parent listed");
    assert!(lines[parent_line + 1].starts_with(&format!("  {child_id}")), "{}", runs.stdout);
    let json_runs = ws.pev(&["runs", "--json"]);
    let child_row = json_runs
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["run_id"] == child_id.as_str())
        .expect("the child in --json");
    assert_eq!(child_row["parent"], run_id.as_str());
    assert_eq!(child_row["parent_step"], "report");

    // `pev show PARENT` names the child and its verdict; `pev show CHILD` names its parent;
    // `last` is the parent, which a person started.
    let show = ws.pev(&["show", "last"]);
    assert!(show.stdout.contains("child runs"), "{}", show.stdout);
    assert!(show.stdout.contains(&format!("{child_id} ← report attempt 1")), "{}", show.stdout);
    let show_child = ws.pev(&["show", &child_id]);
    assert!(
        show_child.stdout.contains(&format!("child of run {run_id} (step report)")),
        "{}",
        show_child.stdout
    );
    // A prefix of the parent's id (which also prefixes the child's) means the parent.
    let prefix = &run_id[..run_id.len() - 2];
    let show_prefix = ws.pev(&["show", prefix, "--format", "json"]);
    assert_eq!(show_prefix.code, 0, "{show_prefix:?}");
    let shown: Value = serde_json::from_str(&show_prefix.stdout).expect("JSON");
    assert_eq!(shown["run_id"], run_id.as_str());
}

#[test]
fn pev_run_refuses_a_plan_with_a_delegated_step_and_says_why() {
    let dir = tempfile::tempdir().expect("tmp");
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        json!({"goal": "g", "steps": [{"id": "d", "delegate": {"goal": "do it"}}]}).to_string(),
    )
    .expect("plan");
    let r = run(
        &mut pev_clean(),
        &["run", plan.to_str().expect("utf-8"), "--workspace", dir.path().to_str().expect("utf-8")],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("delegates to a sub-agent"), "{}", r.stderr);
    assert!(!r.stderr.contains("UNKNOWN_TOOL"), "{}", r.stderr);
}

#[test]
fn unconfined_a_childs_write_outside_its_scope_still_fails_the_parent_step() {
    let parent = json!({"goal": GOAL, "steps": [
        {"id": "report", "delegate": {"goal": "Write a/report.txt", "scope": "a"}}
    ]});
    let child = json!({"goal": "child", "steps": [
        {"id": "write", "tool": "shell.exec",
         "parameters": {"command": "mkdir -p b && echo stolen > b/out.txt && echo ok > a/report.txt"}}
    ]});
    let ws = Ws::new(&parent, &child);
    let policy = ws.dir.path().join("policy.yaml");
    std::fs::write(&policy, "sandbox: off\n").expect("policy");
    let out = Outcome::from(ws.pev(&[
        "agent",
        GOAL,
        "--json",
        "--max-replans",
        "0",
        "--policy",
        policy.to_str().expect("utf-8"),
    ]));

    // Nothing stopped the command; the child's own verdict was success; the parent step is
    // failed on the harness's check of what the child changed.
    assert!(exists(&ws.path(), "b/out.txt"));
    assert_ne!(out.status(), "success", "{}", out.stdout);
    let step = out.step("report");
    assert_eq!(step["status"], "failed", "{step}");
    let error = step["error"].as_str().unwrap_or_default();
    assert!(error.contains("changed files outside its scope `a`: b/out.txt"), "{error}");
}
