//! `pev schema plan|lint|policy|result` print the derived JSON Schemas.

use super::support::{pev, run};

fn schema(kind: &str) -> serde_json::Value {
    let r = run(&mut pev(), &["schema", kind]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("\n  "), "pretty-printed: {}", r.stdout);
    r.json()
}

/// Every name in `fields` appears as a property somewhere in the schema.
fn assert_mentions(schema: &serde_json::Value, fields: &[&str]) {
    let text = schema.to_string();
    for field in fields {
        assert!(text.contains(&format!("\"{field}\":")), "schema lacks `{field}`: {text}");
    }
}

#[test]
fn plan_schema() {
    let s = schema("plan");
    assert_eq!(s["title"], "Plan");
    assert_mentions(
        &s,
        &["goal", "steps", "depends_on", "parameters", "assertions", "postconditions"],
    );
}

#[test]
fn lint_schema() {
    let s = schema("lint");
    assert_mentions(
        &s,
        &["status", "risk_score", "errors", "warnings", "step_id", "code", "msg", "path"],
    );
    assert!(s.to_string().contains("TOOL_DENY"));
}

#[test]
fn policy_schema() {
    let s = schema("policy");
    assert_mentions(
        &s,
        &["allow_tools", "bounds", "deny_tokens_regex", "fail_risk_threshold", "rego"],
    );
}

#[test]
fn result_schema() {
    let s = schema("result");
    assert_mentions(&s, &["run_id", "status", "steps", "goal_actions_executed"]);
}

#[test]
fn an_unknown_kind_is_a_usage_error() {
    let r = run(&mut pev(), &["schema", "plans"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("plans"), "{}", r.stderr);
}
