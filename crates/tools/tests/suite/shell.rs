//! shell.exec: outputs, the scrubbed environment, the timeout that kills the whole process
//! group, and the output caps.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pev_tools::{CommandSpec, Program, ToolPolicy, run_command};
use serde_json::{Value, json};

use super::support::Fixture;

/// Whether a process is gone. A killed process whose parent has exited may linger as a zombie
/// until the container's init reaps it; a zombie runs nothing, so it counts as gone.
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

fn wait_gone(pid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

async fn read_pid(f: &Fixture, file: &str) -> u32 {
    // The background shell may write the pid a moment after it starts.
    for _ in 0..100 {
        if let Ok(text) = std::fs::read_to_string(f.path(file))
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no pid in {file}");
}

#[tokio::test]
async fn a_command_line_runs_in_the_workspace_root() {
    let f = Fixture::new();
    f.write("in.txt", "data");
    let out =
        f.ok("shell.exec", json!({"command": "pwd; cat in.txt; echo oops >&2; exit 3"})).await;
    let root = f.ws().root().to_str().unwrap();
    assert_eq!(out["stdout"], format!("{root}\ndata"));
    assert_eq!(out["stderr"], "oops\n");
    assert_eq!(out["exit_code"], 3);
    assert_eq!(out["signal"], Value::Null);
    assert_eq!(out["timed_out"], false);
    assert_eq!(out["stdout_truncated"], false);
    assert_eq!(out["stderr_truncated"], false);
    assert!(out["duration_ms"].as_u64().unwrap() < 10_000);
}

#[tokio::test]
async fn argv_runs_without_a_shell() {
    let f = Fixture::new();
    let out = f.ok("shell.exec", json!({"argv": ["printf", "%s|", "a b", "$HOME", "*"]})).await;
    assert_eq!(out["stdout"], "a b|$HOME|*|");
    assert_eq!(out["exit_code"], 0);
}

#[tokio::test]
async fn stdin_is_empty() {
    let f = Fixture::new();
    let out = f.ok("shell.exec", json!({"command": "cat; echo done", "timeout_s": 5})).await;
    assert_eq!(out["stdout"], "done\n");
}

#[tokio::test]
async fn argument_errors_go_back_to_the_model() {
    let f = Fixture::new();
    let both = f.respond("shell.exec", json!({"command": "true", "argv": ["true"]})).await;
    assert!(both.contains("exactly one of `command`"), "{both}");
    let neither = f.respond("shell.exec", json!({"timeout_s": 1})).await;
    assert_eq!(neither, both);
    assert_eq!(f.respond("shell.exec", json!({"argv": []})).await, "shell.exec: `argv` is empty");
    let missing = f.respond("shell.exec", json!({"argv": ["/no/such/program"]})).await;
    assert!(missing.starts_with("shell.exec: cannot start `/no/such/program`"), "{missing}");
    let bad_env = f.respond("shell.exec", json!({"command": "true", "env": {"A=B": "x"}})).await;
    assert!(bad_env.contains("invalid environment variable `A=B`"), "{bad_env}");
    let bad_timeout = f.respond("shell.exec", json!({"command": "true", "timeout_s": -1})).await;
    assert!(bad_timeout.contains("timeout_s must be a positive number"), "{bad_timeout}");
    let typo = f.respond("shell.exec", json!({"cmd": "true"})).await;
    assert!(typo.contains("unknown field `cmd`"), "{typo}");
}

#[tokio::test]
async fn the_environment_is_scrubbed() {
    // Cargo sets these for the test process; none is on the allow-list.
    let inherited = ["CARGO_PKG_NAME", "CARGO_MANIFEST_DIR"];
    for name in inherited {
        assert!(std::env::var_os(name).is_some(), "the test needs {name} in its own environment");
    }
    let f = Fixture::new();
    let out =
        f.ok("shell.exec", json!({"argv": ["env"], "env": {"STEP_VAR": "from the step"}})).await;
    let env: BTreeMap<&str, &str> =
        out["stdout"].as_str().unwrap().lines().filter_map(|l| l.split_once('=')).collect();
    for name in inherited {
        assert!(!env.contains_key(name), "{name} leaked into the child: {env:?}");
    }
    assert_eq!(env.get("HOME").copied(), f.ws().root().to_str());
    assert_eq!(env.get("STEP_VAR").copied(), Some("from the step"));
    assert!(env.contains_key("PATH"));
    let allowed = ["PATH", "LANG", "LC_ALL", "TERM", "TZ", "HOME", "STEP_VAR", "PWD", "SHLVL", "_"];
    for name in env.keys() {
        assert!(allowed.contains(name), "unexpected variable {name} in the child");
    }
}

#[tokio::test]
async fn the_policy_can_pass_more_variables() {
    let f = Fixture::with_policy(ToolPolicy {
        env_allow: vec!["CARGO_PKG_NAME".into()],
        ..ToolPolicy::default()
    });
    let out = f.ok("shell.exec", json!({"command": "echo \"$CARGO_PKG_NAME\""})).await;
    assert_eq!(out["stdout"], "pev-tools\n");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let f = Fixture::new();
    let started = Instant::now();
    let out = f
        .ok(
            "shell.exec",
            json!({"command": "sleep 30 & echo $! > bg.pid; sh -c 'echo $$ > nested.pid; sleep 30'", "timeout_s": 0.5}),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(out["timed_out"], true);
    assert_eq!(out["exit_code"], Value::Null);
    assert_eq!(out["signal"], 9);
    for file in ["bg.pid", "nested.pid"] {
        let pid = read_pid(&f, file).await;
        assert!(wait_gone(pid), "{file}: process {pid} survived the timeout");
    }
}

#[tokio::test]
async fn a_cancelled_call_kills_the_whole_process_group() {
    let f = Fixture::new();
    let call = f.call(
        "shell.exec",
        json!({"command": "sleep 30 & echo $! > bg.pid; sleep 30", "timeout_s": 60}),
    );
    let cancelled = tokio::time::timeout(Duration::from_millis(500), call).await;
    assert!(cancelled.is_err(), "the call should still have been running");
    let pid = read_pid(&f, "bg.pid").await;
    assert!(wait_gone(pid), "process {pid} survived the cancellation");
}

#[tokio::test]
async fn a_background_process_holding_the_pipes_does_not_hold_the_step() {
    let f = Fixture::new();
    let started = Instant::now();
    let out =
        f.ok("shell.exec", json!({"command": "sleep 3 & echo started", "timeout_s": 20})).await;
    assert!(started.elapsed() < Duration::from_millis(2500), "took {:?}", started.elapsed());
    assert_eq!(out["stdout"], "started\n");
    assert_eq!(out["exit_code"], 0);
    assert_eq!(out["timed_out"], false);
}

#[tokio::test]
async fn output_is_capped_per_stream_while_the_pipe_is_drained() {
    let f = Fixture::new();
    let out = f
        .ok(
            "shell.exec",
            json!({"command": "yes | head -c 3000000; yes e | head -c 2000000 >&2; echo end >&2"}),
        )
        .await;
    assert_eq!(out["exit_code"], 0, "the child must not block on a full pipe");
    assert_eq!(out["stdout_truncated"], true);
    assert_eq!(out["stdout"].as_str().unwrap().len(), 1024 * 1024);
    assert_eq!(out["stderr_truncated"], true);
    assert_eq!(out["stderr"].as_str().unwrap().len(), 1024 * 1024);
    assert!(!out["stderr"].as_str().unwrap().contains("end"));
}

#[tokio::test]
async fn a_small_cap_cuts_between_characters_not_inside_one() {
    let f = Fixture::with_policy(ToolPolicy { max_output_bytes: 5, ..ToolPolicy::default() });
    // "é" is two bytes: the cap of 5 falls inside the third one.
    let out = f.ok("shell.exec", json!({"argv": ["printf", "ééé"]})).await;
    assert_eq!(out["stdout"], "éé");
    assert_eq!(out["stdout_truncated"], true);
}

#[tokio::test]
async fn run_command_is_usable_directly() {
    let f = Fixture::new();
    let spec = CommandSpec {
        program: Program::Shell("test -d .".into()),
        timeout: Duration::from_secs(5),
        env: BTreeMap::new(),
    };
    assert!(run_command(&f.ctx, &spec).await.unwrap().succeeded());
    let spec = CommandSpec { program: Program::Argv(vec!["false".into()]), ..spec };
    let out = run_command(&f.ctx, &spec).await.unwrap();
    assert!(!out.succeeded());
    assert_eq!(out.exit_code, Some(1));
}
