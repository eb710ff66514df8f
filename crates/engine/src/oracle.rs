//! The run's oracle in the engine: the files its checks judge it by, recorded when the plan is
//! made (an `oracle.recorded` event and their contents as blobs, so a resumed run compares with
//! the same pristine files), pev's own tools refused when a step that may not change them tries
//! to (`refusal`), and, when the run ends, what changed in them, the evidence re-checked on a
//! copy of the final workspace with the pristine oracle, and the hidden checks (`settle`).
//! The rules themselves are `pev_verify::oracle`'s.

use std::collections::HashMap;
use std::sync::Arc;

use pev_protocol::event::EventBody;
use pev_protocol::oracle::{
    HiddenResult, OracleChange, OracleChangeKind, OracleCheck, OracleFile, OracleSettings,
};
use pev_protocol::run::{Reason, ReasonCode};
use pev_protocol::{Assertion, Plan, Step};
use pev_store::Record;
use pev_tools::{ToolContext, Workspace};
use pev_verify::oracle::{Oracle, asks_for_test_work, pristine::Scratch};

use crate::engine::{Engine, EngineError};
use crate::recorder::Recorder;

/// How many recorded files a result lists (the count is always given).
const LISTED: usize = 50;

/// The oracle of one run.
#[derive(Debug, Default)]
pub(crate) struct RunOracle {
    pub rules: Oracle,
    pub files: Vec<OracleFile>,
    /// Recorded contents by sha256.
    pub contents: HashMap<String, Vec<u8>>,
    pub truncated: bool,
    /// The goal, in the user's words, asks for work on the tests.
    goal_permits: bool,
    /// The plan is the user's own (`pev run`), so its permissions are the user's.
    user_plan: bool,
    pub settings: OracleSettings,
}

impl RunOracle {
    /// The rules for `plan` under the engine's settings (the check commands' files included).
    fn rules(engine: &Engine, plan: &Plan) -> Result<Oracle, EngineError> {
        let Some(settings) = &engine.config.oracle else { return Ok(Oracle::default()) };
        let goal_permits = asks_for_test_work(permit_goal(engine, plan));
        let plan_allow = engine.config.plan_from_user || goal_permits;
        let mut rules =
            Oracle::new(settings, plan.oracle.as_ref(), plan_allow).map_err(EngineError::Plan)?;
        let ws = &engine.ctx.workspace;
        let targets: Vec<String> = plan
            .steps
            .iter()
            .flat_map(|s| pev_verify::named_files(&pev_verify::StepIntent::of(s), ws))
            .collect();
        let asserted = plan
            .steps
            .iter()
            .flat_map(|s| &s.assertions)
            .chain(plan.postconditions.iter().flat_map(|p| &p.assertions));
        for a in asserted {
            if let Assertion::CommandSucceeds { command, .. } = a {
                rules.name_check_files(command, ws, &targets);
            }
        }
        Ok(rules)
    }

    /// Whether the plan's oracle globs (and the settings') compile.
    pub(crate) fn check(engine: &Engine, plan: &Plan) -> Result<(), EngineError> {
        match &engine.config.oracle {
            Some(settings) => Oracle::new(settings, plan.oracle.as_ref(), true)
                .map(|_| ())
                .map_err(|e| EngineError::Plan(format!("the plan's oracle: {e}"))),
            None => Ok(()),
        }
    }

    /// Records the oracle of a new run: the files, journaled with their contents.
    pub(crate) fn start(
        engine: &Engine,
        plan: &Plan,
        recorder: &Recorder,
    ) -> Result<Self, EngineError> {
        if engine.config.oracle.is_none() {
            return Ok(Self::default());
        }
        let rules = Self::rules(engine, plan)?;
        let recorded = rules.record(&engine.ctx.workspace);
        for (sha256, content) in &recorded.contents {
            recorder.record(Record::Blob { sha256: sha256.clone(), content: content.clone() })?;
        }
        // A workspace without tests has nothing to record (and its journal stays as it was).
        if !recorded.files.is_empty() || recorded.truncated {
            recorder.emit(EventBody::OracleRecorded {
                files: recorded.files.clone(),
                truncated: recorded.truncated,
            })?;
        }
        let oracle = Self {
            rules,
            files: recorded.files,
            contents: recorded.contents.into_iter().collect(),
            truncated: recorded.truncated,
            goal_permits: asks_for_test_work(permit_goal(engine, plan)),
            user_plan: engine.config.plan_from_user,
            settings: engine.config.oracle.clone().unwrap_or_default(),
        };
        oracle.freeze(engine, plan);
        Ok(oracle)
    }

    /// Commands may read the oracle files but not change, delete or rename them (under
    /// bubblewrap), unless a step of the plan may change them; what the user allows stays
    /// writable.
    fn freeze(&self, engine: &Engine, plan: &Plan) {
        if plan.steps.iter().any(|s| self.may_change(s)) {
            return;
        }
        let root = engine.ctx.workspace.root();
        // A file only partly an oracle stays writable (a dependency or a version is work);
        // a change of its test settings is found at the end.
        let files = self
            .files
            .iter()
            .filter(|f| !self.rules.allowed(&f.path) && !pev_verify::oracle::is_partial(&f.path))
            .map(|f| root.join(&f.path))
            .collect();
        engine.ctx.sandbox.freeze(files);
    }

    /// The oracle a resumed run recorded when it started (none for a run journaled before pev
    /// recorded oracles: then nothing is protected, as then).
    pub(crate) fn resume(
        engine: &Engine,
        plan: &Plan,
        journaled: Journaled,
    ) -> Result<Self, EngineError> {
        if engine.config.oracle.is_none() {
            return Ok(Self::default());
        }
        let rules = Self::rules(engine, plan)?;
        let Some((files, truncated)) = journaled.oracle else {
            return Ok(Self {
                settings: engine.config.oracle.clone().unwrap_or_default(),
                ..Self::default()
            });
        };
        let oracle = Self {
            rules,
            files,
            contents: journaled.blobs,
            truncated,
            goal_permits: asks_for_test_work(permit_goal(engine, plan)),
            user_plan: engine.config.plan_from_user,
            settings: engine.config.oracle.clone().unwrap_or_default(),
        };
        oracle.freeze(engine, plan);
        Ok(oracle)
    }

    /// Whether `step` may change oracle files: marked `may_change_oracle` in the user's own
    /// plan, or, when the goal asks for work on tests, marked or about tests itself.
    pub(crate) fn may_change(&self, step: &Step) -> bool {
        if self.user_plan && step.may_change_oracle {
            return true;
        }
        self.goal_permits
            && (step.may_change_oracle
                || step.title.as_deref().is_some_and(asks_for_test_work)
                || step.description.as_deref().is_some_and(asks_for_test_work))
    }

    /// Why the write `tool` with `args` would change an oracle file `step` may not change, if
    /// it would. A file only partly an oracle (`package.json`, `pyproject.toml`) is refused only
    /// when the write changes its test settings.
    pub(crate) fn refusal(
        &self,
        ws: &Workspace,
        step: &Step,
        (tool, path, args): (&str, &str, &serde_json::Value),
    ) -> Option<String> {
        let rel = normalise(ws, path)?;
        // Through a symlink (`link.py -> tests/test_calc.py`) the write lands on its target.
        let rel = resolved(ws, &rel).unwrap_or(rel);
        let why = self.rules.why(&rel)?;
        if self.rules.allowed(&rel) || self.may_change(step) {
            return None;
        }
        if pev_verify::oracle::is_partial(&rel) && !changes_test_settings(ws, &rel, tool, args) {
            return None;
        }
        Some(pev_verify::oracle::refusal(&rel, &why))
    }

    /// Whether `path` (a normalised workspace path) is an oracle file `step` may not change:
    /// it is what the step must make pass, not its target. A file only partly an oracle
    /// (`package.json`) may well be a step's target.
    pub(crate) fn protects(&self, step: &Step, path: &str) -> bool {
        self.rules.why(path).is_some()
            && !pev_verify::oracle::is_partial(path)
            && !self.rules.allowed(path)
            && !self.may_change(step)
    }

    /// How the oracle differs now from when it was recorded.
    pub(crate) fn changes(&self, ws: &Workspace, plan: &Plan) -> Vec<OracleChange> {
        if self.files.is_empty() && self.truncated {
            return Vec::new();
        }
        let any_step = plan.steps.iter().any(|s| self.may_change(s));
        let pristine = |sha: &str| self.contents.get(sha).cloned();
        self.rules.changes(&self.files, &pristine, ws, &|_| any_step)
    }

    /// A copy of the final workspace with the oracle as recorded, and a tool context on it.
    pub(crate) fn pristine(
        &self,
        ctx: &ToolContext,
        changes: &[OracleChange],
    ) -> Result<(Scratch, ToolContext), String> {
        let pristine = |sha: &str| self.contents.get(sha).cloned();
        let scratch = Scratch::pristine(&ctx.workspace, &self.files, changes, &pristine)?;
        let copy = ToolContext {
            workspace: scratch.workspace().clone(),
            policy: ctx.policy.clone(),
            sandbox: Arc::clone(&ctx.sandbox),
        };
        Ok((scratch, copy))
    }

    /// Runs the hidden checks on a copy of the final workspace (with the pristine oracle).
    pub(crate) async fn hidden(
        &self,
        ctx: &ToolContext,
        changes: &[OracleChange],
        problems: &mut Vec<String>,
    ) -> Vec<HiddenResult> {
        let prepared = {
            let pristine = |sha: &str| self.contents.get(sha).cloned();
            let undone = undone(changes);
            let found = (self.files.as_slice(), undone.as_slice());
            pev_verify::oracle::hidden::prepare(
                &self.settings.hidden,
                &ctx.workspace,
                found,
                &pristine,
            )
        };
        pev_verify::oracle::hidden::run(prepared, ctx, problems).await
    }

    /// The report for the result, with the changes and hidden results given.
    pub(crate) fn report(&self, changes: Vec<OracleChange>) -> OracleCheck {
        OracleCheck {
            files: self.files.len(),
            inferred: self.files.iter().take(LISTED).cloned().collect(),
            changed: changes,
            ..OracleCheck::default()
        }
    }

    /// Whether the run records an oracle at all (or has hidden checks).
    pub(crate) fn is_empty(&self) -> bool {
        self.files.is_empty() && self.settings.hidden.is_empty()
    }
}

/// What the journal holds of a run's oracle, read off the async runtime (the Postgres client
/// blocks): the `oracle.recorded` files, the blobs of their contents and of what the run's
/// changes replaced, and, when asked for, the run's record.
#[derive(Debug, Default)]
pub(crate) struct Journaled {
    pub oracle: Option<(Vec<OracleFile>, bool)>,
    pub blobs: HashMap<String, Vec<u8>>,
    pub record: Option<pev_store::RunRecord>,
}

/// Reads [`Journaled`] for `run_id` from the journal at `location`, on a blocking thread.
pub(crate) async fn load(
    location: pev_store::Location,
    run_id: String,
    with_record: bool,
) -> Result<Journaled, EngineError> {
    let read = move || -> Result<Journaled, pev_store::StoreError> {
        let store = pev_store::Store::open_existing(&location)?;
        let oracle = store.events(&run_id)?.into_iter().find_map(|e| match e.body {
            EventBody::OracleRecorded { files, truncated } => Some((files, truncated)),
            _ => None,
        });
        let record = if with_record { Some(store.load_run(&run_id)?) } else { None };
        let mut wanted: Vec<String> =
            oracle.iter().flat_map(|(files, _)| files.iter().map(|f| f.sha256.clone())).collect();
        wanted.extend(
            record.iter().flat_map(|r| &r.mutations).filter_map(|m| m.before_sha256.clone()),
        );
        let mut blobs = HashMap::new();
        for sha in wanted {
            if !blobs.contains_key(&sha)
                && let Some(bytes) = store.blob(&sha)?
            {
                blobs.insert(sha, bytes);
            }
        }
        Ok(Journaled { oracle, blobs, record })
    };
    match tokio::task::spawn_blocking(read).await {
        Ok(read) => Ok(read?),
        Err(e) => Err(EngineError::Resume(format!("reading the run's oracle failed: {e}"))),
    }
}

/// A copy of the final workspace with the oracle a journaled run recorded (and `extra`, files
/// found since) and `changes` undone, and a tool context on it: for the re-checks that run after
/// the engine's own end of the run (loop mode's model plan).
pub(crate) fn pristine_from_journal(
    ctx: &ToolContext,
    journaled: &Journaled,
    extra: &[OracleFile],
    changes: &[OracleChange],
) -> Result<(Scratch, ToolContext), String> {
    let mut files: Vec<OracleFile> =
        journaled.oracle.iter().flat_map(|(files, _)| files.iter().cloned()).collect();
    files.extend(extra.iter().cloned());
    let pristine = |sha: &str| journaled.blobs.get(sha).cloned();
    let scratch = Scratch::pristine(&ctx.workspace, &files, changes, &pristine)?;
    let copy = ToolContext {
        workspace: scratch.workspace().clone(),
        policy: ctx.policy.clone(),
        sandbox: Arc::clone(&ctx.sandbox),
    };
    Ok((scratch, copy))
}

/// In loop mode the checks are the model's, made after the run started: the files they run
/// (`python3 check_calc.py`) were not recorded with the oracle. Each one the run changed is
/// found here, from the journal (its content before the run's first change of it), unless the
/// user allows it or the user's goal is work on tests. Returns the files as they were and
/// their changes.
pub(crate) fn loop_check_changes(
    engine: &Engine,
    journaled: &Journaled,
    (goal, commands): (&str, &[&str]),
) -> Vec<(OracleFile, OracleChange)> {
    let Some(record) = &journaled.record else { return Vec::new() };
    let Some(settings) = &engine.config.oracle else { return Vec::new() };
    let permits = asks_for_test_work(engine.config.permit_goal.as_deref().unwrap_or(goal));
    let rules = Oracle::new(settings, None, false).unwrap_or_default();
    let ws = &engine.ctx.workspace;
    let mut out: Vec<(OracleFile, OracleChange)> = Vec::new();
    for command in commands {
        for path in pev_verify::oracle::paths_checked_by(command) {
            let Some(path) = normalise(ws, &path) else { continue };
            if permits || rules.allowed(&path) || out.iter().any(|(f, _)| f.path == path) {
                continue;
            }
            // Recorded with the oracle already (a test by convention): found there.
            if rules.why(&path).is_some() {
                continue;
            }
            let first =
                record.mutations.iter().find(|m| m.mutation.path == path && !m.mutation.no_op);
            let Some(before) = first.and_then(|m| m.before_sha256.clone()) else { continue };
            let now = ws.read(&path).ok();
            let now_sha = now.as_deref().map(pev_verify::oracle::sha256_of);
            if now_sha.as_deref() == Some(before.as_str()) {
                continue;
            }
            let old = journaled.blobs.get(&before).cloned();
            let why = format!("run by the check `{}`", pev_verify::oracle::clip_command(command));
            let change = OracleChange {
                path: path.clone(),
                change: if now.is_some() {
                    OracleChangeKind::Modified
                } else {
                    OracleChangeKind::Deleted
                },
                why: why.clone(),
                allowed: false,
                diff: pev_verify::oracle::diff(old.as_deref(), now.as_deref()),
            };
            out.push((OracleFile { path, sha256: before, why }, change));
        }
    }
    out
}

/// The changes a pristine copy undoes: those no permission covers.
pub(crate) fn undone(changes: &[OracleChange]) -> Vec<OracleChange> {
    changes.iter().filter(|c| !c.allowed).cloned().collect()
}

/// The reasons of an oracle check: `oracle_changed` per unpermitted change or deletion,
/// `hidden_check_failed` per failed hidden check (without its output: a replanning model must
/// not learn the held-out tests from it).
pub(crate) fn reasons(check: &OracleCheck) -> Vec<Reason> {
    let mut out = pev_verify::oracle::changed_reasons(&check.changed);
    for hidden in check.hidden.iter().filter(|h| !h.passed) {
        out.push(Reason {
            code: ReasonCode::HiddenCheckFailed,
            step: None,
            message: format!(
                "the hidden check `{}` failed on the final workspace (its output is in the \
                 result's final_check.oracle, never shown to a model)",
                hidden.name
            ),
        });
    }
    out
}

/// `oracle_changed` for created oracle files too (when the pristine re-check could not run
/// without them).
pub(crate) fn created_reasons(changes: &[OracleChange]) -> Vec<Reason> {
    let created: Vec<OracleChange> = changes
        .iter()
        .filter(|c| !c.allowed && c.change == OracleChangeKind::Created)
        .map(|c| OracleChange { change: OracleChangeKind::Modified, ..c.clone() })
        .collect();
    pev_verify::oracle::changed_reasons(&created)
}

/// Whether anything in `changes` needs the pristine re-check.
pub(crate) fn needs_pristine(changes: &[OracleChange]) -> bool {
    changes.iter().any(|c| !c.allowed)
}

/// Created oracle files are said as a warning: the checks ran without them.
pub(crate) fn created_warning(changes: &[OracleChange]) -> Option<String> {
    let created: Vec<&str> = changes
        .iter()
        .filter(|c| !c.allowed && c.change == OracleChangeKind::Created)
        .map(|c| c.path.as_str())
        .collect();
    (!created.is_empty()).then(|| {
        format!(
            "the run created {} where tests or test configuration live; the final re-check ran \
             without {} (on the pristine oracle)",
            created.join(", "),
            if created.len() == 1 { "it" } else { "them" }
        )
    })
}

/// Whether the write `tool` with `args` changes the test settings of the partly-oracle file
/// `rel` (what `oracle_view` keeps of it). A write whose result cannot be computed counts as one.
fn changes_test_settings(ws: &Workspace, rel: &str, tool: &str, args: &serde_json::Value) -> bool {
    let before = ws.read(rel).unwrap_or_default();
    let after = match tool {
        "file.write" => match args.get("content").and_then(serde_json::Value::as_str) {
            Some(content) => content.as_bytes().to_vec(),
            None => return true,
        },
        "file.patch" => {
            let edits: Vec<pev_tools::builtin::file_patch::Edit> =
                match args.get("edits").cloned().map(serde_json::from_value) {
                    Some(Ok(edits)) => edits,
                    _ => return true,
                };
            let text = String::from_utf8_lossy(&before).into_owned();
            match pev_tools::builtin::file_patch::apply(&text, &edits, rel) {
                Ok((patched, _)) => patched.into_bytes(),
                // The patch fails anyway; the tool says why.
                Err(_) => return false,
            }
        }
        _ => return true,
    };
    pev_verify::oracle::oracle_view(rel, &before) != pev_verify::oracle::oracle_view(rel, &after)
}

/// The goal whose words decide whether the run may change tests: the user's, when the engine
/// knows it, else the plan's.
fn permit_goal<'a>(engine: &'a Engine, plan: &'a Plan) -> &'a str {
    engine.config.permit_goal.as_deref().unwrap_or(&plan.goal)
}

/// Where the workspace path `rel` leads through symlinks, as a workspace path; `None` when it
/// does not exist or leads out (the tool refuses that itself).
fn resolved(ws: &Workspace, rel: &str) -> Option<String> {
    let root = ws.root().canonicalize().ok()?;
    let full = ws.root().join(rel).canonicalize().ok()?;
    let inside = full.strip_prefix(&root).ok()?;
    let parts: Vec<String> =
        inside.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// `path` as a normalised workspace path, when it is one.
fn normalise(ws: &Workspace, path: &str) -> Option<String> {
    let rel = ws.resolve(path).ok()?;
    let parts: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}
