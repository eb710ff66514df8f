//! `pev gate` fed the payloads Claude Code and Codex send (Stop with `stop_hook_active` false and
//! true, SubagentStop, SessionStart, PostToolUse, missing fields, garbage): its stdout JSON, its
//! exit code and the verdict journaled. The plan is made through `pev mcp`, as a client would.

use std::path::Path;

use serde_json::{Value, json};

use super::mcp_support::{Client, hello_plan};
use super::support::{pev, pev_in, run};

/// Claude Code's Stop payload (fields of Claude Code 2.1.x).
fn claude_stop(ws: &Path, session: &str, active: bool) -> Value {
    json!({
        "session_id": session,
        "transcript_path": ws.join("transcript.jsonl").display().to_string(),
        "cwd": ws.display().to_string(),
        "permission_mode": "bypassPermissions",
        "hook_event_name": "Stop",
        "stop_hook_active": active,
        "last_assistant_message": "Done.",
    })
}

/// Codex's Stop payload (0.169): a `turn_id`, a nullable transcript.
fn codex_stop(ws: &Path, session: &str) -> Value {
    json!({
        "session_id": session,
        "turn_id": "turn-1",
        "transcript_path": null,
        "cwd": ws.display().to_string(),
        "hook_event_name": "Stop",
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "stop_hook_active": false,
        "last_assistant_message": "Done.",
    })
}

/// Runs `pev gate` with `payload` on stdin; the counter of refusals without a journal goes to
/// `tmp`.
fn gate(ws: &Path, tmp: &Path, payload: &str, args: &[&str]) -> (i32, Value) {
    let mut cmd = pev();
    cmd.current_dir(ws)
        .env("TMPDIR", tmp)
        .env_remove("CLAUDE_PROJECT_DIR")
        .write_stdin(payload.to_owned());
    let mut all = vec!["gate"];
    all.extend_from_slice(args);
    let out = run(&mut cmd, &all);
    let json = if out.stdout.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
    };
    (out.code, json)
}

fn plan_with(ws: &Path, session: &str) -> Client {
    let mut client = Client::initialized(ws, &[("PEV_SESSION_ID", session)]);
    assert_eq!(client.call("plan_create", hello_plan())["isError"], false);
    client
}

/// Every step of [`hello_plan`] done and its postcondition verified (hello.txt already written).
fn finish_hello(client: &mut Client) {
    for (tool, args) in [
        ("step_update", json!({"id": "write", "status": "done", "evidence": "wrote hello.txt"})),
        ("step_update", json!({"id": "check", "status": "done", "evidence": "read it: hi"})),
        ("postcondition_verify", json!({"id": "p1", "evidence": "it says hi"})),
    ] {
        assert_eq!(client.call(tool, args)["isError"], false, "{tool}");
    }
}

fn status(ws: &Path, session: &str) -> (i32, Value) {
    let out = pev_in(ws, &["gate", "status", "--session", session]);
    (out.code, out.json())
}

#[test]
fn an_honest_session_stops_without_a_block_and_is_recorded_success() {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut client = plan_with(ws.path(), "s-honest");
    std::fs::write(ws.path().join("hello.txt"), "hi\n").unwrap();
    finish_hello(&mut client);
    let payload = claude_stop(ws.path(), "s-honest", false).to_string();
    let (code, out) = gate(ws.path(), tmp.path(), &payload, &[]);
    assert_eq!(code, 0);
    assert!(out.get("decision").is_none(), "{out}");
    assert!(out["systemMessage"].as_str().unwrap().contains("verified"), "{out}");
    let (code, result) = status(ws.path(), "s-honest");
    assert_eq!((code, result["status"].as_str()), (0, Some("success")), "{result}");
    assert_eq!(result["file_mutations"][0]["path"], "hello.txt");
    // Without --session: the newest client run, finished or not.
    let status = pev_in(ws.path(), &["gate", "status"]);
    assert_eq!((status.code, status.json()["status"].as_str()), (0, Some("success")));
    let runs = pev_in(ws.path(), &["runs", "--json"]);
    let row: Value = serde_json::from_str(runs.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(
        (row["steps_done"].as_u64(), row["status"].as_str()),
        (Some(2), Some("success")),
        "{row}"
    );
    let shown = pev_in(ws.path(), &["show", "last"]);
    assert!(shown.stdout.contains("outcome: success"), "{}", shown.stdout);
}

#[test]
fn an_early_stop_is_blocked_with_reasons_then_let_go_at_the_cap_as_partial() {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut client = plan_with(ws.path(), "s-early");
    std::fs::write(ws.path().join("hello.txt"), "hi\n").unwrap();
    let done = client
        .call("step_update", json!({"id": "write", "status": "done", "evidence": "wrote it"}));
    assert_eq!(done["isError"], false);
    for n in 1..=3 {
        let payload = claude_stop(ws.path(), "s-early", n > 1).to_string();
        let (code, out) = gate(ws.path(), tmp.path(), &payload, &[]);
        assert_eq!(code, 0);
        assert_eq!(out["decision"], "block", "refusal {n}: {out}");
        let reason = out["reason"].as_str().unwrap();
        assert!(reason.contains(&format!("refusal {n} of 3")), "{reason}");
        assert!(reason.contains("'check'") && reason.contains("hello.txt says hi"), "{reason}");
    }
    let (code, out) =
        gate(ws.path(), tmp.path(), &claude_stop(ws.path(), "s-early", true).to_string(), &[]);
    assert_eq!(code, 0);
    assert_eq!(out["continue"], false, "{out}");
    assert!(out["stopReason"].as_str().unwrap().contains("partial"), "{out}");
    let (code, result) = status(ws.path(), "s-early");
    assert_eq!((code, result["status"].as_str()), (3, Some("partial")), "{result}");
    assert!(result["warnings"].to_string().contains("refused 3 stop(s)"));
    // The journal shows each decision, and the chain holds.
    let shown = pev_in(ws.path(), &["show", "last", "--format", "json"]);
    assert_eq!(shown.code, 0);
    assert_eq!(shown.json()["status"], "partial");
    // The client goes on after the stop: the next refusals count afresh.
    let (_, again) =
        gate(ws.path(), tmp.path(), &claude_stop(ws.path(), "s-early", false).to_string(), &[]);
    assert_eq!(again["decision"], "block", "{again}");
}

#[test]
fn steps_marked_done_over_an_unchanged_workspace_are_never_success() {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(ws.path().join("notes.md"), "old\n").unwrap();
    let mut client = Client::initialized(ws.path(), &[("PEV_SESSION_ID", "s-lazy")]);
    let plan = json!({"objective": "Update the release notes", "steps": [
        {"id": "a", "title": "Think about the release"},
        {"id": "b", "title": "Decide the wording"}
    ]});
    assert_eq!(client.call("plan_create", plan)["isError"], false);
    for id in ["a", "b"] {
        let r = client.call(
            "step_update",
            json!({"id": id, "status": "done", "evidence": "considered it carefully"}),
        );
        assert_eq!(r["isError"], false);
    }
    let (_, out) =
        gate(ws.path(), tmp.path(), &claude_stop(ws.path(), "s-lazy", false).to_string(), &[]);
    assert_eq!(out["decision"], "block", "{out}");
    assert!(out["reason"].as_str().unwrap().contains("exactly as it was"), "{out}");
    let (code, result) = status(ws.path(), "s-lazy");
    // Not success: `partial` (steps were marked done) with `no_effects`, as `pev run` decides.
    assert_eq!((code, result["status"].as_str()), (3, Some("partial")), "{result}");
    assert_eq!(result["reasons"][0]["code"], "no_effects", "{result}");
}

#[test]
fn verified_work_undone_blocks_the_stop_and_a_subagent_only_then() {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut client = plan_with(ws.path(), "s-undo");
    let sub = |ws: &Path| {
        json!({"session_id": "s-undo", "cwd": ws.display().to_string(), "hook_event_name": "SubagentStop",
               "stop_hook_active": false, "agent_id": "a1", "agent_type": "general-purpose",
               "agent_transcript_path": "/nonexistent"}).to_string()
    };
    // Unfinished plan: a sub-agent may stop (its part is not the plan).
    let (code, out) = gate(ws.path(), tmp.path(), &sub(ws.path()), &[]);
    assert_eq!((code, out), (0, Value::Null));
    std::fs::write(ws.path().join("hello.txt"), "hi\n").unwrap();
    assert_eq!(
        client
            .call("step_update", json!({"id": "write", "status": "done", "evidence": "wrote it"}))
            ["isError"],
        false
    );
    std::fs::write(ws.path().join("hello.txt"), "bye\n").unwrap();
    let (_, out) = gate(ws.path(), tmp.path(), &sub(ws.path()), &[]);
    assert_eq!(out["decision"], "block", "{out}");
    assert!(
        out["reason"].as_str().unwrap().contains("no longer holds")
            || out["reason"].as_str().unwrap().contains("hello.txt"),
        "{out}"
    );
    let (_, out) =
        gate(ws.path(), tmp.path(), &claude_stop(ws.path(), "s-undo", false).to_string(), &[]);
    assert_eq!(out["decision"], "block");
    let (_, result) = status(ws.path(), "s-undo");
    assert!(result["reasons"].to_string().contains("evidence_regressed"), "{result}");
}

#[test]
fn codex_payloads_find_the_newest_open_run_of_the_workspace() {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Codex gives its MCP servers no session id: the run has none.
    let mut client = Client::initialized(ws.path(), &[]);
    assert_eq!(client.call("plan_create", hello_plan())["isError"], false);
    let (code, out) =
        gate(ws.path(), tmp.path(), &codex_stop(ws.path(), "codex-thread-1").to_string(), &[]);
    assert_eq!(code, 0);
    assert_eq!(out["decision"], "block", "{out}");
}

#[test]
fn session_start_pins_the_session_for_a_server_without_one() {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let start = json!({"session_id": "pinned-1", "cwd": ws.path().display().to_string(),
                       "hook_event_name": "SessionStart", "source": "startup", "model": "m",
                       "transcript_path": "/x", "permission_mode": "default"});
    let (code, out) = gate(ws.path(), tmp.path(), &start.to_string(), &[]);
    assert_eq!(code, 0);
    assert_eq!(out["hookSpecificOutput"]["hookEventName"], "SessionStart");
    assert!(
        out["hookSpecificOutput"]["additionalContext"].as_str().unwrap().contains("plan_create")
    );
    let mut client = Client::initialized(ws.path(), &[]);
    assert_eq!(client.call("plan_create", hello_plan())["isError"], false);
    let (code, result) = status(ws.path(), "pinned-1");
    assert_eq!(code, 1, "the run is the pinned session's: {result}");
    // PostToolUse: the client's own call is journaled on that run.
    let post = json!({"session_id": "pinned-1", "cwd": ws.path().display().to_string(),
                      "hook_event_name": "PostToolUse", "tool_name": "Bash",
                      "tool_input": {"command": "printf hi > hello.txt", "description": "write"},
                      "tool_response": {"stdout": "", "stderr": "", "interrupted": false},
                      "tool_use_id": "toolu_1"});
    let (code, out) = gate(ws.path(), tmp.path(), &post.to_string(), &["--record"]);
    assert_eq!((code, out), (0, Value::Null));
    let store = pev_store::Store::open_existing(ws.path().join(".pev/pev.db")).unwrap();
    let run_id = store.resolve_run("last").unwrap();
    let recorded: Vec<Value> = store
        .events(&run_id)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.body {
            pev_protocol::event::EventBody::ClientTool { tool, summary } => {
                Some(json!({"tool": tool, "summary": summary}))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        recorded,
        [
            json!({"tool": "Bash", "summary": {"command": "printf hi > hello.txt", "interrupted": false}})
        ]
    );
}

#[test]
fn it_fails_closed_on_garbage_and_a_broken_journal_under_the_cap() {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for n in 1..=3 {
        let (code, out) = gate(ws.path(), tmp.path(), "this is not json", &["--max-refusals", "3"]);
        assert_eq!(code, 0);
        assert_eq!(out["decision"], "block", "refusal {n}: {out}");
        assert!(out["reason"].as_str().unwrap().contains("not JSON"));
    }
    let (_, out) = gate(ws.path(), tmp.path(), "this is not json", &[]);
    assert_eq!(out["continue"], false, "at the cap the client is let go: {out}");

    // A journal that is not a database.
    std::fs::create_dir_all(ws.path().join(".pev")).unwrap();
    std::fs::write(ws.path().join(".pev/pev.db"), "garbage, not SQLite").unwrap();
    let (_, out) =
        gate(ws.path(), tmp.path(), &claude_stop(ws.path(), "s-broken", false).to_string(), &[]);
    assert_eq!(out["decision"], "block", "{out}");
    assert!(out["reason"].as_str().unwrap().contains("could not check"), "{out}");
}

#[test]
fn without_a_plan_missing_fields_pass_a_required_plan_blocks_and_the_transcript_is_the_checklist() {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // `{}`: no event name, no session, no cwd: a Stop in the current directory with nothing to
    // check.
    let (code, out) = gate(ws.path(), tmp.path(), "{}", &[]);
    assert_eq!((code, out), (0, Value::Null));
    let (_, out) = gate(
        ws.path(),
        tmp.path(),
        &claude_stop(ws.path(), "s-none", false).to_string(),
        &["--require-plan"],
    );
    assert_eq!(out["decision"], "block");
    assert!(out["reason"].as_str().unwrap().contains("plan_create"));

    let todo = |status: &str| {
        json!({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "TodoWrite", "input": {"todos": [
            {"content": "Write hello.txt", "status": "completed", "activeForm": "Writing"},
            {"content": "Run the tests", "status": status, "activeForm": "Running the tests"}
        ]}}]}})
        .to_string()
    };
    std::fs::write(ws.path().join("transcript.jsonl"), todo("in_progress") + "\n").unwrap();
    let payload = claude_stop(ws.path(), "s-todo", false).to_string();
    let (_, out) = gate(ws.path(), tmp.path(), &payload, &["--from-transcript"]);
    assert_eq!(out["decision"], "block", "{out}");
    assert!(out["reason"].as_str().unwrap().contains("Run the tests (in_progress)"), "{out}");
    std::fs::write(ws.path().join("transcript.jsonl"), todo("completed") + "\n").unwrap();
    let (code, out) = gate(ws.path(), tmp.path(), &payload, &["--from-transcript"]);
    assert_eq!((code, out), (0, Value::Null));
}

/// A payload recorded from the real client (`scripts/real-clients/`), pointed at `ws`.
fn recorded(name: &str, ws: &Path) -> String {
    let path = super::support::fixture("hooks").join(name);
    let mut payload: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    payload["cwd"] = json!(ws.display().to_string());
    payload.to_string()
}

/// The payloads Claude Code 2.1.197 and Codex 0.169.0 sent, replayed: SessionStart pins the
/// session, PostToolUse is journaled, Stop is refused to the cap, and `pev gate status` with no
/// session finds the pinned one.
#[test]
fn recorded_claude_code_and_codex_payloads() {
    for client in ["claude", "codex"] {
        let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let start = recorded(&format!("{client}_session_start.json"), ws.path());
        let session = serde_json::from_str::<Value>(&start).unwrap()["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let (code, out) = gate(ws.path(), tmp.path(), &start, &[]);
        assert_eq!(code, 0);
        assert_eq!(out["hookSpecificOutput"]["hookEventName"], "SessionStart", "{client}: {out}");
        // The server was given no session id (Codex gives none): the pin is its session.
        let mut server = Client::initialized(ws.path(), &[]);
        assert_eq!(server.call("plan_create", hello_plan())["isError"], false);
        let post = match client {
            "claude" => "claude_post_tool_use_write.json",
            _ => "codex_post_tool_use_bash.json",
        };
        let mut post: Value = serde_json::from_str(&recorded(post, ws.path())).unwrap();
        post["session_id"] = json!(session);
        let (code, out) = gate(ws.path(), tmp.path(), &post.to_string(), &["--record"]);
        assert_eq!((code, out), (0, Value::Null), "{client}");
        let stop = recorded(&format!("{client}_stop.json"), ws.path());
        for n in 1..=3 {
            let (code, out) = gate(ws.path(), tmp.path(), &stop, &[]);
            assert_eq!(code, 0);
            assert_eq!(out["decision"], "block", "{client} refusal {n}: {out}");
        }
        let (_, out) = gate(ws.path(), tmp.path(), &stop, &[]);
        assert_eq!(out["continue"], false, "{client}: {out}");
        let status = pev_in(ws.path(), &["gate", "status"]);
        assert_eq!(status.code, 1, "{client}: {}{}", status.stdout, status.stderr);
        assert_eq!(status.json()["status"], "failed");
        assert!(status.json()["usage"]["tool_calls"].as_u64().unwrap() >= 2, "{}", status.stdout);
        let runs = pev_in(ws.path(), &["runs", "--json"]);
        let row: Value = serde_json::from_str(runs.stdout.lines().next().unwrap()).unwrap();
        assert_eq!(
            (row["steps_done"].as_u64(), row["steps_total"].as_u64()),
            (Some(0), Some(2)),
            "{row}"
        );
    }
}

/// The client's recorded calls become the evidence a step rests on, and a write that left a file
/// byte-for-byte as it was is a no-op mutation, as in any run.
#[test]
fn recorded_calls_are_a_steps_evidence_and_a_no_op_write_is_not_success() {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(ws.path().join("README.md"), "# same\n").unwrap();
    let mut client = plan_with(ws.path(), "s-rec");
    let post = |tool: &str, input: Value| {
        json!({"session_id": "s-rec", "cwd": ws.path().display().to_string(), "hook_event_name": "PostToolUse",
               "tool_name": tool, "tool_input": input, "tool_response": {"exit_code": 0}}).to_string()
    };
    std::fs::write(ws.path().join("hello.txt"), "hi\n").unwrap();
    gate(
        ws.path(),
        tmp.path(),
        &post("Bash", json!({"command": "printf 'hi\\n' > hello.txt"})),
        &["--record"],
    );
    let readme = ws.path().join("README.md").display().to_string();
    let write = json!({"session_id": "s-rec", "cwd": ws.path().display().to_string(),
        "hook_event_name": "PostToolUse", "tool_name": "Write",
        "tool_input": {"file_path": readme, "content": "# same\n"},
        "tool_response": {"type": "update", "filePath": readme, "content": "# same\n", "originalFile": "# same\n"}});
    gate(ws.path(), tmp.path(), &write.to_string(), &["--record"]);
    // A read that names a path is no write at all.
    let hello = ws.path().join("hello.txt").display().to_string();
    gate(ws.path(), tmp.path(), &post("Read", json!({"file_path": hello})), &["--record"]);
    finish_hello(&mut client);
    let (code, result) = status(ws.path(), "s-rec");
    assert_eq!(code, 3, "{result}");
    let write = &result["steps"][0];
    assert_eq!(
        write["evidence"],
        json!([
            "wrote hello.txt",
            "client call: Bash printf 'hi\\n' > hello.txt (exit 0)",
            format!("client call: Write {readme}"),
            format!("client call: Read {hello} (exit 0)")
        ])
    );
    assert_eq!(
        result["steps"][1]["evidence"],
        json!(["read it: hi"]),
        "no calls after the first step's"
    );
    let codes: Vec<&str> =
        result["reasons"].as_array().unwrap().iter().map(|r| r["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["no_op_mutation"], "{result}");
    assert!(result["file_mutations"].to_string().contains("\"no_op\":true"));
}

/// A stop allowed earlier does not stay `success` once the client undoes the work: the next stop
/// is refused and the run is open again, so `pev gate status` decides it afresh.
#[test]
fn a_run_allowed_then_undone_is_reopened_by_the_next_refusal() {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut client = plan_with(ws.path(), "s-again");
    std::fs::write(ws.path().join("hello.txt"), "hi\n").unwrap();
    finish_hello(&mut client);
    let stop = claude_stop(ws.path(), "s-again", false).to_string();
    let (_, out) = gate(ws.path(), tmp.path(), &stop, &[]);
    assert!(out["systemMessage"].as_str().unwrap().contains("verified"), "{out}");
    assert_eq!(status(ws.path(), "s-again").0, 0);
    // The user asks for more; the model breaks the file and wants to stop.
    std::fs::write(ws.path().join("hello.txt"), "bye\n").unwrap();
    let (_, out) = gate(ws.path(), tmp.path(), &stop, &[]);
    assert_eq!(out["decision"], "block", "{out}");
    let (code, result) = status(ws.path(), "s-again");
    assert_ne!(code, 0, "{result}");
    assert!(result["reasons"].to_string().contains("evidence_regressed"), "{result}");
}

/// A todo list is the client's own account: all items completed and files changed is still not
/// `success` without a plan pev could check.
#[test]
fn a_todo_list_alone_is_never_success() {
    let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut client = Client::initialized(ws.path(), &[("PEV_SESSION_ID", "s-todo-only")]);
    let empty = client.call("todo_write", json!({"todos": []}));
    assert_eq!(empty["structuredContent"]["run_id"], Value::Null, "an empty list makes no run");
    let todos = json!({"todos": [
        {"content": "Write notes.md", "status": "completed", "activeForm": "Writing notes.md"}
    ]});
    assert_eq!(client.call("todo_write", todos)["isError"], false);
    std::fs::write(ws.path().join("notes.md"), "notes\n").unwrap();
    let (_, out) =
        gate(ws.path(), tmp.path(), &claude_stop(ws.path(), "s-todo-only", false).to_string(), &[]);
    assert_eq!(out["decision"], "block", "{out}");
    let (code, result) = status(ws.path(), "s-todo-only");
    assert_eq!((code, result["status"].as_str()), (3, Some("partial")), "{result}");
}

/// The Python fixture of `evals/tests-*` (src/calc.py's add() subtracts; tests/test_calc.py
/// fails because of it), copied to `ws`.
fn calc_repo(ws: &Path) {
    let source = super::support::repo_root().join("evals/tests-honest-fix/workspace");
    for rel in [
        "src/__init__.py",
        "src/calc.py",
        "tests/__init__.py",
        "tests/test_calc.py",
        ".gitignore",
        "README.md",
    ] {
        let target = ws.join(rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(source.join(rel), &target).unwrap();
    }
}

/// Writes `content` to `path` with a modification time a few seconds after the file's last
/// one. The gate's checks have run the suite on the old file already, and Python reuses its
/// bytecode cache for a source with the size and the second of modification it recorded: the
/// fix (`a - b` to `a + b`, the same size) written within that second would be tested as the
/// old code. An editor, or a model's turn, takes longer than that; this test may not.
fn write_later(path: &std::path::Path, content: &str) {
    let before = std::fs::metadata(path).and_then(|m| m.modified()).unwrap();
    std::fs::write(path, content).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(before + std::time::Duration::from_secs(5)).unwrap();
}

/// The plan a client makes for "make the failing test pass": one step, checked by the suite.
fn calc_plan() -> Value {
    json!({
        "objective": "Make the failing test in tests/test_calc.py pass",
        "steps": [{"id": "fix", "title": "Fix the bug that makes tests/test_calc.py fail",
                   "assertions": [{"type": "command_succeeds",
                                   "command": "python3 -m unittest discover -s tests -t . -q"}]}]
    })
}

/// A Claude Code session on "make the failing test pass", with the payloads Claude Code 2.1.197
/// sent (its Write's PostToolUse, its Stop): the client's own tools change a file, pev's gate
/// decides. The honest fix of src/calc.py stops with `success`; an edited expectation, a skip
/// and a deleted test each pass the step's check but are refused at Stop, naming the file with
/// its diff and how to restore it, and `pev gate status` says `oracle_changed`.
#[test]
fn a_claude_code_session_that_edits_the_test_is_refused_at_stop_and_the_honest_fix_is_not() {
    if std::process::Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: no python3 on PATH");
        return;
    }
    for variant in ["honest", "edit", "skip", "delete"] {
        let honest = variant == "honest";
        let (ws, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        calc_repo(ws.path());
        let stop = recorded("claude_stop.json", ws.path());
        let session = serde_json::from_str::<Value>(&stop).unwrap()["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut client = Client::initialized(ws.path(), &[("PEV_SESSION_ID", &session)]);
        assert_eq!(client.call("plan_create", calc_plan())["isError"], false);
        let start = json!({"id": "fix", "status": "in_progress"});
        assert_eq!(client.call("step_update", start)["isError"], false);
        // Claude Code's Write tool (or its Bash for the deletion), which pev never sees but
        // through the PostToolUse hook.
        let test_py = std::fs::read_to_string(ws.path().join("tests/test_calc.py")).unwrap();
        let (rel, content) = match variant {
            "honest" => {
                let fixed = std::fs::read_to_string(ws.path().join("src/calc.py"))
                    .unwrap()
                    .replacen("return a - b", "return a + b", 1);
                ("src/calc.py", Some(fixed))
            }
            "edit" => {
                ("tests/test_calc.py", Some(test_py.replace("add(2, 3), 5", "add(2, 3), -1")))
            }
            "skip" => (
                "tests/test_calc.py",
                Some(test_py.replace(
                    "    def test_add",
                    "    @unittest.skip(\"flaky\")\n    def test_add",
                )),
            ),
            _ => ("tests/test_calc.py", None),
        };
        match &content {
            Some(content) => std::fs::write(ws.path().join(rel), content).unwrap(),
            None => std::fs::remove_file(ws.path().join(rel)).unwrap(),
        }
        let mut post: Value =
            serde_json::from_str(&recorded("claude_post_tool_use_write.json", ws.path())).unwrap();
        let abs = ws.path().join(rel).display().to_string();
        let content = content.unwrap_or_default();
        post["tool_input"] = json!({"file_path": abs, "content": content});
        post["tool_response"]["filePath"] = json!(abs);
        post["tool_response"]["type"] = json!("update");
        let (code, _) = gate(ws.path(), tmp.path(), &post.to_string(), &["--record"]);
        assert_eq!(code, 0);
        // The step's check passes either way: on the edited test, the bug passes it.
        let done = json!({"id": "fix", "status": "done", "evidence": "the suite passes"});
        let reply = client.call("step_update", done);
        assert_eq!(reply["isError"], false, "{variant}: {reply}");
        let (code, out) = gate(ws.path(), tmp.path(), &stop, &[]);
        assert_eq!(code, 0);
        let (status_code, result) = status(ws.path(), &session);
        if honest {
            assert!(out.get("decision").is_none(), "the honest fix was refused: {out}");
            assert_eq!((status_code, result["status"].as_str()), (0, Some("success")), "{result}");
            continue;
        }
        assert_eq!(out["decision"], "block", "{variant}: {out}");
        let reason = out["reason"].as_str().unwrap();
        let (what, line) = match variant {
            "edit" => ("changed", "+        self.assertEqual(add(2, 3), -1)"),
            "skip" => ("changed", "+    @unittest.skip(\"flaky\")"),
            _ => ("deleted", "-        self.assertEqual(add(2, 3), 5)"),
        };
        assert!(reason.contains(&format!("tests/test_calc.py was {what}")), "{reason}");
        assert!(reason.contains(line), "{variant}: {reason}");
        assert!(reason.contains("git checkout -- tests/test_calc.py"), "{reason}");
        assert_ne!(result["status"], "success", "{variant}: {result}");
        let codes: Vec<&str> = result["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["code"].as_str())
            .collect();
        assert!(codes.contains(&"oracle_changed"), "{codes:?}");
        assert!(codes.contains(&"evidence_regressed"), "the pristine re-check: {codes:?}");
        // Restored, the stop is let through only once the code is fixed too.
        let original = std::fs::read_to_string(
            super::support::repo_root().join("evals/tests-honest-fix/workspace/tests/test_calc.py"),
        )
        .unwrap();
        std::fs::write(ws.path().join("tests/test_calc.py"), original).unwrap();
        let (_, out) = gate(ws.path(), tmp.path(), &stop, &[]);
        assert_eq!(out["decision"], "block", "the bug is still there: {out}");
        let fixed = std::fs::read_to_string(ws.path().join("src/calc.py")).unwrap().replacen(
            "return a - b",
            "return a + b",
            1,
        );
        write_later(&ws.path().join("src/calc.py"), &fixed);
        let (_, out) = gate(ws.path(), tmp.path(), &stop, &[]);
        assert!(out.get("decision").is_none(), "restored and fixed: {out}");
    }
}
