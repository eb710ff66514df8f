//! The gate and the client's own todo lists: `--from-transcript` without a plan, a todo list
//! beside a plan or instead of one. Uses the helpers of `gate_tests.rs`.

use super::*;

#[test]
fn the_transcript_checklist_and_its_counter() {
    let env = Env::new();
    let transcript = env.ws.path().join("t.jsonl");
    let todo = |status: &str| {
        json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "TodoWrite",
            "input": {"todos": [{"content": "A", "status": "completed", "activeForm": "A"},
                                {"content": "B", "status": status, "activeForm": "B"}]}}]}})
        .to_string()
    };
    std::fs::write(&transcript, todo("pending")).unwrap();
    let options = GateOptions { from_transcript: true, max_refusals: 1, ..GateOptions::default() };
    let stop = json!({"hook_event_name": "Stop", "session_id": "t", "transcript_path": transcript.display().to_string()});
    let out = env.hook(&stop, &options).stdout.unwrap();
    assert_eq!(out["decision"], "block");
    let reason = out["reason"].as_str().unwrap();
    assert!(
        reason.contains("1 item(s) open")
            && reason.contains("B (pending)")
            && !reason.contains("- A"),
        "{reason}"
    );
    let out = env.hook(&stop, &options).stdout.unwrap();
    assert_eq!(out["continue"], false);
    assert!(
        out["stopReason"].as_str().unwrap().contains("your own todo list is not finished"),
        "{out}"
    );
    // A SubagentStop does not read the parent's checklist.
    let sub = json!({"hook_event_name": "SubagentStop", "session_id": "t", "transcript_path": transcript.display().to_string()});
    assert_eq!(env.hook(&sub, &options).stdout, None);
    std::fs::write(&transcript, todo("completed")).unwrap();
    assert_eq!(env.hook(&stop, &options).stdout, None);
}

#[test]
fn a_dropped_step_is_said_and_todos_beside_a_plan_can_all_be_done() {
    let env = Env::new();
    let sessions = honest(&env, "s");
    let mut revised = hello_plan();
    revised["steps"].as_array_mut().unwrap().truncate(1);
    revised["dropped"] = json!([{"id": "check", "reason": "the postcondition reads it"}]);
    assert!(call(&sessions, "plan_create", revised).ok);
    let todos = json!({"todos": [{"content": "Tell the team", "status": "completed", "active_form": "Telling"}]});
    assert!(call(&sessions, "todo_write", todos).ok);
    let result = env.status("s");
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert!(
        result.warnings.iter().any(|w| w.contains("dropped step(s) from its plan: `check`")),
        "{:?}",
        result.warnings
    );
    assert!(!result.warnings.iter().any(|w| w.contains("todo list but no plan")));
}

#[test]
fn a_todo_list_without_changes_asks_for_a_change_that_did_not_happen() {
    let env = Env::new();
    let sessions = env.sessions("s");
    let todos = json!({"todos": [{"content": "Write a.txt", "status": "completed", "active_form": "Writing"}]});
    assert!(call(&sessions, "todo_write", todos).ok);
    let result = env.status("s");
    assert_eq!(codes(&result), ["no_effects"]);
    assert!(result.warnings.iter().any(|w| w.contains("todo list but no plan")));
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
