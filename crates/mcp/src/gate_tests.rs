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
    // Its reason is the undone work only, not the plan's unfinished steps.
    let reason = out["reason"].as_str().unwrap();
    assert!(reason.contains("hello.txt") && !reason.contains("'check'"), "{reason}");
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

/// A session that edited files without a plan: its first Stop is refused (a SubagentStop is
/// not), the next is let through with a note; under `--require-plan` every one is refused as a
/// missing plan, up to the cap.
#[test]
fn edits_without_a_plan_refuse_the_first_stop_only() {
    let env = Env::new();
    let edit = json!({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Edit",
                      "tool_input": {"file_path": "a.py"}, "tool_response": {}});
    assert_eq!(env.hook(&edit, &GateOptions::default()).stdout, None);
    let sub = json!({"hook_event_name": "SubagentStop", "session_id": "s"});
    assert_eq!(env.hook(&sub, &GateOptions::default()).stdout, None, "a sub-agent's stop");
    let required = GateOptions { require_plan: true, max_refusals: 5, ..GateOptions::default() };
    for _ in 0..2 {
        let out = env.stop("s", &required).stdout.unwrap();
        assert!(out["reason"].as_str().unwrap().contains("one is required"), "{out}");
    }
    let first = env.stop("s", &GateOptions::default()).stdout.unwrap();
    assert_eq!(first["decision"], "block");
    assert!(first["reason"].as_str().unwrap().contains("a.py"), "{first}");
    let second = env.stop("s", &GateOptions::default()).stdout.unwrap();
    assert!(second.get("decision").is_none(), "{second}");
    assert!(second["systemMessage"].as_str().unwrap().contains("without a pev plan"));
    assert_eq!(env.stop("s", &GateOptions::default()).stdout, None);
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
    let shapes = tool_summary(
        None,
        Some(&json!({"success": {"x": 1}, "exitCode": [1], "interrupted": false})),
    );
    assert_eq!(shapes, json!({"interrupted": false}), "objects and lists are not kept");
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

#[allow(clippy::needless_pass_by_value)] // call sites build the JSON inline
fn record(env: &Env, session: &str, tool: &str, input: Value, response: Value) {
    let payload = json!({"hook_event_name": "PostToolUse", "session_id": session, "tool_name": tool,
                         "tool_input": input, "tool_response": response});
    assert_eq!(env.hook(&payload, &GateOptions::default()), Reply { stdout: None, exit: 0 });
}

#[test]
fn session_start_pins_and_post_tool_use_records() {
    let env = Env::new();
    let start =
        json!({"hook_event_name": "SessionStart", "session_id": "pin-1", "source": "startup"});
    let out = env.hook(&start, &GateOptions::default()).stdout.unwrap();
    assert_eq!(out["hookSpecificOutput"]["hookEventName"], "SessionStart");
    assert!(
        out["hookSpecificOutput"]["additionalContext"].as_str().unwrap().contains("file_contains")
    );
    assert_eq!(crate::session::pinned(&env.db).as_deref(), Some("pin-1"));
    let sessions = env.sessions("pin-1");
    assert!(call(&sessions, "plan_create", hello_plan()).ok);
    record(&env, "pin-1", "Bash", json!({"command": "make"}), json!({"exit_code": 0}));
    let events = env.store().events(&env.run_id()).unwrap();
    let recorded: Vec<Value> = events
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::ClientTool { tool, summary } => {
                Some(json!({"tool": tool, "summary": summary}))
            }
            _ => None,
        })
        .collect();
    assert_eq!(recorded, [json!({"tool": "Bash", "summary": {"command": "make", "exit_code": 0}})]);
    // Another hook event is not a stop: nothing is checked or blocked.
    let other = json!({"hook_event_name": "UserPromptSubmit", "session_id": "pin-1"});
    assert_eq!(env.hook(&other, &GateOptions::default()).stdout, None);
}

#[test]
fn each_done_step_rests_on_the_client_calls_before_it() {
    let env = Env::new();
    let sessions = env.sessions("s");
    let plan = json!({"objective": "Create a.txt and b.txt", "steps": [
        {"id": "a", "title": "Create a.txt", "assertions": [{"type": "file_exists", "path": "a.txt"}]},
        {"id": "b", "title": "Create b.txt", "assertions": [{"type": "file_exists", "path": "b.txt"}]},
        {"id": "c", "title": "Say so"}
    ]});
    assert!(call(&sessions, "plan_create", plan).ok);
    record(&env, "s", "Bash", json!({"command": "touch a.txt"}), json!({"exit_code": 0}));
    env.write("a.txt", "");
    assert!(
        call(&sessions, "step_update", json!({"id": "a", "status": "done", "evidence": "made a"}))
            .ok
    );
    record(
        &env,
        "s",
        "Write",
        json!({"file_path": "b.txt", "content": "b"}),
        json!({"originalFile": null}),
    );
    env.write("b.txt", "b");
    // Two steps accepted with no call between them: the calls are the first's.
    assert!(
        call(&sessions, "step_update", json!({"id": "b", "status": "done", "evidence": "made b"}))
            .ok
    );
    assert!(
        call(&sessions, "step_update", json!({"id": "c", "status": "done", "evidence": "said so"}))
            .ok
    );
    let result = env.status("s");
    let evidence = |i: usize| result.steps[i].evidence.clone();
    assert_eq!(evidence(0), ["made a", "client call: Bash touch a.txt (exit 0)"]);
    assert_eq!(evidence(1), ["made b", "client call: Write b.txt"]);
    assert_eq!(evidence(2), ["said so"]);
    assert_eq!(result.steps.iter().map(|s| s.attempts).collect::<Vec<_>>(), [1, 1, 1]);
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
}

#[test]
fn a_write_the_client_reports_unchanged_is_a_no_op_and_other_calls_are_not() {
    let env = Env::new();
    env.write("same.txt", "same\n");
    env.write("undone.txt", "orig\n");
    let sessions = honest(&env, "s");
    let root = env.ws.path().canonicalize().unwrap();
    let abs = |p: &str| root.join(p).display().to_string();
    // Recorded twice (the client wrote it twice): one no-op mutation.
    for _ in 0..2 {
        record(
            &env,
            "s",
            "Write",
            json!({"file_path": abs("same.txt"), "content": "same\n"}),
            json!({"originalFile": "same\n"}),
        );
    }
    // Edited and put back: the client saw a change, so it is no no-op.
    record(
        &env,
        "s",
        "Write",
        json!({"file_path": abs("undone.txt"), "content": "x"}),
        json!({"originalFile": "orig\n"}),
    );
    // A file that did not exist when the plan was made is not a no-op either.
    env.write("new.txt", "n");
    record(
        &env,
        "s",
        "Write",
        json!({"file_path": abs("new.txt"), "content": "n"}),
        json!({"originalFile": "n"}),
    );
    let _ = sessions;
    let result = env.status("s");
    let no_ops: Vec<&str> =
        result.file_mutations.iter().filter(|m| m.no_op).map(|m| m.path.as_str()).collect();
    assert_eq!(no_ops, ["same.txt"]);
    assert_eq!(codes(&result), ["no_op_mutation"]);
    assert!(result.goal_actions_executed);
}

#[test]
fn a_no_op_write_to_a_file_changed_since_is_not_a_no_op() {
    let env = Env::new();
    env.write("f.txt", "one\n");
    let _sessions = honest(&env, "s");
    env.write("f.txt", "two\n");
    record(
        &env,
        "s",
        "Write",
        json!({"file_path": "f.txt", "content": "two\n"}),
        json!({"originalFile": "two\n"}),
    );
    let result = env.status("s");
    assert!(result.file_mutations.iter().all(|m| !m.no_op), "{:?}", result.file_mutations);
    assert_eq!(result.status, RunStatus::Success);
}

#[test]
fn status_finds_the_run_never_reports_a_stale_success_and_keeps_a_recorded_cap() {
    let env = Env::new();
    let _sessions = honest(&env, "s");
    // A run of another kind in the same journal, newer: not the client's.
    env.store()
        .create_run(&pev_store::NewRun {
            run_id: "plain".into(),
            goal: "g".into(),
            workspace: env.ctx.workspace.root().display().to_string(),
            plan: json!({"goal": "g", "steps": []}),
            options: json!({}),
            created_at: "2999-01-01T00:00:00.000Z".into(),
        })
        .unwrap();
    assert!(env.stop("s", &GateOptions::default()).stdout.unwrap()["systemMessage"].is_string());
    let found = block_on(status(None, None, &env.ctx, &env.db)).unwrap();
    assert_eq!(
        (found.run_id.as_str(), found.status),
        (env.store().list_runs().unwrap()[1].run_id.as_str(), RunStatus::Success)
    );
    assert!(
        block_on(status(Some("nobody"), None, &env.ctx, &env.db))
            .unwrap_err()
            .0
            .contains("session nobody")
    );
    assert!(
        block_on(status(None, Some("plain"), &env.ctx, &env.db))
            .unwrap_err()
            .0
            .contains("not a pev mcp run")
    );
    // The workspace changes after the recorded success: the answer is the verdict now.
    env.write("hello.txt", "bye\n");
    let now = env.status("s");
    assert_ne!(now.status, RunStatus::Success);
    assert!(now.warnings[0].contains("changed since"), "{:?}", now.warnings);
}

#[test]
fn a_recorded_cap_is_what_status_reports() {
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
    let none = GateOptions { max_refusals: 0, ..GateOptions::default() };
    assert_eq!(env.stop("s", &none).stdout.unwrap()["continue"], false);
    let result = env.status("s");
    assert_eq!(result.status, RunStatus::Partial);
    assert!(
        result.warnings.iter().any(|w| w.contains("refused 0 stop(s)")),
        "{:?}",
        result.warnings
    );
}

#[test]
fn subagent_refusals_do_not_count_toward_the_stop_cap() {
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
    env.write("hello.txt", "bye\n");
    let sub = json!({"hook_event_name": "SubagentStop", "session_id": "s"});
    let one = GateOptions { max_refusals: 1, ..GateOptions::default() };
    assert_eq!(env.hook(&sub, &one).stdout.unwrap()["decision"], "block");
    // The main agent's first stop is still its first refusal, not past the cap.
    let out = env.stop("s", &one).stdout.unwrap();
    assert_eq!(out["decision"], "block", "{out}");
    assert!(out["reason"].as_str().unwrap().contains("refusal 1 of 1"));
}

#[test]
fn a_long_list_of_reasons_is_cut_with_a_count() {
    let reasons: Vec<String> = (1..=13).map(|i| format!("reason {i}")).collect();
    let text = block_reason("r", &reasons, 1, 3);
    assert!(text.contains("- reason 12\n- … and 1 more"), "{text}");
    let twelve = block_reason("r", &reasons[..12], 1, 3);
    assert!(!twelve.contains("more"), "{twelve}");
}

#[test]
fn the_default_counter_dir_is_under_the_temp_dir() {
    struct Bare;
    impl GateEnv for Bare {
        fn open(&self, _: Option<&str>) -> Result<(Arc<ToolContext>, PathBuf), String> {
            Err("no workspace".into())
        }
    }
    assert_eq!(Bare.counter_dir(), std::env::temp_dir().join("pev-gate"));
}

#[test]
fn content_changed_is_rechecked_against_the_hash_it_was_checked_against() {
    let env = Env::new();
    env.write("a.txt", "before\n");
    let sessions = env.sessions("s");
    let plan = json!({"objective": "Change a.txt", "steps": [{"id": "a", "title": "Change a.txt",
        "assertions": [{"type": "content_changed", "path": "a.txt"}]}]});
    assert!(call(&sessions, "plan_create", plan).ok);
    assert!(call(&sessions, "step_update", json!({"id": "a", "status": "in_progress"})).ok);
    env.write("a.txt", "after\n");
    assert!(
        call(
            &sessions,
            "step_update",
            json!({"id": "a", "status": "done", "evidence": "changed it"})
        )
        .ok
    );
    let result = env.status("s");
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert_eq!(result.final_check.unwrap().rechecked, 1);
}

#[test]
fn steps_accepted_together_give_the_calls_to_the_first_in_plan_order_not_by_name() {
    let env = Env::new();
    let sessions = env.sessions("s");
    let plan = json!({"objective": "Create z.txt", "steps": [
        {"id": "zeta", "title": "Create z.txt", "assertions": [{"type": "file_exists", "path": "z.txt"}]},
        {"id": "alpha", "title": "Say so"}
    ]});
    assert!(call(&sessions, "plan_create", plan).ok);
    record(&env, "s", "Bash", json!({"command": "touch z.txt"}), json!({"exit_code": 0}));
    env.write("z.txt", "");
    assert!(
        call(
            &sessions,
            "step_update",
            json!({"id": "zeta", "status": "done", "evidence": "made z"})
        )
        .ok
    );
    assert!(
        call(
            &sessions,
            "step_update",
            json!({"id": "alpha", "status": "done", "evidence": "said"})
        )
        .ok
    );
    let result = env.status("s");
    assert_eq!(result.steps[0].evidence, ["made z", "client call: Bash touch z.txt (exit 0)"]);
    assert_eq!(result.steps[1].evidence, ["said"]);
}

#[path = "gate_oracle_tests.rs"]
mod oracle;

#[path = "gate_todo_tests.rs"]
mod todo;

#[path = "gate_session_tests.rs"]
mod sessions;
