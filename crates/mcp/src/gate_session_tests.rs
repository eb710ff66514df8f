//! Issue 33: the gate with two sessions in one workspace, Claude Code's `/clear`, `SubagentStop`
//! with and without `--require-plan`, and a verdict gone stale. Each test names the rule it
//! holds; uses the helpers of `gate_tests.rs`.

use super::*;

fn events_of(env: &Env, run_id: &str) -> Vec<EventBody> {
    env.store().events(run_id).unwrap().into_iter().map(|e| e.body).collect()
}

fn gate_decisions(env: &Env, run_id: &str) -> usize {
    events_of(env, run_id).iter().filter(|b| matches!(b, EventBody::GateDecided { .. })).count()
}

/// Rule (`session::find_run`): the open run a hook may adopt is one that belongs to no session;
/// a session never adopts another session's run, at its stop or its PostToolUse.
#[test]
fn a_session_never_adopts_another_sessions_open_run() {
    let env = Env::new();
    let a = env.sessions("A");
    assert!(call(&a, "plan_create", hello_plan()).ok);
    let run_a = env.run_id();
    // B has no run of its own: its stop is not decided on A's unfinished run.
    assert_eq!(env.stop("B", &GateOptions::default()).stdout, None);
    let required = GateOptions { require_plan: true, ..GateOptions::default() };
    let out = env.stop("B", &required).stdout.unwrap();
    assert_eq!(out["decision"], "block");
    assert!(out["reason"].as_str().unwrap().contains("no pev plan"), "{out}");
    // B's own tool call is not recorded in A's run.
    let edit = json!({"hook_event_name": "PostToolUse", "session_id": "B", "tool_name": "Edit",
                      "tool_input": {"file_path": "x.txt"}});
    assert_eq!(env.hook(&edit, &GateOptions::default()).stdout, None);
    let bodies = events_of(&env, &run_a);
    assert!(!bodies.iter().any(|b| matches!(b, EventBody::ClientTool { .. })), "{bodies:?}");
    assert_eq!(gate_decisions(&env, &run_a), 0, "B's stops were decided on A's run");
    // A's own stop is decided on A's run (so the above is not vacuous).
    assert_eq!(env.stop("A", &GateOptions::default()).stdout.unwrap()["decision"], "block");
    assert_eq!(gate_decisions(&env, &run_a), 1);
}

/// Rule: two sessions at once each get their own run and their own verdict.
#[test]
fn two_sessions_at_once_are_decided_each_on_its_own_run() {
    let env = Env::new();
    let _a = honest(&env, "A");
    let run_a = env.run_id();
    let b = env.sessions("B");
    assert!(call(&b, "plan_create", hello_plan()).ok);
    let run_b = env.run_id();
    assert_ne!(run_a, run_b);
    // B's calls never touch A's plan.
    let answer = call(&b, "step_update", json!({"id": "check", "status": "done", "evidence": "b"}));
    assert!(answer.ok, "{}", answer.text);
    assert_eq!(env.status("A").status, RunStatus::Success);
    let out = env.stop("B", &GateOptions::default()).stdout.unwrap();
    assert_eq!(out["decision"], "block", "{out}");
    let out = env.stop("A", &GateOptions::default()).stdout.unwrap();
    assert!(out["systemMessage"].as_str().unwrap().contains(&run_a), "{out}");
    assert_eq!((gate_decisions(&env, &run_a), gate_decisions(&env, &run_b)), (1, 1));
}

/// Rule (`Sessions::session`, `Sessions::load`): after `/clear` (a SessionStart with a new id
/// under the same server) the server's calls belong to the new session, which starts a run of
/// its own; the old session's run keeps its plan and its verdict.
#[test]
fn after_clear_the_new_session_gets_a_run_of_its_own() {
    let env = Env::new();
    let server = Sessions::new(Arc::clone(&env.ctx), env.db.clone(), Some("A".to_owned()))
        .with_client_process(None);
    assert!(call(&server, "plan_create", hello_plan()).ok);
    let run_a = env.run_id();
    let start = json!({"hook_event_name": "SessionStart", "session_id": "B"});
    assert!(env.hook(&start, &GateOptions::default()).stdout.is_some());
    assert_eq!(server.session().as_deref(), Some("B"));
    // The new session has no plan yet: the server does not go on with A's.
    let answer = call(
        &server,
        "step_update",
        json!({"id": "write", "status": "done",
                                                      "evidence": "wrote it"}),
    );
    assert!(!answer.ok, "{}", answer.text);
    let plan =
        json!({"objective": "Create bye.txt", "steps": [{"id": "bye", "title": "Write bye.txt"}]});
    assert!(call(&server, "plan_create", plan).ok);
    let run_b = env.run_id();
    assert_ne!(run_a, run_b, "/clear's session revised the old session's plan");
    let options = env.store().run_options().unwrap();
    let session_of = |id: &str| {
        options.iter().find(|r| r.run_id == id).map(|r| r.options["session"].clone()).unwrap()
    };
    assert_eq!((session_of(&run_a), session_of(&run_b)), (json!("A"), json!("B")));
    let a = env.status("A");
    assert_eq!(a.run_id, run_a);
    assert!(a.steps.iter().all(|s| s.evidence.is_empty()), "{:?}", a.steps);
}

/// Rule (`no_plan`): `--require-plan` refuses a Stop without a plan, never a SubagentStop (a
/// sub-agent finishing is not the session stopping); without the flag neither is refused.
#[test]
fn subagent_stop_without_a_plan_passes_with_and_without_require_plan() {
    let env = Env::new();
    let sub = json!({"hook_event_name": "SubagentStop", "session_id": "s"});
    let required = GateOptions { require_plan: true, ..GateOptions::default() };
    for options in [GateOptions::default(), required.clone()] {
        assert_eq!(env.hook(&sub, &options).stdout, None, "{options:?}");
    }
    assert_eq!(env.stop("s", &GateOptions::default()).stdout, None);
    assert_eq!(env.stop("s", &required).stdout.unwrap()["decision"], "block");
}

/// Rule (`stop`): with a plan, a SubagentStop is held only when verified work was undone, with
/// `--require-plan` or without; unfinished work is the main agent's to finish.
#[test]
fn subagent_stop_with_an_unfinished_plan_passes_with_and_without_require_plan() {
    let env = Env::new();
    let sessions = env.sessions("s");
    assert!(call(&sessions, "plan_create", hello_plan()).ok);
    let sub = json!({"hook_event_name": "SubagentStop", "session_id": "s"});
    let required = GateOptions { require_plan: true, ..GateOptions::default() };
    for options in [GateOptions::default(), required] {
        assert_eq!(env.hook(&sub, &options).stdout, None, "{options:?}");
    }
    assert!(decisions(&env).is_empty(), "{:?}", decisions(&env));
}

/// Rule (`finish`): a verdict is recorded only under its guard: when a plan call came in after
/// the check began, nothing final is written and the run stays open.
#[test]
fn a_stale_verdict_is_not_recorded() {
    let env = Env::new();
    let sessions = honest(&env, "s");
    let run_id = env.run_id();
    let store = env.store();
    let last_call = |store: &Store| {
        store
            .events(&run_id)
            .unwrap()
            .iter()
            .rev()
            .find(|e| matches!(e.body, EventBody::ClientPlanCall { .. }))
            .map(|e| e.seq)
    };
    let seen = last_call(&store);
    let result = block_on(verdict::verdict(&store, &run_id, &env.ctx)).unwrap();
    assert_eq!(result.status, RunStatus::Success);
    // A plan call lands while the check runs.
    assert!(call(&sessions, "plan_show", json!({})).ok);
    assert_ne!(last_call(&store), seen);
    let decided = || decision(&Payload::default(), "allow", 0, &[]);
    let stale = Guard { kind: "client.plan_call", last: seen };
    assert!(!finish(&store, &result, stale, decided()).unwrap());
    let bodies = events_of(&env, &run_id);
    assert!(!bodies.iter().any(|b| matches!(b, EventBody::RunFinished { .. })), "{bodies:?}");
    assert_eq!(store.load_run(&run_id).unwrap().status, "running");
    // Under the current guard it is recorded.
    let fresh = Guard { kind: "client.plan_call", last: last_call(&store) };
    assert!(finish(&store, &result, fresh, decided()).unwrap());
    assert_eq!(store.load_run(&run_id).unwrap().status, "success");
}
