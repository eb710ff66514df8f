//! The gate and the verdict in-process: plans made through [`Sessions`] as a client's server
//! would, stops decided by [`gate`] on the workspace as the test leaves it. These are the tests
//! that judge the decision code's mutants (`bench/mutants.sh`), so each outcome is checked with
//! its reasons, not only its status.

use std::path::PathBuf;
use std::sync::Arc;

use pev_protocol::event::EventBody;
use pev_store::Store;
use pev_tools::{ToolContext, Workspace};
use serde_json::{Value, json};

use super::*;
use crate::session::{Sessions, Target};

struct Env {
    ws: tempfile::TempDir,
    counters: tempfile::TempDir,
    ctx: Arc<ToolContext>,
    db: PathBuf,
}

impl Env {
    fn new() -> Self {
        let ws = tempfile::tempdir().unwrap();
        let workspace = Workspace::open(ws.path()).unwrap();
        let db = pev_store::default_path(workspace.root());
        Self {
            ctx: Arc::new(ToolContext::new(workspace)),
            db,
            ws,
            counters: tempfile::tempdir().unwrap(),
        }
    }

    fn write(&self, path: &str, text: &str) {
        std::fs::write(self.ws.path().join(path), text).unwrap();
    }

    fn sessions(&self, session: &str) -> Sessions {
        Sessions::new(Arc::clone(&self.ctx), self.db.clone(), Some(session.to_owned()))
    }

    fn store(&self) -> Store {
        Store::open_existing(&self.db).unwrap()
    }

    fn run_id(&self) -> String {
        self.store().resolve_run("last").unwrap()
    }

    fn stop(&self, session: &str, options: &GateOptions) -> Reply {
        self.hook(&json!({"hook_event_name": "Stop", "session_id": session}), options)
    }

    fn hook(&self, payload: &Value, options: &GateOptions) -> Reply {
        block_on(gate(payload.to_string().as_bytes(), options, self))
    }

    fn status(&self, session: &str) -> pev_protocol::run::RunResult {
        block_on(status(Some(session), None, &self.ctx, &self.db)).unwrap()
    }
}

impl GateEnv for Env {
    fn open(&self, _cwd: Option<&str>) -> Result<(Arc<ToolContext>, PathBuf), String> {
        Ok((Arc::clone(&self.ctx), self.db.clone()))
    }

    fn counter_dir(&self) -> PathBuf {
        self.counters.path().to_path_buf()
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}

fn call(sessions: &Sessions, tool: &str, args: Value) -> crate::session::Answer {
    block_on(sessions.call(tool, args, Target::default())).unwrap()
}

fn hello_plan() -> Value {
    json!({
        "objective": "Create hello.txt containing hi",
        "steps": [
            {"id": "write", "title": "Write hello.txt",
             "assertions": [{"type": "file_contains", "path": "hello.txt", "pattern": "hi"}]},
            {"id": "check", "title": "Read it back"}
        ],
        "postconditions": [{"description": "hello.txt says hi",
            "assertions": [{"type": "file_contains", "path": "hello.txt", "pattern": "hi"}]}]
    })
}

/// The plan made and carried out honestly.
fn honest(env: &Env, session: &str) -> Sessions {
    let sessions = env.sessions(session);
    assert!(call(&sessions, "plan_create", hello_plan()).ok);
    env.write("hello.txt", "hi\n");
    for (tool, args) in [
        ("step_update", json!({"id": "write", "status": "done", "evidence": "wrote hello.txt"})),
        ("step_update", json!({"id": "check", "status": "done", "evidence": "read it: hi"})),
        ("postcondition_verify", json!({"id": "p1", "evidence": "it says hi"})),
    ] {
        let answer = call(&sessions, tool, args);
        assert!(answer.ok, "{}", answer.text);
    }
    sessions
}

fn codes(result: &pev_protocol::run::RunResult) -> Vec<String> {
    result
        .reasons
        .iter()
        .map(|r| serde_json::to_value(r.code).unwrap().as_str().unwrap().to_owned())
        .collect()
}

fn decisions(env: &Env) -> Vec<(String, String, u32)> {
    env.store()
        .events(&env.run_id())
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::GateDecided { hook, decision, refusals, .. } => {
                Some((hook, decision, refusals))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn an_honest_run_is_let_go_and_recorded_success() {
    let env = Env::new();
    let _sessions = honest(&env, "s");
    let reply = env.stop("s", &GateOptions::default());
    assert_eq!(reply.exit, 0);
    let message = reply.stdout.unwrap()["systemMessage"].as_str().unwrap().to_owned();
    assert!(
        message.contains("verified: 2 step(s) done, 1 postcondition(s) checked, 1 file(s) changed"),
        "{message}"
    );
    let record = env.store().load_run(&env.run_id()).unwrap();
    assert_eq!(record.status, "success");
    assert_eq!(record.result.unwrap().status, RunStatus::Success);
    assert_eq!(decisions(&env), [("Stop".to_owned(), "allow".to_owned(), 0)]);
    assert!(!env.store().integrity(&env.run_id()).unwrap().is_broken());
}

#[test]
fn unfinished_work_is_refused_to_the_cap_then_recorded_partial() {
    let env = Env::new();
    let sessions = env.sessions("s");
    assert!(call(&sessions, "plan_create", hello_plan()).ok);
    env.write("hello.txt", "hi\n");
    assert!(
        call(
            &sessions,
            "step_update",
            json!({"id": "write", "status": "done", "evidence": "wrote it"})
        )
        .ok
    );
    let options = GateOptions { max_refusals: 2, ..GateOptions::default() };
    for n in 1..=2 {
        let out = env.stop("s", &options).stdout.unwrap();
        assert_eq!(out["decision"], "block");
        let reason = out["reason"].as_str().unwrap();
        assert!(reason.contains(&format!("refusal {n} of 2")), "{reason}");
        assert!(reason.contains("'check'"), "{reason}");
    }
    let out = env.stop("s", &options).stdout.unwrap();
    assert_eq!(out["continue"], false, "{out}");
    let stop = out["stopReason"].as_str().unwrap();
    assert!(stop.contains("after 2 refusals") && stop.contains("partial"), "{stop}");
    let result = env.store().load_run(&env.run_id()).unwrap().result.unwrap();
    assert_eq!(result.status, RunStatus::Partial);
    assert!(result.warnings.iter().any(|w| w.contains("refused 2 stop(s)")));
    assert_eq!(codes(&result), ["steps_not_run", "postcondition_unverified"]);
    let kinds: Vec<String> = decisions(&env).into_iter().map(|(_, d, _)| d).collect();
    assert_eq!(kinds, ["block", "block", "stop"]);
    // The next stop after the cap counts afresh.
    assert_eq!(env.stop("s", &options).stdout.unwrap()["decision"], "block");
}

#[test]
fn nothing_done_at_the_cap_is_failed() {
    let env = Env::new();
    let sessions = env.sessions("s");
    assert!(call(&sessions, "plan_create", hello_plan()).ok);
    let options = GateOptions { max_refusals: 0, ..GateOptions::default() };
    let out = env.stop("s", &options).stdout.unwrap();
    assert_eq!(out["continue"], false);
    assert_eq!(env.status("s").status, RunStatus::Failed);
}

#[test]
fn done_steps_over_an_unchanged_workspace_are_no_effects() {
    let env = Env::new();
    env.write("notes.md", "old\n");
    let sessions = env.sessions("s");
    let plan = json!({"objective": "Update the release notes", "steps": [{"id": "a", "title": "Think it over"}]});
    assert!(call(&sessions, "plan_create", plan).ok);
    assert!(
        call(
            &sessions,
            "step_update",
            json!({"id": "a", "status": "done", "evidence": "thought hard"})
        )
        .ok
    );
    let result = env.status("s");
    assert_eq!(result.status, RunStatus::Partial);
    assert_eq!(codes(&result), ["no_effects"]);
    assert!(
        result.reasons[0].message.contains("exactly as it was"),
        "{}",
        result.reasons[0].message
    );
    assert!(!result.goal_actions_executed);
    // Changing a file is what the goal asked for: then it succeeds.
    env.write("notes.md", "new\n");
    let result = env.status("s");
    assert_eq!((result.status, result.goal_actions_executed), (RunStatus::Success, true));
    assert_eq!(result.file_mutations.len(), 1);
}

#[test]
fn a_postcondition_without_assertions_is_only_claimed() {
    let env = Env::new();
    let sessions = env.sessions("s");
    let plan = json!({"objective": "Create a.txt", "steps": [{"id": "a", "title": "Create a.txt",
        "assertions": [{"type": "file_exists", "path": "a.txt"}]}],
        "postconditions": [{"description": "the team is happy"}]});
    assert!(call(&sessions, "plan_create", plan).ok);
    env.write("a.txt", "a");
    assert!(
        call(&sessions, "step_update", json!({"id": "a", "status": "done", "evidence": "made it"}))
            .ok
    );
    assert!(
        call(&sessions, "postcondition_verify", json!({"id": "p1", "evidence": "they said so"})).ok
    );
    let result = env.status("s");
    assert_eq!(result.status, RunStatus::Partial);
    assert_eq!(codes(&result), ["postcondition_unverified"]);
    assert!(!result.postconditions[0].satisfied);
    assert!(result.postconditions[0].evidence.contains("claimed by the client"));
}

#[test]
fn work_undone_after_it_was_verified_regresses_and_a_subagent_is_held_only_then() {
    let env = Env::new();
    let sessions = env.sessions("s");
    assert!(call(&sessions, "plan_create", hello_plan()).ok);
    let sub = json!({"hook_event_name": "SubagentStop", "session_id": "s"});
    assert_eq!(env.hook(&sub, &GateOptions::default()), Reply { stdout: None, exit: 0 });
    env.write("hello.txt", "hi\n");
    assert!(
        call(
            &sessions,
            "step_update",
            json!({"id": "write", "status": "done", "evidence": "wrote it"})
        )
        .ok
    );
    env.write("hello.txt", "bye\n");
    let out = env.hook(&sub, &GateOptions::default()).stdout.unwrap();
    assert_eq!(out["decision"], "block");
    // A sub-agent's refusals do not count toward the main agent's cap.
    let counted = decisions(&env);
    assert_eq!(counted, [("SubagentStop".to_owned(), "block".to_owned(), 1)]);
    let result = env.status("s");
    assert!(codes(&result).contains(&"evidence_regressed".to_owned()), "{:?}", codes(&result));
    let check = result.final_check.unwrap();
    assert_eq!(check.regressed.len(), 1);
    // Past the cap a sub-agent is let go.
    let none = GateOptions { max_refusals: 0, ..GateOptions::default() };
    assert_eq!(env.hook(&sub, &none).stdout, None);
}

#[test]
fn a_refusal_reopens_a_run_recorded_success() {
    let env = Env::new();
    let _sessions = honest(&env, "s");
    assert!(env.stop("s", &GateOptions::default()).stdout.unwrap()["systemMessage"].is_string());
    env.write("hello.txt", "bye\n");
    assert_eq!(env.stop("s", &GateOptions::default()).stdout.unwrap()["decision"], "block");
    assert_eq!(env.store().load_run(&env.run_id()).unwrap().status, "running");
    assert_ne!(env.status("s").status, RunStatus::Success);
}

#[test]
fn a_broken_journal_chain_is_refused() {
    let env = Env::new();
    let _sessions = honest(&env, "s");
    assert!(tamper(&env), "the journal holds the evidence text");
    let out = env.stop("s", &GateOptions::default()).stdout.unwrap();
    assert_eq!(out["decision"], "block", "{out}");
    assert!(out["reason"].as_str().unwrap().contains("could not check"), "{out}");
}

/// Changes one byte of a recorded event's text in the journal file, behind pev's back (the
/// connections are closed, so SQLite has folded its WAL into the file).
fn tamper(env: &Env) -> bool {
    let bytes = std::fs::read(&env.db).unwrap();
    // In an event's body (the step states keep evidence as a list, unchained).
    let needle = br#""evidence":"wrote hello.txt""#;
    let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) else { return false };
    let mut forged = bytes;
    forged[at + 12] = b'W';
    std::fs::write(&env.db, forged).is_ok()
}

#[test]
fn garbage_is_refused_under_the_cap_counted_outside_the_journal() {
    let env = Env::new();
    let options = GateOptions { max_refusals: 2, ..GateOptions::default() };
    for _ in 0..2 {
        let out = block_on(gate(b"not json", &options, &env)).stdout.unwrap();
        assert_eq!(out["decision"], "block");
        assert!(out["reason"].as_str().unwrap().contains("not JSON"));
    }
    let out = block_on(gate(b"not json", &options, &env)).stdout.unwrap();
    assert_eq!(out["continue"], false);
    // The count starts again after the cap.
    let out = block_on(gate(b"not json", &options, &env)).stdout.unwrap();
    assert_eq!(out["decision"], "block");
}

#[test]
fn no_run_passes_unless_a_plan_is_required() {
    let env = Env::new();
    assert_eq!(env.stop("s", &GateOptions::default()).stdout, None);
    let required = GateOptions { require_plan: true, ..GateOptions::default() };
    let out = env.stop("s", &required).stdout.unwrap();
    assert_eq!(out["decision"], "block");
    assert!(out["reason"].as_str().unwrap().contains("plan_create"));
}

#[test]
fn a_todo_list_alone_is_partial_and_an_empty_one_makes_no_run() {
    let env = Env::new();
    let sessions = env.sessions("s");
    let empty = call(&sessions, "todo_write", json!({"todos": []}));
    assert_eq!(empty.structured["run_id"], Value::Null);
    let todos = json!({"todos": [{"content": "Write a.txt", "status": "completed", "active_form": "Writing"}]});
    assert!(call(&sessions, "todo_write", todos).ok);
    env.write("a.txt", "a");
    let result = env.status("s");
    assert_eq!(result.status, RunStatus::Partial);
    assert_eq!(codes(&result), ["steps_not_run"]);
    assert!(result.reasons[0].message.contains("todo list but no plan"));
}

#[test]
fn an_open_todo_item_keeps_a_planned_run_from_success() {
    let env = Env::new();
    let sessions = honest(&env, "s");
    let todos = json!({"todos": [{"content": "Tell the team", "status": "pending", "active_form": "Telling"}]});
    assert!(call(&sessions, "todo_write", todos).ok);
    let result = env.status("s");
    assert_eq!(result.status, RunStatus::Partial);
    assert_eq!(codes(&result), ["steps_not_run"]);
    assert!(result.reasons[0].message.contains("todo-1"), "{}", result.reasons[0].message);
}

#[test]
fn the_summary_of_a_clients_call() {
    let bash = tool_summary(
        Some(&json!({"command": "make test"})),
        Some(&json!({"exit_code": 2, "stdout": "x"})),
    );
    assert_eq!(bash, json!({"command": "make test", "exit_code": 2}));
    let write = tool_summary(
        Some(&json!({"file_path": "/w/a.txt", "content": "same"})),
        Some(&json!({"originalFile": "same", "filePath": "/w/a.txt"})),
    );
    assert_eq!(write, json!({"path": "/w/a.txt", "no_op": true}));
    let changed = tool_summary(
        Some(&json!({"file_path": "a", "content": "new"})),
        Some(&json!({"originalFile": "old"})),
    );
    assert_eq!(changed["no_op"], false);
    let argv = tool_summary(Some(&json!({"command": ["git", "status"]})), None);
    assert_eq!(argv, json!({"command": "git status"}));
    assert_eq!(tool_summary(None, None), json!({}));
}

#[test]
fn payloads_of_both_clients() {
    let codex = Payload::parse(
        br#"{"hook_event_name":"Stop","session_id":"a","turn_id":"t","stop_hook_active":true}"#,
    )
    .unwrap();
    assert_eq!(
        (codex.client, codex.stop_hook_active, codex.session.as_deref()),
        ("codex", true, Some("a"))
    );
    let claude = Payload::parse(br#"{"session_id":"b","cwd":"/w"}"#).unwrap();
    assert_eq!(
        (claude.client, claude.hook.as_str(), claude.cwd.as_deref()),
        ("claude", "Stop", Some("/w"))
    );
    assert!(Payload::parse(b"[1]").unwrap_err().contains("not a JSON object"));
    assert!(Payload::parse(b"").is_err());
}
