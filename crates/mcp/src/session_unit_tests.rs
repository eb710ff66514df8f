//! Issue 33: the rules of `session.rs` that no test of the crate held — which session a server's
//! calls belong to (the environment, the pins and their age, the client process, /clear), which
//! run a call drives (the remembered one, a shared server's named one), when a run is made,
//! reopened or given a new plan version. Each test names the rule it holds; the mutants of
//! `session.rs` it kills are listed above it (line numbers as of the issue).

use std::sync::Arc;

use pev_protocol::event::EventBody;
use pev_store::{Record, Store};
use pev_tools::{ToolContext, Workspace};
use serde_json::{Value, json};

use super::*;

/// A workspace in a temp dir and its journal's path (the journal is made by the first run).
struct Env {
    ws: tempfile::TempDir,
    ctx: Arc<ToolContext>,
    db: PathBuf,
}

impl Env {
    fn new() -> Self {
        let ws = tempfile::tempdir().unwrap();
        let workspace = Workspace::open(ws.path()).unwrap();
        let db = pev_store::default_path(workspace.root());
        Self { ctx: Arc::new(ToolContext::new(workspace)), db, ws }
    }

    /// A server given `env` by its environment and started by the client process `process`.
    fn server(&self, env: Option<&str>, process: Option<&str>) -> Sessions {
        Sessions::new(Arc::clone(&self.ctx), self.db.clone(), env.map(str::to_owned))
            .with_client_process(process.map(str::to_owned))
    }

    fn write(&self, path: &str, text: &str) {
        std::fs::write(self.ws.path().join(path), text).unwrap();
    }

    fn store(&self) -> Store {
        Store::open_existing(&self.db).unwrap()
    }

    fn runs(&self) -> Vec<String> {
        match Store::open_existing(&self.db) {
            Ok(store) => store.run_options().unwrap().into_iter().map(|r| r.run_id).collect(),
            Err(_) => Vec::new(),
        }
    }

    fn status(&self, run_id: &str) -> String {
        self.store().load_run(run_id).unwrap().status
    }

    fn events(&self, run_id: &str) -> Vec<EventBody> {
        self.store().events(run_id).unwrap().into_iter().map(|e| e.body).collect()
    }

    /// The run recorded as finished, as the gate would.
    fn finish(&self, run_id: &str) {
        let record = Record::RunStatus {
            run_id: run_id.to_owned(),
            status: "success".to_owned(),
            result: None,
            updated_at: now_rfc3339(),
        };
        self.store().append_guarded(run_id, None, &[record], Vec::new()).unwrap().unwrap();
        assert_eq!(self.status(run_id), "success");
    }
}

/// The clock, read here rather than through `unix_now` (whose mutants are under test).
fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// Writes a pin as the SessionStart hook does, with `at` and `client_process` chosen.
fn write_pin_file(path: &Path, session: &str, at: u64, process: Option<&str>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let body = json!({"session_id": session, "client": "claude-code", "at": at,
                      "client_process": process});
    std::fs::write(path, body.to_string()).unwrap();
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}

fn call_at(sessions: &Sessions, tool: &str, args: Value, target: Target<'_>) -> Answer {
    block_on(sessions.call(tool, args, target)).unwrap()
}

fn call(sessions: &Sessions, tool: &str, args: Value) -> Answer {
    call_at(sessions, tool, args, Target::default())
}

fn plan() -> Value {
    json!({"objective": "Write the notes",
           "steps": [{"id": "a", "title": "Think it over"}, {"id": "b", "title": "Write it down"}]})
}

fn run_of(answer: &Answer) -> Option<String> {
    answer.structured["run_id"].as_str().map(str::to_owned)
}

fn plan_calls(env: &Env, run_id: &str) -> Vec<(String, bool, Option<Value>)> {
    env.events(run_id)
        .into_iter()
        .filter_map(|b| match b {
            EventBody::ClientPlanCall { tool, ok, state, .. } => Some((tool, ok, state)),
            _ => None,
        })
        .collect()
}

fn versions(env: &Env, run_id: &str) -> Vec<u32> {
    env.store().plan_versions(run_id).unwrap().into_iter().map(|(v, ..)| v).collect()
}

fn revised(env: &Env, run_id: &str) -> Vec<u32> {
    env.events(run_id)
        .into_iter()
        .filter_map(|b| match b {
            EventBody::PlanRevised { version, .. } => Some(version),
            _ => None,
        })
        .collect()
}

// ---- The environment's session id ----

/// Rule (`session_from_env`): `PEV_SESSION_ID` first, then `CLAUDE_CODE_SESSION_ID`, each
/// trimmed; a blank one is not an id (the next is tried).
/// Kills 57:5 (`None`), 58:48 (`delete !`).
#[test]
fn the_environment_names_the_session_pev_first_then_claude_code_and_blank_is_none() {
    let from = |pev: Option<&str>, claude: Option<&str>| {
        let var = |name: &str| match name {
            "PEV_SESSION_ID" => pev.map(str::to_owned),
            "CLAUDE_CODE_SESSION_ID" => claude.map(str::to_owned),
            _ => None,
        };
        session_from_env(&var)
    };
    let pev = SessionSource::Env("PEV_SESSION_ID");
    let claude = SessionSource::Env("CLAUDE_CODE_SESSION_ID");
    assert_eq!(from(Some(" p1 "), Some("c1")), Some(("p1".to_owned(), pev.clone())));
    assert_eq!(from(Some("p1"), None), Some(("p1".to_owned(), pev)));
    assert_eq!(from(None, Some("c1\n")), Some(("c1".to_owned(), claude.clone())));
    assert_eq!(from(Some("  "), Some("c1")), Some(("c1".to_owned(), claude)));
    assert_eq!(from(Some(""), Some(" \t")), None);
    assert_eq!(from(None, None), None);
}

// ---- Pins and their age ----

/// Rule (`PIN_FRESH_SECS`, `pinned_at`): a pin is the session for twelve hours after it was
/// written, and not after; `pin` writes one that is read back.
/// Kills 66:32 (`*` → `+`, `*` → `/`: an hour-old pin would be stale), 119:38 (`>` → `==`),
/// 130:5 (`unix_now` → 0 or 1: no pin would ever go stale).
#[test]
fn a_pin_is_the_session_for_twelve_hours_and_not_after() {
    let env = Env::new();
    assert_eq!(pinned(&env.db), None, "no pin yet");
    pin(&env.db, "fresh", Some("claude-code"), None).unwrap();
    assert_eq!(pinned(&env.db).as_deref(), Some("fresh"));
    let path = pin_path(&env.db);
    for (age, fresh) in [(0, true), (3600, true), (11 * 3600, true), (12 * 3600 + 60, false)] {
        write_pin_file(&path, "s", now() - age, None);
        assert_eq!(pinned(&env.db).is_some(), fresh, "a pin {age} s old");
    }
    write_pin_file(&path, "s", now() - 13 * 3600, None);
    assert_eq!(pinned(&env.db), None, "a pin 13 h old is stale");
    // The age is of the clock now, not of a fixed epoch: a pin of the epoch is stale too.
    write_pin_file(&path, "s", 1, None);
    assert_eq!(pinned(&env.db), None);
    // A pin without its time or session is no pin.
    std::fs::write(&path, json!({"session_id": "s"}).to_string()).unwrap();
    assert_eq!(pinned(&env.db), None);
    std::fs::write(&path, json!({"at": now()}).to_string()).unwrap();
    assert_eq!(pinned(&env.db), None);
}

/// Rule (`pinned_at`): "stale" is strictly older than twelve hours: a pin exactly twelve hours
/// old still counts. (The clock is read before and after; a try across a second's tick is
/// retried, so the age seen is exactly 12 h.)
/// Kills 119:38 (`>` → `>=`).
#[test]
fn a_pin_exactly_twelve_hours_old_is_still_fresh() {
    let env = Env::new();
    let path = pin_path(&env.db);
    for _ in 0..20 {
        let before = now();
        write_pin_file(&path, "edge", before - PIN_FRESH_SECS, None);
        let read = pinned(&env.db);
        if now() == before {
            assert_eq!(read.as_deref(), Some("edge"));
            return;
        }
    }
    panic!("the clock ticked during every try");
}

// ---- Which session a server's calls belong to ----

/// Rule (`Debug for Sessions`): a server shows as its journal, nothing more (not its context,
/// nor its locks).
/// Kills 172:9 (`Ok(Default::default())`: nothing shown).
#[test]
fn a_server_shows_as_its_journal() {
    let env = Env::new();
    let server = env.server(Some("secret-session"), Some("k"));
    let shown = format!("{server:?}");
    assert_eq!(shown, format!("Sessions {{ db: {:?}, .. }}", env.db));
    assert!(!shown.contains("secret-session"), "{shown}");
}

/// Rule (`Sessions::session`): a server that knows only its client process names its session
/// after it (`client:KEY`), so it never takes another session's run; one that knows nothing
/// has none.
/// Kills 255:37 (`delete !`: a server of one client would have no session).
#[test]
fn a_server_that_knows_only_its_client_names_its_session_after_it() {
    let env = Env::new();
    assert_eq!(env.server(None, Some("4242-17")).session().as_deref(), Some("client:4242-17"));
    assert_eq!(env.server(None, None).session(), None);
    // Its runs carry that name.
    let server = env.server(None, Some("4242-17"));
    let answer = call(&server, "plan_create", plan());
    assert!(answer.ok, "{}", answer.text);
    let options = env.store().run_options().unwrap();
    assert_eq!(options[0].options["session"], "client:4242-17");
}

/// Rule (`Sessions::session`): the workspace's pin written by another client process is that
/// client's session, not this server's (two sessions in one workspace); a pin that names no
/// process (an older pev) may be anyone's, and is taken.
/// Kills 241:13 (`delete match arm (Some(theirs), Some(mine))`).
#[test]
fn the_workspace_pin_of_another_client_process_is_not_this_servers() {
    let env = Env::new();
    let server = env.server(None, Some("me"));
    write_pin_file(&pin_path(&env.db), "theirs", now(), Some("other"));
    assert_eq!(server.session().as_deref(), Some("client:me"));
    // With the environment's id, that id, never the other client's pin.
    let with_env = env.server(Some("E"), Some("me"));
    assert_eq!(with_env.session().as_deref(), Some("E"));
    write_pin_file(&pin_path(&env.db), "anyones", now(), None);
    assert_eq!(server.session().as_deref(), Some("anyones"));
}

/// Rule (`Sessions::session`): the workspace's pin written by this server's own client process
/// is this server's session (its own client pin, when there is one, comes first).
/// Kills 241:50 (`==` → `!=`: its own client's pin would be refused).
#[test]
fn the_workspace_pin_of_this_client_process_is_this_servers() {
    let env = Env::new();
    let server = env.server(None, Some("me"));
    write_pin_file(&pin_path(&env.db), "mine", now(), Some("me"));
    assert_eq!(server.session().as_deref(), Some("mine"));
    write_pin_file(&crate::client_process::pin_path(&env.db, "me"), "own", now(), Some("me"));
    assert_eq!(server.session().as_deref(), Some("own"));
    // `pin` writes both.
    pin(&env.db, "hooked", Some("claude-code"), Some("me")).unwrap();
    assert_eq!(server.session().as_deref(), Some("hooked"));
    assert_eq!(env.server(None, Some("other")).session().as_deref(), Some("client:other"));
}

/// Rule (`Sessions::session`): a pin written since the server started (Claude Code's /clear)
/// beats the environment's id; one from before it does not (it is an older session's), though
/// without an environment id it is still the best guess.
/// Kills 246:26 (guard `pin.at >= self.started` → `true`).
#[test]
fn a_pin_from_before_the_server_started_does_not_override_the_environment() {
    let env = Env::new();
    let server = env.server(Some("E"), None);
    let path = pin_path(&env.db);
    write_pin_file(&path, "older", server.started - 60, None);
    assert_eq!(server.session().as_deref(), Some("E"));
    assert_eq!(env.server(None, None).session().as_deref(), Some("older"));
    write_pin_file(&path, "cleared", server.started, None);
    assert_eq!(server.session().as_deref(), Some("cleared"));
}

// ---- A shared (HTTP) server ----

/// Rule (`Sessions::shared`, `call`): a server many clients share has no session of its own
/// (not even its client process's), refuses a call that does not name its run — except the
/// `plan_create` / `todo_write` that make one — and answers a call that names it.
/// Kills 222:16 (`delete field shared`), 255:37 (the shared side), 281:44 (`delete !`).
#[test]
fn a_shared_server_has_no_session_and_each_call_names_its_run() {
    let env = Env::new();
    let server = Sessions::shared(Arc::clone(&env.ctx), env.db.clone())
        .with_client_process(Some("k".to_owned()));
    assert!(server.shared);
    assert_eq!(server.session(), None);
    let refused = call(&server, "plan_show", json!({}));
    assert!(!refused.ok && refused.text.contains("shared (HTTP)"), "{}", refused.text);
    let made = call(&server, "plan_create", plan());
    assert!(made.ok, "{}", made.text);
    let run_id = run_of(&made).expect("plan_create names the run");
    assert_eq!(env.store().run_options().unwrap()[0].options["session"], Value::Null);
    // The run is not remembered: the next call without its id is refused again.
    let update = json!({"id": "a", "status": "done", "evidence": "thought it over"});
    let refused = call(&server, "step_update", update.clone());
    assert!(!refused.ok && refused.text.contains("pass run_id"), "{}", refused.text);
    let named = Target { run: Some(&run_id), session: None };
    let done = call_at(&server, "step_update", update, named);
    assert!(done.ok, "{}", done.text);
    assert_eq!(run_of(&done).as_deref(), Some(run_id.as_str()));
    let todo = json!({"todos": [{"content": "x", "activeForm": "doing x", "status": "pending"}]});
    let listed = call(&server, "todo_write", todo);
    assert!(listed.ok, "{}", listed.text);
    assert_eq!(env.runs().len(), 2, "a shared server's todo_write makes its own run");
    let unknown = Target { run: Some("nope"), session: None };
    let refused = call_at(&server, "plan_show", json!({}), unknown);
    assert!(!refused.ok && refused.text.contains("unknown run `nope`"), "{}", refused.text);
}

// ---- What a call does to its run ----

/// Rule (`call`): the files the client changed since the plan (found by pev's snapshot) are
/// what `step_update` holds a step to: a step that names `notes.md` is not done by a change of
/// another file, and the refusal names that file.
/// Kills 301:17 (`==` → `!=`: step_update would not see the client's changes).
#[test]
fn step_update_holds_a_step_to_the_files_the_client_changed() {
    let env = Env::new();
    env.write("notes.md", "old\n");
    let server = env.server(Some("s"), None);
    let plan = json!({"objective": "Update the notes",
                      "steps": [{"id": "edit", "title": "Edit notes.md"}]});
    assert!(call(&server, "plan_create", plan).ok);
    env.write("other.txt", "new\n");
    let answer = call(
        &server,
        "step_update",
        json!({"id": "edit", "status": "done", "evidence": "edited the notes"}),
    );
    assert!(!answer.ok, "{}", answer.text);
    assert!(answer.text.contains("other.txt"), "{}", answer.text);
    env.write("notes.md", "new\n");
    let answer = call(
        &server,
        "step_update",
        json!({"id": "edit", "status": "done", "evidence": "edited the notes"}),
    );
    assert!(answer.ok, "{}", answer.text);
}

/// Rule (`call`): only `step_update` looks at the workspace's changes; a `plan_show` changes
/// nothing, so it journals no new state.
/// Kills 301:17 (`==` → `!=`: every other call would note the changes into the state).
#[test]
fn a_look_at_the_plan_records_no_new_state() {
    let env = Env::new();
    let server = env.server(Some("s"), None);
    let made = call(&server, "plan_create", plan());
    let run_id = run_of(&made).unwrap();
    env.write("other.txt", "new\n");
    assert!(call(&server, "plan_show", json!({})).ok);
    let calls = plan_calls(&env, &run_id);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls[0].2.is_some(), "plan_create saves the state");
    assert_eq!((calls[1].0.as_str(), calls[1].1, &calls[1].2), ("plan_show", true, &None));
}

/// Rule (`call`): the first *accepted* plan makes the run; a refused one makes nothing (and
/// says there is no run).
/// Kills 323:41 (`ok && changed` → `ok || changed`: the first call always changes the state).
#[test]
fn a_refused_first_plan_makes_no_run() {
    let env = Env::new();
    let server = env.server(Some("s"), None);
    let empty = json!({"objective": "Nothing", "steps": []});
    let refused = call(&server, "plan_create", empty);
    assert!(!refused.ok, "{}", refused.text);
    assert_eq!(refused.structured["run_id"], Value::Null);
    assert!(env.runs().is_empty(), "{:?}", env.runs());
    // A refused todo list neither.
    let bad = json!({"todos": [{"content": "", "activeForm": "", "status": "pending"}]});
    assert!(!call(&server, "todo_write", bad).ok);
    assert!(env.runs().is_empty(), "{:?}", env.runs());
    let made = call(&server, "plan_create", plan());
    assert!(made.ok, "{}", made.text);
    assert_eq!(env.runs(), [run_of(&made).unwrap()]);
}

/// Rule (`call`): a call that changes the plan of a finished run reopens it (`running`); one
/// that only looks (`plan_show`) leaves it finished.
/// Kills 337:69 (`!=` → `==`), 338:24 (`&&` → `||`).
#[test]
fn a_change_reopens_a_finished_run_and_a_look_does_not() {
    let env = Env::new();
    let server = env.server(Some("s"), None);
    let run_id = run_of(&call(&server, "plan_create", plan())).unwrap();
    // A change of an open run leaves it open, with no status written.
    let update = json!({"id": "a", "status": "in_progress"});
    assert!(call(&server, "step_update", update).ok);
    assert_eq!(env.status(&run_id), "running");
    env.finish(&run_id);
    let look = call(&server, "plan_show", json!({}));
    assert!(look.ok && run_of(&look).as_deref() == Some(run_id.as_str()), "{}", look.text);
    assert_eq!(env.status(&run_id), "success", "a look reopened the run");
    let update = json!({"id": "a", "status": "done", "evidence": "thought it over"});
    assert!(call(&server, "step_update", update).ok);
    assert_eq!(env.status(&run_id), "running", "a change left the run finished");
}

/// Rule (`call`, `revision`): an accepted rewrite of the plan (a second `plan_create`) is a new
/// plan version with a `plan.revised` event; the first plan, a refused rewrite and any other
/// call are not.
/// Kills 346:19 (`&&` → `||`), 346:27 (`==` → `!=`), 346:42 (`&&` → `||`), 346:45 (`delete !`).
#[test]
fn only_an_accepted_rewrite_is_a_new_plan_version() {
    let env = Env::new();
    let server = env.server(Some("s"), None);
    let run_id = run_of(&call(&server, "plan_create", plan())).unwrap();
    assert_eq!(versions(&env, &run_id), [1]);
    assert_eq!(revised(&env, &run_id), Vec::<u32>::new());
    let rewrite = json!({"objective": "Write the notes",
        "steps": [{"id": "a", "title": "Think it over"}, {"id": "c", "title": "Say it"}],
        "dropped": [{"id": "b", "reason": "nothing to write"}]});
    let answer = call(&server, "plan_create", rewrite);
    assert!(answer.ok, "{}", answer.text);
    assert_eq!(versions(&env, &run_id), [1, 2]);
    assert_eq!(revised(&env, &run_id), [2]);
    let versions_of = env.store().plan_versions(&run_id).unwrap();
    assert!(versions_of[1].2.contains("dropped `b` (nothing to write)"), "{:?}", versions_of[1]);
    // Neither a refused rewrite (it loses step `a`) nor another call adds one.
    let lossy = json!({"objective": "Write the notes", "steps": [{"id": "c", "title": "Say it"}]});
    assert!(!call(&server, "plan_create", lossy).ok);
    let update = json!({"id": "a", "status": "done", "evidence": "thought it over"});
    assert!(call(&server, "step_update", update).ok);
    assert!(call(&server, "plan_show", json!({})).ok);
    assert_eq!(versions(&env, &run_id), [1, 2]);
    assert_eq!(revised(&env, &run_id), [2]);
}

// ---- Which run a call drives ----

/// Rule (`call`, `load`): a server remembers the run it works on for its session and goes on
/// with it, even once it is finished and no longer the newest open run (a server that knows no
/// session could not find it again).
/// Kills 370:16 (`delete !`: the run would not be remembered), 393:43 (`==` → `!=`).
#[test]
fn a_server_goes_on_with_its_run_while_the_session_is_the_same() {
    let env = Env::new();
    let server = env.server(None, None);
    assert_eq!(server.session(), None);
    let run_id = run_of(&call(&server, "plan_create", plan())).unwrap();
    env.finish(&run_id);
    let look = call(&server, "plan_show", json!({}));
    assert_eq!(run_of(&look).as_deref(), Some(run_id.as_str()), "{}", look.structured);
    assert_eq!(look.structured["plan"]["objective"], "Write the notes");
    // Another server that knows no session takes no finished run for its own.
    let other = call(&env.server(None, None), "plan_show", json!({}));
    assert_eq!(other.structured["run_id"], Value::Null);
}

/// Rule (`load`): once the session changes (a call carrying another session's id, or /clear),
/// the run remembered for the old session is not the call's; the new session gets its own.
/// Kills 393:43 (`==` → `!=`).
#[test]
fn a_call_of_another_session_never_drives_the_remembered_run() {
    let env = Env::new();
    let server = env.server(Some("A"), None);
    let run_a = run_of(&call(&server, "plan_create", plan())).unwrap();
    let b = Target { run: None, session: Some("B") };
    let look = call_at(&server, "plan_show", json!({}), b);
    assert_eq!(look.structured["run_id"], Value::Null, "{}", look.structured);
    let made = call_at(&server, "plan_create", plan(), b);
    let run_b = run_of(&made).unwrap();
    assert_ne!(run_a, run_b);
    // And back: A's calls are on A's run, B's on B's.
    let look = call(&server, "plan_show", json!({}));
    assert_eq!(run_of(&look).as_deref(), Some(run_a.as_str()));
    let look = call_at(&server, "plan_show", json!({}), b);
    assert_eq!(run_of(&look).as_deref(), Some(run_b.as_str()));
}

/// A `pev mcp` run made by hand in the journal, with `session` and `status`.
fn journal_run(env: &Env, store: &Store, session: Option<&str>, status: &str) -> String {
    let run_id = pev_store::new_run_id();
    store
        .create_run(&NewRun {
            run_id: run_id.clone(),
            goal: "by hand".to_owned(),
            workspace: env.ctx.workspace.root().display().to_string(),
            plan: json!({"goal": "by hand", "steps": []}),
            options: json!({"mode": MODE, "session": session}),
            created_at: now_rfc3339(),
        })
        .unwrap();
    if status != "running" {
        let record = Record::RunStatus {
            run_id: run_id.clone(),
            status: status.to_owned(),
            result: None,
            updated_at: now_rfc3339(),
        };
        store.append_guarded(&run_id, None, &[record], Vec::new()).unwrap().unwrap();
    }
    run_id
}

/// Rule (`find_run`): a session's own run is found whatever its status; a known session takes
/// no other run unless the gate says it may adopt one; the run that may be adopted (or taken
/// when no session is known) is the newest *open* run that belongs to no session — never a
/// finished one, another session's, another workspace's or one that is not `pev mcp`'s.
/// Kills 553:26 (`&&` → `||`), 553:29 (`delete !`), 566:28 (`==` → `!=`).
#[test]
fn only_an_open_run_of_no_session_is_adopted_and_only_when_allowed() {
    let env = Env::new();
    let store = Store::open(&env.db).unwrap();
    let ws = env.ctx.workspace.root().display().to_string();
    let open = journal_run(&env, &store, None, "running");
    let finished = journal_run(&env, &store, None, "success");
    let _other = journal_run(&env, &store, Some("other"), "running");
    let mine = journal_run(&env, &store, Some("mine"), "partial");
    let find = |session, adopt| find_run(&store, &ws, session, adopt).unwrap();
    assert_eq!(find(Some("mine"), false).as_deref(), Some(mine.as_str()));
    assert_eq!(find(Some("mine"), true).as_deref(), Some(mine.as_str()));
    assert_eq!(find(Some("new"), false), None, "a known session took a run not its own");
    assert_eq!(find(Some("new"), true).as_deref(), Some(open.as_str()));
    assert_eq!(find(None, false).as_deref(), Some(open.as_str()));
    assert_eq!(find(None, true).as_deref(), Some(open.as_str()));
    assert_ne!(find(None, false).as_deref(), Some(finished.as_str()));
    // Another workspace's runs are not this one's.
    assert_eq!(find_run(&store, "/elsewhere", None, true).unwrap(), None);
    // With no open run of no session, nothing is adopted (the finished one is not).
    let env2 = Env::new();
    let store2 = Store::open(&env2.db).unwrap();
    let _finished = journal_run(&env2, &store2, None, "success");
    let ws2 = env2.ctx.workspace.root().display().to_string();
    assert_eq!(find_run(&store2, &ws2, None, false).unwrap(), None);
    assert_eq!(find_run(&store2, &ws2, Some("new"), true).unwrap(), None);
}

/// Rule (`load_run`, `state_of`): a run's snapshot is its newest `workspace.snapshot` (pev writes
/// one per run today, in `create_run`; with two, the later one is what the workspace is held
/// to).
/// Kills 606:71 (guard `snapshot.is_none()` → `true`: the oldest would win when no plan call
/// carries a state).
#[test]
fn a_runs_snapshot_is_its_newest() {
    let env = Env::new();
    let store = Store::open(&env.db).unwrap();
    let run_id = journal_run(&env, &store, Some("s"), "running");
    for git in ["old", "new"] {
        let body = EventBody::WorkspaceSnapshot {
            files: json!({}),
            git: Some(json!(git)),
            truncated: false,
        };
        store.append_event(&run_id, body).unwrap();
    }
    let journaled = state_of(&store, &run_id).unwrap();
    assert_eq!(journaled.snapshot.unwrap().git, Some(json!("new")));
    assert_eq!((journaled.calls, journaled.state.book.plan.is_none()), (0, true));
}

/// Rule (`create_run`): a run's goal is the plan's objective, or for a todo list without a plan
/// its first item; the run's first plan version carries that goal too.
/// Kills 416:37 (`delete field goal`: a todo list's run would have a plan with no goal).
#[test]
fn a_runs_goal_is_the_objective_or_the_first_todo() {
    let env = Env::new();
    let server = env.server(Some("t"), None);
    let todo = json!({"todos": [
        {"content": "Write x", "activeForm": "Writing x", "status": "in_progress"},
        {"content": "Check x", "activeForm": "Checking x", "status": "pending"}]});
    let run_id = run_of(&call(&server, "todo_write", todo)).unwrap();
    let record = env.store().load_run(&run_id).unwrap();
    assert_eq!(record.goal, "Todo list: Write x");
    assert_eq!(record.plan["goal"], "Todo list: Write x");
    assert_eq!(env.store().plan_versions(&run_id).unwrap()[0].1["goal"], "Todo list: Write x");
    let server = env.server(Some("p"), None);
    let run_id = run_of(&call(&server, "plan_create", plan())).unwrap();
    let record = env.store().load_run(&run_id).unwrap();
    assert_eq!(
        (record.goal.as_str(), &record.plan["goal"]),
        ("Write the notes", &json!("Write the notes"))
    );
    assert_eq!(record.options["mode"], MODE);
    assert_eq!(record.options["session"], "p");
}

/// Rule (`step_records`): each call that changes the plan writes its steps' states to the
/// journal (what `pev runs` and `pev show` count): status, one attempt for a done step (none
/// otherwise), its evidence, and a blocked step's reason.
/// Kills 504:5 (`vec![]`), 519:45 (`==` → `!=`).
#[test]
fn the_journal_holds_each_steps_state() {
    use pev_protocol::run::StepStatus;
    let env = Env::new();
    let server = env.server(Some("s"), None);
    let plan = json!({"objective": "Write the notes", "steps": [
        {"id": "a", "title": "Think it over"}, {"id": "b", "title": "Write it down"},
        {"id": "c", "title": "Ask"}]});
    let run_id = run_of(&call(&server, "plan_create", plan)).unwrap();
    let steps = |env: &Env| {
        env.store()
            .load_run(&run_id)
            .unwrap()
            .steps
            .into_iter()
            .map(|s| (s.step_id, s.status, s.attempts, s.evidence, s.error))
            .collect::<Vec<_>>()
    };
    let pending = |id: &str| (id.to_owned(), StepStatus::Pending, 0, Vec::new(), None);
    assert_eq!(steps(&env), [pending("a"), pending("b"), pending("c")]);
    for update in [
        json!({"id": "a", "status": "done", "evidence": "thought it over"}),
        json!({"id": "b", "status": "in_progress"}),
        json!({"id": "c", "status": "blocked", "reason": "nobody answers"}),
    ] {
        let answer = call(&server, "step_update", update);
        assert!(answer.ok, "{}", answer.text);
    }
    assert_eq!(
        steps(&env),
        [
            ("a".to_owned(), StepStatus::Done, 1, vec!["thought it over".to_owned()], None),
            ("b".to_owned(), StepStatus::InProgress, 0, Vec::new(), None),
            ("c".to_owned(), StepStatus::Blocked, 0, Vec::new(), Some("nobody answers".to_owned())),
        ]
    );
}

/// Rule (`structured`, `plan_view`): what the model reads is the answer, the run, the plan
/// (each step's id, title, status, evidence and check kinds; each postcondition's) and, when
/// there is one, the todo list with each item's status.
/// Kills 669:5 (`Default::default()`), 675:8 (`delete !`), 696:5 (`Default::default()`).
#[test]
fn the_model_reads_the_run_the_plan_and_the_todo_list() {
    let env = Env::new();
    let server = env.server(Some("s"), None);
    let plan = json!({"objective": "Write the notes",
        "steps": [{"id": "a", "title": "Write notes.md",
                   "assertions": [{"type": "file_exists", "path": "notes.md"}]}],
        "postconditions": [{"description": "the notes exist",
                            "assertions": [{"type": "file_exists", "path": "notes.md"}]}]});
    let made = call(&server, "plan_create", plan);
    let run_id = run_of(&made).unwrap();
    let out = &made.structured;
    assert_eq!((out["ok"].clone(), out["message"].clone()), (json!(true), json!(made.text)));
    assert!(out.get("todo").is_none(), "{out}");
    assert_eq!(
        out["plan"],
        json!({"objective": "Write the notes",
               "steps": [{"id": "a", "title": "Write notes.md", "status": "pending",
                          "evidence": null, "blocked_reason": null, "checks": ["file_exists"]}],
               "postconditions": [{"id": "p1", "description": "the notes exist",
                                   "verified": false, "checked_by_harness": false,
                                   "checks": ["file_exists"]}]})
    );
    env.write("notes.md", "notes\n");
    let done =
        call(&server, "step_update", json!({"id": "a", "status": "done", "evidence": "wrote it"}));
    assert!(done.ok, "{}", done.text);
    assert_eq!(done.structured["plan"]["steps"][0]["status"], "done");
    assert_eq!(done.structured["plan"]["steps"][0]["evidence"], "wrote it");
    let verified =
        call(&server, "postcondition_verify", json!({"id": "p1", "evidence": "it is there"}));
    assert!(verified.ok, "{}", verified.text);
    let post = &verified.structured["plan"]["postconditions"][0];
    assert_eq!(
        (post["verified"].clone(), post["checked_by_harness"].clone()),
        (json!(true), json!(true))
    );
    let todo = json!({"todos": [
        {"content": "one", "activeForm": "doing one", "status": "completed"},
        {"content": "two", "activeForm": "doing two", "status": "in_progress"},
        {"content": "three", "activeForm": "doing three", "status": "pending"}]});
    let listed = call(&server, "todo_write", todo);
    assert!(listed.ok, "{}", listed.text);
    assert_eq!(run_of(&listed).as_deref(), Some(run_id.as_str()));
    assert_eq!(
        listed.structured["todo"],
        json!([{"content": "one", "status": "completed"},
               {"content": "two", "status": "in_progress"},
               {"content": "three", "status": "pending"}])
    );
    // A refusal says so, with no run when there is none.
    let fresh = env.server(Some("other"), None);
    let refused =
        call(&fresh, "step_update", json!({"id": "a", "status": "done", "evidence": "x"}));
    assert_eq!((refused.ok, refused.structured["ok"].clone()), (false, json!(false)));
    assert_eq!(refused.structured["run_id"], Value::Null);
    assert_eq!(refused.structured["message"], json!(refused.text));
}

/// Rule (`is_read_only`): `plan_show` and `lint_plan` only read; every tool that changes a plan
/// or a todo list does not.
/// Kills 718:5 (`true`, `false`).
#[test]
fn only_plan_show_and_lint_plan_are_read_only() {
    assert!(is_read_only(PLAN_SHOW) && is_read_only(LINT_PLAN));
    for tool in [PLAN_CREATE, STEP_UPDATE, TODO_WRITE, "postcondition_verify"] {
        assert!(!is_read_only(tool), "{tool}");
    }
}
