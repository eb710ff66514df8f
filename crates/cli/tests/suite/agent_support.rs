//! Helpers for the `pev agent` scenario tests: a fixture of `tests/fixtures/agent/<scenario>/`
//! (workspace files, `pev.toml`, and the planner, executor and verifier scripts) copied into a
//! temp dir and used as the workspace, the binary run with a cleared environment (only `PATH`),
//! so no API key or `PEV_*` variable of the machine can leak in, and checks of the event stream's
//! shape.
//!
//! Every role in the fixtures is a `script:` provider, so the runs are offline and a missing
//! `ANTHROPIC_API_KEY` is the normal case. The scripts' `expect` blocks check what the agent sent
//! (a drift fails the turn with a script error, which fails the step), so the requests are
//! asserted as well as the outcome.

#![allow(dead_code)] // each agent module uses a subset

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

use super::run_support::Outcome;
use super::support::{Run, fixture, pev, run};

/// The goal of the dark-green fixtures (the same words as `examples/dark-green`).
pub const GREEN_GOAL: &str = "Change the site background to dark green";

/// `pev` with nothing of this process's environment but `PATH`.
pub fn pev_clean() -> Command {
    let mut cmd = pev();
    cmd.env_clear();
    cmd.env("PATH", super::support::path());
    cmd
}

/// A scenario's fixture copied to `<tmp>/ws`, which is the workspace.
pub struct Scenario {
    pub root: TempDir,
}

impl Scenario {
    pub fn new(name: &str) -> Scenario {
        let root = tempfile::tempdir().expect("temp dir");
        let source = fixture("agent").join(name);
        assert!(source.join("pev.toml").is_file(), "no fixture at {}", source.display());
        copy_dir(&source, &root.path().join("ws"));
        Scenario { root }
    }

    pub fn path(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    pub fn arg(&self) -> String {
        self.path().to_string_lossy().into_owned()
    }

    /// The text of `rel` in the workspace.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// The text of `rel` in the scenario's fixture (what the workspace started with).
    pub fn original(name: &str, rel: &str) -> String {
        let path = fixture("agent").join(name).join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }

    /// `pev agent GOAL --workspace WS --json EXTRA...`.
    pub fn agent(&self, goal: &str, extra: &[&str]) -> Outcome {
        let ws = self.arg();
        let mut args = vec!["agent", goal, "--workspace", ws.as_str(), "--json"];
        args.extend_from_slice(extra);
        Outcome::from(run(&mut pev_clean(), &args))
    }

    /// `pev ARGS --workspace WS`.
    pub fn pev(&self, args: &[&str]) -> Run {
        let ws = self.arg();
        let mut all = args.to_vec();
        all.extend(["--workspace", ws.as_str()]);
        run(&mut pev_clean(), &all)
    }

    /// `pev show RUN --workspace WS` (text).
    pub fn show_text(&self, run_id: &str) -> String {
        let r = self.pev(&["show", run_id]);
        assert_eq!(r.code, 0, "{r:?}");
        r.stdout
    }

    /// `pev show RUN --format json --workspace WS`: the stored run result.
    pub fn show_json(&self, run_id: &str) -> Value {
        let r = self.pev(&["show", run_id, "--format", "json"]);
        assert_eq!(r.code, 0, "{r:?}");
        r.json()
    }
}

/// Copies the directory `from` to `to`, files and subdirectories (fixtures).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read fixture dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy fixture file");
        }
    }
}

/// The names of the events in order, for messages and sequence checks.
pub fn names(out: &Outcome) -> Vec<&str> {
    out.events.iter().map(|e| e["event"].as_str().unwrap_or("?")).collect()
}

/// The attempts of the `step.started` events of `step`, in order.
pub fn started_attempts(out: &Outcome, step: &str) -> Vec<u64> {
    out.of("step.started")
        .iter()
        .filter(|e| e["step"] == step)
        .map(|e| e["attempt"].as_u64().expect("attempt"))
        .collect()
}

/// The `warning` event messages.
pub fn warnings(out: &Outcome) -> Vec<String> {
    out.of("warning").iter().map(|e| e["message"].as_str().unwrap_or("").to_owned()).collect()
}

/// The reason with `code`, whose message the test reads.
pub fn reason<'a>(out: &'a Outcome, code: &str) -> &'a Value {
    let list = out.result()["reasons"].as_array().expect("reasons");
    list.iter()
        .find(|r| r["code"] == code)
        .unwrap_or_else(|| panic!("no {code} reason in {}", out.result()["reasons"]))
}

/// `usage.cost_usd` of the result.
pub fn cost(out: &Outcome) -> f64 {
    out.result()["usage"]["cost_usd"].as_f64().expect("cost_usd")
}

/// The shape every `--json` stream of one process has, from `first_seq`: one run id, dense
/// `seq`, an `at` on every event, `run.started` first (with `resumed`), `verify.finished` then
/// `run.finished` last, each `tool.called` answered by one `tool.finished` of the same call and
/// step, and each `step.started` followed by a `step.finished` of that step (a step stopped by
/// the budget finishes too, as `pending`).
pub fn assert_stream_shape(out: &Outcome, first_seq: u64, resumed: bool) {
    let shown = names(out);
    let run_id = out.run_id();
    for (i, e) in out.events.iter().enumerate() {
        assert_eq!(e["run_id"], run_id.as_str(), "{e}");
        assert_eq!(e["seq"].as_u64(), Some(first_seq + i as u64), "dense seq: {e}");
        assert!(e["at"].as_str().is_some_and(|at| at.ends_with('Z')), "{e}");
    }
    let first = &out.events[0];
    assert_eq!(first["event"], "run.started", "{shown:?}");
    assert_eq!(first["resumed"], resumed, "{first}");
    let n = shown.len();
    assert!(n >= 3, "{shown:?}");
    assert_eq!(shown[n - 1], "run.finished", "{shown:?}");
    assert_eq!(shown[n - 2], "verify.finished", "{shown:?}");
    let verify = &out.events[n - 2];
    assert_eq!(verify["status"], out.result()["status"], "verify.finished agrees with the result");
    assert_eq!(
        verify["reasons"],
        out.result()["reasons"],
        "verify.finished agrees with the result"
    );

    // Tool calls: each answered once, by the same step, before the next step of that id starts
    // its next attempt.
    let mut open: HashMap<String, String> = HashMap::new();
    let mut answered: HashSet<String> = HashSet::new();
    for e in &out.events {
        let step = e["step"].as_str().unwrap_or_default().to_owned();
        match e["event"].as_str() {
            Some("tool.called") => {
                let id = e["call_id"].as_str().expect("call_id").to_owned();
                assert!(open.insert(id.clone(), step).is_none(), "call {id} called twice");
            }
            Some("tool.finished") => {
                let id = e["call_id"].as_str().expect("call_id").to_owned();
                assert_eq!(open.remove(&id).as_deref(), Some(step.as_str()), "{e}");
                assert!(answered.insert(id.clone()), "call {id} finished twice");
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "tool calls never answered: {open:?}");

    // Steps: started → finished, never finished without a start in this process.
    let mut running: HashSet<String> = HashSet::new();
    for e in &out.events {
        let step = e["step"].as_str().unwrap_or_default().to_owned();
        match e["event"].as_str() {
            Some("step.started") => {
                running.insert(step);
            }
            Some("step.finished") => {
                assert!(running.remove(&step), "step.finished without step.started: {e}");
            }
            _ => {}
        }
    }
    assert!(running.is_empty(), "steps started and never finished: {running:?}");
}

/// A stream of one whole agent run has one `run.finished`: its result is the outcome.
pub fn assert_one_run_finished(out: &Outcome) {
    let finished: Vec<u64> =
        out.of("run.finished").iter().map(|e| e["seq"].as_u64().unwrap_or(0)).collect();
    assert_eq!(finished.len(), 1, "run.finished at seq {finished:?}; events: {:?}", names(out));
    let verified = out.of("verify.finished").len();
    assert_eq!(verified, 1, "verify.finished events: {verified}; events: {:?}", names(out));
}

/// The dark-green rule, whatever else the scenario checks: a run whose result says no goal
/// action ran is never `success`, and a `success` always changed a file.
pub fn assert_no_dark_green(out: &Outcome) {
    let result = out.result();
    let changed =
        result["file_mutations"].as_array().is_some_and(|m| m.iter().any(|m| m["no_op"] == false));
    if result["status"] == "success" {
        assert_eq!(result["goal_actions_executed"], true, "{result}");
        assert!(changed, "success without a file change: {result}");
        assert_eq!(out.code, 0);
    }
    if result["goal_actions_executed"] == false {
        assert_ne!(result["status"], "success", "{result}");
        assert_ne!(out.code, 0);
    }
}
