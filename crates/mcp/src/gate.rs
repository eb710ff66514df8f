//! `pev gate`: the hook command Claude Code and Codex run (one command, either client's payload
//! on stdin, one JSON answer on stdout, exit 0).
//!
//! - **Stop**: the run of the session (the `session_id` the client passes; else the newest open
//!   `pev mcp` run of the workspace) is decided now ([`crate::verdict`]). `success` lets the
//!   client stop and records the run. Anything else blocks the stop (`decision: block`) with the
//!   reasons as the client's next instruction, up to `max_refusals` consecutive refusals; then
//!   the client is stopped (`continue: false`, a `stopReason`) and the run is recorded
//!   unfinished, never a silent success.
//! - **SubagentStop**: a sub-agent finishing its part is not the plan finishing; it is blocked
//!   only when evidence the run had accepted no longer holds (it undid verified work).
//! - **SessionStart**: pins the session id beside the journal (for a server that is not given
//!   one) and tells the model that its work is checked.
//! - **PostToolUse** (`--record`): journals the client's own tool call as evidence for `pev show`.
//!
//! It fails closed: a payload that is not JSON, a journal that cannot be read, a transcript
//! that was asked for and cannot be read all block the stop with the reason, under the same cap
//! (counted in a file in the temp directory when there is no journal to count in).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pev_protocol::event::{EventBody, kind, now_rfc3339};
use pev_protocol::run::{ReasonCode, RunResult, RunStatus};
use pev_store::{Guard, Record, Store, StoreError};
use pev_tools::ToolContext;
use serde_json::{Value, json};

use crate::session::{MODE, find_run, pin};
use crate::snapshot::sha256_hex;
use crate::transcript;
use crate::{McpError, verdict};

/// The default number of refusals before the client is let go (Claude Code's own cap is 8).
pub const DEFAULT_MAX_REFUSALS: u32 = 3;

/// How the gate was called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateOptions {
    pub max_refusals: u32,
    /// Without a pev plan, build the checklist from the client's own todo tools.
    pub from_transcript: bool,
    /// Without a pev plan (and no checklist), refuse the stop: a plan is owed.
    pub require_plan: bool,
    /// How long the check may take: past it the stop is refused (a client whose hook times
    /// out would let the stop through unchecked, so this stays under the hook's timeout).
    pub deadline: std::time::Duration,
}

/// The default deadline: under the 600 s hook timeout `pev integrate` writes.
pub const DEFAULT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(540);

impl Default for GateOptions {
    fn default() -> Self {
        Self {
            max_refusals: DEFAULT_MAX_REFUSALS,
            from_transcript: false,
            require_plan: false,
            deadline: DEFAULT_DEADLINE,
        }
    }
}

/// What the command line provides: the workspace and journal a payload's `cwd` leads to, with
/// the tool context (sandbox included) assertions run in.
pub trait GateEnv {
    /// The workspace (`cwd` is the payload's, if any), its journal path and a tool context.
    fn open(&self, cwd: Option<&str>) -> Result<(Arc<ToolContext>, PathBuf), String>;
    /// Where the fail-closed counter lives when there is no journal.
    fn counter_dir(&self) -> PathBuf {
        std::env::temp_dir().join("pev-gate")
    }
}

/// The gate's answer: stdout (one JSON object, or nothing) and the exit code.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub stdout: Option<Value>,
    pub exit: u8,
}

impl Reply {
    pub(crate) fn quiet() -> Self {
        Self { stdout: None, exit: 0 }
    }

    pub(crate) fn json(value: Value) -> Self {
        Self { stdout: Some(value), exit: 0 }
    }
}

/// The hook's payload, in the fields both clients send.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Payload {
    pub hook: String,
    pub session: Option<String>,
    pub cwd: Option<String>,
    pub transcript: Option<String>,
    pub stop_hook_active: bool,
    pub tool_name: Option<String>,
    pub tool_input: Option<Value>,
    pub tool_response: Option<Value>,
    /// `codex` when the payload has Codex's `turn_id` or rollout transcript, else `claude`.
    pub client: &'static str,
}

impl Payload {
    /// Reads a payload; `Err` says why it is not one.
    pub fn parse(input: &[u8]) -> Result<Self, String> {
        let value: Value = serde_json::from_slice(input)
            .map_err(|e| format!("the hook's input is not JSON ({e})"))?;
        let Value::Object(map) = value else {
            return Err("the hook's input is not a JSON object".to_owned());
        };
        let text = |k: &str| {
            map.get(k).and_then(Value::as_str).map(str::to_owned).filter(|s| !s.is_empty())
        };
        // No event name: the gate is a Stop hook unless told otherwise (fail closed).
        let hook = text("hook_event_name").unwrap_or_else(|| "Stop".to_owned());
        Ok(Self {
            hook,
            session: text("session_id"),
            cwd: text("cwd"),
            transcript: text("transcript_path"),
            stop_hook_active: map.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false),
            tool_name: text("tool_name"),
            tool_input: map.get("tool_input").cloned(),
            tool_response: map.get("tool_response").cloned(),
            client: if map.contains_key("turn_id")
                || map
                    .get("transcript_path")
                    .and_then(Value::as_str)
                    .is_some_and(|p| p.contains("/rollout-"))
            {
                "codex"
            } else {
                "claude"
            },
        })
    }
}

/// Runs the gate on one payload.
pub async fn gate(input: &[u8], options: &GateOptions, env: &dyn GateEnv) -> Reply {
    let payload = match Payload::parse(input) {
        Ok(p) => p,
        Err(why) => return fail_closed(env, options, None, &why),
    };
    match payload.hook.as_str() {
        "SessionStart" => session_start(&payload, env),
        "PostToolUse" => record_tool(&payload, env),
        "Stop" | "SubagentStop" => {
            match tokio::time::timeout(options.deadline, stop(&payload, options, env)).await {
                Ok(Ok(reply)) => reply,
                Ok(Err(e)) => fail_closed(env, options, Some(&payload), &e.0),
                Err(_) => {
                    let why = format!(
                        "the check took longer than {} s (--deadline), so it was not finished",
                        options.deadline.as_secs()
                    );
                    fail_closed(env, options, Some(&payload), &why)
                }
            }
        }
        // Another event wired to the gate by mistake: nothing to check, nothing blocked.
        _ => Reply::quiet(),
    }
}

async fn stop(
    payload: &Payload,
    options: &GateOptions,
    env: &dyn GateEnv,
) -> Result<Reply, McpError> {
    let (ctx, db) = env.open(payload.cwd.as_deref()).map_err(McpError)?;
    let workspace = ctx.workspace.root().display().to_string();
    let store = match Store::open_existing(&db) {
        Ok(store) => Some(store),
        Err(StoreError::Missing { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let run = match &store {
        Some(store) => find_run(store, &workspace, payload.session.as_deref(), true)?,
        None => None,
    };
    let (Some(store), Some(run_id)) = (store, run) else {
        return no_plan(payload, options, env);
    };
    // A journal changed behind pev's back is not evidence of anything.
    let integrity = store.integrity(&run_id)?;
    if integrity.is_broken() {
        return Err(McpError(format!("the journal of run {run_id} is {}", integrity.describe())));
    }
    // What the client had done when the check began: a plan call after it means the verdict
    // is stale, and nothing final is recorded on it.
    let guard_seq = store.event_kinds(&run_id)?.get(kind::CLIENT_PLAN_CALL).map(|k| k.newest);
    let guard = Guard { kind: kind::CLIENT_PLAN_CALL, last: guard_seq };
    let result = verdict::verdict(&store, &run_id, &ctx).await?;
    let subagent = payload.hook == "SubagentStop";
    let regressed = result.final_check.as_ref().is_some_and(|c| !c.regressed.is_empty());
    if subagent && !regressed {
        // A sub-agent finishing its part is not the plan finishing.
        return Ok(Reply::quiet());
    }
    let refusals = consecutive_refusals(&store, &run_id)?;
    if result.status == RunStatus::Success && !subagent {
        let decided = decision(payload, "allow", 0, &[]);
        if !finish(&store, &result, guard, decided)? {
            return stale(&store, &run_id, payload, refusals, options);
        }
        return Ok(Reply::json(json!({
            "systemMessage": format!(
                "pev: run {run_id} verified: {} (checked by pev against the workspace)",
                summary(&result)
            ),
        })));
    }
    let reasons: Vec<String> = if subagent {
        result
            .reasons
            .iter()
            .filter(|r| r.code == ReasonCode::EvidenceRegressed)
            .map(|r| r.message.clone())
            .collect()
    } else {
        result.reasons.iter().map(|r| with_diff(r, &result)).collect()
    };
    if refusals < options.max_refusals {
        return block((&store, &run_id), payload, &reasons, refusals, options);
    }
    if subagent {
        // The cap is the main agent's: a sub-agent past it is let go, and its parent's stop
        // will be decided as usual.
        return Ok(Reply::quiet());
    }
    // The cap: the client stops, and the run says it is unfinished.
    let mut result = result;
    result.warnings.push(format!(
        "the stop gate refused {refusals} stop(s) and then let the client stop with the plan \
         unfinished"
    ));
    if result.status != RunStatus::Failed {
        result.status = RunStatus::Partial;
    }
    let decided = decision(payload, "stop", refusals, &reasons);
    if !finish(&store, &result, guard, decided)? {
        return stale(&store, &run_id, payload, refusals, options);
    }
    let status = pev_engine::status_name(result.status);
    let why = reasons.first().cloned().unwrap_or_default();
    let stop = format!(
        "pev: stopped unfinished after {refusals} refusals; run {run_id} is {status}: {why}"
    );
    Ok(Reply::json(json!({"continue": false, "stopReason": stop, "systemMessage": stop})))
}

/// Refuses the stop: the reasons, journaled, and the run open again (a run recorded finished
/// earlier is not finished while its client is told to go on).
fn block(
    (store, run_id): (&Store, &str),
    payload: &Payload,
    reasons: &[String],
    refusals: u32,
    options: &GateOptions,
) -> Result<Reply, McpError> {
    let n = refusals.saturating_add(1);
    let reopen = Record::RunStatus {
        run_id: run_id.to_owned(),
        status: "running".to_owned(),
        result: None,
        updated_at: now_rfc3339(),
    };
    store.append_guarded(run_id, None, &[reopen], vec![decision(payload, "block", n, reasons)])?;
    Ok(Reply::json(json!({
        "decision": "block",
        "reason": block_reason(run_id, reasons, n, options.max_refusals),
    })))
}

/// The client changed the plan while pev was checking it: the verdict is stale, so the stop is
/// refused and will be checked again.
fn stale(
    store: &Store,
    run_id: &str,
    payload: &Payload,
    refusals: u32,
    options: &GateOptions,
) -> Result<Reply, McpError> {
    let why = vec![
        "the plan changed while pev was checking it (a plan tool call came in meanwhile); stop \
         again to have it checked"
            .to_owned(),
    ];
    block((store, run_id), payload, &why, refusals, options)
}

/// No pev run for the session: the transcript's checklist when asked, a refusal when a plan is
/// required, otherwise a quiet pass with a note for the person.
fn no_plan(payload: &Payload, options: &GateOptions, env: &dyn GateEnv) -> Result<Reply, McpError> {
    if options.from_transcript && payload.hook == "Stop" {
        let Some(path) = &payload.transcript else {
            return Err(McpError(
                "--from-transcript: the hook's input has no transcript_path".to_owned(),
            ));
        };
        let items = transcript::read(Path::new(path)).map_err(McpError)?;
        let open: Vec<String> = items
            .iter()
            .filter(|i| !i.done)
            .map(|i| format!("{} ({})", i.text, i.status))
            .collect();
        if open.is_empty() {
            let _ = std::fs::remove_file(counter_file(env, payload));
            return Ok(Reply::quiet());
        }
        return Ok(counted_block(
            env,
            options,
            payload,
            &format!(
                "pev: your own todo list is not finished: {} item(s) open:\n- {}\nFinish them, or \
                 mark each one completed only when it is done.",
                open.len(),
                open.join("\n- ")
            ),
        ));
    }
    if payload.hook == "Stop"
        && !options.require_plan
        && let Some(reply) =
            crate::unplanned::at_stop(&env.counter_dir(), payload.session.as_deref())
    {
        return Ok(reply);
    }
    if options.require_plan && payload.hook == "Stop" {
        return Ok(counted_block(
            env,
            options,
            payload,
            "pev: this session has no pev plan, and one is required: call plan_create (pev's MCP \
             tools) with the steps and assertions of the task, carry them out, and record each \
             step with step_update.",
        ));
    }
    Ok(Reply::quiet())
}

/// A refusal counted outside the journal (no run to count in), under the same cap.
fn counted_block(
    env: &dyn GateEnv,
    options: &GateOptions,
    payload: &Payload,
    reason: &str,
) -> Reply {
    let counter = counter_file(env, payload);
    let count: u32 =
        std::fs::read_to_string(&counter).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    if count >= options.max_refusals {
        let _ = std::fs::remove_file(&counter);
        let stop = format!("pev: stopped after {count} refusals: {}", first_line(reason));
        return Reply::json(json!({"continue": false, "stopReason": stop, "systemMessage": stop}));
    }
    let written = std::fs::create_dir_all(env.counter_dir())
        .and_then(|()| std::fs::write(&counter, count.saturating_add(1).to_string()));
    if let Err(e) = written {
        // Without a count there is no cap, and Codex has none of its own: stop the client
        // rather than refuse forever (nothing is recorded as a success).
        let stop = format!(
            "pev: stopped: {} (and the refusal count cannot be kept in {}: {e})",
            first_line(reason),
            env.counter_dir().display()
        );
        return Reply::json(json!({"continue": false, "stopReason": stop, "systemMessage": stop}));
    }
    Reply::json(json!({"decision": "block", "reason": reason}))
}

/// Where refusals without a journal are counted: by session, else by directory.
fn counter_file(env: &dyn GateEnv, payload: &Payload) -> std::path::PathBuf {
    let cwd = || std::env::current_dir().ok().map(|d| d.display().to_string());
    let key =
        payload.session.clone().or_else(|| payload.cwd.clone()).or_else(cwd).unwrap_or_default();
    env.counter_dir().join(sha256_hex(key.as_bytes()))
}

/// Something went wrong: the stop is refused with why (under the cap).
fn fail_closed(
    env: &dyn GateEnv,
    options: &GateOptions,
    payload: Option<&Payload>,
    why: &str,
) -> Reply {
    let default = Payload::default();
    let payload = payload.unwrap_or(&default);
    if payload.hook == "SubagentStop" {
        return Reply::quiet();
    }
    counted_block(
        env,
        options,
        payload,
        &format!("pev gate could not check this session, so the stop is refused: {why}"),
    )
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

fn session_start(payload: &Payload, env: &dyn GateEnv) -> Reply {
    if let (Some(session), Ok((_, db))) = (&payload.session, env.open(payload.cwd.as_deref())) {
        // A failure to pin costs only the fallback to the newest open run.
        let process = crate::client_process::client_key();
        let _ = pin(&db, session, Some(payload.client), process.as_deref());
    }
    Reply::json(json!({
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": format!(
                "{} {}",
                crate::catalogue::INSTRUCTIONS,
                crate::catalogue::ASSERTIONS
            ),
        },
    }))
}

/// PostToolUse: the client's own call, journaled in the session's run (if there is one).
/// Without a run, a call that changes files is noted for the Stop hook (see
/// [`crate::unplanned`]).
fn record_tool(payload: &Payload, env: &dyn GateEnv) -> Reply {
    let tool = payload.tool_name.clone().unwrap_or_else(|| "unknown".to_owned());
    let summary = tool_summary(payload.tool_input.as_ref(), payload.tool_response.as_ref());
    let run = env.open(payload.cwd.as_deref()).ok().and_then(|(ctx, db)| {
        let store = Store::open_existing(&db).ok()?;
        let workspace = ctx.workspace.root().display().to_string();
        let run_id = find_run(&store, &workspace, payload.session.as_deref(), true).ok()??;
        Some((store, run_id))
    });
    match run {
        // Recording is evidence for people reading the run; failing to record blocks nothing.
        Some((store, run_id)) => {
            let _ = store.append_event(&run_id, EventBody::ClientTool { tool, summary });
        }
        None => {
            crate::unplanned::note(&env.counter_dir(), payload.session.as_deref(), &tool, &summary)
        }
    }
    Reply::quiet()
}

/// What is kept of a client's tool call: the command or file it named and how it ended.
pub fn tool_summary(input: Option<&Value>, response: Option<&Value>) -> Value {
    let mut out = serde_json::Map::new();
    let pick = |v: Option<&Value>, keys: &[&str]| {
        keys.iter().find_map(|k| v.and_then(|v| v.get(*k)).cloned())
    };
    if let Some(Value::String(command)) = pick(input, &["command", "cmd"]) {
        out.insert("command".to_owned(), json!(clip(&command, 500)));
    } else if let Some(Value::Array(argv)) = pick(input, &["command"]) {
        let joined: Vec<String> =
            argv.iter().filter_map(Value::as_str).map(str::to_owned).collect();
        out.insert("command".to_owned(), json!(clip(&joined.join(" "), 500)));
    }
    if let Some(Value::String(path)) = pick(input, &["file_path", "path", "notebook_path"]) {
        out.insert("path".to_owned(), json!(clip(&path, 500)));
    }
    // A write that left the file as it was, by the client's own account of before and after
    // (Claude Code's Write answers with `originalFile`).
    let content = input.and_then(|i| i.get("content")).and_then(Value::as_str);
    let original = response.and_then(|r| r.get("originalFile")).and_then(Value::as_str);
    if let (Some(content), Some(original)) = (content, original) {
        out.insert("no_op".to_owned(), json!(content == original));
    }
    for key in ["exit_code", "exitCode", "returnCode", "interrupted", "success"] {
        if let Some(v) =
            response.and_then(|r| r.get(key)).filter(|v| !v.is_object() && !v.is_array())
        {
            out.insert(key.to_owned(), v.clone());
        }
    }
    Value::Object(out)
}

fn clip(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(limit).collect();
    cut.push('…');
    cut
}

/// Refusals since the last time the gate let the client go (or the run began).
fn consecutive_refusals(store: &Store, run_id: &str) -> Result<u32, McpError> {
    let mut n = 0u32;
    for event in store.events_of_kind(run_id, kind::GATE_DECIDED)?.iter().rev() {
        match &event.body {
            EventBody::GateDecided { decision, hook, .. } if hook == "Stop" => {
                if decision == "block" {
                    n = n.saturating_add(1);
                } else {
                    break;
                }
            }
            _ => {}
        }
    }
    Ok(n)
}

/// The gate's answer, for the journal.
fn decision(payload: &Payload, decision: &str, refusals: u32, reasons: &[String]) -> EventBody {
    EventBody::GateDecided {
        hook: payload.hook.clone(),
        decision: decision.to_owned(),
        refusals,
        reasons: reasons.to_vec(),
        session: payload.session.clone(),
    }
}

/// Records the gate's decision and the run's result (the verdict event, the status and
/// `run.finished`) in one transaction, unless the client made a plan call after `guard`
/// (then nothing is written and the answer is `false`).
pub fn finish(
    store: &Store,
    result: &RunResult,
    guard: Guard<'_>,
    decided: EventBody,
) -> Result<bool, McpError> {
    let status = Record::RunStatus {
        run_id: result.run_id.clone(),
        status: pev_engine::status_name(result.status).to_owned(),
        result: Some(Box::new(result.clone())),
        updated_at: now_rfc3339(),
    };
    let bodies = vec![
        decided,
        EventBody::VerifyFinished { status: result.status, reasons: result.reasons.clone() },
        EventBody::RunFinished { result: Box::new(result.clone()) },
    ];
    Ok(store.append_guarded(&result.run_id, Some(guard), &[status], bodies)?.is_some())
}

/// A reason as the client reads it: an `oracle_changed` one with the file's diff, from the
/// oracle as the plan's snapshot recorded it to the workspace now.
fn with_diff(reason: &pev_protocol::run::Reason, result: &RunResult) -> String {
    if reason.code != ReasonCode::OracleChanged {
        return reason.message.clone();
    }
    let changed = result.final_check.as_ref().and_then(|c| c.oracle.as_ref());
    let diff = changed
        .into_iter()
        .flat_map(|o| &o.changed)
        .find(|c| reason.message.starts_with(&format!("{} was", c.path)))
        .map(|c| c.diff.trim_end().to_owned())
        .filter(|d| !d.is_empty());
    match diff {
        Some(diff) => format!("{}\n{diff}", reason.message),
        None => reason.message.clone(),
    }
}

fn block_reason(run_id: &str, reasons: &[String], n: u32, max: u32) -> String {
    let mut out = format!(
        "pev: the plan is not finished, so you may not stop yet (refusal {n} of {max}; run {run_id}). \
         What pev found, checking the workspace now:"
    );
    for reason in reasons.iter().take(12) {
        out.push_str("\n- ");
        // A changed test is shown with its diff, so the client can see what to undo.
        let limit = if reason.contains("\n@@") { 2400 } else { 400 };
        out.push_str(&clip(reason, limit));
    }
    if reasons.len() > 12 {
        out.push_str(&format!("\n- … and {} more", reasons.len() - 12));
    }
    out.push_str(
        "\nDo the remaining work, mark each step done with step_update (with evidence; pev runs \
         its assertions) and verify the postconditions with postcondition_verify. If a step is \
         no longer needed, revise the plan with plan_create and list it in `dropped` with a \
         reason. If you cannot finish, say so plainly.",
    );
    out
}

fn summary(result: &RunResult) -> String {
    let done =
        result.steps.iter().filter(|s| s.status == pev_protocol::run::StepStatus::Done).count();
    let files = result.file_mutations.len();
    format!(
        "{done} step(s) done, {} postcondition(s) checked, {files} file(s) changed",
        result.postconditions.iter().filter(|p| p.satisfied).count()
    )
}

fn newest_client_run(store: &Store, workspace: &str) -> Result<Option<String>, McpError> {
    Ok(store
        .run_options()?
        .into_iter()
        .find(|r| {
            r.workspace == workspace && r.options.get("mode").and_then(Value::as_str) == Some(MODE)
        })
        .map(|r| r.run_id))
}

/// `pev gate status`: the run of `session` (or `run`), its stored result when the gate has
/// recorded one, else the verdict now (not recorded).
pub async fn status(
    session: Option<&str>,
    run: Option<&str>,
    ctx: &ToolContext,
    db: &Path,
) -> Result<RunResult, McpError> {
    let store = Store::open_existing(db)?;
    let workspace = ctx.workspace.root().display().to_string();
    // Without a session: the one the SessionStart hook pinned, else the newest client run.
    let pinned = crate::session::pinned(db);
    let session = session.or(pinned.as_deref());
    let run_id = match run {
        Some(run) => store.resolve_run(run)?,
        None => match find_run(&store, &workspace, session, true)? {
            Some(id) => id,
            None if session.is_none() => newest_client_run(&store, &workspace)?
                .ok_or_else(|| McpError(format!("no pev mcp run in {}", db.display())))?,
            None => {
                return Err(McpError(format!(
                    "no pev mcp run for session {} in {}",
                    session.unwrap_or_default(),
                    db.display()
                )));
            }
        },
    };
    // A journal changed behind pev's back decides nothing, stored success included.
    store.require_intact(&run_id)?;
    let record = store.load_run(&run_id)?;
    if record.options.get("mode").and_then(Value::as_str) != Some(MODE) {
        return Err(McpError(format!("run {run_id} is not a pev mcp run")));
    }
    let now = || verdict::verdict(&store, &run_id, ctx);
    match record.result {
        // A success is a statement about the workspace: if it no longer holds, say so.
        // (A run the gate recorded and nothing reopened since: a reopening clears the result.)
        Some(stored) if stored.status == RunStatus::Success => {
            let mut current = now().await?;
            if current.status == RunStatus::Success {
                return Ok(stored);
            }
            current.warnings.insert(
                0,
                "the gate recorded success, but the workspace has changed since: this is the \
                 verdict now"
                    .to_owned(),
            );
            Ok(current)
        }
        Some(stored) => Ok(stored),
        None => now().await,
    }
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
