//! Checking the evidence of the plan tools: running a step's or a postcondition's assertions
//! with `pev_verify::check` on the workspace, the before-hashes `content_changed` compares
//! against, the texts that tell the model what passed and what the harness saw fail, and
//! [`StepTargets`], the plan-execution mismatch rule over the files a step's title names.

use std::collections::HashMap;
use std::fmt::Write as _;

use pev_protocol::Assertion;
use pev_protocol::assertion::AssertionResult;
use pev_tools::ToolContext;
use pev_verify::CheckEnv;

/// The path whose earlier hash `assertion` compares against, if it is a `content_changed`.
pub(crate) fn changed_path(assertion: &Assertion) -> Option<&str> {
    match assertion {
        Assertion::ContentChanged { path, .. } => Some(path),
        _ => None,
    }
}

/// The hash of `path` now (`Some(None)`: absent); `None` when the path may not be read (the
/// check will say why).
pub(crate) fn hash(ctx: &ToolContext, path: &str) -> Option<Option<String>> {
    ctx.workspace.sha256(path).ok()
}

pub(crate) async fn run_checks(
    assertions: &[Assertion],
    ctx: &ToolContext,
    step: Option<&str>,
    before: &HashMap<String, Option<String>>,
) -> Vec<AssertionResult> {
    // The loop has no step outputs: output_contains and exit_code_eq fail with a detail that
    // says so, which is what the model should learn.
    let outputs = HashMap::new();
    let env = CheckEnv { ctx, step, outputs: &outputs, before };
    let mut results = Vec::with_capacity(assertions.len());
    for assertion in assertions {
        results.push(pev_verify::check(assertion, &env).await);
    }
    results
}

/// "k of n assertions failed:" and each failure's detail and recovery hint; `None` if all passed.
pub(crate) fn failures(assertions: &[Assertion], results: &[AssertionResult]) -> Option<String> {
    let failed: Vec<(&Assertion, &AssertionResult)> =
        assertions.iter().zip(results).filter(|(_, r)| !r.passed).collect();
    if failed.is_empty() {
        return None;
    }
    let mut out = format!("{} of {} assertions failed:", failed.len(), results.len());
    for (assertion, result) in failed {
        let _ = write!(out, "\n- {}: {}", result.kind, result.detail);
        if let Some(recovery) = assertion.recovery() {
            let _ = write!(out, "\n  recovery: {recovery}");
        }
    }
    Some(out)
}

/// " Checked: kind: detail; …" for the assertions that passed, or "" when there were none.
pub(crate) fn passes(results: &[AssertionResult]) -> String {
    if results.is_empty() {
        return String::new();
    }
    let each: Vec<String> = results.iter().map(|r| format!("{}: {}", r.kind, r.detail)).collect();
    format!(" Checked by the harness: {}.", each.join("; "))
}

/// The files each step's title names as what it changes, and what the loop changed: the
/// plan-execution mismatch rule (`pev_verify::mismatch`) for loop-mode steps.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub(crate) struct StepTargets {
    /// Step id → the files its title names (empty: read-only, or none).
    named: HashMap<String, Vec<String>>,
    /// Step id → the hashes of those files at its baseline (plan creation, then when it first
    /// goes in progress).
    before: HashMap<String, HashMap<String, Option<String>>>,
    /// The files the loop's journaled calls changed so far, in order.
    changed: Vec<String>,
    /// Step id → how many of `changed` there were when it first went in progress.
    changed_at_start: HashMap<String, usize>,
}

impl StepTargets {
    /// A plan names step `id` with `title`: its target files, and their baseline if it has
    /// none yet.
    pub(crate) fn on_plan(
        &mut self,
        (id, title, checks): (&str, &str, &[Assertion]),
        (ctx, recorded): (&ToolContext, &HashMap<String, Option<String>>),
    ) {
        // A test the step must make pass ("fix the bug that makes tests/test_calc.py fail") is
        // its check, not its target, unless the step's work is the tests themselves.
        // The same for what the step's own checks run ("fix the bug that makes check_calc.py
        // fail", checked by `python3 check_calc.py`).
        let about_tests = pev_verify::oracle::asks_for_test_work(title);
        let checked: Vec<String> = checks
            .iter()
            .filter_map(|a| match a {
                Assertion::CommandSucceeds { command, .. } => Some(command),
                _ => None,
            })
            .flat_map(|c| pev_verify::oracle::paths_checked_by(c))
            .collect();
        let named: Vec<String> =
            pev_verify::named_files(&pev_verify::StepIntent::titled(title), &ctx.workspace)
                .into_iter()
                .filter(|p| {
                    about_tests
                        || (pev_verify::oracle::convention(p).is_none() && !checked.contains(p))
                })
                .collect();
        if !self.before.contains_key(id) {
            self.before.insert(id.to_owned(), hashes(&named, ctx, recorded));
        }
        self.named.insert(id.to_owned(), named);
    }

    /// Step `id` went in progress for the first time: its baseline is now.
    pub(crate) fn on_start(
        &mut self,
        id: &str,
        (ctx, recorded): (&ToolContext, &HashMap<String, Option<String>>),
    ) {
        let named = self.named.get(id).map_or(&[][..], Vec::as_slice);
        let now = hashes(named, ctx, recorded);
        self.before.insert(id.to_owned(), now);
        self.changed_at_start.insert(id.to_owned(), self.changed.len());
    }

    /// The files the loop's journaled calls have changed so far.
    pub(crate) fn note_changes(&mut self, changed: Vec<String>) {
        self.changed = changed;
    }

    /// The rule for step `id`. A target counts as changed when a journaled call of the loop
    /// changed it, or its content differs from the step's baseline (a shell command may have
    /// changed it). A mismatch names the files changed since the step went in progress.
    pub(crate) fn mismatch(
        &self,
        id: &str,
        title: &str,
        ctx: &ToolContext,
    ) -> Option<pev_verify::Mismatch> {
        let named = self.named.get(id).filter(|t| !t.is_empty())?;
        let before = self.before.get(id);
        let mut changed = self.changed.clone();
        for path in named {
            let then = before.and_then(|b| b.get(path));
            if then.is_some_and(|then| hash(ctx, path).as_ref() != Some(then)) {
                changed.push(path.clone());
            }
        }
        let intent = pev_verify::StepIntent::titled(title);
        let mut found = pev_verify::mismatch(&intent, named, &changed, &ctx.workspace)?;
        let start = self.changed_at_start.get(id).copied().unwrap_or(0);
        found.changed = Vec::new();
        for path in self.changed.iter().skip(start) {
            if !found.changed.contains(path) {
                found.changed.push(path.clone());
            }
        }
        Some(found)
    }
}

/// The hashes of `paths` now (those that may be read).
fn hashes(
    paths: &[String],
    ctx: &ToolContext,
    recorded: &HashMap<String, Option<String>>,
) -> HashMap<String, Option<String>> {
    paths.iter().filter_map(|p| baseline(recorded, ctx, p).map(|h| (p.clone(), h))).collect()
}

/// `path`'s hash as a baseline: as the interrupted session saw it when `recorded` knows it
/// (a continued loop), else as the workspace holds it now.
pub(crate) fn baseline(
    recorded: &HashMap<String, Option<String>>,
    ctx: &ToolContext,
    path: &str,
) -> Option<Option<String>> {
    match recorded.get(path) {
        Some(before) => Some(before.clone()),
        None => hash(ctx, path),
    }
}
