//! A client's run against its oracle. Claude Code and Codex edit files with their own tools,
//! which pev cannot refuse, so here pev detects: the oracle is every file of the snapshot taken
//! with the plan that the rules of `pev_verify::oracle` make one (tests, test configuration,
//! files the plan's check commands name, `[oracle] protect` of the user's settings); a changed
//! or deleted one is `oracle_changed` (the gate refuses the Stop with the file, its diff and how
//! to restore it), and the evidence is re-checked on a copy of the workspace with the oracle as
//! the snapshot recorded it. A client's plan grants no leave to change tests (its goal is the
//! model's own words); only the user's `[oracle] allow` does.

use pev_engine::agent::loop_mode::LoopReport;
use pev_engine::agent::loop_run::final_recheck;
use pev_protocol::oracle::{OracleFile, OracleSettings};
use pev_protocol::run::{FinalCheck, Reason};
use pev_store::Store;
use pev_tools::ToolContext;
use pev_verify::oracle::{Oracle, changed_reasons, pristine::Scratch};

use crate::snapshot::Snapshot;

/// The oracle's reasons for a client's run; the oracle's report goes into `check.oracle`.
pub(crate) async fn settle(
    (snapshot, options): (&Snapshot, &serde_json::Value),
    (store, ctx): (&Store, &ToolContext),
    report: &LoopReport,
    check: &mut FinalCheck,
    warnings: &mut Vec<String>,
) -> Vec<Reason> {
    // The settings recorded when the plan was made (a pev.toml the client edited since does
    // not count); a run recorded before pev kept them has the defaults.
    let settings: OracleSettings = options
        .get("oracle")
        .and_then(|o| serde_json::from_value(o.clone()).ok())
        .unwrap_or_default();
    let mut rules = match Oracle::new(&settings, None, false) {
        Ok(rules) => rules,
        Err(why) => {
            warnings.push(format!("[oracle]: {why}; the conventions alone apply"));
            Oracle::new(&OracleSettings::default(), None, false).unwrap_or_default()
        }
    };
    let commands = report.plan.iter().flat_map(|p| {
        p.steps
            .iter()
            .flat_map(|s| &s.assertions)
            .chain(p.postconditions.iter().flat_map(|c| &c.assertions))
    });
    for a in commands {
        if let pev_protocol::Assertion::CommandSucceeds { command, .. } = a {
            rules.name_check_files(command, &ctx.workspace, &[]);
        }
    }
    let files: Vec<OracleFile> = snapshot
        .files
        .iter()
        .filter_map(|(path, entry)| {
            rules.why(path).map(|why| OracleFile {
                path: path.clone(),
                sha256: entry.sha256.clone(),
                why,
            })
        })
        .collect();
    let pristine = |sha: &str| store.blob(sha).ok().flatten();
    let changes = rules.changes(&files, &pristine, &ctx.workspace, &|_| false);
    let mut oracle = pev_protocol::oracle::OracleCheck {
        files: files.len(),
        inferred: files.iter().take(50).cloned().collect(),
        changed: changes.clone(),
        ..Default::default()
    };
    let mut reasons = changed_reasons(&changes);
    if changes.iter().any(|c| !c.allowed) {
        match Scratch::pristine(&ctx.workspace, &files, &changes, &pristine) {
            Ok(scratch) => {
                let copy = ToolContext {
                    workspace: scratch.workspace().clone(),
                    policy: ctx.policy.clone(),
                    sandbox: std::sync::Arc::clone(&ctx.sandbox),
                };
                let found = final_recheck(&copy, report).await;
                drop(scratch);
                oracle.pristine_recheck = true;
                pev_verify::oracle::add_pristine_regressions(check, found.regressed);
            }
            Err(why) => {
                oracle.problems.push(format!(
                    "the evidence could not be re-checked on the pristine oracle: {why}"
                ));
                let created: Vec<_> = changes
                    .iter()
                    .filter(|c| c.change == pev_protocol::oracle::OracleChangeKind::Created)
                    .map(|c| pev_protocol::oracle::OracleChange {
                        change: pev_protocol::oracle::OracleChangeKind::Modified,
                        ..c.clone()
                    })
                    .collect();
                reasons.extend(changed_reasons(&created));
            }
        }
        let created: Vec<&str> = changes
            .iter()
            .filter(|c| c.change == pev_protocol::oracle::OracleChangeKind::Created)
            .map(|c| c.path.as_str())
            .collect();
        if !created.is_empty() {
            warnings.push(format!(
                "the client created {} where tests or test configuration live; the final \
                 re-check ran without them (on the pristine oracle)",
                created.join(", ")
            ));
        }
    }
    if !settings.hidden.is_empty() {
        let undone: Vec<_> = changes.iter().filter(|c| !c.allowed).cloned().collect();
        let found = (files.as_slice(), undone.as_slice());
        let prepared =
            pev_verify::oracle::hidden::prepare(&settings.hidden, &ctx.workspace, found, &pristine);
        oracle.hidden = pev_verify::oracle::hidden::run(prepared, ctx, &mut oracle.problems).await;
    }
    let report = pev_protocol::run::FinalCheck { oracle: Some(oracle), ..Default::default() };
    let oracle = report.oracle.unwrap_or_default();
    reasons.extend(hidden_reasons(&oracle));
    check.oracle = Some(oracle);
    reasons
}

/// Makes the oracle files of `snapshot` read-only to the commands pev runs for the client (the
/// plan tools' `command_succeeds` checks, under bubblewrap): a check must not be able to change
/// what it checks. Files only partly an oracle and what the user allows stay writable.
pub(crate) fn freeze(snapshot: &Snapshot, ctx: &ToolContext, settings: &OracleSettings) {
    let Ok(rules) = Oracle::new(settings, None, false) else { return };
    let root = ctx.workspace.root();
    let files = snapshot
        .files
        .keys()
        .filter(|p| rules.why(p).is_some())
        .filter(|p| !rules.allowed(p) && !pev_verify::oracle::is_partial(p))
        .map(|p| root.join(p))
        .collect();
    ctx.sandbox.freeze(files);
}

/// `[oracle]` of the user's and the workspace's pev.toml (a workspace's file may only add
/// checks); the defaults, with a warning, when they cannot be read.
pub(crate) fn settings(ctx: &ToolContext, warnings: &mut Vec<String>) -> OracleSettings {
    let vars = |name: &str| {
        matches!(name, "XDG_CONFIG_HOME" | "HOME").then(|| std::env::var(name).ok()).flatten()
    };
    match pev_providers::config::Config::load(ctx.workspace.root(), &vars) {
        Ok(config) => config.oracle().clone(),
        Err(e) => {
            warnings.push(format!("pev.toml: {e}; the oracle's conventions alone apply"));
            OracleSettings::default()
        }
    }
}

/// `hidden_check_failed` for each failed hidden check (its output stays in the result).
fn hidden_reasons(oracle: &pev_protocol::oracle::OracleCheck) -> Vec<Reason> {
    oracle
        .hidden
        .iter()
        .filter(|h| !h.passed)
        .map(|h| Reason {
            code: pev_protocol::run::ReasonCode::HiddenCheckFailed,
            step: None,
            message: format!(
                "the hidden check `{}` failed on the workspace as it is now (its output is in \
                 the run's result, never shown to the client)",
                h.name
            ),
        })
        .collect()
}
