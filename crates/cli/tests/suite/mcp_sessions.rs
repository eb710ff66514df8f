//! Issue 28: two sessions of a client working in one workspace at once each get their own run
//! and verdict, though the client gives its `pev mcp` server no session id (Claude Code's
//! plugin servers get none); and a session that changed files without any plan does not end
//! silently.
//!
//! Each client is `fixtures/clients/client.py`: a process that runs pev's hooks through a shell
//! and starts `pev mcp` as its own child, as Claude Code does.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value;

use super::support::fixture;

struct FakeClient {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl FakeClient {
    fn start(ws: &Path, tmp: &Path, session: &str) -> Self {
        let mut child = Command::new("python3")
            .arg(fixture("clients/client.py"))
            .arg(env!("CARGO_BIN_EXE_pev"))
            .arg(ws)
            .arg(session)
            .env("TMPDIR", tmp)
            .env_remove("PEV_STORE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the client");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Self { child, stdin, stdout }
    }

    fn say(&mut self, command: &str) -> Value {
        writeln!(self.stdin, "{command}").expect("write");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{command}: {e}: {line:?}"))
    }
}

impl Drop for FakeClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn session_of(ws: &Path, run_id: &str) -> Value {
    let store = pev_store::Store::open_existing(ws.join(".pev/pev.db")).expect("journal");
    store.load_run(run_id).expect("run").options["session"].clone()
}

#[test]
fn two_sessions_in_one_workspace_never_cross() {
    let (ws, tmp) = (tempfile::tempdir().expect("ws"), tempfile::tempdir().expect("tmp"));
    let mut a = FakeClient::start(ws.path(), tmp.path(), "session-a");
    let mut b = FakeClient::start(ws.path(), tmp.path(), "session-b");
    // A starts and gets its server; then B starts (its SessionStart is the workspace's newest
    // pin) and gets its own; then both plan.
    a.say("start");
    assert_eq!(a.say("serve")["served"], true);
    b.say("start");
    assert_eq!(b.say("serve")["served"], true);
    let plan_a = a.say("plan");
    let plan_b = b.say("plan");
    assert_eq!(plan_a["isError"], false, "{plan_a}");
    assert_eq!(plan_b["isError"], false, "{plan_b}");
    let run_a = plan_a["structuredContent"]["run_id"].as_str().expect("run a").to_owned();
    let run_b = plan_b["structuredContent"]["run_id"].as_str().expect("run b").to_owned();
    assert_ne!(run_a, run_b);
    assert_eq!(session_of(ws.path(), &run_a), "session-a");
    assert_eq!(session_of(ws.path(), &run_b), "session-b");
    // Each Stop is decided on its own session's run: A's plan is unfinished, so A is refused
    // with A's step; B likewise.
    let stop_a = a.say("stop");
    assert_eq!(stop_a["decision"], "block", "{stop_a}");
    assert!(stop_a["reason"].as_str().expect("reason").contains(&run_a), "{stop_a}");
}

#[test]
fn a_session_that_edits_without_a_plan_is_told_before_it_ends() {
    let (ws, tmp) = (tempfile::tempdir().expect("ws"), tempfile::tempdir().expect("tmp"));
    let mut client = FakeClient::start(ws.path(), tmp.path(), "session-edit");
    client.say("start");
    client.say("edit");
    let first = client.say("stop");
    assert_eq!(first["decision"], "block", "{first}");
    assert!(first["reason"].as_str().expect("reason").contains("without a pev plan"), "{first}");
    let second = client.say("stop");
    assert!(second.get("decision").is_none(), "{second}");
    assert!(second["systemMessage"].as_str().expect("message").contains("nothing checked"));
    // A session that changed nothing ends as before, quietly.
    let mut idle = FakeClient::start(ws.path(), tmp.path(), "session-idle");
    idle.say("start");
    assert_eq!(idle.say("stop"), serde_json::json!({}));
}
