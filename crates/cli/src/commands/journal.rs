//! `pev runs`, `pev show RUN` and `pev approve RUN [STEP]`: the journal, read (and, for
//! approvals, written) from the CLI.

use std::io::Write;

use pev_protocol::Plan;
use pev_protocol::run::StepStatus;
use pev_store::{RunRecord, Store};

use crate::args::values::Common;
use crate::shared::exit::{EXIT_OK, Fail};
use crate::shared::workspace::{store_path, workspace_dir};
use crate::view::show_view::{FileDiff, RunRow, render_runs, render_show};
use crate::view::style::Style;

const EXIT_FAILED: u8 = 1;

fn open(common: &Common) -> Result<Store, Fail> {
    let workspace = workspace_dir(common.workspace.as_deref())?;
    let db = store_path(common, &workspace)?;
    Store::open_existing(&db).map_err(|e| Fail(2, e.to_string()))
}

/// `pev show RUN --format recording`: the run and its child runs as a text recording
/// (`pev_store::recording`), matched with the built-in volatile rules.
pub fn recording(run: &str, common: &Common, out: &mut dyn Write) -> Result<u8, Fail> {
    let store = open(common)?;
    let run_id = store.resolve_run(run).map_err(|e| Fail(2, e.to_string()))?;
    let rules = pev_engine::agent::volatile::built_in_rules();
    pev_store::recording::write(&store, &run_id, &rules, out).map_err(|e| Fail(EXIT_FAILED, e))?;
    Ok(EXIT_OK)
}

/// `pev runs`: one line (or one JSON object) per run, newest first.
pub fn runs(common: &Common, out: &mut dyn Write) -> Result<u8, Fail> {
    let store = open(common)?;
    let runs = store.list_runs().map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    if common.json {
        for run in &runs {
            let line = serde_json::to_string(run).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
            let _ = writeln!(out, "{line}");
        }
    } else {
        let rows: Vec<RunRow> = tree_order(runs)
            .into_iter()
            .map(|(depth, r)| RunRow {
                run_id: format!("{}{}", "  ".repeat(depth), r.run_id),
                status: r.status,
                goal: r.goal,
                created_at: r.created_at,
                steps_done: r.steps_done,
                steps_total: r.steps_total,
            })
            .collect();
        let style = Style::for_stdout(common.color);
        let _ = write!(out, "{}", render_runs(&rows, &style));
        if !rows.is_empty() {
            let _ = writeln!(
                out,
                "{}",
                style
                    .dim("pev show RUN: one run in the terminal; pev report RUN: as one HTML file")
            );
        }
    }
    Ok(EXIT_OK)
}

/// The run's place in its tree: its parent (for a child run) and the child runs of its
/// delegated steps, each with its verdict and the state of its plan's steps, one level down
/// (`pev show CHILD` goes further).
fn render_tree(store: &Store, record: &pev_store::RunRecord, style: &Style) -> String {
    use std::fmt::Write as _;
    let clean = crate::view::style::clean;
    let mut out = String::new();
    if let Some(parent) = record.options.get("parent") {
        let run = parent.get("run").and_then(serde_json::Value::as_str).unwrap_or("?");
        let step = parent.get("step").and_then(serde_json::Value::as_str).unwrap_or("?");
        let _ = writeln!(
            out,
            "\n{} child of run {} (step {}); its verdict is that step's evidence",
            style.bold("parent:"),
            clean(run),
            clean(step)
        );
    }
    let events = store.events(&record.run_id).unwrap_or_default();
    let mut children: Vec<(String, String, u32)> = Vec::new();
    for event in &events {
        if let pev_protocol::EventBody::DelegateStarted { step, attempt, child_run, .. } =
            &event.body
            && !children.iter().any(|(c, ..)| c == child_run)
        {
            children.push((child_run.clone(), step.clone(), *attempt));
        }
    }
    if children.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\n{}", style.bold("child runs"));
    for (child, step, attempt) in children {
        let Ok(run) = store.load_run(&child) else {
            let _ = writeln!(
                out,
                "  {} ← {} attempt {attempt}: not in the journal",
                clean(&child),
                clean(&step)
            );
            continue;
        };
        let status = run
            .result
            .as_ref()
            .map_or(run.status.clone(), |r| pev_engine::status_name(r.status).to_owned());
        let _ = writeln!(
            out,
            "  {} ← {} attempt {attempt}: {}",
            style.bold(&clean(&child)),
            clean(&step),
            style.status(&status)
        );
        for state in &run.steps {
            let _ = writeln!(
                out,
                "      {} {}",
                clean(&state.step_id),
                style.dim(&format!("{:?}", state.status).to_lowercase())
            );
        }
        if let Some(reason) = run.result.as_ref().and_then(|r| r.reasons.first()) {
            let line = crate::view::style::truncate(&clean(&reason.message), 160).into_owned();
            let _ = writeln!(out, "      {}", style.dim(&line));
        }
    }
    out
}

/// The runs with each child run (a delegated step's) right under its parent, oldest child
/// first, and its depth; runs whose parent is not listed stay where they are.
fn tree_order(runs: Vec<pev_store::RunSummary>) -> Vec<(usize, pev_store::RunSummary)> {
    use std::collections::{HashMap, HashSet};
    let ids: HashSet<String> = runs.iter().map(|r| r.run_id.clone()).collect();
    let mut children: HashMap<String, Vec<pev_store::RunSummary>> = HashMap::new();
    let mut roots = Vec::new();
    for run in runs {
        match run.parent.clone().filter(|p| ids.contains(p) && *p != run.run_id) {
            Some(parent) => children.entry(parent).or_default().push(run),
            None => roots.push(run),
        }
    }
    let mut out = Vec::new();
    // Depth-first with an explicit stack; children were listed newest first.
    let mut stack: Vec<(usize, pev_store::RunSummary)> =
        roots.into_iter().rev().map(|r| (0, r)).collect();
    while let Some((depth, run)) = stack.pop() {
        if let Some(kids) = children.remove(&run.run_id) {
            stack.extend(kids.into_iter().map(|k| (depth + 1, k)));
        }
        out.push((depth, run));
    }
    out
}

/// `pev show RUN`: the plan, the steps with their evidence, the diffs and the outcome; with
/// `--json`/`--format json`, the run result of CONTRACTS.md §4.
pub fn show(run: &str, common: &Common, out: &mut dyn Write) -> Result<u8, Fail> {
    let store = open(common)?;
    let run_id = store.resolve_run(run).map_err(|e| Fail(2, e.to_string()))?;
    let record = store.load_run(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let mut result = pev_engine::snapshot(&record);
    let mut integrity = store.integrity(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    // The chained events hold the result the run ended with; the `runs` row is a copy for
    // quick reads. When they differ, the events are what happened.
    if let pev_store::Integrity::Intact { events } = integrity
        && let Some(finished) = last_result(&store, &run_id)
        && record.result.as_ref() != Some(&finished)
    {
        integrity = pev_store::Integrity::Broken {
            events,
            problem: "the run's stored result differs from its chained run.finished event (shown \
                      instead)"
                .into(),
        };
        result = finished;
    }
    // A journal changed behind pev's back is said first, and makes `show` fail: what it shows
    // is not evidence any more.
    let code = if integrity.is_broken() {
        result.warnings.insert(0, format!("journal {}", integrity.describe()));
        EXIT_FAILED
    } else {
        EXIT_OK
    };
    // An MCP client's run that the gate has not closed: the verdict on the workspace now.
    let open_mcp = record.status == "running"
        && record.options.get("mode").and_then(serde_json::Value::as_str)
            == Some(pev_mcp::session::MODE);
    if open_mcp {
        // The run's own workspace (the journal says where), whatever directory `show` ran in.
        let place = crate::args::values::Place {
            workspace: Some(
                common.workspace.clone().unwrap_or_else(|| record.workspace.clone().into()),
            ),
            store: store.location().file().map(std::path::Path::to_path_buf),
        };
        match crate::commands::mcp::verdict_now(&place, &run_id) {
            Ok(now) => result = now,
            Err(Fail(_, why)) => result.warnings.insert(
                0,
                format!("the verdict on the workspace now could not be computed: {why}"),
            ),
        }
    }
    let mut sandbox = sandbox_of(&store, &run_id);
    if record.options.get("mode").and_then(serde_json::Value::as_str)
        == Some(pev_mcp::session::MODE)
    {
        sandbox.push_str(
            " (for the commands of pev's own assertions; the client ran its own tools under its \
             own sandbox, not pev's)",
        );
    }
    if common.json {
        let text =
            serde_json::to_string_pretty(&result).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
        let _ = writeln!(out, "{text}");
        return Ok(code);
    }
    let plan: Plan = serde_json::from_value(record.plan.clone()).unwrap_or_default();
    let blob = |sha: &Option<String>| sha.as_ref().and_then(|s| store.blob(s).ok().flatten());
    let diffs: Vec<FileDiff> = record
        .mutations
        .iter()
        .map(|m| FileDiff {
            step: m.step_id.clone(),
            path: m.mutation.path.clone(),
            before: blob(&m.before_sha256),
            after: blob(&m.after_sha256),
        })
        .collect();
    let style = Style::for_stdout(common.color);
    // `running` in the journal is either a run another process holds (its lock is taken) or
    // one that was interrupted (killed, crashed): the lock tells which.
    let stored = if open_mcp {
        "open"
    } else if record.status == "running" {
        let workspace = workspace_dir(common.workspace.as_deref())?;
        match crate::shared::workspace::lock_run(&store_path(common, &workspace)?, &run_id) {
            Ok(_lock) => "interrupted",
            Err(_) => "running",
        }
    } else {
        record.status.as_str()
    };
    let _ = write!(out, "{}", render_show(&run_id, stored, &plan, &result, &diffs, &style));
    let versions = store.plan_versions(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let _ = write!(out, "{}", render_revisions(&versions, &style));
    let _ = write!(out, "{}", render_gate(&store.events(&run_id).unwrap_or_default(), &style));
    let _ = write!(out, "{}", render_tree(&store, &record, &style));
    let _ = writeln!(out, "\n{} {}", style.bold("sandbox:"), sandbox);
    let journal = integrity.describe();
    let journal = if integrity.is_broken() { style.red(&journal) } else { style.dim(&journal) };
    let _ = writeln!(out, "{} {journal}", style.bold("journal:"));
    let _ = writeln!(
        out,
        "{} pev report {run_id}  (the same as one HTML file, to open or share)",
        style.dim("report:")
    );
    Ok(code)
}

/// `pev report RUN`: the run as one self-contained HTML file (`pev-report`), written to
/// `output` (`-`: stdout; default `pev-report-RUN.html` here).
pub fn report(
    run: &str,
    common: &Common,
    output: Option<&std::path::Path>,
    out: &mut dyn Write,
) -> Result<u8, Fail> {
    let store = open(common)?;
    let run_id = store.resolve_run(run).map_err(|e| Fail(2, e.to_string()))?;
    let record = store.load_run(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let mut result = match (&record.result, record.status.as_str()) {
        (Some(stored), status) if status != "running" => stored.clone(),
        _ => pev_engine::snapshot(&record),
    };
    let mcp = record.options.get("mode").and_then(serde_json::Value::as_str)
        == Some(pev_mcp::session::MODE);
    if mcp && record.status == "running" {
        let place = crate::args::values::Place {
            workspace: Some(
                common.workspace.clone().unwrap_or_else(|| record.workspace.clone().into()),
            ),
            store: store.location().file().map(std::path::Path::to_path_buf),
        };
        if let Ok(now) = crate::commands::mcp::verdict_now(&place, &run_id) {
            result = now;
        }
    }
    let integrity = store.integrity(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    if integrity.is_broken() {
        result.warnings.insert(0, format!("journal {}", integrity.describe()));
    }
    let versions = store.plan_versions(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let blob = |sha: &str| store.blob(sha).ok().flatten();
    let generated_at = pev_protocol::event::now_rfc3339();
    let events = store.events(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let model_calls = store.model_calls(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let html = pev_report::render(&pev_report::Input {
        record: &record,
        result: &result,
        versions: &versions,
        blob: &blob,
        generated_at: &generated_at,
        events: &events,
        model_calls: &model_calls,
    });
    let default = std::path::PathBuf::from(format!("pev-report-{run_id}.html"));
    let path = output.unwrap_or(&default);
    if path == std::path::Path::new("-") {
        out.write_all(html.as_bytes())
            .map_err(|e| Fail(EXIT_FAILED, format!("cannot write stdout: {e}")))?;
        return Ok(if integrity.is_broken() { EXIT_FAILED } else { EXIT_OK });
    }
    std::fs::write(path, &html)
        .map_err(|e| Fail(EXIT_FAILED, format!("cannot write {}: {e}", path.display())))?;
    let _ = writeln!(
        out,
        "wrote {} ({} KB): run {run_id}, {}; open it in a browser (it needs no network)",
        path.display(),
        html.len().div_ceil(1024),
        pev_engine::status_name(result.status)
    );
    Ok(if integrity.is_broken() { EXIT_FAILED } else { EXIT_OK })
}

/// What `pev gate` answered each time an MCP client wanted to stop, and the client's own calls
/// it recorded (nothing for other runs).
fn render_gate(events: &[pev_protocol::event::Event], style: &Style) -> String {
    use pev_protocol::event::EventBody;
    let mut out = String::new();
    let mut calls = Vec::new();
    for event in events {
        match &event.body {
            EventBody::GateDecided { hook, decision, refusals, reasons, .. } => {
                if out.is_empty() {
                    out.push_str(&format!("\n{}\n", style.bold("stop gate")));
                }
                let what = match decision.as_str() {
                    "allow" => style.green("allowed"),
                    "block" => style.yellow(&format!("refused (refusal {refusals})")),
                    _ => style.red(&format!("stopped the client after {refusals} refusals")),
                };
                let why = reasons
                    .first()
                    .map(|r| format!(": {}", crate::view::style::clean(r)))
                    .unwrap_or_default();
                out.push_str(&format!("  {} {hook} {what}{why}\n", style.dim(&event.at)));
            }
            EventBody::ClientTool { tool, summary } => {
                let what = ["command", "path"]
                    .iter()
                    .find_map(|k| summary.get(*k).and_then(serde_json::Value::as_str))
                    .unwrap_or_default();
                calls.push(format!(
                    "  {} {} {}",
                    style.dim(&event.at),
                    crate::view::style::clean(tool),
                    crate::view::style::clean(what)
                ));
            }
            _ => {}
        }
    }
    if !calls.is_empty() {
        out.push_str(&format!(
            "\n{} (recorded by the PostToolUse hook)\n",
            style.bold("client calls")
        ));
        for line in calls {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// The result of the run's last `run.finished` event.
fn last_result(store: &Store, run_id: &str) -> Option<pev_protocol::run::RunResult> {
    let events = store.events(run_id).ok()?;
    events.into_iter().rev().find_map(|e| match e.body {
        pev_protocol::event::EventBody::RunFinished { result } => Some(*result),
        _ => None,
    })
}

/// The sandbox the run's commands ran in, from its (last) `run.started` event.
fn sandbox_of(store: &Store, run_id: &str) -> String {
    let events = store.events(run_id).unwrap_or_default();
    let last = events.iter().rev().find_map(|e| match &e.body {
        pev_protocol::event::EventBody::RunStarted { sandbox, .. } => Some(sandbox.clone()),
        _ => None,
    });
    match last.flatten().map(serde_json::from_value::<pev_sandbox::Enforced>) {
        Some(Ok(enforced)) => enforced.summary(),
        Some(Err(_)) => "unreadable in the journal".into(),
        None => "not recorded (a run from before the sandbox existed)".into(),
    }
}

/// The steps of a run that wait for approval.
fn waiting(record: &RunRecord) -> Vec<String> {
    record
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Blocked)
        .map(|s| s.step_id.clone())
        .collect()
}

/// `pev approve RUN [STEP]`: records a person's approval; `pev resume RUN` then runs the steps.
pub fn approve(
    run: &str,
    step: Option<&str>,
    common: &Common,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, Fail> {
    let store = open(common)?;
    let run_id = store.resolve_run(run).map_err(|e| Fail(2, e.to_string()))?;
    let record = store.load_run(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let waiting = waiting(&record);
    let steps: Vec<String> = match step {
        Some(step) => {
            let plan: Plan = serde_json::from_value(record.plan).unwrap_or_default();
            if !plan.steps.iter().any(|s| s.id.as_str() == step) {
                return Err(Fail(
                    2,
                    format!(
                        "run {run_id} has no step `{step}` (steps waiting: {})",
                        list(&waiting)
                    ),
                ));
            }
            vec![step.to_owned()]
        }
        None if waiting.is_empty() => {
            if common.json {
                let _ = writeln!(out, "{}", serde_json::json!({"run_id": run_id, "approved": []}));
            }
            let _ = writeln!(err, "pev: no step of run {run_id} is waiting for approval");
            return Ok(EXIT_OK);
        }
        None => waiting,
    };
    let by = std::env::var("USER").unwrap_or_else(|_| "pev approve".to_owned());
    for s in &steps {
        store.approve(&run_id, s, &by).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
        // A call of the step cut off by a crash (it may have run): approving the step approves
        // running that call again, by its own key, so an approval from before it does not.
        for call in record
            .tool_calls
            .iter()
            .filter(|c| c.step_id == *s && c.status == pev_store::ToolCallStatus::Started)
        {
            let key = pev_store::rerun_approval_key(s, &call.call_id);
            store.approve(&run_id, &key, &by).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
        }
        let _ = writeln!(err, "pev: approved step `{s}` of run {run_id}");
    }
    if common.json {
        let _ = writeln!(out, "{}", serde_json::json!({"run_id": run_id, "approved": steps}));
    }
    let _ = writeln!(err, "pev: continue with `pev resume {run_id}`");
    Ok(EXIT_OK)
}

fn list(items: &[String]) -> String {
    if items.is_empty() { "none".to_owned() } else { items.join(", ") }
}

/// What each plan revision dropped and added, after the first version.
fn render_revisions(
    versions: &[(u32, serde_json::Value, String, String)],
    style: &Style,
) -> String {
    let ids = |plan: &serde_json::Value| -> Vec<String> {
        plan.get("steps")
            .and_then(serde_json::Value::as_array)
            .map(|steps| {
                steps
                    .iter()
                    .filter_map(|s| s.get("id").and_then(serde_json::Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = String::new();
    for pair in versions.windows(2) {
        let [(_, old, _, _), (version, new, reason, at)] = pair else { continue };
        if out.is_empty() {
            out.push_str(&format!("\n{}\n", style.bold("plan revisions")));
        }
        let (mut old_ids, new_ids) = (ids(old), ids(new));
        // In loop mode version 1 is the one-step host plan (`loop`); the model's first
        // plan_create adds its steps and drops nothing.
        if old_ids == [pev_engine::agent::loop_run::LOOP_STEP] {
            old_ids.clear();
        }
        let dropped: Vec<&str> =
            old_ids.iter().filter(|i| !new_ids.contains(i)).map(String::as_str).collect();
        let added: Vec<&str> =
            new_ids.iter().filter(|i| !old_ids.contains(i)).map(String::as_str).collect();
        out.push_str(&format!(
            "  v{version}  {}  {}\n",
            style.dim(at),
            crate::view::style::clean(reason)
        ));
        if !dropped.is_empty() {
            out.push_str(&format!("      {} {}\n", style.red("dropped:"), dropped.join(", ")));
        }
        if !added.is_empty() {
            out.push_str(&format!("      {} {}\n", style.green("added:"), added.join(", ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn revisions_name_what_was_dropped_and_added() {
        let v1 = json!({"steps": [{"id": "a"}, {"id": "b"}]});
        let v2 = json!({"steps": [{"id": "a"}, {"id": "b2"}, {"id": "c"}]});
        let looped = vec![
            (1, json!({"steps": [{"id": "loop"}]}), "loop".to_owned(), "t0".to_owned()),
            (
                2,
                json!({"steps": [{"id": "x"}]}),
                "plan_create #1 by the model".to_owned(),
                "t1".to_owned(),
            ),
        ];
        let text = render_revisions(&looped, &Style { color: false });
        assert!(text.contains("added: x\n") && !text.contains("dropped"), "{text}");
        let versions = vec![
            (1, v1, "first".to_owned(), "t1".to_owned()),
            (2, v2, "replan 1: step `b` failed".to_owned(), "t2".to_owned()),
        ];
        let text = render_revisions(&versions, &Style { color: false });
        assert!(text.contains("plan revisions"), "{text}");
        assert!(text.contains("v2  t2  replan 1: step `b` failed"), "{text}");
        assert!(text.contains("dropped: b\n"), "{text}");
        assert!(text.contains("added: b2, c\n"), "{text}");
        assert_eq!(render_revisions(&versions[..1], &Style { color: false }), "");
    }
}

/// `pev gc --older-than AGE [--dry-run]`.
pub fn gc(
    age: std::time::Duration,
    dry_run: bool,
    common: &Common,
    out: &mut dyn Write,
) -> Result<u8, Fail> {
    let cutoff = std::time::SystemTime::now().checked_sub(age).unwrap_or(std::time::UNIX_EPOCH);
    let cutoff = pev_protocol::event::rfc3339(cutoff);
    let workspace = crate::shared::workspace::workspace_dir(common.workspace.as_deref())?;
    let db = crate::shared::workspace::store_path(common, &workspace)?;
    // The store and the leases below share one `Location`: on Postgres the collection then
    // runs on the session that holds this process's leases, which it tells from others'.
    let store = Store::open_existing(&db).map_err(|e| Fail(2, e.to_string()))?;
    // A run another pev process holds (its lock) is never collected, and while any is held,
    // no blob is: a writer may commit a blob before the row that names it. The locks taken
    // here are held until the collection ends, so no resume starts on a run being deleted.
    //
    // On a shared (Postgres) journal only the old top-level runs are leased: a lease is a lock
    // in the server's lock table, which a team's thousands of runs would fill, and there the
    // collection itself checks for runs being driven before it touches a blob.
    let runs = store.list_runs().map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let mut keep: Vec<String> = Vec::new();
    let mut held = Vec::new();
    let candidates = runs.iter().filter(|r| {
        !db.is_shared() || (r.parent.is_none() && r.updated_at.as_str() < cutoff.as_str())
    });
    for run in candidates {
        match db.lease(&run.run_id) {
            Ok(lease) => held.push(lease),
            Err(pev_store::LeaseError::Held { .. }) => keep.push(run.run_id.clone()),
            Err(e) => return Err(Fail(EXIT_FAILED, e.to_string())),
        }
    }
    let options = pev_store::GcOptions { dry_run, keep: &keep, collect_blobs: keep.is_empty() };
    let report = store.gc(&cutoff, options).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    drop(held);
    if !dry_run && let Some(db) = db.file() {
        // The deleted runs' lock files go with them.
        let locks = db.parent().unwrap_or_else(|| std::path::Path::new(".")).join("locks");
        for run in &report.runs {
            let _ = std::fs::remove_file(locks.join(format!("{run}.lock")));
        }
    }
    if common.json {
        let line = serde_json::json!({"cutoff": cutoff, "dry_run": dry_run, "report": report});
        let _ = writeln!(out, "{line}");
        return Ok(EXIT_OK);
    }
    let verb = if dry_run { "would delete" } else { "deleted" };
    let _ = writeln!(
        out,
        "pev gc: {verb} {} run(s) and {} blob(s) ({} bytes) last updated before {cutoff}",
        report.runs.len(),
        report.blobs,
        report.blob_bytes
    );
    for run in &report.runs {
        let _ = writeln!(out, "  {}", crate::view::style::clean(run));
    }
    if !report.kept.is_empty() {
        let _ = writeln!(
            out,
            "kept {} older run(s) a resume may still finish, or under way: {}",
            report.kept.len(),
            report.kept.join(", ")
        );
    }
    if let Some(why) = &report.blobs_skipped {
        let _ = writeln!(out, "no blob was collected: {why}; run `pev gc` again later");
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod gc_tests {
    #[test]
    fn ages_have_a_number_and_a_unit() {
        use crate::args::values::parse_age;
        assert_eq!(parse_age("30d").unwrap().as_secs(), 30 * 86_400);
        assert_eq!(parse_age("90m").unwrap().as_secs(), 5400);
        assert_eq!(parse_age("0s").unwrap().as_secs(), 0);
        assert_eq!(parse_age("2w").unwrap().as_secs(), 14 * 86_400);
        for bad in ["30", "d", "3x", "-1d", "", "99999999999999999999w"] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }
}
