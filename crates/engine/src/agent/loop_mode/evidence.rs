//! Checking the evidence of the plan tools: running a step's or a postcondition's assertions
//! with `pev_verify::check` on the workspace, the before-hashes `content_changed` compares
//! against, and the texts that tell the model what passed and what the harness saw fail.

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
