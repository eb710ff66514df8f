//! Rego policies through regorus: `violations` become `POLICY_VIOLATION` findings with the
//! step, code and message the policy gave; `allow = false` denies the plan; a module that does
//! not parse stops the policy from loading; an evaluation error fails closed. plan-lint's own
//! finance example policy runs unchanged against plans written for it.

use std::path::{Path, PathBuf};

use pev_lint::policy::RegoSource;
use pev_lint::{CompiledPolicy, LintOptions, PolicyError, lint};
use pev_protocol::parse::{Format, parse_plan};
use pev_protocol::{Finding, LintCode, LintResult, LintStatus, Policy};

use super::support::findings;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rego").join(name)
}

fn compile(file: &str, source: &str) -> Result<CompiledPolicy, PolicyError> {
    let rego = vec![RegoSource { path: PathBuf::from(file), source: source.to_owned() }];
    CompiledPolicy::from_parts(Policy::default(), Path::new("test-policy.yaml"), rego)
}

fn run(plan: &str, policy: &CompiledPolicy) -> LintResult {
    let parsed = parse_plan(plan, Format::sniff(plan)).expect("test plan must parse");
    lint(&parsed, policy, LintOptions::default())
}

fn violations(result: &LintResult) -> Vec<&Finding> {
    findings(result, LintCode::PolicyViolation)
}

/// A plan-lint-style module: a set of objects, steps by index, reading `args`.
const NO_DELETE: &str = r#"
package pev.guard

violations contains v if {
    some i
    step := input.steps[i]
    step.tool == "db.exec"
    contains(lower(step.args.sql), "delete")
    v := {"code": "NO_DELETE", "msg": "deletes are not allowed", "step": i}
}
"#;

const TWO_STEPS: &str = r#"{
  "goal": "Tidy the orders table",
  "steps": [
    {"id": "count", "tool": "db.query_ro", "args": {"sql": "SELECT count(*) FROM orders"}},
    {"id": "purge", "title": "Purge old orders", "tool": "db.exec", "depends_on": ["count"],
     "args": {"sql": "DELETE FROM orders WHERE year < 2020"}}
  ]
}"#;

#[test]
fn a_violation_names_its_code_step_and_message() {
    let policy = compile("guard.rego", NO_DELETE).expect("policy loads");
    let result = run(TWO_STEPS, &policy);
    let found = violations(&result);
    assert_eq!(found.len(), 1, "{result:?}");
    let f = found[0];
    assert_eq!(f.step, Some(1));
    assert_eq!(f.step_id.as_deref(), Some("purge"));
    assert_eq!(f.path, "/steps/1");
    assert_eq!(f.msg, "guard.rego: [NO_DELETE] deletes are not allowed");
    assert!(result.errors.iter().any(|e| e.code == LintCode::PolicyViolation));
    assert_eq!(result.status, LintStatus::Error);
}

#[test]
fn a_near_miss_passes_the_same_policy() {
    let policy = compile("guard.rego", NO_DELETE).expect("policy loads");
    let plan = TWO_STEPS.replace("DELETE FROM orders WHERE year < 2020", "VACUUM orders");
    let result = run(&plan, &policy);
    assert!(violations(&result).is_empty(), "{result:?}");
}

#[test]
fn parameters_are_visible_under_their_canonical_name_too() {
    let module = NO_DELETE.replace("step.args.sql", "step.parameters.sql");
    let policy = compile("guard.rego", &module).expect("policy loads");
    let plan = TWO_STEPS.replace("\"args\"", "\"parameters\"");
    assert_eq!(violations(&run(&plan, &policy)).len(), 1);
}

#[test]
fn an_array_of_violations_with_step_ids_and_message_keys() {
    let module = r#"
package checks
violations := [v |
    some step in input.steps
    not step.assertions
    step.tool == "file.write"
    v := {"message": sprintf("%s writes without an assertion", [step.id]), "step": step.id}
]
"#;
    let policy = compile("checks.rego", module).expect("policy loads");
    let plan = r#"{"goal": "g", "steps": [
        {"id": "read", "tool": "file.read", "parameters": {"path": "a.txt"}},
        {"id": "write", "tool": "file.write", "parameters": {"path": "b.txt", "content": "x"}}
    ]}"#;
    let result = run(plan, &policy);
    let found = violations(&result);
    assert_eq!(found.len(), 1, "{result:?}");
    assert_eq!((found[0].step, found[0].path.as_str()), (Some(1), "/steps/1"));
    assert_eq!(found[0].msg, "checks.rego: write writes without an assertion");
}

#[test]
fn plan_level_violations_and_unknown_steps_have_no_step() {
    let module = r#"
package plan
violations contains {"msg": "too few postconditions"} if count(object.get(input, "postconditions", [])) == 0
violations contains {"msg": "bad step", "step": 42} if true
"#;
    let policy = compile("plan.rego", module).expect("policy loads");
    let result = run(r#"{"goal": "g", "steps": [{"id": "a"}]}"#, &policy);
    let mut msgs: Vec<_> =
        violations(&result).iter().map(|f| (f.step, f.path.clone(), f.msg.clone())).collect();
    msgs.sort();
    assert_eq!(
        msgs,
        vec![
            (None, String::new(), "plan.rego: bad step (step 42 is not in the plan)".to_owned()),
            (None, String::new(), "plan.rego: too few postconditions".to_owned()),
        ]
    );
}

#[test]
fn a_whole_float_index_names_its_step() {
    let module = "package f\nviolations contains {\"msg\": \"m\", \"step\": 1.5 - 0.5} if true\n";
    let policy = compile("f.rego", module).expect("policy loads");
    let result = run(r#"{"goal": "g", "steps": [{"id": "a"}, {"id": "b"}]}"#, &policy);
    let found = violations(&result);
    assert_eq!(found.len(), 1, "{result:?}");
    assert_eq!((found[0].step, found[0].step_id.as_deref()), (Some(1), Some("b")));
}

#[test]
fn modules_sharing_a_package_are_evaluated_once_and_both_named() {
    let rego = vec![
        RegoSource {
            path: PathBuf::from("rules/a.rego"),
            source: "package shared\nviolations contains {\"msg\": \"from a\"} if true\n".into(),
        },
        RegoSource {
            path: PathBuf::from("rules/b.rego"),
            source: "package shared\nviolations contains {\"msg\": \"from b\"} if true\n".into(),
        },
        RegoSource {
            path: PathBuf::from("rules/quiet.rego"),
            source: "package quiet\nx := 1\n".into(),
        },
    ];
    let policy = CompiledPolicy::from_parts(Policy::default(), Path::new("p.yaml"), rego)
        .expect("policy loads");
    let result = run(r#"{"goal": "g", "steps": [{"id": "a"}]}"#, &policy);
    let mut msgs: Vec<String> = violations(&result).iter().map(|f| f.msg.clone()).collect();
    msgs.sort();
    assert_eq!(msgs, ["a.rego, b.rego: from a", "a.rego, b.rego: from b"]);
}

/// `package a["b.c"]` and `package a.b.c` are different documents: each module's violations
/// are read from its own package, and a quoted component that is not an identifier is queried
/// as a string key.
#[test]
fn a_quoted_package_component_is_its_own_document() {
    let rego = vec![
        RegoSource {
            path: PathBuf::from("quoted.rego"),
            source: "package team[\"b.c\"]\nviolations contains {\"msg\": \"quoted\"} if true\n"
                .into(),
        },
        RegoSource {
            path: PathBuf::from("dotted.rego"),
            source: "package team.b.c\nviolations contains {\"msg\": \"dotted\"} if true\n".into(),
        },
        RegoSource {
            path: PathBuf::from("v1.rego"),
            source:
                "package team[\"1.0\"].x\nviolations contains {\"msg\": \"versioned\"} if true\n"
                    .into(),
        },
    ];
    let policy = CompiledPolicy::from_parts(Policy::default(), Path::new("p.yaml"), rego)
        .expect("policy loads");
    let result = run(r#"{"goal": "g", "steps": [{"id": "a"}]}"#, &policy);
    let mut msgs: Vec<String> = violations(&result).iter().map(|f| f.msg.clone()).collect();
    msgs.sort();
    assert_eq!(msgs, ["dotted.rego: dotted", "quoted.rego: quoted", "v1.rego: versioned"]);
}

#[test]
fn allow_false_without_violations_denies_the_plan() {
    let module = r#"
package gate
default allow := false
allow if every step in input.steps { step.tool != "shell.exec" }
"#;
    let policy = compile("gate.rego", module).expect("policy loads");
    let denied = run(
        r#"{"goal": "g", "steps": [{"id": "x", "tool": "shell.exec", "parameters": {"argv": ["ls"]}}]}"#,
        &policy,
    );
    let found = violations(&denied);
    assert_eq!(found.len(), 1, "{denied:?}");
    assert_eq!((found[0].step, found[0].path.as_str()), (None, ""));
    assert_eq!(found[0].msg, "gate.rego: policy denies the plan");

    let allowed = run(
        r#"{"goal": "g", "steps": [{"id": "x", "tool": "file.read", "parameters": {"path": "a"}}]}"#,
        &policy,
    );
    assert!(violations(&allowed).is_empty(), "{allowed:?}");
}

#[test]
fn older_v0_syntax_is_accepted() {
    let module = r#"
package legacy
deny[msg] {
    step := input.steps[_]
    step.tool == "shell.exec"
    msg := sprintf("no shell in %v", [step.id])
}
violations = [{"msg": m} | deny[m]]
"#;
    let policy = compile("legacy.rego", module).expect("a v0 module loads");
    let result = run(r#"{"goal": "g", "steps": [{"id": "sh", "tool": "shell.exec"}]}"#, &policy);
    let found = violations(&result);
    assert_eq!(found.len(), 1, "{result:?}");
    assert_eq!(found[0].msg, "legacy.rego: no shell in sh");
}

#[test]
fn a_syntax_error_fails_the_policy_load_and_names_the_file() {
    let err = CompiledPolicy::load(&fixture("broken.policy.yaml")).expect_err("must not load");
    assert!(matches!(err, PolicyError::Rego { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("broken.rego"), "{text}");
    assert!(text.contains(":4:"), "line of the error: {text}");
    assert!(!text.contains('\n'), "one line: {text}");
}

#[test]
fn a_call_to_an_unknown_function_fails_closed_at_lint_time() {
    // regorus resolves calls when a body runs, so this surfaces on the first plan that reaches it.
    let module = "package p\nviolations contains x if { some s in input.steps; x := no_such_function(s.id) }\n";
    let policy = compile("unknown_fn.rego", module).expect("parses");
    let result = run(r#"{"goal": "g", "steps": [{"id": "a"}]}"#, &policy);
    let found = violations(&result);
    assert_eq!(found.len(), 1, "{result:?}");
    assert!(
        found[0].msg.starts_with("unknown_fn.rego: the policy failed to evaluate: "),
        "{}",
        found[0].msg
    );
    assert!(found[0].msg.contains("no_such_function"), "{}", found[0].msg);
}

#[test]
fn an_evaluation_error_fails_closed() {
    // Two complete definitions giving different values: a conflict only the input reveals.
    let module = r#"
package conflict
violations := [{"msg": "one"}] if count(input.steps) > 0
violations := [{"msg": "two"}] if count(input.steps) > 0
"#;
    let policy = compile("conflict.rego", module).expect("policy loads");
    let result = run(r#"{"goal": "g", "steps": [{"id": "a"}]}"#, &policy);
    let found = violations(&result);
    assert_eq!(found.len(), 1, "{result:?}");
    assert!(
        found[0].msg.starts_with("conflict.rego: the policy failed to evaluate: "),
        "{}",
        found[0].msg
    );
    assert_eq!(result.status, LintStatus::Error);
}

#[test]
fn a_bare_rego_file_is_a_policy() {
    let policy = CompiledPolicy::load(&fixture("finance_policy.rego")).expect("loads");
    let plan = std::fs::read_to_string(fixture("finance_excessive.json")).expect("fixture");
    assert_eq!(violations(&run(&plan, &policy)).len(), 2);
}

fn finance() -> CompiledPolicy {
    CompiledPolicy::load(&fixture("finance.policy.yaml")).expect("plan-lint's finance policy loads")
}

fn finance_run(plan_file: &str) -> LintResult {
    let plan = std::fs::read_to_string(fixture(plan_file)).expect("fixture");
    run(&plan, &finance())
}

#[test]
fn plan_lint_finance_policy_flags_a_large_transfer_and_sql_injection() {
    let result = finance_run("finance_excessive.json");
    let mut found: Vec<_> =
        violations(&result).iter().map(|f| (f.step, f.step_id.clone(), f.msg.clone())).collect();
    found.sort();
    assert_eq!(found.len(), 2, "{result:?}");
    assert_eq!(found[0].0, Some(1));
    assert_eq!(found[0].1.as_deref(), Some("pay"));
    assert!(
        found[0].2.starts_with("finance_policy.rego: [EXCESSIVE_AMOUNT] Transaction amount 50000"),
        "{}",
        found[0].2
    );
    assert_eq!(found[1].0, Some(2));
    assert_eq!(
        found[1].2,
        "finance_policy.rego: [SQL_INJECTION] Potential SQL injection pattern detected"
    );
    assert_eq!(result.status, LintStatus::Error);
}

#[test]
fn plan_lint_finance_policy_passes_a_modest_transfer() {
    let result = finance_run("finance_ok.json");
    assert!(violations(&result).is_empty(), "{result:?}");
}

#[test]
fn plan_lint_finance_policy_denies_an_unlisted_tool() {
    let result = finance_run("finance_unlisted_tool.json");
    let found = violations(&result);
    assert_eq!(found.len(), 1, "{result:?}");
    assert_eq!(found[0].msg, "finance_policy.rego: policy denies the plan");
}

#[test]
fn recursive_rules_fail_closed() {
    let module = "package r\na if b\nb if a\nviolations contains {\"msg\": \"x\"} if a\n";
    let policy = compile("recursive.rego", module).expect("parses");
    let result = run(r#"{"goal": "g", "steps": [{"id": "a"}]}"#, &policy);
    let found = violations(&result);
    assert_eq!(found.len(), 1, "{result:?}");
    assert!(
        found[0].msg.starts_with("recursive.rego: the policy failed to evaluate: "),
        "{}",
        found[0].msg
    );
}
