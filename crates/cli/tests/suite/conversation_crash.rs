//! Conversations survive a crash (issue 16): a 48-turn loop-mode session is killed with SIGKILL
//! at 20 points (counted in events read, from a fixed-seed generator), and after every kill the
//! journal must pass `PRAGMA integrity_check` and every model call it holds must read back whole
//! (`pev show --conversation --format json`): its messages, system prompt and tools, through the
//! chain of calls it extends, and its answer. The calls journaled never outnumber the turns the
//! model was asked for, and an uninterrupted run journals exactly one call per turn.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::run_support::pev_path;
use super::support::run;

const TURNS: usize = 48;
const KILLS: usize = 20;
const GOAL: &str = "Replace TODO with DONE in a.txt";

fn script() -> Value {
    let mut turns = vec![
        json!({"content": [{"type": "tool_use", "id": "t0", "name": "plan_create", "input": {
        "objective": "a.txt says DONE",
        "steps": [{"id": "a", "title": "Mark a.txt DONE", "assertions": [{"type": "file_contains", "path": "a.txt", "pattern": "DONE"}]}]
    }}], "usage": {"input_tokens": 1000, "output_tokens": 50}}),
    ];
    for i in 1..TURNS - 3 {
        turns.push(json!({"content": [
            {"type": "text", "text": format!("Looking at a.txt once more ({i}).")},
            {"type": "tool_use", "id": format!("t{i}"), "name": "file_read", "input": {"path": "a.txt"}}
        ], "usage": {"input_tokens": 1000 + 100 * i, "output_tokens": 30}}));
    }
    turns.push(json!({"content": [{"type": "tool_use", "id": "tp", "name": "file_patch", "input": {"path": "a.txt", "edits": [{"old": "TODO", "new": "DONE"}]}}], "usage": {"input_tokens": 6000, "output_tokens": 40}}));
    turns.push(json!({"content": [{"type": "tool_use", "id": "tu", "name": "step_update", "input": {"id": "a", "status": "done", "evidence": "a.txt says DONE"}}], "usage": {"input_tokens": 6100, "output_tokens": 40}}));
    turns.push(json!({"content": [{"type": "text", "text": "a.txt says DONE."}], "usage": {"input_tokens": 6200, "output_tokens": 10}}));
    assert_eq!(turns.len(), TURNS);
    json!({"turns": turns})
}

struct Rng(u64);

impl Rng {
    fn between(&mut self, lo: usize, hi: usize) -> usize {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        lo + (x % (hi - lo + 1) as u64) as usize
    }
}

/// `pev agent GOAL --mode loop --json` in `ws`; killed after `kill_after` events when given.
/// The events read.
fn agent(ws: &std::path::Path, kill_after: Option<usize>) -> usize {
    std::fs::write(ws.join("a.txt"), "status: TODO\n").expect("reset a.txt");
    let mut child = Command::new(pev_path())
        .args(["agent", GOAL, "--mode", "loop", "--json", "--workspace"])
        .arg(ws)
        .env_clear()
        .env("PATH", super::support::path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pev agent");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut read = 0;
    while let Some(Ok(_)) = lines.next() {
        read += 1;
        if Some(read) == kill_after {
            child.kill().expect("SIGKILL");
            break;
        }
    }
    let status = child.wait().expect("wait");
    if kill_after.is_some_and(|k| read == k) {
        assert_eq!(status.signal(), Some(9), "killed by SIGKILL");
    } else {
        assert!(status.success(), "an uninterrupted run succeeds: {status:?}");
    }
    read
}

/// The last run's conversation, read back through `pev show`.
fn conversation(ws: &std::path::Path) -> Vec<Value> {
    let ws = ws.display().to_string();
    let out = run(
        &mut super::agent_support::pev_clean(),
        &["show", "last", "--conversation", "--format", "json", "--workspace", &ws],
    );
    assert_eq!(out.code, 0, "the conversation reads back: {}", out.stderr);
    serde_json::from_str::<Value>(&out.stdout).expect("JSON").as_array().cloned().expect("array")
}

#[test]
fn a_killed_session_leaves_every_journaled_call_readable() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    let model = dir.path().join("model.json");
    std::fs::write(&model, script().to_string()).expect("script");
    std::fs::write(
        ws.join("pev.toml"),
        format!("[roles.executor]\nprovider = \"script:{}\"\nmodel = \"m\"\n", model.display()),
    )
    .expect("pev.toml");

    let events = agent(&ws, None);
    let whole = conversation(&ws);
    assert_eq!(whole.len(), TURNS, "one journaled call per turn");
    // Each call after the first extends the one before: only its new messages are stored.
    let last = &whole[TURNS - 1];
    assert_eq!(last["call"]["request"]["prior"], json!(TURNS - 1), "{}", last["call"]);
    assert!(last["request"]["messages"].as_array().expect("messages").len() > 2 * (TURNS - 2));

    let mut rng = Rng(0x2026_1125_0016_0001);
    for _ in 0..KILLS {
        let at = rng.between(2, events - 2);
        let read = agent(&ws, Some(at));
        assert_eq!(read, at);
        let calls = conversation(&ws);
        assert!(calls.len() <= TURNS, "{} calls journaled", calls.len());
        for c in &calls {
            assert!(!c["request"]["messages"].as_array().expect("messages").is_empty(), "{c}");
            assert!(c["request"]["system"].as_str().is_some_and(|s| !s.is_empty()), "{c}");
            let answered = c["response"].is_object();
            let failed = c["call"]["error_type"].is_string();
            assert!(answered || failed, "every call has its answer or its failure: {c}");
        }
        let store = pev_store::Store::open_existing(pev_store::default_path(&ws)).expect("journal");
        assert_eq!(store.integrity_check().expect("check"), "ok");
    }
}
