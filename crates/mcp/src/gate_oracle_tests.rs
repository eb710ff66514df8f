//! The gate and the run's oracle (issue 27): a client that changes a test is refused with the
//! file's diff, and the pristine re-check. Uses the helpers of `gate_tests.rs`.

use super::*;

/// A client that changes a test: the verdict says `oracle_changed`, the stop is refused with the
/// file's diff; the same change in a workspace too large to snapshot is not judged as a test's
/// (the snapshot knows nothing), and the verdict says so instead.
#[test]
fn a_changed_test_is_refused_with_its_diff() {
    let env = Env::new();
    std::fs::create_dir_all(env.ws.path().join("tests")).unwrap();
    env.write("tests/test_hello.py", "assert open('hello.txt').read() == 'hi\\n'\n");
    let _sessions = honest(&env, "s-oracle");
    env.write("tests/test_hello.py", "assert True\n");
    let result = env.status("s-oracle");
    assert!(codes(&result).contains(&"oracle_changed".to_owned()), "{:?}", codes(&result));
    let changed = &result.final_check.as_ref().unwrap().oracle.as_ref().unwrap().changed;
    assert_eq!(changed[0].path, "tests/test_hello.py");
    let out = env.stop("s-oracle", &GateOptions::default()).stdout.unwrap_or_default();
    assert_eq!(out["decision"], "block", "{out}");
    let reason = out["reason"].as_str().unwrap();
    assert!(reason.contains("tests/test_hello.py was changed"), "{reason}");
    assert!(reason.contains("+assert True"), "the diff: {reason}");
    assert!(reason.contains("-assert open('hello.txt')"), "the diff: {reason}");
}

#[test]
fn with_diff_adds_the_diff_to_an_oracle_reason_only() {
    use pev_protocol::oracle::{OracleChange, OracleChangeKind, OracleCheck};
    use pev_protocol::run::{FinalCheck, Reason, ReasonCode, RunResult};
    let change = |path: &str, diff: &str| OracleChange {
        path: path.to_owned(),
        change: OracleChangeKind::Modified,
        why: "a test".to_owned(),
        allowed: false,
        diff: diff.to_owned(),
    };
    let result = RunResult {
        final_check: Some(FinalCheck {
            oracle: Some(OracleCheck {
                changed: vec![change("tests/a.py", "@@ -1 +1 @@\n-x\n+y\n"), change("tests/b.py", "")],
                ..OracleCheck::default()
            }),
            ..FinalCheck::default()
        }),
        ..serde_json::from_value(json!({"run_id": "r", "goal": "g", "status": "partial",
            "reasons": [], "goal_actions_executed": true, "steps": [], "postconditions": [],
            "file_mutations": [], "warnings": [], "duration_ms": 0,
            "usage": {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "tool_calls": 0}}))
        .unwrap()
    };
    let reason = |code, message: &str| Reason { code, step: None, message: message.to_owned() };
    let a = reason(ReasonCode::OracleChanged, "tests/a.py was changed, but …");
    assert_eq!(with_diff(&a, &result), "tests/a.py was changed, but …\n@@ -1 +1 @@\n-x\n+y");
    let b = reason(ReasonCode::OracleChanged, "tests/b.py was deleted, but …");
    assert_eq!(with_diff(&b, &result), "tests/b.py was deleted, but …", "no diff to add");
    let other = reason(ReasonCode::StepsNotRun, "tests/a.py was changed, but …");
    assert_eq!(with_diff(&other, &result), "tests/a.py was changed, but …");
}

/// A workspace too large to snapshot: nothing is known of what changed, so nothing is judged as
/// a test's change (the verdict says why it knows nothing instead).
#[test]
fn a_workspace_too_large_to_snapshot_has_no_oracle_verdict() {
    let env = Env::new();
    std::fs::create_dir_all(env.ws.path().join("tests")).unwrap();
    std::fs::create_dir_all(env.ws.path().join("data")).unwrap();
    for i in 0..=pev_engine::inventory::MAX_FILES {
        std::fs::write(env.ws.path().join(format!("data/{i}.txt")), "x").unwrap();
    }
    env.write("tests/test_hello.py", "assert True\n");
    let _sessions = honest(&env, "s-big");
    env.write("tests/test_hello.py", "assert False\n");
    let result = env.status("s-big");
    assert!(result.final_check.as_ref().is_some_and(|c| c.oracle.is_none()), "{result:#?}");
    assert!(!codes(&result).contains(&"oracle_changed".to_owned()));
}
