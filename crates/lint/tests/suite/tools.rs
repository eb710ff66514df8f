//! TOOL_DENY, UNKNOWN_TOOL, BOUND_VIOLATION, APPROVAL_REQUIRED and UNVERIFIED_EFFECT, including
//! bounds on dotted tool names (plan-lint splits `payments.transfer.amount` at the first dot and
//! silently passes 5000).

use pev_protocol::LintCode::{
    ApprovalRequired, BoundViolation, ToolDeny, UnknownTool, UnverifiedEffect,
};
use pev_protocol::{Finding, LintCode, LintResult};
use serde_json::{Value, json};

use super::support::{findings, found, lint_default, lint_with};

fn one(result: &LintResult, code: LintCode) -> Finding {
    let all = findings(result, code);
    assert_eq!(all.len(), 1, "expected one {code}: {result:#?}");
    all[0].clone()
}

/// A plan of one step with `tool` and `parameters` (checked by an assertion, so that only the
/// code under test shows up).
fn step(tool: &str, parameters: &Value) -> String {
    json!({"goal": "g", "steps": [{"id": "s", "tool": tool, "parameters": parameters,
        "acceptance_criteria": ["done"]}]})
    .to_string()
}

const PAYMENTS: &str = "bounds:\n  payments.transfer.amount: [0.01, 1000]\n";

#[test]
fn tool_not_in_allow_tools_is_denied() {
    let r =
        lint_with(&step("shell.exec", &json!({"command": "ls"})), "allow_tools: [file.read, db.*]");
    let f = one(&r, ToolDeny);
    assert_eq!((f.step, f.path.as_str()), (Some(0), "/steps/0/tool"));
    assert!(f.msg.contains("`shell.exec`") && f.msg.contains("allow_tools"), "{}", f.msg);

    let near = lint_with(&step("db.query", &json!({"query": "SELECT 1"})), "allow_tools: [db.*]");
    assert!(found(&near, ToolDeny).is_empty());
    assert!(found(&near, UnknownTool).is_empty(), "a glob in allow_tools names the tool");
    assert!(found(&lint_default(&step("crm.get", &json!({}))), ToolDeny).is_empty());
}

#[test]
fn deny_tools_wins_over_allow_tools() {
    let policy = "allow_tools: [\"*\"]\ndeny_tools: [shell.*]";
    let r = lint_with(&step("shell.exec", &json!({"command": "ls"})), policy);
    let f = one(&r, ToolDeny);
    assert!(f.msg.contains("deny_tools `shell.*`"), "{}", f.msg);
    assert!(
        found(
            &lint_with(&step("shell.execute2", &json!({})), "deny_tools: [shell.exec]"),
            ToolDeny
        )
        .is_empty()
    );
}

#[test]
fn unknown_tool_is_a_warning_unless_known_or_denied() {
    let r = lint_default(&step("crm.frobnicate", &json!({})));
    let f = one(&r, UnknownTool);
    assert_eq!((f.step, f.path.as_str()), (Some(0), "/steps/0/tool"));
    assert!(f.msg.contains("`crm.frobnicate`"), "{}", f.msg);
    assert!(r.errors.is_empty());

    for (tool, policy) in [
        ("file.patch", ""),
        ("crm.frobnicate", "approve_tools: [crm.*]"),
        ("crm.frobnicate", "bounds:\n  crm.frobnicate.n: [0, 1]"),
        ("db.query_ro", ""),
    ] {
        let r = lint_with(&step(tool, &json!({})), policy);
        assert!(found(&r, UnknownTool).is_empty(), "{tool} under {policy:?}");
    }
    // Denied tools are reported once, as denied.
    let r = lint_with(&step("crm.frobnicate", &json!({})), "deny_tools: [crm.*]");
    assert_eq!((found(&r, ToolDeny).len(), found(&r, UnknownTool).len()), (1, 0));
}

#[test]
fn bounds_on_a_dotted_tool_name() {
    let r = lint_with(&step("payments.transfer", &json!({"amount": 5000, "to": "acct"})), PAYMENTS);
    let f = one(&r, BoundViolation);
    assert_eq!((f.step, f.path.as_str()), (Some(0), "/steps/0/parameters/amount"));
    assert!(f.msg.contains("5000") && f.msg.contains("[0.01, 1000]"), "{}", f.msg);
    assert!(f.msg.contains("payments.transfer"), "{}", f.msg);

    for amount in [
        json!(999),
        json!(0.01),
        json!(1000),
        json!("999"),
        json!("${q.result.amount}"),
        json!("all"),
    ] {
        let r = lint_with(&step("payments.transfer", &json!({"amount": amount})), PAYMENTS);
        assert!(found(&r, BoundViolation).is_empty(), "{amount}");
    }
}

#[test]
fn numeric_strings_and_arrays_are_checked() {
    let r = lint_with(&step("payments.transfer", &json!({"amount": " 5000 "})), PAYMENTS);
    assert!(one(&r, BoundViolation).msg.contains("\" 5000 \""));
    let r = lint_with(&step("payments.transfer", &json!({"amount": "-1e3"})), PAYMENTS);
    assert_eq!(found(&r, BoundViolation).len(), 1);

    let r = lint_with(
        &step("payments.transfer", &json!({"amount": [5, 5000, "2000", "x", 0]})),
        PAYMENTS,
    );
    let paths: Vec<String> = found(&r, BoundViolation).into_iter().map(|(_, p)| p).collect();
    assert_eq!(
        paths,
        [
            "/steps/0/parameters/amount/1",
            "/steps/0/parameters/amount/2",
            "/steps/0/parameters/amount/4"
        ]
    );
    assert!(
        found(
            &lint_with(&step("payments.transfer", &json!({"amount": "NaN"})), PAYMENTS),
            BoundViolation
        )
        .is_empty()
    );
}

#[test]
fn bound_argument_paths_go_into_nested_objects() {
    let policy = "bounds:\n  payments.transfer.limits.daily: [0, 100]\n";
    let r = lint_with(&step("payments.transfer", &json!({"limits": {"daily": 250}})), policy);
    assert_eq!(
        found(&r, BoundViolation),
        [(Some(0), "/steps/0/parameters/limits/daily".to_owned())]
    );
    let r = lint_with(&step("payments.transfer", &json!({"limits": {"weekly": 250}})), policy);
    assert!(found(&r, BoundViolation).is_empty());
}

#[test]
fn the_longest_tool_name_owns_the_bound() {
    // Both `payments` and `payments.transfer` are used; the key belongs to the longer one, so
    // the `payments` step's nested transfer.amount is not its argument.
    let plan = json!({"goal": "g", "steps": [
        {"id": "p", "tool": "payments", "parameters": {"transfer": {"amount": 5000}},
         "acceptance_criteria": ["ok"]},
        {"id": "t", "tool": "payments.transfer", "parameters": {"amount": 5000},
         "acceptance_criteria": ["ok"]},
    ]})
    .to_string();
    let r = lint_with(&plan, PAYMENTS);
    assert_eq!(found(&r, BoundViolation), [(Some(1), "/steps/1/parameters/amount".to_owned())]);

    // With only `payments` in the plan, the same key resolves to it and the nested path counts.
    let only = step("payments", &json!({"transfer": {"amount": 5000}}));
    assert_eq!(
        found(&lint_with(&only, PAYMENTS), BoundViolation),
        [(Some(0), "/steps/0/parameters/transfer/amount".to_owned())]
    );
}

#[test]
fn camel_case_tool_bounds() {
    let policy = "bounds:\n  priceAPI.bulkUpdate.discount_pct: [0, 40]\n";
    let r = lint_with(&step("priceAPI.bulkUpdate", &json!({"discount_pct": 90})), policy);
    let f = one(&r, BoundViolation);
    assert_eq!(f.path, "/steps/0/parameters/discount_pct");
    assert!(f.msg.contains("90") && f.msg.contains("[0, 40]"), "{}", f.msg);
    let r = lint_with(&step("priceAPI.bulkUpdate", &json!({"discount_pct": 10})), policy);
    assert!(found(&r, BoundViolation).is_empty());
    // Another tool with the same argument name is not bound.
    let r = lint_with(&step("priceAPI.update", &json!({"discount_pct": 90})), policy);
    assert!(found(&r, BoundViolation).is_empty());
}

#[test]
fn approval_from_the_step_or_the_policy_once_per_step() {
    let plan = json!({"goal": "g", "steps": [
        {"id": "a", "tool": "payments.transfer", "requires_approval": true,
         "acceptance_criteria": ["ok"]},
        {"id": "b", "tool": "payments.refund", "acceptance_criteria": ["ok"]},
        {"id": "c", "tool": "file.read", "requires_approval": false},
    ]})
    .to_string();
    let r = lint_with(&plan, "approve_tools: [payments.*]");
    assert_eq!(
        found(&r, ApprovalRequired),
        [(Some(0), "/steps/0/requires_approval".to_owned()), (Some(1), "/steps/1/tool".to_owned())]
    );
    let all = findings(&r, ApprovalRequired);
    assert!(all[1].msg.contains("approve_tools `payments.*`"), "{}", all[1].msg);
    assert!(found(&lint_default(&plan), ApprovalRequired).len() == 1);
}

/// The UNVERIFIED_EFFECT findings of a one-step plan without assertions.
fn unverified(step: &Value) -> Vec<Finding> {
    let r = lint_default(&json!({"goal": "g", "steps": [step]}).to_string());
    findings(&r, UnverifiedEffect).into_iter().cloned().collect()
}

#[test]
fn unverified_effects() {
    for (step, words) in [
        (
            json!({"id": "w", "tool": "file.write", "parameters": {"path": "a", "content": "b"}}),
            "writes files",
        ),
        (
            json!({"id": "w", "tool": "shell.exec", "parameters": {"command": "make"}}),
            "runs a command",
        ),
        (
            json!({"id": "w", "tool": "http.request", "parameters": {"method": "post", "url": "http://x"}}),
            "HTTP POST",
        ),
        (json!({"id": "w", "tool": "priceAPI.bulkUpdate"}), "bulk"),
        (json!({"id": "w", "tool": "payments.transfer"}), "transfer"),
        (json!({"id": "w", "tool": "crm.set_owner"}), "set"),
        (json!({"id": "w", "description": "Deploy the site"}), "instruction"),
    ] {
        let got = unverified(&step);
        assert_eq!(got.len(), 1, "{step}");
        assert_eq!((got[0].step, got[0].path.as_str()), (Some(0), "/steps/0"));
        assert!(got[0].msg.contains(words) && got[0].msg.contains("assertion"), "{}", got[0].msg);
    }
}

#[test]
fn verified_or_harmless_steps_are_quiet() {
    for step in [
        json!({"id": "r", "tool": "file.read", "parameters": {"path": "a"}}),
        json!({"id": "r", "tool": "http.request", "parameters": {"url": "http://x"}}),
        json!({"id": "r", "tool": "http.request", "parameters": {"method": "HEAD", "url": "http://x"}}),
        json!({"id": "r", "tool": "crm.settings"}),
        json!({"id": "r", "tool": "crm.getPayload"}),
        json!({"id": "r", "tool": "db.query", "parameters": {"query": "SELECT 1"}}),
        json!({"id": "w", "tool": "file.write", "parameters": {"path": "a", "content": "b"},
               "assertions": [{"type": "file_contains", "path": "a", "pattern": "b"}]}),
        json!({"id": "w", "description": "Deploy", "acceptance_criteria": ["site is live"]}),
    ] {
        assert!(unverified(&step).is_empty(), "{step}");
    }
}
