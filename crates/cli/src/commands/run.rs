//! `pev run` and `pev resume`: lint the plan, open the journal, run the engine with the right
//! view and approval mode, print the outcome, and map it to the exit code.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pev_engine::agent::call_marks::CallMarks;
use pev_engine::{ResumeInput, RunInput};
use pev_lint::{LintOptions, lint};
use pev_protocol::LintStatus;
use pev_protocol::event::{EventBody, now_rfc3339};
use pev_protocol::parse::{Format, ParseError, parse_plan};
use pev_protocol::run::{RunResult, RunStatus, StepStatus};
use pev_store::{NewRun, Store};
use pev_tools::Registry;
use serde_json::{Value, json};

use crate::shared::sandbox_setup::SandboxPolicy;
use crate::view::style::Style;
use crate::{commands::lint, input, shared::scratch};

use crate::args::values::Common;
use crate::shared::exit::{EXIT_FAILED, Fail, exit_code};
use crate::shared::session::{RunPolicy, Session, resumed_oracle, with_stored_hidden};
use crate::shared::workspace::{file_config, lock_run, store_path, workspace_dir};

/// `pev run PLAN`.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub plan: String,
    pub policy: Option<PathBuf>,
    pub scratch: bool,
    pub common: Common,
}

/// The stored result of a run that has nothing left to do: it ended (not interrupted, not
/// stopped by Ctrl-C, not waiting for approval or out of budget, which `resume` continues).
fn finished(record: &pev_store::RunRecord) -> Option<&RunResult> {
    use pev_protocol::run::ReasonCode;
    let result = record.result.as_ref()?;
    let resumable = result.status == RunStatus::AwaitingApproval
        || result
            .reasons
            .iter()
            .any(|r| matches!(r.code, ReasonCode::Cancelled | ReasonCode::BudgetExhausted));
    (record.status != "running" && !resumable).then_some(result)
}

fn status_word(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Success => "success",
        RunStatus::Partial => "partial",
        RunStatus::Failed => "failed",
        RunStatus::AwaitingApproval => "awaiting approval",
    }
}

pub fn run(req: &RunRequest, err: &mut dyn Write) -> Result<u8, Fail> {
    let limit = input::max_bytes(std::env::var("PEV_MAX_INPUT_BYTES").ok().as_deref());
    let source = input::read(&req.plan, limit).map_err(|e| Fail::input(e.to_string()))?;
    let named = workspace_dir(req.common.workspace.as_deref())?;
    let floor = file_config(&named)?.sandbox();
    let policy = crate::shared::policy_source::load(req.policy.as_deref(), &named, floor, err)?;
    let format = match (source.is_stdin, Format::from_path(&source.name)) {
        (false, Some(format)) => format,
        _ => Format::sniff(&source.text),
    };
    let parsed = match parse_plan(&source.text, format) {
        Ok(parsed) => parsed,
        Err(ParseError::Syntax { format, line, column, message }) => {
            return Err(Fail::input(format!(
                "{}:{line}:{column}: invalid {format}: {message}",
                source.name
            )));
        }
        Err(ParseError::Schema(issues)) => {
            let lines: Vec<String> = issues
                .iter()
                .map(|i| {
                    let at = if i.pointer.is_empty() { "(top level)" } else { &i.pointer };
                    format!("  {at}: {}", i.message)
                })
                .collect();
            return Err(Fail::input(format!(
                "{} does not match the plan schema:\n{}",
                source.name,
                lines.join("\n")
            )));
        }
    };
    // Lint first: a plan with errors does not run.
    // The same lint as `pev lint` with the same policy: same findings, same threshold. Its
    // report goes to stderr whenever it has something to say, warnings included, so a run never
    // hides what lint would have shown.
    let linted = lint(&parsed, &policy, LintOptions::default());
    let threshold = policy.policy.fail_risk_threshold;
    let color = Style::for_stderr(req.common.color).color;
    if linted.status == LintStatus::Error {
        let report = (&linted, &parsed.plan, threshold);
        let _ = lint::write_text_report(&source, format, report, color, err);
        return Err(Fail::input(format!(
            "{} has lint errors; it was not run (fix them, or see `pev lint --explain CODE`)",
            source.name
        )));
    }
    if !linted.warnings.is_empty() && !req.common.json {
        let report = (&linted, &parsed.plan, threshold);
        let _ = lint::write_text_report(&source, format, report, color, err);
    }
    input::check_goal(&parsed.plan.goal)
        .map_err(|e| Fail::input(format!("{}: {e}", source.name)))?;
    let plan = parsed.plan;
    let registry = Registry::builtin();
    pev_engine::check_runnable(&plan, &registry).map_err(|e| {
        let delegates = plan.steps.iter().any(|s| s.delegate.is_some());
        let unknown_tool =
            plan.steps.iter().any(|s| s.tool.as_deref().is_some_and(|t| registry.get(t).is_none()));
        let hint = if unknown_tool {
            " (`pev lint` reports this as UNKNOWN_TOOL, a warning there because a plan may name \
             tools of another runtime; pev run can only run the tools it has)"
        } else if delegates {
            " (a delegated step runs a child run with the models of `pev agent`)"
        } else {
            ""
        };
        Fail::input(format!("{e}; it was not run{hint}"))
    })?;

    let mut workspace = named;
    if req.scratch {
        workspace = scratch::announced_copy(&workspace, err)?;
    }
    let db = store_path(&req.common, &workspace)?;
    let approve_tools = policy.policy.approve_tools.clone();
    let allow_hosts = policy.policy.allow_hosts.clone();
    // Everything that can refuse the run (a bad pev.toml, an unusable workspace) is checked
    // before the run is journaled, so a refusal leaves no empty run behind.
    let session = Session::open(
        &req.common,
        &workspace,
        &db,
        RunPolicy {
            approve_tools: approve_tools.clone(),
            allow_hosts: allow_hosts.clone(),
            sandbox: SandboxPolicy::from_policy(&policy.policy),
            oracle: policy.policy.oracle.clone(),
            lint: Arc::new(policy.clone()),
        },
        None,
    )?;
    let store = Store::open(&db).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let run_id = pev_store::new_run_id();
    // Locked before the run exists in the journal, so no `resume` can pick it up half-started.
    let _lock = lock_run(&db, &run_id)?;
    let options = json!({
        "plan_file": source.name,
        "approve_tools": approve_tools,
        "allow_hosts": allow_hosts,
        "scratch": req.scratch,
        "sandbox": session.sandbox_options(),
        "oracle": session.engine.config.oracle,
        "policy": crate::shared::policy_source::to_options(&policy),
    });
    store
        .create_run(&NewRun {
            run_id: run_id.clone(),
            goal: plan.goal.clone(),
            workspace: workspace.display().to_string(),
            plan: serde_json::to_value(&plan).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?,
            options,
            created_at: now_rfc3339(),
        })
        .map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    drop(store);
    let _ = writeln!(err, "pev: run {run_id} (journal {})", db);
    session.trace(&run_id, false);
    let journal = session.journal()?;
    // A plan run has tool steps only (`check_runnable`): no model's calls are journaled beside
    // the engine's records, so its groups may wait for company (`Journal::linger`).
    journal.linger(pev_store::LINGER);
    let outcome = session.block_on(session.engine.run(RunInput { run_id, plan, journal }));
    session.report(outcome, err)
}

/// Whether the journal vouches for `run_id`'s record (its keyed chain holds). A journal changed
/// outside pev is refused: nothing is built on it.
fn verified_journal(store: &Store, run_id: &str) -> Result<bool, Fail> {
    match store.require_intact(run_id) {
        Ok(integrity) => Ok(integrity.is_verified()),
        Err(e @ pev_store::StoreError::Tampered { .. }) => Err(Fail::input(format!(
            "run {run_id} cannot be resumed: {e}. Nothing was run; `pev show {run_id}` shows \
             the record as it stands"
        ))),
        Err(e) => Err(Fail(EXIT_FAILED, e.to_string())),
    }
}

/// `pev resume RUN`.
pub fn resume(run: &str, common: &Common, err: &mut dyn Write) -> Result<u8, Fail> {
    let workspace = workspace_dir(common.workspace.as_deref())?;
    let db = store_path(common, &workspace)?;
    let store = Store::open_existing(&db).map_err(|e| Fail::input(e.to_string()))?;
    let run_id = store.resolve_run(run).map_err(|e| Fail::input(e.to_string()))?;
    let _lock = lock_run(&db, &run_id)?;
    let mut record = store.load_run(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let verified = verified_journal(&store, &run_id)?;
    if record.options.get("mode").and_then(serde_json::Value::as_str)
        == Some(pev_mcp::session::MODE)
    {
        return Err(Fail::input(format!(
            "run {run_id} is an MCP client's run (`pev mcp`): the client drives it, so there is \
             nothing for pev to resume; `pev gate status --run {run_id}` decides it now"
        )));
    }
    if let Some(result) = finished(&record) {
        // Nothing to resume: say so with the outcome it ended with, and write nothing.
        let _ = writeln!(
            err,
            "pev: run {run_id} already finished: {} (nothing to resume; `pev show {run_id}` \
             explains it)",
            status_word(result.status)
        );
        if common.json {
            let line = json!({"run_id": run_id, "event": "run.finished", "result": result});
            let mut out = std::io::stdout();
            let _ = writeln!(out, "{line}");
        }
        return Ok(exit_code(result.status));
    }
    if record.workspace != workspace.display().to_string() {
        // Another place (another machine, a moved checkout): the run can only go on in a
        // workspace that holds what its journal says the run left there.
        let mismatches = workspace_mismatches(&record, &workspace);
        if !mismatches.is_empty() {
            let shown: Vec<&str> = mismatches.iter().take(10).map(String::as_str).collect();
            return Err(Fail::input(format!(
                "run {run_id} was started in {}, and this workspace ({}) does not hold what its \
                 journal says the run left: {}{}. Resuming needs the run's workspace: resume \
                 there, or bring its files here",
                record.workspace,
                workspace.display(),
                shown.join("; "),
                if mismatches.len() > shown.len() {
                    format!(" (and {} more)", mismatches.len() - shown.len())
                } else {
                    String::new()
                }
            )));
        }
        let _ = writeln!(
            err,
            "pev: note: run {run_id} was started in {}; resuming in {} (the files the run \
             changed match its journal)",
            record.workspace,
            workspace.display()
        );
    }
    let mut blobs = std::collections::HashMap::new();
    for sha in ResumeInput::blobs_needed(&record) {
        if let Ok(Some(content)) = store.blob(&sha) {
            blobs.insert(sha, content);
        }
    }
    let events = store.events(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    // What earlier sessions spent, all of them: see `spent_before`.
    let journaled_usage = events.iter().rev().find_map(|e| match &e.body {
        EventBody::Usage { usage } => Some(usage.clone()),
        _ => None,
    });
    let stored = record.result.as_ref().map(|r| r.usage.clone());
    // Calls the killed session had in flight count at their worst case (issue 31).
    match pev_engine::agent::call_marks::settle_left(&workspace, &store, &run_id) {
        Ok(0) => {}
        Ok(n) => {
            let _ = writeln!(
                err,
                "pev: {n} model call(s) were in flight when the run was stopped; each is counted \
                 at its worst case against the run's ceilings"
            );
        }
        Err(e) => {
            return Err(Fail(
                EXIT_FAILED,
                format!("cannot count the model calls in flight when the run was stopped: {e}"),
            ));
        }
    }
    let prior_usage = spent_before(journaled_usage, stored, calls_usage(&store, &run_id));
    let warnings = events
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::Warning { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    let has_instructions = record
        .plan
        .get("steps")
        .and_then(Value::as_array)
        .is_some_and(|steps| steps.iter().any(|s| s.get("tool").is_none_or(Value::is_null)));
    let looped = record.options.get("mode").and_then(Value::as_str) == Some("loop");
    if looped {
        // The loop's plan, gate and evidence live in its conversation: a loop the killed session
        // had finished is replayed too, so that what it decided is known again.
        for step in record.steps.iter_mut().filter(|s| s.status == StepStatus::Done) {
            step.status = StepStatus::InProgress;
        }
        // What runs is the loop (plan version 1): the model's plan, journaled as later
        // versions when the loop ends, is the conversation's to rebuild, not steps to run (a
        // kill after it was journaled and before the outcome was announced left it newest).
        let versions =
            store.plan_versions(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
        if let Some((version, plan, _, _)) = versions.into_iter().next() {
            record.plan = plan;
            record.plan_version = version;
        }
    }
    let recording =
        if has_instructions { interrupted_conversations(&store, &record, err) } else { None };
    drop(store);
    let strings = |key: &str| -> Vec<String> {
        record.options.get(key).and_then(Value::as_array).map_or_else(Vec::new, |items| {
            items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
        })
    };
    // The policy the run started with (its children are linted by it too), never looser than a
    // workspace file could make it when the journal cannot vouch for it.
    let floor = file_config(&workspace)?.sandbox();
    let (policy, ignored) =
        crate::shared::policy_source::from_options(&record.options, verified, floor)?;
    if !ignored.is_empty() {
        let _ = writeln!(
            err,
            "pev: note: this journal cannot vouch for run {run_id}'s stored policy (no keyed \
             chain), so it is applied only where it tightens; ignored: {}",
            ignored.join("; ")
        );
    }
    let policy = Arc::new(policy);
    let approve_tools = policy.policy.approve_tools.clone();
    let allow_hosts = policy.policy.allow_hosts.clone();
    let _ = writeln!(err, "pev: resuming run {run_id}");
    // An agent run's instruction steps need the executor and judge again (from pev.toml and the
    // environment, as when it started); a plain run needs no model.
    if looped {
        let budget = crate::shared::models::remaining_budget(&record.options, prior_usage.as_ref());
        let sandbox = SandboxPolicy::from_options(&record.options, floor, verified);
        let resume = crate::commands::agent::LoopResume {
            record,
            blobs,
            warnings,
            prior_usage,
            budget,
            run_policy: RunPolicy {
                approve_tools,
                allow_hosts,
                sandbox,
                oracle: None,
                lint: Arc::clone(&policy),
            },
            recording,
        };
        let common = Common {
            workspace: Some(workspace.clone()),
            store: Some(db.clone()),
            ..common.clone()
        };
        return crate::commands::agent::resume_loop(resume, &common, err);
    }
    let notices = crate::view::call_notice::Notices::new();
    let mut calls = None;
    let mut resumed_tools = None;
    let models = if has_instructions {
        let budget = crate::shared::models::remaining_budget(&record.options, prior_usage.as_ref());
        let recorded = recording.as_ref().map_or(
            crate::shared::models::Recorded::Nothing,
            crate::shared::models::Recorded::Resume,
        );
        // The MCP servers the run was started with come back with it.
        let registry = Arc::new(crate::shared::models::resumed_registry(
            &workspace,
            &strings("allowed_tools"),
            err,
        )?);
        let models = crate::shared::models::build_models(
            &workspace,
            &notices,
            budget,
            (&policy, &registry),
            recorded,
        )?;
        resumed_tools = Some(registry);
        crate::shared::models::attach_calls(&models.calls, &db, &run_id, err);
        models.state.mark_calls_in(CallMarks::new(&workspace, &run_id));
        calls = Some(Arc::clone(&models.calls));
        Some(models)
    } else {
        None
    };
    let hooks = models.as_ref().map(|m| {
        let mut hooks = m.hooks.clone();
        // The tools the run's policy allowed when it started.
        hooks.allowed_tools = strings("allowed_tools");
        hooks
    });
    let sandbox = SandboxPolicy::from_options(&record.options, floor, verified);
    // The held-out tests the run started with stay hidden from its commands.
    let common = &with_stored_hidden(common, &record.options);
    let mut session = Session::open(
        common,
        &workspace,
        &db,
        RunPolicy { approve_tools, allow_hosts, sandbox, oracle: None, lint: Arc::clone(&policy) },
        hooks,
    )?;
    // A run `pev agent` started has a model's plan, on resume too.
    let agent = record.options.get("agent").and_then(Value::as_bool).unwrap_or(false);
    session.engine.config.plan_from_user = !agent;
    if agent {
        session.engine.config.permit_goal = Some(record.goal.clone());
    }
    // The oracle the run started with, never loosened by the resume's own flags.
    session.engine.config.oracle =
        resumed_oracle(record.options.get("oracle"), session.engine.config.oracle.take());
    if let Some(registry) = resumed_tools {
        session.engine.registry = registry;
    }
    if let Some(models) = &models {
        // Delegated steps: their children are continued (or their verdicts read) in the tree.
        let max_replans = record
            .options
            .get("max_replans")
            .and_then(Value::as_u64)
            .map_or(2, |n| u32::try_from(n).unwrap_or(2));
        models.attach_delegator(&mut session.engine, &db, (&policy, max_replans));
    }
    notices.attach(session.live());
    session.trace(&run_id, true);
    let journal = session.journal()?;
    if models.is_none() {
        // Tool steps only, as in `pev run`: the journal may linger.
        journal.linger(pev_store::LINGER);
    }
    let input = ResumeInput { record, journal, blobs, warnings, prior_usage, revision: None };
    let outcome = session.block_on(session.engine.resume(input));
    if let Some(calls) = &calls {
        crate::shared::models::close_calls(calls, err);
    }
    session.report(outcome, err)
}

/// The files run `record` changed whose content in `workspace` is not what its journal says
/// the run left (the last change of each), one line each. A file whose write was in flight at
/// a crash may hold either side of it.
fn workspace_mismatches(record: &pev_store::RunRecord, workspace: &Path) -> Vec<String> {
    let Ok(ws) = pev_tools::Workspace::open(workspace) else {
        return vec![format!("{} cannot be opened", workspace.display())];
    };
    let mut last: Vec<(String, Option<String>)> = Vec::new();
    for m in
        record.mutations.iter().filter(|m| m.after_sha256.is_some() || m.mutation.bytes_after == 0)
    {
        let after = m.after_sha256.clone();
        match last.iter_mut().find(|(p, _)| *p == m.mutation.path) {
            Some(entry) => entry.1 = after,
            None => last.push((m.mutation.path.clone(), after)),
        }
    }
    let in_flight: Vec<(&str, Option<&str>, Option<&str>)> = record
        .tool_calls
        .iter()
        .filter(|c| c.status == pev_store::ToolCallStatus::Started)
        .filter_map(|c| {
            c.path.as_deref().map(|p| (p, c.pre_sha256.as_deref(), c.intended_sha256.as_deref()))
        })
        .collect();
    let mut out = Vec::new();
    for (path, expected) in last {
        let here = match ws.sha256(&path) {
            Ok(sha) => sha,
            Err(e) => {
                out.push(format!("{path} cannot be read ({e})"));
                continue;
            }
        };
        if here == expected {
            continue;
        }
        let either = in_flight.iter().any(|(p, pre, intended)| {
            *p == path && (here.as_deref() == *pre || here.as_deref() == *intended)
        });
        if either {
            continue;
        }
        let short = |h: &Option<String>| {
            h.as_deref().map_or_else(
                || "absent".to_owned(),
                |h| format!("sha256 {}…", &h[..12.min(h.len())]),
            )
        };
        out.push(format!("{path} (journal: {}, here: {})", short(&expected), short(&here)));
    }
    out
}

/// The model calls journaled for `run_id` and its child runs, summed; `None` when there are none
/// or they cannot be read.
fn calls_usage(store: &Store, run_id: &str) -> Option<pev_protocol::run::Usage> {
    let prefix = format!("{run_id}.");
    let runs = store.list_runs().ok()?;
    let children = runs.iter().map(|r| r.run_id.as_str()).filter(|id| id.starts_with(&prefix));
    let mut usage = pev_protocol::run::Usage::default();
    for id in std::iter::once(run_id).chain(children) {
        for call in store.model_calls(id).ok()? {
            usage.llm_calls += 1;
            usage.input_tokens +=
                call.input_tokens + call.cache_read_tokens + call.cache_write_tokens;
            usage.output_tokens += call.output_tokens;
            usage.cache_read_tokens += call.cache_read_tokens;
            usage.cache_write_tokens += call.cache_write_tokens;
            usage.cost_usd += call.cost_usd.unwrap_or(0.0);
        }
    }
    (usage.llm_calls > 0).then_some(usage)
}

/// What every earlier session of a run spent, for the ceilings of the next one (issue 31: from
/// the second resume on, the first session's spend was forgotten, so `--max-usd` could be
/// overrun across resumes). The journaled model calls of the run and its children are the
/// record of every session: each call is journaled before its answer is used (a killed
/// session's too), and a call a resume answers from the journal is not journaled again. The
/// usage events and the stored result say what one session counted; they are used where the
/// calls say less (a journal from before calls were kept), and for the tool calls.
fn spent_before(
    journaled: Option<pev_protocol::run::Usage>,
    stored: Option<pev_protocol::run::Usage>,
    calls: Option<pev_protocol::run::Usage>,
) -> Option<pev_protocol::run::Usage> {
    let counted = match (journaled, stored) {
        (Some(a), Some(b)) => Some(if a.llm_calls >= b.llm_calls { a } else { b }),
        (a, b) => a.or(b),
    };
    match (counted, calls) {
        (Some(mut counted), Some(calls)) if calls.llm_calls >= counted.llm_calls => {
            counted.llm_calls = calls.llm_calls;
            counted.input_tokens = calls.input_tokens;
            counted.output_tokens = calls.output_tokens;
            counted.cache_read_tokens = calls.cache_read_tokens;
            counted.cache_write_tokens = calls.cache_write_tokens;
            counted.cost_usd = calls.cost_usd;
            Some(counted)
        }
        (counted, calls) => counted.or(calls),
    }
}

/// The model calls of the attempts the killed session left unfinished, to answer them again
/// from the journal (`None` when there are none, or they cannot be read: then the attempts
/// start over, as before conversations were kept).
fn interrupted_conversations(
    store: &Store,
    record: &pev_store::RunRecord,
    err: &mut dyn Write,
) -> Option<std::sync::Arc<pev_engine::agent::replay::Recording>> {
    let open: Vec<(&str, u32)> = record
        .steps
        .iter()
        .filter(|s| s.status == pev_protocol::run::StepStatus::InProgress)
        .map(|s| (s.step_id.as_str(), s.attempts))
        .collect();
    let calls: Vec<pev_store::ModelCallRecord> = store
        .model_calls(&record.run_id)
        .ok()?
        .into_iter()
        .filter(|c| {
            c.step_id.as_deref().zip(c.attempt).is_some_and(|(s, a)| open.contains(&(s, a)))
        })
        .collect();
    if calls.is_empty() {
        return None;
    }
    match pev_engine::agent::conversation::exchanges(store, &calls) {
        Ok(exchanges) => Some(pev_engine::agent::replay::Recording::new(exchanges)),
        Err(e) => {
            let _ = writeln!(
                err,
                "pev: warning: the interrupted conversations cannot be read ({e}); their \
                 attempts start over"
            );
            None
        }
    }
}

#[cfg(test)]
mod spent_tests {
    use pev_protocol::run::Usage;

    use super::spent_before;

    fn usage(calls: u64, usd: f64) -> Usage {
        Usage { llm_calls: calls, cost_usd: usd, tool_calls: 2, ..Usage::default() }
    }

    #[test]
    fn every_session_counts_not_only_the_last_one() {
        // Three sessions of 0.02 each: the last one's usage events count only its own calls.
        let last_session = usage(2, 0.02);
        let journal = usage(6, 0.06);
        let spent = spent_before(Some(last_session), None, Some(journal.clone())).unwrap();
        assert_eq!((spent.llm_calls, spent.cost_usd), (6, 0.06));
        assert_eq!(spent.tool_calls, 2, "tool calls come from what the sessions counted");
        // Only the calls (a killed first session journaled no usage yet).
        assert_eq!(spent_before(None, None, Some(journal)).unwrap().cost_usd, 0.06);
        // A journal from before calls were kept: what the sessions counted stands.
        let old = spent_before(Some(usage(4, 0.04)), Some(usage(3, 0.03)), None).unwrap();
        assert_eq!((old.llm_calls, old.cost_usd), (4, 0.04));
        assert!(spent_before(None, None, None).is_none());
        // Fewer journaled calls than counted (calls before they were journaled): the count stands.
        let partial = spent_before(Some(usage(5, 0.05)), None, Some(usage(2, 0.01))).unwrap();
        assert_eq!((partial.llm_calls, partial.cost_usd), (5, 0.05));
    }
}
