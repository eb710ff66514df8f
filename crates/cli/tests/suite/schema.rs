//! `pev schema plan|lint|policy|result` print the derived JSON Schemas, and each schema
//! describes what pev really reads and writes: real documents (the examples' plans, a policy pev
//! accepts, `pev lint --format json`, `pev run --json` and `pev show --format json` results) are
//! valid against it, and documents broken in one place (an unknown status, a missing required
//! field) are not. Validation is offline (jsonschema, no remote references).

use serde_json::{Value, json};

use super::run_support::Ws;
use super::support::{dir_with, pev, repo_root, run};

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

/// The schema `kind`, compiled.
fn validator(kind: &str) -> jsonschema::Validator {
    jsonschema::options()
        .build(&schema(kind))
        .unwrap_or_else(|e| panic!("the {kind} schema compiles: {e}"))
}

#[track_caller]
fn assert_valid(validator: &jsonschema::Validator, doc: &Value, what: &str) {
    let errors: Vec<String> = validator.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{what} is not valid: {errors:?}\n{doc}");
}

/// `doc` is refused, and one of the errors says `needle`.
#[track_caller]
fn assert_invalid(validator: &jsonschema::Validator, doc: &Value, needle: &str) {
    let errors: Vec<String> = validator.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(!errors.is_empty(), "accepted a document that should fail on {needle}:\n{doc}");
    assert!(errors.iter().any(|e| e.contains(needle)), "no error mentions {needle}: {errors:?}");
}

fn read_json(rel: &str) -> Value {
    let path = repo_root().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn run_results_are_valid_against_the_result_schema_and_broken_ones_are_not() {
    let v = validator("result");
    let ws = Ws::new();
    ws.file("notes.txt", "hello\n");
    let plan = |pattern: &str| {
        json!({"goal": "Read the notes", "steps": [{"id": "read", "tool": "file.read",
            "parameters": {"path": "notes.txt"},
            "assertions": [{"type": "file_contains", "path": "notes.txt", "pattern": pattern}]}]})
    };
    let ok = ws.run(&plan("hello"), &[]);
    assert_eq!(ok.status(), "success", "{ok:?}");
    let failed = ws.run(&plan("goodbye"), &[]);
    assert_eq!(failed.status(), "failed", "{failed:?}");
    assert_eq!(failed.codes(), ["assertion_failed"]);
    for out in [&ok, &failed] {
        assert_valid(&v, out.result(), "the run.finished result");
        assert_valid(&v, &ws.show_json(&out.run_id()), "pev show --format json");
    }

    let mut broken = ok.result().clone();
    broken["status"] = json!("maybe");
    assert_invalid(&v, &broken, "\"maybe\"");
    let mut broken = ok.result().clone();
    broken.as_object_mut().expect("an object").remove("run_id");
    assert_invalid(&v, &broken, "\"run_id\" is a required property");
    let mut broken = ok.result().clone();
    broken["steps"][0]["status"] = json!("kinda");
    assert_invalid(&v, &broken, "\"kinda\"");
    let mut broken = failed.result().clone();
    broken["reasons"][0]["code"] = json!("vibes");
    assert_invalid(&v, &broken, "\"vibes\"");
    let mut broken = ok.result().clone();
    broken["steps"] = json!("read");
    assert_invalid(&v, &broken, "\"read\"");
}

#[test]
fn the_example_plans_are_valid_against_the_plan_schema_and_broken_ones_are_not() {
    let v = validator("plan");
    for rel in [
        "examples/dark-green/plan.json",
        "examples/failing-assertion/plan.json",
        "examples/discovery-only/plan.json",
        "examples/parallel/plan.json",
        "examples/lint/dark-green.json",
    ] {
        assert_valid(&v, &read_json(rel), rel);
    }
    let plan = read_json("examples/dark-green/plan.json");
    let mut broken = plan.clone();
    broken["steps"] = json!("read-css");
    assert_invalid(&v, &broken, "\"read-css\"");
    let mut broken = plan.clone();
    broken["steps"][0]["depends_on"] = json!(42);
    assert_invalid(&v, &broken, "42");
    let mut broken = plan;
    broken["steps"][1]["on_fail"] = json!("shrug");
    assert_invalid(&v, &broken, "\"shrug\"");
}

#[test]
fn lint_output_is_valid_against_the_lint_schema_and_broken_output_is_not() {
    let v = validator("lint");
    let root = repo_root();
    let refund = root.join("examples/lint/refund.yaml");
    let policy = root.join("examples/lint/policy.yaml");
    let dark = root.join("examples/lint/dark-green.json");
    let mut outputs = Vec::new();
    for args in [
        vec![refund.to_str().expect("utf-8"), "--policy", policy.to_str().expect("utf-8")],
        vec![dark.to_str().expect("utf-8")],
    ] {
        let mut args = args;
        args.splice(0..0, ["lint"]);
        args.extend(["--format", "json"]);
        let r = run(&mut pev(), &args);
        assert!(r.code == 0 || r.code == 1, "{r:?}");
        let doc = r.json();
        assert_valid(&v, &doc, &format!("pev {}", args.join(" ")));
        outputs.push(doc);
    }
    assert!(
        outputs.iter().any(|o| o["errors"].as_array().is_some_and(|e| !e.is_empty())),
        "one example has findings, so their shape is checked: {outputs:?}"
    );
    let finding = outputs.iter().find(|o| o["errors"][0].is_object()).expect("a finding");
    let mut broken = finding.clone();
    broken["status"] = json!("maybe");
    assert_invalid(&v, &broken, "\"maybe\"");
    let mut broken = finding.clone();
    broken["risk_score"] = json!("high");
    assert_invalid(&v, &broken, "\"high\"");
    let mut broken = finding.clone();
    broken["errors"][0]["code"] = json!("NOT_A_CODE");
    assert_invalid(&v, &broken, "\"NOT_A_CODE\"");
}

#[test]
fn a_policy_pev_accepts_is_valid_against_the_policy_schema_and_a_broken_one_is_not() {
    let v = validator("policy");
    // examples/lint/policy.yaml, as JSON (which the policy loader reads as well).
    let policy = json!({
        "allow_tools": ["db.query_ro", "payments.refund", "notify.*", "file.*", "shell.exec"],
        "approve_tools": ["payments.*"],
        "bounds": {"payments.refund.amount": [0.01, 500]},
        "deny_tokens_regex": ["sk_live_[0-9A-Za-z]+"],
        "risk_weights": {"SENSITIVE_DATA_EXPOSURE": 0.4},
        "fail_risk_threshold": 0.8
    });
    let text = serde_json::to_string_pretty(&policy).expect("serialises");
    let dir = dir_with(&[("policy.json", text.as_str())]);
    let refund = repo_root().join("examples/lint/refund.yaml");
    let policy_path = dir.path().join("policy.json");
    let r = run(
        &mut pev(),
        &[
            "lint",
            refund.to_str().expect("utf-8"),
            "--policy",
            policy_path.to_str().expect("utf-8"),
        ],
    );
    assert!(r.code == 0 || r.code == 1, "pev accepts the policy: {r:?}");
    assert_valid(&v, &policy, "the example policy");

    let mut broken = policy.clone();
    broken["alow_tools"] = json!(["x"]);
    assert_invalid(&v, &broken, "alow_tools");
    let mut broken = policy.clone();
    broken["fail_risk_threshold"] = json!("high");
    assert_invalid(&v, &broken, "\"high\"");
    let mut broken = policy;
    broken["allow_tools"] = json!("file.*");
    assert_invalid(&v, &broken, "\"file.*\"");
}
