//! One client's run. The plan tools' state lives in the journal, not in the server process: each
//! call finds the run (the one this process works on, the client session's, or the newest open
//! `pev mcp` run of the workspace), loads the state the last call left (`client.plan_call`
//! events carry it), answers with loop mode's [`PlanBook`], and journals the call and the new
//! state before it answers. So `pev show`, `pev gate` and a restarted server all see the same
//! plan, and a stateless transport can serve any call.
//!
//! The run is created by the first accepted `plan_create` (or `todo_write`): its goal is the
//! plan's objective, its options say `mode: mcp` and the client's session, and the workspace is
//! snapshotted ([`crate::snapshot`]) before anything is answered.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use pev_engine::agent::loop_mode::plan_state::PlanBook;
use pev_engine::agent::loop_mode::plan_tools::{PLAN_CREATE, PLAN_SHOW, STEP_UPDATE};
use pev_engine::agent::loop_mode::todo::{self, TODO_WRITE};
use pev_engine::agent::loop_mode::{ModelPlan, TodoItem, TodoStatus};
use pev_engine::agent::loop_run::as_plan;
use pev_protocol::event::{EventBody, kind, now_rfc3339};
use pev_store::{Guard, Journal, NewRun, Record, RunOptions, Store};
use pev_tools::ToolContext;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::McpError;
use crate::catalogue::LINT_PLAN;
use crate::snapshot::{self, Snapshot};

/// The `mode` a `pev mcp` run carries in its options.
pub const MODE: &str = "mcp";

/// What the plan tools remember between calls: loop mode's plan book and the todo list.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct McpState {
    pub book: PlanBook,
    #[serde(default)]
    pub todo: Vec<TodoItem>,
}

/// Where the client's session id came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionSource {
    /// An environment variable (`PEV_SESSION_ID`, or Claude Code's `CLAUDE_CODE_SESSION_ID`).
    Env(&'static str),
    /// The SessionStart hook (`pev gate`) pinned it in the journal's directory.
    Pin,
    /// None is known: the newest open `pev mcp` run of the workspace is the client's.
    Unknown,
}

/// The session id the client's environment gives, if any: the variables in order.
pub fn session_from_env(var: &dyn Fn(&str) -> Option<String>) -> Option<(String, SessionSource)> {
    for name in ["PEV_SESSION_ID", "CLAUDE_CODE_SESSION_ID"] {
        if let Some(id) = var(name).filter(|v| !v.trim().is_empty()) {
            return Some((id.trim().to_owned(), SessionSource::Env(name)));
        }
    }
    None
}

/// How long a pinned session stays the default for a server that has no id of its own.
const PIN_FRESH_SECS: u64 = 12 * 3600;

/// The pin file beside the journal.
pub fn pin_path(db: &Path) -> PathBuf {
    db.parent().unwrap_or_else(|| Path::new(".")).join("session.json")
}

/// Records `session` as the workspace's current client session (the SessionStart hook), and
/// as the session of the client process `process` (see [`crate::client_process`]), which is
/// what a server of that client reads.
pub fn pin(
    db: &Path,
    session: &str,
    client: Option<&str>,
    process: Option<&str>,
) -> Result<(), McpError> {
    let body = json!({"session_id": session, "client": client, "at": unix_now(),
                      "client_process": process});
    if let Some(key) = process {
        write_pin(&crate::client_process::pin_path(db, key), &body)?;
    }
    write_pin(&pin_path(db), &body)
}

fn write_pin(path: &Path, body: &Value) -> Result<(), McpError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| McpError(format!("cannot create {}: {e}", dir.display())))?;
    }
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    std::fs::write(&tmp, body.to_string())
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| McpError(format!("cannot write {}: {e}", path.display())))
}

/// The pinned session, when it is recent.
pub fn pinned(db: &Path) -> Option<String> {
    pinned_at(&pin_path(db)).map(|p| p.session)
}

/// A pin as read back.
struct Pin {
    session: String,
    at: u64,
    /// The client process that pinned it (pins from before it was recorded have none).
    process: Option<String>,
}

/// The pin at `path` (the workspace's, or a client's), when it is recent.
fn pinned_at(path: &Path) -> Option<Pin> {
    let text = std::fs::read_to_string(path).ok()?;
    let value: Value = serde_json::from_str(&text).ok()?;
    let at = value.get("at")?.as_u64()?;
    if unix_now().saturating_sub(at) > PIN_FRESH_SECS {
        return None;
    }
    Some(Pin {
        session: value.get("session_id")?.as_str()?.to_owned(),
        at,
        process: value.get("client_process").and_then(Value::as_str).map(str::to_owned),
    })
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Which run a call is for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Target<'a> {
    /// Named by the call (`run_id`).
    pub run: Option<&'a str>,
    /// The client's session, as the request carries it.
    pub session: Option<&'a str>,
}

/// A tool's answer: `ok: false` is a refusal or a mistake the model can fix (`isError`).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub ok: bool,
    pub text: String,
    pub structured: Value,
}

/// The runs of one workspace's journal, as the plan tools of one server see them.
pub struct Sessions {
    pub ctx: Arc<ToolContext>,
    pub db: PathBuf,
    /// The session id given by the environment (else the pin is read at each call).
    pub env_session: Option<String>,
    /// The client's name, from `initialize` or the request's `_meta`.
    pub client: Mutex<Option<String>>,
    /// The run this process works on, once known, with the session it was found for.
    run: Mutex<Option<(Option<String>, String)>>,
    /// One call at a time: a call loads, changes and saves the state.
    lock: tokio::sync::Mutex<()>,
    /// Shared by many clients (HTTP): no run is remembered or guessed; a call names its run.
    pub shared: bool,
    /// When this server started (Unix seconds).
    started: u64,
    /// The client process this server was started by ([`crate::client_process`]).
    process: Option<String>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").field("db", &self.db).finish_non_exhaustive()
    }
}

/// A run and its state, as loaded.
struct Loaded {
    run_id: String,
    status: String,
    state: McpState,
    snapshot: Option<Snapshot>,
    /// The client's calls journaled: pev's plan tools and its own (recorded by the hook).
    calls: u64,
    /// The client's own tool calls (`client.tool`, recorded by `pev gate --record`), in order.
    client_tools: Vec<ClientCall>,
    /// The sequence number of the run's newest `client.plan_call` (the guard of the save).
    last_call: Option<u64>,
    /// The run is a `pev mcp` run (a named `pev run` or `pev agent` run is not the client's).
    is_client_run: bool,
}

/// One of the client's own tool calls, as the PostToolUse hook recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientCall {
    pub tool: String,
    pub summary: Value,
}

impl Sessions {
    pub fn new(ctx: Arc<ToolContext>, db: PathBuf, env_session: Option<String>) -> Self {
        Self {
            ctx,
            db,
            env_session,
            client: Mutex::new(None),
            run: Mutex::new(None),
            lock: tokio::sync::Mutex::new(()),
            shared: false,
            started: unix_now(),
            process: crate::client_process::client_key(),
        }
    }

    /// The same, as a server started by the client process `key` (tests).
    pub fn with_client_process(mut self, key: Option<String>) -> Self {
        self.process = key;
        self
    }

    /// Sessions for a server many clients share (HTTP): every call names its run.
    pub fn shared(ctx: Arc<ToolContext>, db: PathBuf) -> Self {
        Self { shared: true, ..Self::new(ctx, db, None) }
    }

    /// The session this server's calls belong to: a session pinned (by the SessionStart hook)
    /// since this server started (Claude Code's /clear starts a new session under the same
    /// server), else the environment's, else the pinned one.
    ///
    /// With several sessions in one workspace, the workspace's pin may be another session's:
    /// the pin of this server's own client process comes first, and the workspace's pin is
    /// used only when it was written by this client (or by a pev that did not say whose it
    /// was). Without either, a server that knows its client names its runs after it
    /// (`client:KEY`), so that it never takes another session's run for its own.
    pub fn session(&self) -> Option<String> {
        if let Some(key) = &self.process
            && let Some(pin) = pinned_at(&crate::client_process::pin_path(&self.db, key))
        {
            return Some(pin.session);
        }
        let ours = |pin: &Pin| match (&pin.process, &self.process) {
            (Some(theirs), Some(mine)) => theirs == mine,
            _ => true,
        };
        let pin = pinned_at(&pin_path(&self.db)).filter(ours);
        match pin {
            Some(pin) if pin.at >= self.started => Some(pin.session),
            pin => self
                .env_session
                .clone()
                .or_else(|| pin.map(|p| p.session))
                // A server many clients share (HTTP) has no client of its own.
                .or_else(|| {
                    self.process
                        .as_ref()
                        .filter(|_| !self.shared)
                        .map(|key| format!("client:{key}"))
                }),
        }
    }

    fn workspace(&self) -> String {
        self.ctx.workspace.root().display().to_string()
    }

    /// Answers one plan tool call. `target.run` names the run (the HTTP transport, where every
    /// call says which); otherwise it is the session's (the request's own session id, as Codex
    /// sends it in `_meta`, else the server's). Errors are the journal's; a model's mistake is
    /// an [`Answer`] with `ok: false`.
    pub async fn call(
        &self,
        tool: &str,
        input: Value,
        target: Target<'_>,
    ) -> Result<Answer, McpError> {
        let run = target.run;
        let session = target.session.map(str::to_owned).or_else(|| self.session());
        if tool == LINT_PLAN {
            return Ok(crate::catalogue::lint_plan(&input));
        }
        let _one = self.lock.lock().await;
        if self.shared && run.is_none() && !matches!(tool, PLAN_CREATE | TODO_WRITE) {
            return Ok(refusal(format!(
                "{tool} refused: this pev server is shared (HTTP), so each call names its run: \
                 pass run_id as plan_create returned it"
            )));
        }
        let mut loaded = self.load(run, session.as_deref())?;
        if run.is_some() && loaded.is_none() {
            return Ok(refusal(format!(
                "unknown run `{}`: pass the run_id plan_create returned",
                run.unwrap_or_default()
            )));
        }
        let before = loaded.as_ref().map(|l| state_json(&l.state));
        let fresh = loaded.is_none();
        let mut state = loaded.as_mut().map(|l| std::mem::take(&mut l.state)).unwrap_or_default();

        // What the client changed since the plan was made, found by pev: the mismatch rule and
        // the evidence of each step are held to it.
        // (Only step_update consults them: the others need not pay for the workspace's listing.)
        if tool == STEP_UPDATE
            && let Some(snapshot) = loaded.as_ref().and_then(|l| l.snapshot.as_ref())
        {
            let store = Store::open_existing(&self.db).ok();
            let changes = snapshot::changes(snapshot, &self.ctx.workspace, store.as_ref());
            state.book.note_changes(changes.paths());
        }
        // Evidence accepted now is marked with how many of the client's own calls came before
        // it, so the verdict can say which calls a step's evidence rests on.
        let recorded = loaded.as_ref().map_or(0, |l| l.client_tools.len());
        state.book.note_position(Some(recorded as u64));
        let reply = match tool {
            TODO_WRITE => todo::write(&mut state.todo, input.clone()),
            _ => state.book.call(tool, input.clone(), &self.ctx).await,
        };
        let (ok, text) = match reply {
            Ok(text) => (true, text),
            Err(text) => (false, text),
        };
        let after = state_json(&state);
        let changed = before.as_ref() != Some(&after);

        let run_id = match (&loaded, ok && changed) {
            (Some(l), _) => Some(l.run_id.clone()),
            // The first accepted plan (or todo list) makes the run.
            (None, true)
                if tool == PLAN_CREATE || (tool == TODO_WRITE && !state.todo.is_empty()) =>
            {
                Some(self.create_run(&state, session.as_deref())?)
            }
            (None, _) => None,
        };
        if let Some(run_id) = &run_id {
            let store = Store::open(&self.db)?;
            let mut records = Vec::new();
            let mut bodies = Vec::new();
            let reopened = loaded.as_ref().is_some_and(|l| l.status != "running");
            if changed && reopened {
                records.push(Record::RunStatus {
                    run_id: run_id.clone(),
                    status: "running".to_owned(),
                    result: None,
                    updated_at: now_rfc3339(),
                });
            }
            if ok && tool == PLAN_CREATE && !fresh {
                let (record, body) = revision(&store, run_id, &state)?;
                records.extend(record);
                bodies.extend(body);
            }
            if changed {
                records.extend(step_records(run_id, &state));
            }
            bodies.push(EventBody::ClientPlanCall {
                tool: tool.to_owned(),
                arguments: input,
                ok,
                reply: text.clone(),
                state: changed.then_some(after),
            });
            // Another process may have answered a call of this run since it was loaded: then
            // this answer rests on a stale plan, and nothing of it is written.
            let guard =
                loaded.as_ref().map(|l| Guard { kind: kind::CLIENT_PLAN_CALL, last: l.last_call });
            if store.append_guarded(run_id, guard, &records, bodies)?.is_none() {
                return Ok(refusal(format!(
                    "{tool} was not recorded: the plan of run {run_id} changed meanwhile (another \
                     pev process answered a call for it). Call plan_show, then try again."
                )));
            }
            if !self.shared {
                *self.run.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some((session.clone(), run_id.clone()));
            }
        }
        let structured = structured(ok, &text, run_id.as_deref(), &state);
        Ok(Answer { ok, text, structured })
    }

    /// The run the call belongs to, with its state.
    fn load(&self, run: Option<&str>, session: Option<&str>) -> Result<Option<Loaded>, McpError> {
        let store = match Store::open_existing(&self.db) {
            Ok(store) => store,
            Err(pev_store::StoreError::Missing { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        // The run this process worked on, while the session is the one it was for (after
        // Claude Code's /clear the session changes, and so does the run).
        let known = self
            .run
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .filter(|(s, _)| s.as_deref() == session)
            .map(|(_, run)| run);
        if self.shared && run.is_none() {
            return Ok(None);
        }
        let run_id = match run.map(str::to_owned).or(known) {
            Some(id) => match store.resolve_run(&id) {
                Ok(id) => Some(id),
                Err(pev_store::StoreError::NotFound(_)) => None,
                Err(e) => return Err(e.into()),
            },
            // A known session never takes over another client's run.
            None => find_run(&store, &self.workspace(), session, false)?,
        };
        let Some(run_id) = run_id else { return Ok(None) };
        let loaded = load_run(&store, &run_id)?;
        Ok(loaded.is_client_run.then_some(loaded))
    }

    fn create_run(&self, state: &McpState, session: Option<&str>) -> Result<String, McpError> {
        let goal = goal_of(state);
        let run_id = pev_store::new_run_id();
        let plan = state.book.plan.as_ref().map_or_else(
            || pev_protocol::Plan { goal: goal.clone(), ..pev_protocol::Plan::default() },
            |p| as_plan(&goal, p),
        );
        let client = self.client.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let store = Store::open(&self.db)?;
        // The oracle settings as they are now, before the client can edit a pev.toml: the
        // verdict reads these, never the files again.
        let mut ignored = Vec::new();
        let oracle = crate::oracle::settings(&self.ctx, &mut ignored);
        store.create_run(&NewRun {
            run_id: run_id.clone(),
            goal: goal.clone(),
            workspace: self.workspace(),
            plan: serde_json::to_value(&plan).map_err(|e| McpError(e.to_string()))?,
            options: json!({"mode": MODE, "session": session, "client": client, "oracle": oracle}),
            created_at: now_rfc3339(),
        })?;
        store.append_event(
            &run_id,
            EventBody::RunStarted {
                goal,
                workspace: self.workspace(),
                resumed: false,
                sandbox: serde_json::to_value(self.ctx.sandbox.enforced()).ok(),
            },
        )?;
        store.append_event(
            &run_id,
            EventBody::PlanCreated { version: 1, steps: plan.steps.len() },
        )?;
        let taken = snapshot::take(&self.ctx.workspace);
        if !taken.blobs.is_empty() {
            // The contents, for diffs later: one group commit, not one per file.
            let journal = Journal::start(&self.db)?;
            for (sha256, content) in taken.blobs {
                journal.record(Record::Blob { sha256, content })?;
            }
            journal.close()?;
        }
        // The plan tools' checks run in pev's sandbox: there, the tests are read-only.
        crate::oracle::freeze(&taken.snapshot, &self.ctx, &oracle);
        let files =
            serde_json::to_value(&taken.snapshot.files).map_err(|e| McpError(e.to_string()))?;
        store.append_event(
            &run_id,
            EventBody::WorkspaceSnapshot {
                files,
                git: taken.snapshot.git,
                truncated: taken.snapshot.truncated,
            },
        )?;
        Ok(run_id)
    }
}

/// The plan version and `plan.revised` event of an accepted rewrite.
fn revision(
    store: &Store,
    run_id: &str,
    state: &McpState,
) -> Result<(Option<Record>, Option<EventBody>), McpError> {
    let (Some(plan), Some(revision)) = (&state.book.plan, state.book.revisions.last()) else {
        return Ok((None, None));
    };
    let record = store.load_run(run_id)?;
    let version = record.plan_version.saturating_add(1);
    let mut reason = format!("plan_create #{} by the client", revision.number);
    if !revision.dropped.is_empty() {
        let dropped: Vec<String> =
            revision.dropped.iter().map(|d| format!("`{}` ({})", d.id, d.reason)).collect();
        reason.push_str(&format!("; dropped {}", dropped.join(", ")));
    }
    let version_record = Record::PlanVersion {
        run_id: run_id.to_owned(),
        version,
        plan: serde_json::to_value(as_plan(&record.goal, plan))
            .map_err(|e| McpError(e.to_string()))?,
        reason: reason.clone(),
        created_at: now_rfc3339(),
    };
    Ok((
        Some(version_record),
        Some(EventBody::PlanRevised { version, steps: plan.steps.len(), reason }),
    ))
}

/// The plan's steps as the journal's step states (what `pev runs` counts).
fn step_records(run_id: &str, state: &McpState) -> Vec<Record> {
    use pev_engine::agent::loop_mode::StepStatus as Model;
    use pev_protocol::run::StepStatus;
    let Some(plan) = &state.book.plan else { return Vec::new() };
    let marks = state.book.marks();
    let mut out = Vec::new();
    for step in &plan.steps {
        out.push(Record::StepState(pev_store::StepState {
            run_id: run_id.to_owned(),
            step_id: step.id.clone(),
            status: match step.status {
                Model::Done => StepStatus::Done,
                Model::InProgress => StepStatus::InProgress,
                Model::Blocked => StepStatus::Blocked,
                Model::Pending => StepStatus::Pending,
            },
            attempts: u32::from(step.status == Model::Done),
            output: None,
            error: step.blocked_reason.clone(),
            started_at: None,
            ended_at: None,
            assertions: marks.step_results.get(&step.id).cloned().unwrap_or_default(),
            evidence: step.evidence.iter().cloned().collect(),
        }));
    }
    out
}

/// The newest `pev mcp` run of `workspace` for `session`: the session's own (any status: a
/// client that goes on after a stop works on the same run); else the newest open run without a
/// session, when no session is known or `adopt` says a known one may take it (the gate, for a
/// client whose server could not learn its session).
pub fn find_run(
    store: &Store,
    workspace: &str,
    session: Option<&str>,
    adopt: bool,
) -> Result<Option<String>, McpError> {
    let runs = store.run_options()?;
    let ours = |r: &&RunOptions| {
        r.options.get("mode").and_then(Value::as_str) == Some(MODE) && r.workspace == workspace
    };
    fn of_session(r: &RunOptions) -> Option<&str> {
        r.options.get("session").and_then(Value::as_str)
    }
    if let Some(session) = session
        && let Some(run) = runs.iter().filter(ours).find(|r| of_session(r) == Some(session))
    {
        return Ok(Some(run.run_id.clone()));
    }
    if session.is_some() && !adopt {
        return Ok(None);
    }
    // A run a server of this same client process made without knowing its session (named
    // after the client process, see `Sessions::session`).
    if let Some(key) = crate::client_process::client_key().map(|k| format!("client:{k}"))
        && let Some(run) = runs.iter().filter(ours).find(|r| of_session(r) == Some(&key))
    {
        return Ok(Some(run.run_id.clone()));
    }
    Ok(runs
        .iter()
        .filter(ours)
        .find(|r| r.status == "running" && of_session(r).is_none())
        .map(|r| r.run_id.clone()))
}

/// A run's state: the latest `client.plan_call` that carried one, and the snapshot. Only the
/// bodies it needs are read: every plan call journals the whole state, so reading them all
/// would grow with the square of the run's length (issue 32).
fn load_run(store: &Store, run_id: &str) -> Result<Loaded, McpError> {
    let record = store.load_run(run_id)?;
    let kinds = store.event_kinds(run_id)?;
    let count = |kind: &str| kinds.get(kind).map_or(0, |k| k.count);
    let calls = count(kind::CLIENT_PLAN_CALL).saturating_add(count(kind::CLIENT_TOOL));
    let last_call = kinds.get(kind::CLIENT_PLAN_CALL).map(|k| k.newest);
    let client_tools = store
        .events_of_kind(run_id, kind::CLIENT_TOOL)?
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::ClientTool { tool, summary } => Some(ClientCall { tool, summary }),
            _ => None,
        })
        .collect();
    let state = store.newest_of_kind(run_id, kind::CLIENT_PLAN_CALL, |e| match e.body {
        EventBody::ClientPlanCall { state: Some(s), .. } => Some((e.seq, s)),
        _ => None,
    })?;
    let state = state
        .map(|(seq, s)| {
            serde_json::from_value::<McpState>(s).map_err(|e| {
                McpError(format!(
                    "the journal's plan state of run {run_id} (event {seq}) cannot be read: {e}"
                ))
            })
        })
        .transpose()?;
    let snapshot = store.newest_of_kind(run_id, kind::WORKSPACE_SNAPSHOT, |e| match e.body {
        EventBody::WorkspaceSnapshot { files, git, truncated } => Some((files, git, truncated)),
        _ => None,
    })?;
    let snapshot = snapshot
        .map(|(files, git, truncated)| {
            let files = serde_json::from_value(files).map_err(|e| {
                McpError(format!("the workspace snapshot of run {run_id} cannot be read: {e}"))
            })?;
            Ok::<_, McpError>(Snapshot { files, git, truncated })
        })
        .transpose()?;
    Ok(Loaded {
        run_id: run_id.to_owned(),
        status: record.status,
        state: state.unwrap_or_default(),
        snapshot,
        calls,
        client_tools,
        last_call,
        is_client_run: record.options.get("mode").and_then(Value::as_str) == Some(MODE),
    })
}

/// What the journal holds of a client's run: its state, the snapshot, and how many calls the
/// client made (for the gate, `pev show` and `pev gate status`).
pub struct Journaled {
    pub state: McpState,
    pub snapshot: Option<Snapshot>,
    pub calls: u64,
    pub client_tools: Vec<ClientCall>,
}

/// The state of `run_id` as the journal holds it.
pub fn state_of(store: &Store, run_id: &str) -> Result<Journaled, McpError> {
    let loaded = load_run(store, run_id)?;
    Ok(Journaled {
        state: loaded.state,
        snapshot: loaded.snapshot,
        calls: loaded.calls,
        client_tools: loaded.client_tools,
    })
}

fn state_json(state: &McpState) -> Value {
    serde_json::to_value(state).unwrap_or(Value::Null)
}

fn goal_of(state: &McpState) -> String {
    match (&state.book.plan, state.todo.first()) {
        (Some(plan), _) => plan.objective.clone(),
        (None, Some(item)) => format!("Todo list: {}", item.content),
        (None, None) => "(no goal)".to_owned(),
    }
}

fn refusal(text: String) -> Answer {
    Answer { ok: false, structured: json!({"ok": false, "message": text}), text }
}

/// What the model reads (Claude Code shows it `structuredContent`, not the text): the answer,
/// the run, and the plan and todo list as they now stand.
fn structured(ok: bool, text: &str, run_id: Option<&str>, state: &McpState) -> Value {
    let mut out = json!({
        "ok": ok,
        "message": text,
        "run_id": run_id,
        "plan": state.book.plan.as_ref().map(plan_view),
    });
    if !state.todo.is_empty() {
        out["todo"] = json!(
            state
                .todo
                .iter()
                .map(|t| json!({
                    "content": t.content,
                    "status": match t.status {
                        TodoStatus::Pending => "pending",
                        TodoStatus::InProgress => "in_progress",
                        TodoStatus::Completed => "completed",
                    },
                }))
                .collect::<Vec<_>>()
        );
    }
    out
}

/// The plan as structured data: each step's id, title, status, evidence and check kinds.
pub fn plan_view(plan: &ModelPlan) -> Value {
    json!({
        "objective": plan.objective,
        "steps": plan.steps.iter().map(|s| json!({
            "id": s.id,
            "title": s.title,
            "status": s.status.as_str(),
            "evidence": s.evidence,
            "blocked_reason": s.blocked_reason,
            "checks": s.assertions.iter().map(pev_protocol::Assertion::kind).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "postconditions": plan.postconditions.iter().map(|p| json!({
            "id": p.id,
            "description": p.description,
            "verified": p.verified,
            "checked_by_harness": p.verified && p.verified_by == Some(pev_engine::agent::loop_mode::VerifiedBy::Harness),
            "checks": p.assertions.iter().map(pev_protocol::Assertion::kind).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// `plan_show` without a run: how to start.
pub fn is_read_only(tool: &str) -> bool {
    matches!(tool, PLAN_SHOW | LINT_PLAN)
}

#[cfg(test)]
#[path = "session_unit_tests.rs"]
mod unit_tests;
