//! Tests of `output_contains`, `exit_code_eq` and `command_succeeds` through `check`, and of
//! `check_postconditions`.

use pev_protocol::Plan;
use serde_json::json;

use crate::test_support::{Fixture, failed, failed_with, passed};
use crate::{CheckEnv, check_postconditions};

fn with_outputs() -> Fixture {
    let mut fx = Fixture::new();
    fx.outputs.insert(
        "s".into(),
        json!({"exit_code": 0, "stdout": "building\nall 12 tests passed\n", "stderr": "warning: slow\n",
               "timed_out": false, "stdout_truncated": false, "stderr_truncated": true}),
    );
    fx.outputs.insert(
        "read".into(),
        json!({"content": "body { background: #013220; }", "bytes": 29, "truncated": false}),
    );
    fx.outputs.insert("custom".into(), json!({"ok": true, "items": [1, 2]}));
    fx.outputs.insert("text".into(), json!("plain result\nsecond line"));
    fx.outputs.insert(
        "bad".into(),
        json!({"exit_code": 2, "stdout": "", "stderr": "one\ntwo\nthree\nfatal: four\n"}),
    );
    fx.outputs.insert("killed".into(), json!({"exit_code": null, "signal": 9, "timed_out": true}));
    fx
}

#[tokio::test]
async fn output_contains_searches_the_text_fields() {
    let fx = with_outputs();
    let r = fx.check(json!({"type": "output_contains", "pattern": "tests passed"})).await;
    assert_eq!(r.kind, "output_contains");
    passed(
        &r,
        "pattern 'tests passed' found in the stdout of step 's' at line 2: `all 12 tests passed`",
    );
    let r = fx.check(json!({"type": "output_contains", "pattern": "slow"})).await;
    passed(&r, "pattern 'slow' found in the stderr of step 's' at line 1: `warning: slow`");
    let r = fx
        .check(json!({"type": "output_contains", "pattern": "#0132[0-9]{2}", "regex": true, "step": "read"}))
        .await;
    passed(
        &r,
        "regex '#0132[0-9]{2}' found in the content of step 'read' at line 1: `body { background: #013220; }`",
    );
    let r = fx.check(json!({"type": "output_contains", "pattern": "second", "step": "text"})).await;
    passed(&r, "pattern 'second' found in the text of step 'text' at line 2: `second line`");
}

#[tokio::test]
async fn output_contains_failures_say_what_was_searched() {
    let fx = with_outputs();
    let r = fx.check(json!({"type": "output_contains", "pattern": "FAILED"})).await;
    failed(
        &r,
        "pattern 'FAILED' not found in the output of step 's' (stdout 29 bytes, stderr 14 bytes, \
         truncated at the cap)",
    );
    let r = fx.check(json!({"type": "output_contains", "pattern": "white", "step": "read"})).await;
    failed(&r, "pattern 'white' not found in the output of step 'read' (content 29 bytes)");
}

#[tokio::test]
async fn output_contains_falls_back_to_compact_json() {
    let fx = with_outputs();
    let r = fx
        .check(json!({"type": "output_contains", "pattern": "\"ok\":true", "step": "custom"}))
        .await;
    passed(&r, "pattern '\"ok\":true' found in the JSON output of step 'custom'");
    let r =
        fx.check(json!({"type": "output_contains", "pattern": "false", "step": "custom"})).await;
    failed(
        &r,
        "pattern 'false' not found in the JSON output of step 'custom' (25 bytes): `{\"ok\":true,\"items\":[1,2]}`",
    );
}

#[tokio::test]
async fn output_contains_without_an_output() {
    let fx = with_outputs();
    let r = fx.check(json!({"type": "output_contains", "pattern": "x", "step": "later"})).await;
    failed(&r, "step 'later' has no output (it is not done)");
    let r = fx.check(json!({"type": "output_contains", "pattern": "(", "regex": true})).await;
    failed_with(&r, &["invalid regex '('"]);
    // A postcondition has no step of its own.
    let assertion =
        serde_json::from_value(json!({"type": "output_contains", "pattern": "x"})).unwrap();
    let r = crate::check(&assertion, &fx.env(None)).await;
    failed(&r, "no step to look at: a postcondition's assertion must name its `step`");
}

#[tokio::test]
async fn exit_code_eq_pass_and_fail() {
    let fx = with_outputs();
    let r = fx.check(json!({"type": "exit_code_eq", "code": 0})).await;
    assert_eq!(r.kind, "exit_code_eq");
    passed(&r, "step 's' exited with code 0");
    let r = fx.check(json!({"type": "exit_code_eq", "code": 0, "step": "bad"})).await;
    failed(&r, "step 'bad' exited with code 2; expected 0; stderr: two | three | fatal: four");
    let r = fx.check(json!({"type": "exit_code_eq", "code": 2, "step": "bad"})).await;
    passed(&r, "step 'bad' exited with code 2");
    let r = fx.check(json!({"type": "exit_code_eq", "code": 0, "step": "killed"})).await;
    failed(&r, "step 'killed' has no exit code: it timed out and was killed; expected 0");
    let r = fx.check(json!({"type": "exit_code_eq", "code": 0, "step": "read"})).await;
    failed(&r, "the output of step 'read' has no exit_code (it did not run a process)");
    let r = fx.check(json!({"type": "exit_code_eq", "code": 0, "step": "nope"})).await;
    failed(&r, "step 'nope' has no output (it is not done)");
}

#[tokio::test]
async fn command_succeeds_runs_in_the_workspace() {
    let fx = Fixture::new();
    fx.write("site/style.css", "body {}");
    let r =
        fx.check(json!({"type": "command_succeeds", "command": "test -f site/style.css"})).await;
    assert_eq!(r.kind, "command_succeeds");
    assert!(r.passed, "{}", r.detail);
    assert!(r.detail.starts_with("`test -f site/style.css` exited 0 in "), "{}", r.detail);
    // The environment is scrubbed: HOME is the workspace.
    let r =
        fx.check(json!({"type": "command_succeeds", "command": "test \"$HOME\" = \"$PWD\""})).await;
    assert!(r.passed, "{}", r.detail);
}

#[tokio::test]
async fn command_succeeds_failures_quote_the_output() {
    let fx = Fixture::new();
    let r = fx
        .check(json!({"type": "command_succeeds", "command": "echo a >&2; echo b >&2; exit 3"}))
        .await;
    failed(&r, "`echo a >&2; echo b >&2; exit 3` exited with code 3; stderr: a | b");
    let r = fx.check(json!({"type": "command_succeeds", "command": "echo 1 failed; exit 1"})).await;
    failed(&r, "`echo 1 failed; exit 1` exited with code 1; stderr empty, stdout: 1 failed");
    let r = fx.check(json!({"type": "command_succeeds", "command": "exit 1"})).await;
    failed(&r, "`exit 1` exited with code 1; no output");
    let r =
        fx.check(json!({"type": "command_succeeds", "command": "cat /nonexistent-pev-file"})).await;
    failed_with(&r, &["exited with code 1", "No such file or directory"]);
}

#[tokio::test]
async fn command_succeeds_times_out() {
    let fx = Fixture::new();
    let started = std::time::Instant::now();
    let r = fx
        .check(json!({"type": "command_succeeds", "command": "sleep 20", "timeout_s": 0.3}))
        .await;
    failed(&r, "`sleep 20` timed out after 0.3 s and was killed; no output");
    assert!(started.elapsed().as_secs() < 10);
    for bad in [json!(-1.0), json!(0.0), json!(1e300)] {
        let r = fx
            .check(json!({"type": "command_succeeds", "command": "true", "timeout_s": bad}))
            .await;
        failed_with(&r, &["invalid timeout_s", "for `true`: give a positive number of seconds"]);
    }
}

fn plan(json: serde_json::Value) -> Plan {
    serde_json::from_value(json).unwrap()
}

#[tokio::test]
async fn postconditions_need_assertions_that_all_pass() {
    let fx = Fixture::new();
    fx.write("site/style.css", "body { background: #013220; }");
    let plan = plan(json!({
        "goal": "g",
        "steps": [],
        "postconditions": [
            "The page background is dark green",
            {"description": "CSS has the colour", "assertions": [
                {"type": "file_contains", "path": "site/style.css", "pattern": "#013220"},
                {"type": "file_exists", "path": "site/style.css"}
            ]},
            {"description": "old colour gone", "assertions": [
                {"type": "file_exists", "path": "site/style.css"},
                {"type": "file_not_contains", "path": "site/style.css", "pattern": "#013220"}
            ]},
            {"description": "no assertions here", "assertions": []}
        ]
    }));
    let results = check_postconditions(&plan, &fx.env(Some("s"))).await;
    assert_eq!(results.len(), 4);

    let (bare, checks) = &results[0];
    assert_eq!(bare.description, "The page background is dark green");
    assert!(!bare.satisfied);
    assert_eq!(bare.evidence, "no assertion: needs a judge");
    assert!(checks.is_empty());

    let (good, checks) = &results[1];
    assert!(good.satisfied, "{}", good.evidence);
    assert_eq!(checks.len(), 2);
    assert_eq!(
        good.evidence,
        "file_contains: pattern '#013220' found in site/style.css (29 bytes) at line 1: \
         `body { background: #013220; }`; file_exists: site/style.css exists (file, 29 bytes)"
    );

    let (bad, checks) = &results[2];
    assert!(!bad.satisfied);
    assert_eq!(checks.iter().filter(|c| c.passed).count(), 1);
    assert_eq!(
        bad.evidence,
        "1 of 2 assertions failed: file_not_contains: pattern '#013220' found in site/style.css \
         (29 bytes) at line 1: `body { background: #013220; }`"
    );

    let (empty, _) = &results[3];
    assert!(!empty.satisfied);
    assert_eq!(empty.evidence, "no assertion: needs a judge");
}

#[tokio::test]
async fn postconditions_ignore_the_step_of_the_env() {
    let mut fx = Fixture::new();
    fx.outputs.insert("s".into(), json!({"stdout": "hello"}));
    let plan = plan(json!({"goal": "g", "steps": [], "postconditions": [
        {"description": "said hello", "assertions": [{"type": "output_contains", "pattern": "hello"}]},
        {"description": "said hello in s", "assertions": [
            {"type": "output_contains", "pattern": "hello", "step": "s"}]}
    ]}));
    let env = CheckEnv { step: Some("s"), ..fx.env(None) };
    let results = check_postconditions(&plan, &env).await;
    assert!(!results[0].0.satisfied);
    assert_eq!(
        results[0].0.evidence,
        "1 of 1 assertions failed: output_contains: no step to look at: a postcondition's \
         assertion must name its `step`"
    );
    assert!(results[1].0.satisfied, "{}", results[1].0.evidence);
}
