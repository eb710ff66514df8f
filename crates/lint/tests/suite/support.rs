//! Helpers shared by the suite: lint a plan given as JSON/YAML text with a policy given as YAML.

#![allow(dead_code)] // each suite module uses a subset

use std::path::Path;

use pev_lint::{CompiledPolicy, LintOptions, lint};
use pev_protocol::parse::{Format, parse_plan};
use pev_protocol::{LintCode, LintResult};

/// Lints `plan` (JSON or YAML) under `policy` (YAML; empty string for the default policy).
pub fn lint_with(plan: &str, policy: &str) -> LintResult {
    let parsed = parse_plan(plan, Format::sniff(plan)).expect("test plan must parse");
    let policy = if policy.trim().is_empty() {
        CompiledPolicy::default()
    } else {
        let path = Path::new("test-policy.yaml");
        let doc = CompiledPolicy::parse(policy, path).expect("test policy must parse");
        CompiledPolicy::from_parts(doc, path, Vec::new()).expect("test policy must compile")
    };
    lint(&parsed, &policy, LintOptions::default())
}

/// Lints under the default policy.
pub fn lint_default(plan: &str) -> LintResult {
    lint_with(plan, "")
}

/// The codes found (errors and warnings), in order.
pub fn codes(result: &LintResult) -> Vec<LintCode> {
    result.errors.iter().chain(&result.warnings).map(|f| f.code).collect()
}

/// The findings with this code, as `(step index, JSON path)`.
pub fn found(result: &LintResult, code: LintCode) -> Vec<(Option<usize>, String)> {
    result
        .errors
        .iter()
        .chain(&result.warnings)
        .filter(|f| f.code == code)
        .map(|f| (f.step, f.path.clone()))
        .collect()
}

/// The findings with this code, errors then warnings, for assertions on messages.
pub fn findings(result: &LintResult, code: LintCode) -> Vec<&pev_protocol::Finding> {
    result.errors.iter().chain(&result.warnings).filter(|f| f.code == code).collect()
}
