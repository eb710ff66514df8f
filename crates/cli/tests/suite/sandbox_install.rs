//! Issue 28: pev runs its commands wherever it is installed. The sandbox helper is pev itself
//! (or `pev-sandbox` beside it); under bubblewrap `/tmp` is an empty tmpfs and secrets are
//! covered, so a pev copied under `/tmp`, or into a virtualenv inside the workspace, must still
//! be able to start its helper; and a helper that cannot start ends the step with an error at
//! once, never a run that waits for ever.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::support::run;

const PLAN: &str = r#"{"goal": "Say hi", "steps": [
  {"id": "hi", "title": "Write out.txt", "tool": "shell.exec",
   "parameters": {"command": "echo hi > out.txt"},
   "assertions": [{"type": "file_contains", "path": "out.txt", "pattern": "hi"}]}
]}"#;

/// A copy of the pev under test in `dir` (created), and nothing else beside it.
fn install(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("dir");
    let to = dir.join("pev");
    std::fs::copy(env!("CARGO_BIN_EXE_pev"), &to).expect("copy pev");
    to
}

/// `pev run plan.json --yes --json` in `ws` with the binary `pev`, bounded in time.
fn run_with(pev: &Path, ws: &Path) -> (super::support::Run, Duration) {
    std::fs::write(ws.join("plan.json"), PLAN).expect("plan");
    let mut cmd = assert_cmd::Command::new(pev);
    cmd.current_dir(ws).env_remove("PEV_STORE").timeout(Duration::from_secs(60));
    let start = Instant::now();
    let out = run(&mut cmd, &["run", "plan.json", "--yes", "--json"]);
    (out, start.elapsed())
}

fn result(out: &super::support::Run) -> Value {
    let last = out.stdout.lines().last().unwrap_or_default();
    let event: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(event["event"], "run.finished", "{out:?}");
    event["result"].clone()
}

#[test]
fn pev_copied_under_tmp_runs_a_command_step() {
    let install_dir = tempfile::tempdir().expect("tmp"); // under /tmp, which commands see empty
    let pev = install(install_dir.path());
    let ws = tempfile::tempdir().expect("ws");
    let (out, _) = run_with(&pev, ws.path());
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(result(&out)["status"], "success", "{out:?}");
    assert_eq!(std::fs::read_to_string(ws.path().join("out.txt")).expect("out"), "hi\n");
}

#[test]
fn pev_in_a_virtualenv_inside_the_workspace_runs_a_command_step() {
    let ws = tempfile::tempdir().expect("ws");
    let pev = install(&ws.path().join(".venv/bin"));
    let (out, _) = run_with(&pev, ws.path());
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(result(&out)["status"], "success", "{out:?}");
}

#[test]
fn a_helper_that_cannot_start_ends_the_step_with_an_error_in_seconds() {
    let install_dir = tempfile::tempdir().expect("tmp");
    let pev = install(install_dir.path());
    // A `pev-sandbox` beside pev is the helper: this one answers the probe (so the sandbox is
    // chosen as usual) and fails to supervise anything, as a helper missing a library would.
    let helper = install_dir.path().join("pev-sandbox");
    let script = format!(
        "#!/bin/sh\nif [ \"$2\" = probe ]; then exec '{}' \"$@\"; fi\necho 'cannot load libfoo.so' >&2\nexit 127\n",
        pev.display()
    );
    std::fs::write(&helper, script).expect("helper");
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let ws = tempfile::tempdir().expect("ws");
    let (out, took) = run_with(&pev, ws.path());
    assert_eq!(out.code, 1, "{out:?}");
    let result = result(&out);
    assert_eq!(result["status"], "failed", "{out:?}");
    let error = result["steps"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("the sandbox could not run the command")
            && error.contains("cannot load libfoo.so"),
        "{error}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(!ws.path().join("out.txt").exists());
}
