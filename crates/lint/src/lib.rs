//! Static analysis of a plan against a policy (CONTRACTS.md §5–6).
//!
//! [`lint`] runs every check over a parsed plan and folds the findings into a [`LintResult`]:
//! the policy decides each code's level (error, warning or off), the risk score is the sum of
//! the weights of the distinct codes found (capped at 1), and the status follows from both.
//!
//! Checks are pure functions of a [`Ctx`] that push [`Finding`]s; they never fail and never do
//! I/O (Rego modules are read when the policy is loaded). Each lives in its own module under
//! `checks/`, grouped by what it looks at. A plan of thousands of steps is checked on two
//! threads, with the findings in the same order as on one.

mod checks;
pub mod graph;
pub mod locate;
pub mod locate_yaml;
pub mod narrow;
pub mod policy;
pub mod rego;
mod tool_names;
mod walk;

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use pev_protocol::parse::{ParsedPlan, SchemaIssue};
use pev_protocol::{Finding, Level, LintCode, LintResult, LintStatus, Plan};

pub use policy::{CompiledPolicy, PolicyError};

/// Options that are not part of the policy document.
#[derive(Debug, Clone, Copy, Default)]
pub struct LintOptions {
    /// Overrides the policy's `fail_risk_threshold` (the CLI's `--fail-risk`, when given).
    pub fail_risk: Option<f64>,
}

/// What every check sees.
pub struct Ctx<'a> {
    pub parsed: &'a ParsedPlan,
    pub plan: &'a Plan,
    pub policy: &'a CompiledPolicy,
    /// Step id to index (the first step with that id), built on first use ([`Ctx::index`]):
    /// the checks that do not need it start without waiting for it.
    index: OnceLock<HashMap<&'a str, usize>>,
    /// The plan's distinct tool names and each step's.
    pub(crate) tools: tool_names::ToolNames<'a>,
}

impl<'a> Ctx<'a> {
    pub fn new(parsed: &'a ParsedPlan, policy: &'a CompiledPolicy) -> Self {
        let plan = &parsed.plan;
        let tools = tool_names::ToolNames::new(plan);
        Self { parsed, plan, policy, index: OnceLock::new(), tools }
    }

    /// Step id to index (the first step with that id).
    pub fn index(&self) -> &HashMap<&'a str, usize> {
        self.index.get_or_init(|| self.plan.index())
    }
}

/// Lints a parsed plan.
pub fn lint(parsed: &ParsedPlan, policy: &CompiledPolicy, options: LintOptions) -> LintResult {
    let ctx = Ctx::new(parsed, policy);
    let mut findings = Vec::new();
    checks::run_all(&ctx, &mut findings);
    fold(findings, policy, options)
}

/// The lint result for a plan that did not match the schema: one `SCHEMA_INVALID` per problem.
pub fn schema_failure(
    issues: &[SchemaIssue],
    policy: &CompiledPolicy,
    options: LintOptions,
) -> LintResult {
    let findings = issues
        .iter()
        .map(|issue| {
            let mut f = Finding::plan(
                LintCode::SchemaInvalid,
                issue.pointer.clone(),
                issue.message.clone(),
            );
            f.step = issue.step;
            f
        })
        .collect();
    fold(findings, policy, options)
}

/// Applies the policy's levels, computes the risk score and the status.
///
/// The errors stay in `findings`, in order, and only the rest moves out: a 100,000-step plan
/// can have tens of thousands of findings, and copying them all into a second list would hold
/// both at the peak of the run.
fn fold(mut findings: Vec<Finding>, policy: &CompiledPolicy, options: LintOptions) -> LintResult {
    let mut warnings = Vec::new();
    for finding in findings.extract_if(.., |f| policy.level(f.code) != Some(Level::Error)) {
        if policy.level(finding.code) == Some(Level::Warning) {
            warnings.push(finding);
        }
    }
    let errors = findings;
    let codes: BTreeSet<(LintCode, bool)> = errors
        .iter()
        .map(|f| (f.code, true))
        .chain(warnings.iter().map(|f| (f.code, false)))
        .collect();
    let score: f64 = codes
        .iter()
        .map(|&(code, is_error)| {
            policy.risk_weight(code, if is_error { Level::Error } else { Level::Warning })
        })
        .sum();
    // `+ 0.0` turns the -0.0 that an empty float sum yields into 0.0, so JSON never says `-0.0`.
    let risk_score = (score.min(1.0) * 100.0).round() / 100.0 + 0.0;
    let threshold = options.fail_risk.unwrap_or(policy.policy.fail_risk_threshold);
    let status = if !errors.is_empty() || risk_score >= threshold {
        LintStatus::Error
    } else if !warnings.is_empty() {
        LintStatus::Warn
    } else {
        LintStatus::Pass
    };
    LintResult { status, risk_score, errors, warnings }
}

#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;
