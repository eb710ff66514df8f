//! The engine's side of oracles: who may change a test. A model's plan cannot grant itself
//! leave (only the user's goal can, and a child run is judged by the user's goal, not the one
//! its parent gave it); the user's own plan can.

use pev_protocol::run::{RunStatus, StepStatus};
use serde_json::json;

use super::support::{Harness, config, step};

fn write_test_plan(goal: &str, may: bool) -> serde_json::Value {
    json!({
        "goal": goal,
        "steps": [{"id": "t", "tool": "file.write", "may_change_oracle": may,
                   "parameters": {"path": "tests/test_new.py", "content": "def test_x():\n    pass\n"},
                   "assertions": [{"type": "file_exists", "path": "tests/test_new.py"}]}]
    })
}

#[tokio::test]
async fn a_models_plan_needs_the_users_goal_to_change_a_test() {
    for (permit, may, plan_goal, done) in [
        // A model's plan whose goal (a delegated one, say) asks for tests, under a user's
        // goal that does not: refused.
        (Some("Make the failing test pass"), true, "Add a test for x", false),
        // The user's goal asks for it and the step says so: allowed.
        (Some("Add a test for x"), true, "Add a test for x", true),
        // The user's goal asks for tests, but the step neither says so nor is about tests.
        (Some("Add a test for x"), false, "Add a test for x", false),
        (None, true, "Fix the bug", false),
    ] {
        let h = Harness::new();
        h.write("tests/test_old.py", "def test_old():\n    pass\n");
        let mut cfg = config(1);
        cfg.plan_from_user = false;
        cfg.permit_goal = permit.map(str::to_owned);
        let result = h.run(write_test_plan(plan_goal, may), cfg).await;
        let status = step(&result, "t").status;
        assert_eq!(status == StepStatus::Done, done, "{permit:?} {may} {plan_goal}: {result:#?}");
        if !done {
            let error = step(&result, "t").error.clone().unwrap_or_default();
            assert!(error.contains("one of the checks this work is judged by"), "{error}");
            assert_ne!(result.status, RunStatus::Success);
        }
    }
}

#[tokio::test]
async fn the_users_own_plan_may_say_so_and_without_an_oracle_nothing_is_refused() {
    let h = Harness::new();
    h.write("tests/test_old.py", "x\n");
    let result = h.run(write_test_plan("Fix the bug", true), config(1)).await;
    assert_eq!(result.status, RunStatus::Success, "{result:#?}");
    let h = Harness::new();
    h.write("tests/test_old.py", "x\n");
    let mut cfg = config(1);
    cfg.oracle = None;
    let result = h.run(write_test_plan("Fix the bug", false), cfg).await;
    assert_eq!(result.status, RunStatus::Success, "{result:#?}");
    assert!(result.final_check.as_ref().is_some_and(|c| c.oracle.is_none()));
}

#[tokio::test]
async fn a_write_through_a_symlink_to_a_test_is_refused() {
    let h = Harness::new();
    h.write("tests/test_old.py", "def test_old():\n    assert 1 == 1\n");
    std::os::unix::fs::symlink("tests/test_old.py", h.root.join("link.py")).unwrap();
    let plan = json!({
        "goal": "Fix the bug",
        "steps": [{"id": "t", "tool": "file.write",
                   "parameters": {"path": "link.py", "content": "def test_old():\n    pass\n"}}]
    });
    let mut cfg = config(1);
    cfg.plan_from_user = false;
    let result = h.run(plan, cfg).await;
    let error = step(&result, "t").error.clone().unwrap_or_default();
    assert!(error.contains("tests/test_old.py is one of the checks"), "{error}");
    assert_eq!(h.read("tests/test_old.py"), "def test_old():\n    assert 1 == 1\n");
}
