//! `pev replay RUN`: a recorded agent run, run again by today's code with every model call
//! answered from the journal. The workspace is a scratch copy of the run's, put back as it was
//! before the run (every file the run changed returned to its recorded before-content), so the
//! tools run for real and the verdict is computed again. Each request must equal the one
//! recorded at its place; the first that does not is reported with the call and the message,
//! and the outcome is compared with the recorded one. A user can keep real sessions this way
//! and replay them in CI after a prompt change or an upgrade, offline and at no cost.

use std::io::Write;
use std::path::{Path, PathBuf};

use pev_engine::agent::conversation::exchanges;
use pev_engine::agent::replay::Recording;
use pev_engine::agent::volatile::Masks;
use pev_protocol::run::RunResult;
use pev_store::{RunRecord, Store};
use serde_json::Value;

use crate::args::values::Common;
use crate::commands::agent::{AgentRequest, BudgetArgs, Mode};
use crate::shared::exit::{EXIT_BAD_INPUT, EXIT_OK, Fail};
use crate::shared::workspace::{store_path, workspace_dir};

const EXIT_FAILED: u8 = 1;

/// `pev replay`'s arguments.
#[derive(Debug)]
pub(crate) struct ReplayRequest {
    pub run: String,
    /// The policy the run was made with (it decides which tools the models were offered).
    pub policy: Option<PathBuf>,
    /// Start from this directory instead of rebuilding the run's workspace.
    pub from: Option<PathBuf>,
    /// Replay with this goal instead of the recorded one.
    pub goal: Option<String>,
    pub common: Common,
}

pub(crate) fn replay(req: &ReplayRequest, err: &mut dyn Write) -> Result<u8, Fail> {
    let workspace = workspace_dir(req.common.workspace.as_deref())?;
    let db = store_path(&req.common, &workspace)?;
    let text = db.file().filter(|f| f.extension().is_some_and(|e| e == "jsonl"));
    let (store, masks, _scratch) = match text {
        Some(file) => {
            let (store, masks, scratch) = read_recording(file, err)?;
            (store, masks, Some(scratch))
        }
        None => {
            let store =
                Store::open_existing(&db).map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?;
            (store, Masks::default(), None)
        }
    };
    let run_id = store.resolve_run(&req.run).map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?;
    let record = store.load_run(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let option = |key: &str| record.options.get(key);
    if option("agent").and_then(Value::as_bool) != Some(true) {
        return Err(Fail(
            EXIT_BAD_INPUT,
            format!(
                "run {run_id} is not an agent run: a plan run (`pev run`) has no model to replay; \
                 run its plan again instead"
            ),
        ));
    }
    let Some(recorded) = record.result.clone() else {
        return Err(Fail(
            EXIT_BAD_INPUT,
            format!("run {run_id} has not finished; `pev resume {run_id}` first"),
        ));
    };
    let mut calls = store.model_calls(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    // Calls a kill cut off were never answered: they count against budgets, not in a replay.
    calls.retain(|c| c.error_type.as_deref() != Some("cut_off"));
    if calls.is_empty() || calls.iter().any(|c| c.request.is_none()) {
        return Err(Fail(
            EXIT_BAD_INPUT,
            format!(
                "run {run_id} was recorded before pev kept model conversations: there is \
                 nothing to answer its calls from"
            ),
        ));
    }
    let exchanges = exchanges(&store, &calls).map_err(|e| Fail(EXIT_FAILED, e))?;
    let recording = Recording::with_masks(exchanges, masks);

    let source = req.from.clone().unwrap_or_else(|| PathBuf::from(&record.workspace));
    let copy =
        crate::shared::scratch::copy_workspace(&source).map_err(|e| Fail(EXIT_BAD_INPUT, e))?;
    if req.from.is_none() {
        rewind(&store, &record, &copy).map_err(|e| {
            Fail(EXIT_FAILED, format!("cannot rebuild the workspace the run started from: {e}"))
        })?;
    }
    let _ = writeln!(
        err,
        "pev: replaying run {run_id} ({} model calls) in {} ({}; it stays for inspection)",
        calls.len(),
        copy.display(),
        if req.from.is_some() {
            "a copy of --from"
        } else {
            "the workspace as it was before the run"
        }
    );
    let budget = option("budget").cloned().unwrap_or_default();
    let agent = AgentRequest {
        goal: req.goal.clone().unwrap_or_else(|| record.goal.clone()),
        policy: req.policy.clone(),
        scratch: false,
        approve_plan: false,
        budget: BudgetArgs {
            max_usd: budget.get("max_usd").and_then(Value::as_f64),
            max_tokens: budget.get("max_tokens").and_then(Value::as_u64),
            max_turns: budget.get("max_turns").and_then(Value::as_u64).map(|n| n as u32),
            timeout_secs: None,
        },
        max_replans: option("max_replans").and_then(Value::as_u64).map_or(2, |n| n as u32),
        mode: if option("mode").and_then(Value::as_str) == Some("loop") {
            Mode::Loop
        } else {
            Mode::Pev
        },
        gate: option("gate").and_then(Value::as_bool).unwrap_or(true),
        max_refusals: option("max_refusals").and_then(Value::as_u64).map_or(3, |n| n as u32),
        reminder_every: option("reminder_every").and_then(Value::as_u64).map_or(10, |n| n as u32),
        common: Common {
            workspace: Some(copy.clone()),
            // The replay is journaled in its scratch copy, whatever PEV_STORE names.
            store: Some(pev_store::Location::File(pev_store::default_path(&copy))),
            yes: true,
            ..req.common.clone()
        },
        replay: Some(std::sync::Arc::clone(&recording)),
    };
    crate::commands::agent::run(&agent, err)?;

    let replayed = Store::open_existing(pev_store::default_path(&copy))
        .and_then(|s| {
            let id = s.resolve_run("last")?;
            s.load_run(&id)
        })
        .map_err(|e| Fail(EXIT_FAILED, format!("the replay left no run: {e}")))?;
    let Some(now) = replayed.result else {
        return Err(Fail(EXIT_FAILED, "the replay did not finish its run".to_owned()));
    };
    let divergences = recording.divergences();
    let unused = recording.unused();
    let same = same_outcome(&recorded, &now);
    let _ = writeln!(
        err,
        "pev: replay of {run_id} (as run {}): {} of {} recorded model calls answered",
        replayed.run_id,
        recording.answered(),
        calls.len()
    );
    for d in &divergences {
        let _ = writeln!(err, "pev: diverged at {}", crate::view::style::clean(&d.to_string()));
    }
    if divergences.is_empty() && !unused.is_empty() {
        let list: Vec<String> = unused.iter().map(u64::to_string).collect();
        let _ = writeln!(err, "pev: the replay never made recorded call(s) {}", list.join(", "));
    }
    let _ = writeln!(
        err,
        "pev: outcome {} now, {} when recorded{}",
        outcome(&now),
        outcome(&recorded),
        if same { "" } else { ": DIFFERENT" }
    );
    Ok(if same && divergences.is_empty() && unused.is_empty() { EXIT_OK } else { EXIT_FAILED })
}

/// A text recording (`pev_store::recording`) read into a scratch journal, removed when the
/// returned guard is dropped, and the volatile rules it declares.
fn read_recording(
    file: &Path,
    err: &mut dyn Write,
) -> Result<(Store, Masks, tempfile::TempDir), Fail> {
    let bad = |e: String| Fail(EXIT_BAD_INPUT, e);
    let input = std::fs::File::open(file)
        .map_err(|e| bad(format!("cannot open the recording {}: {e}", file.display())))?;
    let scratch = tempfile::Builder::new()
        .prefix("pev-recording-")
        .tempdir()
        .map_err(|e| Fail(EXIT_FAILED, format!("cannot make a scratch journal: {e}")))?;
    let store = Store::open(pev_store::default_path(scratch.path()))
        .map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let name = file.display().to_string();
    let read = pev_store::recording::read(&mut std::io::BufReader::new(input), &name, &store)
        .map_err(bad)?;
    if read.skipped > 0 {
        let _ = writeln!(
            err,
            "pev: {name}: {} line(s) of kinds this pev does not know (recorded by pev {}) were \
             skipped",
            read.skipped, read.header.pev
        );
    }
    let rules = read.header.volatile.into_iter().map(|r| (r.pattern, r.with));
    let masks = Masks::declared(rules).map_err(|e| bad(format!("{name}: {e}")))?;
    Ok((store, masks, scratch))
}

/// Puts every file the run changed back as it was before its first change, through the
/// workspace sandbox (a symlink in the copy cannot lead a write or a removal outside it).
fn rewind(store: &Store, record: &RunRecord, copy: &Path) -> Result<(), String> {
    let ws = pev_tools::Workspace::open(copy).map_err(|e| e.to_string())?;
    let mut seen = std::collections::HashSet::new();
    for m in &record.mutations {
        let path = &m.mutation.path;
        if !seen.insert(path.clone()) {
            continue;
        }
        match &m.before_sha256 {
            // It did not exist before the run.
            None if m.mutation.bytes_before == 0 => {
                // Through the copy's own handle: `resolve` gives a path relative to the copy,
                // which `std::fs` would have taken relative to the current directory.
                ws.remove_file(path).map_err(|e| format!("{path}: {e}"))?;
            }
            None => {
                return Err(format!(
                    "the journal does not hold {path} as it was before the run (it was too big \
                     to keep); give the starting workspace with --from DIR"
                ));
            }
            Some(sha) => {
                let content = store.blob(sha).map_err(|e| e.to_string())?.ok_or_else(|| {
                    format!("the journal lacks {path} as it was before the run; use --from DIR")
                })?;
                ws.write(path, &content).map_err(|e| format!("{path}: {e}"))?;
            }
        }
    }
    Ok(())
}

fn outcome(result: &RunResult) -> String {
    let codes: Vec<String> = result
        .reasons
        .iter()
        .filter_map(|r| serde_json::to_value(r.code).ok()?.as_str().map(str::to_owned))
        .collect();
    let status = pev_engine::status_name(result.status);
    if codes.is_empty() { status.to_owned() } else { format!("{status} ({})", codes.join(", ")) }
}

/// The same status for the same reasons (their codes and steps; messages may word things anew).
fn same_outcome(a: &RunResult, b: &RunResult) -> bool {
    let key = |r: &RunResult| {
        let mut reasons: Vec<String> = r
            .reasons
            .iter()
            .map(|x| format!("{:?}/{}", x.code, x.step.as_deref().unwrap_or("")))
            .collect();
        reasons.sort();
        (r.status, reasons)
    };
    key(a) == key(b)
}
