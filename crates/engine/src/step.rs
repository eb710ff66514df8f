//! Running one step: resolve its references, get approval if it needs it, hash the files it may
//! change, journal the intent (durably, before any effect), call the tool, then measure what
//! changed and check the step's assertions.
//!
//! The order matters for resume: the intent record (with the hash before and, for writes and
//! patches, the hash the call will produce) reaches the disk before the tool runs, so after a
//! crash `recover` can tell "not applied" from "applied" by looking at the file.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use pev_lint::policy::Glob;
use pev_protocol::event::{EventBody, now_rfc3339};
use pev_protocol::run::StepStatus;
use pev_protocol::tool::Effect;
use pev_protocol::{Plan, Step};
use pev_store::{
    FileHashRecord, HashPhase, Record, StoreError, ToolCallEnd, ToolCallStart, ToolCallStatus,
};
use pev_tools::builtin::file_patch::{Edit, apply};
use serde_json::Value;

use crate::approval::{approval_reason, ask_approval};
use crate::recorder::Recorder;
use crate::recover::Recovery;
use crate::resolve::resolve_parameters;
use crate::state::{Slot, StepMutation};
use crate::{Approval, Engine};

/// Files above this size are hashed but not kept for line counts and diffs.
const MAX_SNAPSHOT_BYTES: usize = 8 * 1024 * 1024;

/// What every step task shares.
pub(crate) struct Shared {
    pub engine: Engine,
    pub plan: Arc<Plan>,
    pub recorder: Recorder,
    pub approve_globs: Vec<Glob>,
    /// One approval prompt at a time.
    pub approval_lock: tokio::sync::Mutex<()>,
    /// Distinguishes tool-call ids of this session from those of earlier ones of the same run.
    pub session: u64,
    /// Which steps are running (a command's changes are credited only when it ran alone).
    pub activity: Arc<crate::inventory::Activity>,
    /// The run's oracle: what its checks judge it by.
    pub oracle: Arc<crate::oracle::RunOracle>,
}

/// The work handed to a step task.
pub(crate) struct StepJob {
    pub idx: usize,
    pub attempts_before: u32,
    /// The hashes from before the step's first attempt (an earlier session's, on resume): its
    /// `content_changed` checks and the final re-check compare with them.
    pub baseline: HashMap<String, Option<String>>,
    /// The outputs of the steps this one references or asserts on.
    pub inputs: HashMap<String, Value>,
    /// Approved already (journaled earlier, or `--yes`).
    pub approved: bool,
    pub recovery: Option<Recovery>,
    /// An instruction step's interrupted attempt to continue (resume).
    pub continuation: Option<crate::continuation::Continuation>,
    /// The changes earlier sessions journaled for this step (a delegated step's adopted child
    /// changes are not journaled twice when a resume meets the same child again).
    pub earlier_mutations: Vec<pev_protocol::run::FileMutation>,
}

/// What a step task hands back.
pub(crate) struct StepReport {
    pub idx: usize,
    pub slot: Slot,
    pub mutations: Vec<StepMutation>,
    pub tool_calls: u64,
    pub warnings: Vec<String>,
    /// A cancel stopped the step from trying again.
    pub cancelled: bool,
    /// The run's budget stopped the step.
    pub budget_exhausted: Option<String>,
    /// What `--cache` learned about the step (its key, what it read, whether it may be cached).
    pub cache: crate::cache::Trace,
    /// The first this many of `mutations` were restored from an earlier session (a continued
    /// attempt): the step's evidence, already in the run's changes.
    pub restored_mutations: usize,
    /// Indexes in `mutations` (past the restored ones) already in the run's changes: a
    /// finished child's changes met again by a resume.
    pub already_counted: Vec<usize>,
    /// The changes earlier sessions journaled for this step (for child runs' changes met
    /// again; see `delegation`).
    pub earlier_mutations: Vec<pev_protocol::run::FileMutation>,
}

/// The file a write-effect call changes (its `path` argument), if it names one.
pub(crate) fn target_path(effect: Effect, args: &Value) -> Option<String> {
    if effect != Effect::Write {
        return None;
    }
    args.get("path").and_then(Value::as_str).map(str::to_owned)
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    pev_verify::oracle::sha256_of(bytes)
}

/// The hash a write or patch will leave, computed before it runs; `None` when it cannot be known.
fn intended_sha256(tool: &str, args: &Value, before: Option<&[u8]>, path: &str) -> Option<String> {
    match tool {
        "file.write" => {
            args.get("content").and_then(Value::as_str).map(|c| sha256_hex(c.as_bytes()))
        }
        "file.patch" => {
            let text = std::str::from_utf8(before?).ok()?;
            let edits: Vec<Edit> = serde_json::from_value(args.get("edits")?.clone()).ok()?;
            let (new, _) = apply(text, &edits, path).ok()?;
            Some(sha256_hex(new.as_bytes()))
        }
        _ => None,
    }
}

/// The paths whose state before and after the step is recorded: the file a write changes, the
/// step's `expected_outputs`, and the paths of its `content_changed` assertions.
pub(crate) fn watched_paths(step: &Step, target: Option<&str>) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    let mut add = |p: &str| {
        if !paths.iter().any(|q| q == p) {
            paths.push(p.to_owned());
        }
    };
    if let Some(t) = target {
        add(t);
    }
    for p in &step.expected_outputs {
        add(p);
    }
    for a in &step.assertions {
        if let pev_protocol::Assertion::ContentChanged { path, .. } = a {
            add(path);
        }
    }
    paths
}

/// A file's state: `Some(None)` absent, `Some(Some(bytes))` present, `None` unreadable (outside
/// the sandbox, a directory): not recorded.
pub(crate) fn snapshot(engine: &Engine, path: &str) -> Option<Option<Vec<u8>>> {
    match engine.ctx.workspace.read(path) {
        Ok(bytes) => Some(Some(bytes)),
        Err(pev_tools::SandboxError::NotFound { .. }) => Some(None),
        Err(_) => None,
    }
}

/// The files' states before a call: hashes of all watched paths, content of those small enough
/// to diff (`None` inside: the file did not exist).
pub(crate) struct Before {
    pub hashes: HashMap<String, Option<String>>,
    pub contents: HashMap<String, Option<Vec<u8>>>,
    /// For a command: the workspace's files before it (see `inventory.rs`).
    pub inventory: Option<crate::inventory::Taken>,
}

impl Before {
    pub(crate) fn take(engine: &Engine, paths: &[String]) -> Self {
        let mut hashes = HashMap::new();
        let mut contents = HashMap::new();
        for path in paths {
            let Some(state) = snapshot(engine, path) else { continue };
            hashes.insert(path.clone(), state.as_deref().map(sha256_hex));
            if state.as_ref().is_none_or(|c| c.len() <= MAX_SNAPSHOT_BYTES) {
                contents.insert(path.clone(), state);
            }
        }
        Self { hashes, contents, inventory: None }
    }
}

/// How a call ended.
pub(crate) struct CallEnd {
    pub output: Result<Value, String>,
}

/// One tool call as the step will make it.
pub(crate) struct Call<'a> {
    pub step: &'a Step,
    pub tool: &'a str,
    pub effect: Effect,
    pub args: &'a Value,
    pub watched: &'a [String],
    pub target: Option<&'a str>,
}

pub(crate) async fn run_step(shared: Arc<Shared>, mut job: StepJob) -> StepReport {
    let _running = shared.activity.enter();
    let mut report = StepReport {
        idx: job.idx,
        slot: Slot {
            attempts: job.attempts_before,
            baseline: std::mem::take(&mut job.baseline),
            ..Slot::default()
        },
        mutations: Vec::new(),
        tool_calls: 0,
        warnings: Vec::new(),
        cancelled: false,
        budget_exhausted: None,
        cache: crate::cache::Trace::default(),
        restored_mutations: 0,
        already_counted: Vec::new(),
        earlier_mutations: std::mem::take(&mut job.earlier_mutations),
    };
    let plan = Arc::clone(&shared.plan);
    let Some(step) = plan.steps.get(job.idx) else {
        fail(&mut report.slot, "internal error: no such step");
        return report;
    };
    let driven = match drive(&shared, step, &mut job, &mut report).await {
        Ok(()) => crate::cache::remember(&shared, step, &mut report),
        Err(e) => Err(e),
    };
    if let Err(e) = driven {
        fail(&mut report.slot, &format!("the journal failed: {e}"));
    }
    report
}

/// Asks for a step's approval; `false` when it may not run now (refused: the step failed;
/// deferred: it waits, blocked).
async fn approved(
    shared: &Shared,
    step: &Step,
    (what, args, reason): (&str, &Value, String),
    report: &mut StepReport,
) -> Result<bool, StoreError> {
    match ask_approval(shared, step, what, args, reason).await? {
        Approval::Yes => Ok(true),
        Approval::No => {
            fail(&mut report.slot, "a person refused approval");
            Ok(false)
        }
        Approval::Defer => {
            report.slot.status = StepStatus::Blocked;
            report.slot.awaiting_approval = true;
            report.slot.started_at = None;
            Ok(false)
        }
    }
}

pub(crate) fn fail(slot: &mut Slot, message: &str) {
    slot.status = StepStatus::Failed;
    slot.error = Some(message.to_owned());
    slot.ended_at = Some(now_rfc3339());
}

/// How many attempts a step gets: `max_attempts` if the plan says, else 3 for `on_fail: retry`
/// and 1 otherwise.
pub(crate) fn max_attempts(step: &Step) -> u32 {
    let default = if step.on_fail == pev_protocol::OnFail::Retry { 3 } else { 1 };
    step.max_attempts.unwrap_or(default).max(1)
}

async fn drive(
    shared: &Shared,
    step: &Step,
    job: &mut StepJob,
    report: &mut StepReport,
) -> Result<(), StoreError> {
    let engine = &shared.engine;
    let id = step.id.as_str();
    report.slot.started_at = Some(now_rfc3339());
    if let Some(delegation) = &step.delegate {
        if !job.approved && step.requires_approval {
            let args = serde_json::json!({ "delegate": delegation.goal });
            let reason = "the step sets requires_approval".to_owned();
            if !approved(shared, step, ("delegate", &args, reason), report).await? {
                return Ok(());
            }
        }
        report.cache.refuse("a delegated step runs a child run".to_owned());
        return crate::delegation::run(shared, step, delegation, &job.inputs, report).await;
    }
    if step.tool.is_none() {
        if crate::cache::try_reuse(shared, step, job, report, (None, None, false))? {
            return Ok(());
        }
        if !job.approved && step.requires_approval {
            let args = serde_json::json!({ "description": step.description });
            let reason = "the step sets requires_approval".to_owned();
            if !approved(shared, step, ("executor", &args, reason), report).await? {
                return Ok(());
            }
        }
        let continuation = job.continuation.take();
        return crate::instruction::run(shared, step, &job.inputs, continuation, report).await;
    }
    let Some((tool_name, tool)) =
        step.tool.as_deref().and_then(|t| engine.registry.get(t).map(|tool| (t, Arc::clone(tool))))
    else {
        fail(&mut report.slot, "the step names no tool pev has");
        return Ok(());
    };
    let effect = tool.effect();
    let args = match resolve_parameters(&step.parameters, &|s| job.inputs.get(s)) {
        Ok(map) => Value::Object(map),
        Err(e) => {
            fail(&mut report.slot, &e.to_string());
            return Ok(());
        }
    };

    if job.recovery.is_some() {
        report.cache.refuse("it was settled after an interruption".to_owned());
    } else {
        let needs_approval = approval_reason(shared, step, tool_name).is_some();
        let reuse = (Some(&args), Some(effect), needs_approval);
        if crate::cache::try_reuse(shared, step, job, report, reuse)? {
            return Ok(());
        }
    }
    if !job.approved
        && let Some(reason) = approval_reason(shared, step, tool_name)
        && !approved(shared, step, (tool_name, &args, reason), report).await?
    {
        return Ok(());
    }

    let target = target_path(effect, &args);
    if let Some(refused) = target
        .as_deref()
        .and_then(|t| shared.oracle.refusal(&engine.ctx.workspace, step, (tool_name, t, &args)))
    {
        report.slot.attempts += 1;
        fail(&mut report.slot, &refused);
        return Ok(());
    }
    let watched = watched_paths(step, target.as_deref());
    let call = Call {
        step,
        tool: tool_name,
        effect,
        args: &args,
        watched: &watched,
        target: target.as_deref(),
    };
    let max_attempts = max_attempts(step);
    let mut recovery = job.recovery.take();
    loop {
        report.slot.attempts += 1;
        report.slot.status = StepStatus::InProgress;
        report.slot.error = None;
        shared
            .recorder
            .record(Record::StepState(report.slot.to_stored(shared.recorder.run_id(), id)))?;
        shared
            .recorder
            .emit(EventBody::StepStarted { step: id.to_owned(), attempt: report.slot.attempts })?;

        let settled = match recovery.take() {
            Some(r) => crate::recover::settle(shared, &call, r, report).await?,
            None => None,
        };
        let mut objection = None;
        let (before, end) = match settled {
            Some(known) => known,
            None => {
                let hooked = (tool_name, &args);
                if let Some(reason) =
                    crate::hooks::before_call(shared, step, hooked, report).await?
                {
                    // Denied: the call is not made, and asking again would be denied again.
                    fail(&mut report.slot, &format!("hook denied: {reason}"));
                    break;
                }
                let (before, end) = invoke(shared, &call, &*tool, report, None).await?;
                objection =
                    crate::hooks::after_step_call(shared, step, hooked, &end.output, report)
                        .await?;
                (before, end)
            }
        };
        let mutations_before = report.mutations.len();
        crate::check::after_call(shared, &call, (before, end), &job.inputs, report).await?;
        if let Some(reason) = objection {
            // The call happened (its changes are recorded above), but the hook rejects it.
            fail(&mut report.slot, &format!("hook denied: {reason}"));
        }
        if report.slot.status == StepStatus::Done
            && let Some(models) = engine.config.models.clone()
        {
            let claim = report.slot.output.as_ref().map(Value::to_string).unwrap_or_default();
            let claim: String = claim.chars().take(4000).collect();
            let mutations = report
                .mutations
                .iter()
                .skip(mutations_before)
                .map(|m| m.mutation.clone())
                .collect();
            crate::instruction::judge(
                shared,
                &models,
                step,
                (claim, Vec::new(), mutations, Vec::new()),
                report,
            )
            .await?;
            if report.budget_exhausted.is_some() {
                break;
            }
        }
        if report.slot.status == StepStatus::Done || report.slot.attempts >= max_attempts {
            break;
        }
        if engine.config.cancel.is_cancelled() {
            report.cancelled = true;
            break;
        }
        let message = format!(
            "step `{id}`: attempt {} of {max_attempts} failed: {}; trying again",
            report.slot.attempts,
            report.slot.error.as_deref().unwrap_or("unknown error")
        );
        shared
            .recorder
            .emit(EventBody::Warning { step: Some(id.to_owned()), message: message.clone() })?;
        report.warnings.push(message);
        report.cache.retry_warnings += 1;
    }
    Ok(())
}

/// Makes the call: state before, the durable intent, the tool, the end record.
pub(crate) async fn invoke(
    shared: &Shared,
    call: &Call<'_>,
    tool: &dyn pev_tools::Tool,
    report: &mut StepReport,
    call_no: Option<u32>,
) -> Result<(Before, CallEnd), StoreError> {
    let engine = &shared.engine;
    let run_id = shared.recorder.run_id().to_owned();
    let id = call.step.id.as_str();
    let mut before = Before::take(engine, call.watched);
    if call.tool == "shell.exec" {
        before.inventory = Some(crate::inventory::before(&engine.ctx.workspace, &shared.activity));
    }
    let call_id = match call_no {
        // An executor's calls within one attempt.
        Some(n) => format!("{id}#{}.{}.{n}", report.slot.attempts, shared.session),
        None => format!("{id}#{}.{}", report.slot.attempts, shared.session),
    };
    let target_content =
        call.target.and_then(|t| before.contents.get(t)).and_then(Option::as_deref);
    let intended =
        call.target.and_then(|path| intended_sha256(call.tool, call.args, target_content, path));
    let now = now_rfc3339();
    let mut records = Vec::with_capacity(call.watched.len() + 2);
    for (path, sha) in &before.hashes {
        records.push(Record::FileHash(FileHashRecord {
            run_id: run_id.clone(),
            step_id: id.to_owned(),
            path: path.clone(),
            phase: HashPhase::Before,
            sha256: sha.clone(),
            bytes: None,
            at: now.clone(),
        }));
    }
    // The content before a write goes with the intent, so a resumed run can still show the diff.
    if let Some(content) = target_content {
        records.push(Record::Blob { sha256: sha256_hex(content), content: content.to_vec() });
    }
    records.push(Record::ToolCallStarted(ToolCallStart {
        run_id: run_id.clone(),
        call_id: call_id.clone(),
        step_id: id.to_owned(),
        attempt: report.slot.attempts,
        tool: call.tool.to_owned(),
        effect: call.effect,
        arguments: call.args.clone(),
        path: call.target.map(str::to_owned),
        pre_sha256: call.target.and_then(|t| before.hashes.get(t).cloned().flatten()),
        intended_sha256: intended,
        started_at: now,
    }));
    // An effect must not happen unless its intent is on disk: that is what makes resume safe.
    if call.effect == Effect::Read {
        for r in records {
            shared.recorder.record(r)?;
        }
    } else {
        shared.recorder.durable(records).await?;
    }
    shared.recorder.emit(EventBody::ToolCalled {
        step: id.to_owned(),
        call_id: call_id.clone(),
        tool: call.tool.to_owned(),
        effect: call.effect,
        arguments: call.args.clone(),
    })?;
    report.tool_calls += 1;
    let started = Instant::now();
    let result = tool.call(&engine.ctx, call.args.clone()).await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (ok, output, error) = match result {
        Ok(v) => (true, Some(v), None),
        Err(e) => (false, None, Some(e.to_string())),
    };
    shared.recorder.record(Record::ToolCallFinished(ToolCallEnd {
        run_id,
        call_id: call_id.clone(),
        status: if ok { ToolCallStatus::Finished } else { ToolCallStatus::Failed },
        output: output.clone(),
        error: error.clone(),
        ended_at: now_rfc3339(),
        duration_ms,
    }))?;
    shared.recorder.emit(EventBody::ToolFinished {
        step: id.to_owned(),
        call_id,
        tool: call.tool.to_owned(),
        ok,
        output: output.clone(),
        error: error.clone(),
        duration_ms,
        recovered: false,
    })?;
    let end = CallEnd { output: output.ok_or_else(|| error.unwrap_or_default()) };
    if engine.config.cache {
        crate::cache::observe(&engine.ctx.workspace, &mut report.cache, call, &before, &end.output);
    }
    Ok((before, end))
}
