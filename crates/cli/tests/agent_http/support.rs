//! Helpers of the agent_http scenarios: a temp workspace whose pev.toml sends every role to the
//! mock model, running `pev agent --json` there with only PATH and the key in the environment,
//! reading the events and the result, and building the planner's and the judge's answers.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::agent_http::mock::{EXECUTOR_MODEL, PLANNER_MODEL, Reply, VERIFIER_MODEL};

pub const KEY: &str = "test-key";

/// A workspace whose pev.toml sends every role to `base_url`.
pub struct Ws {
    pub root: TempDir,
}

impl Ws {
    pub fn new(base_url: &str, files: &[(&str, &str)]) -> Ws {
        let root = tempfile::tempdir().expect("temp dir");
        let ws = Ws { root };
        std::fs::create_dir(ws.path()).expect("mkdir ws");
        for (rel, content) in files {
            ws.write(rel, content);
        }
        let mut toml = String::new();
        for (role, model) in
            [("planner", PLANNER_MODEL), ("executor", EXECUTOR_MODEL), ("verifier", VERIFIER_MODEL)]
        {
            toml.push_str(&format!(
                "[roles.{role}]\nprovider = \"anthropic\"\nmodel = \"{model}\"\n\
                 base_url = \"{base_url}\"\n\n"
            ));
        }
        ws.write("pev.toml", &toml);
        ws
    }

    pub fn path(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    pub fn write(&self, rel: &str, content: &str) {
        let path = self.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir -p");
        std::fs::write(path, content).expect("write a workspace file");
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).expect("read a workspace file")
    }

    /// `pev agent GOAL --workspace WS --json --jobs 2 EXTRA…` with only PATH and the key.
    pub fn agent(&self, goal: &str, extra: &[&str]) -> Outcome {
        self.agent_with(goal, extra, &[])
    }

    /// [`Ws::agent`] with these variables set too.
    pub fn agent_with(&self, goal: &str, extra: &[&str], vars: &[(&str, &str)]) -> Outcome {
        let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("pev");
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("ANTHROPIC_API_KEY", KEY)
            .envs(vars.iter().copied())
            .current_dir(self.root.path())
            .timeout(Duration::from_secs(120))
            .args(["agent", goal, "--workspace"])
            .arg(self.path())
            .args(["--json", "--jobs", "2"])
            .args(extra);
        let output = cmd.output().expect("pev runs");
        let stdout = String::from_utf8(output.stdout).expect("stdout is UTF-8");
        let stderr = String::from_utf8(output.stderr).expect("stderr is UTF-8");
        let events = stdout
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| {
                    panic!("stdout line is not JSON ({e}): {line:?}\nstderr:\n{stderr}")
                })
            })
            .collect();
        Outcome { code: output.status.code().unwrap_or(-1), stderr, events }
    }
}

#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub stderr: String,
    pub events: Vec<Value>,
}

impl Outcome {
    /// The result of the last event, which must be `run.finished`.
    pub fn result(&self) -> &Value {
        let last = self.events.last().unwrap_or_else(|| panic!("no events:\n{}", self.stderr));
        assert_eq!(last["event"], "run.finished", "last event: {last}\n{}", self.stderr);
        &last["result"]
    }

    pub fn status(&self) -> &str {
        self.result()["status"].as_str().expect("status")
    }

    pub fn codes(&self) -> Vec<&str> {
        let reasons = self.result()["reasons"].as_array().expect("reasons");
        reasons.iter().map(|r| r["code"].as_str().expect("code")).collect()
    }

    pub fn step(&self, id: &str) -> &Value {
        let steps = self.result()["steps"].as_array().expect("steps");
        steps.iter().find(|s| s["id"] == id).unwrap_or_else(|| panic!("no step {id}"))
    }
}

/// The planner's answer: the plan in a fenced block inside prose, as models write it.
pub fn plan_reply(plan: &Value) -> Reply {
    let text = format!(
        "Here is the plan.\n\n```json\n{}\n```\n",
        serde_json::to_string_pretty(plan).expect("plan")
    );
    Reply::text(PLANNER_MODEL, &text)
}

pub fn verdict(pass: bool, confidence: f64, feedback: &str) -> Reply {
    let body = json!({
        "answers": [
            {"question": "Did it change the right target?", "yes": pass, "confidence": confidence},
            {"question": "Is the step complete?", "yes": pass, "confidence": confidence}
        ],
        "pass": pass,
        "confidence": confidence,
        "feedback": feedback,
    });
    Reply::text(VERIFIER_MODEL, &body.to_string())
}

/// The `(tool_use_id, is_error, content)` of the tool_result blocks of `message`.
pub fn tool_results(message: &Value) -> Vec<(String, bool, String)> {
    let blocks = message["content"].as_array().expect("content blocks");
    blocks
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            (
                b["tool_use_id"].as_str().expect("tool_use_id").to_owned(),
                b["is_error"].as_bool().expect("is_error"),
                b["content"].as_str().expect("content as text").to_owned(),
            )
        })
        .collect()
}

pub fn tool_use_ids(message: &Value) -> Vec<&str> {
    let blocks = message["content"].as_array().expect("content blocks");
    blocks.iter().filter(|b| b["type"] == "tool_use").filter_map(|b| b["id"].as_str()).collect()
}

/// How a `pev` stopped by a SIGINT ended.
pub struct Interrupted {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ws {
    /// Starts `pev agent GOAL --workspace WS EXTRA…` (only PATH and the key in its
    /// environment), waits until `ready` holds (at most 30 s), sends it one SIGINT, and waits (at
    /// most 10 s) for it to end.
    pub fn agent_interrupted(
        &self,
        goal: &str,
        extra: &[&str],
        ready: impl Fn() -> bool,
    ) -> Interrupted {
        use std::io::Read;
        use std::process::{Command, Stdio};
        use std::time::Instant;

        let mut child = Command::new(env!("CARGO_BIN_EXE_pev"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("ANTHROPIC_API_KEY", KEY)
            .args(["agent", goal, "--workspace"])
            .arg(self.path())
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("pev starts");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(ready(), "pev never reached the point to interrupt");
        let sent = Instant::now();
        let kill = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(kill.success());
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            assert!(sent.elapsed() < Duration::from_secs(10), "pev did not stop");
            std::thread::sleep(Duration::from_millis(50));
        };
        let (mut stdout, mut stderr) = (String::new(), String::new());
        child.stdout.take().expect("stdout").read_to_string(&mut stdout).expect("read");
        child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read");
        Interrupted { code: status.code(), stdout, stderr }
    }
}
