//! References end to end: a step's output flows into a later step's arguments with its JSON type,
//! text interpolation is compact, and an unresolvable reference fails the step with a message
//! that names it (never an empty string).

use pev_protocol::run::{ReasonCode, RunStatus, StepStatus};
use serde_json::json;

use super::support::{Harness, codes, config, finished_error, plan, step};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_keep_their_json_type_through_references() {
    let h = Harness::new();
    let steps = json!([
        {"id": "src", "tool": "test.echo", "parameters": {
            "key": "src", "n": 42, "f": 1.5, "b": true, "nul": null, "s": "hi",
            "obj": {"x": [1, 2], "y": "z"}}},
        {"id": "dst", "tool": "test.echo", "parameters": {
            "key": "dst",
            "num": "${src.result.n}",
            "float": "${src.result.f}",
            "flag": "{{src.result.b}}",
            "nothing": "${src.result.nul}",
            "obj": "${src.result.obj}",
            "second": "${src.result.obj.x.1}",
            "nested": {"list": ["${src.result.obj.y}", "${src.result.n}"]},
            "text": "n=${src.result.n} s=${src.result.s} obj=${src.result.obj}",
            "whole": "${src.result}"}},
    ]);
    let result = h.run(plan(steps), config(2)).await;

    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    let out = step(&result, "dst").output.clone().unwrap();
    assert_eq!(out["num"], json!(42));
    assert!(out["num"].is_u64(), "a number stays a number: {}", out["num"]);
    assert_eq!(out["float"], json!(1.5));
    assert_eq!(out["flag"], json!(true));
    assert_eq!(out["nothing"], json!(null));
    assert_eq!(out["obj"], json!({"x": [1, 2], "y": "z"}));
    assert_eq!(out["second"], json!(2));
    assert_eq!(out["nested"], json!({"list": ["z", 42]}));
    assert_eq!(out["text"], json!(r#"n=42 s=hi obj={"x":[1,2],"y":"z"}"#));
    assert_eq!(out["whole"]["obj"]["x"], json!([1, 2]));
    assert_eq!(out["whole"]["key"], json!("src"));
    // The tool was called with the resolved arguments, as journaled.
    let stored = h.store().load_run(&result.run_id).unwrap();
    let call = stored.tool_calls.iter().find(|c| c.step_id == "dst").unwrap();
    assert_eq!(call.arguments["num"], json!(42));
    assert_eq!(call.arguments["obj"], json!({"x": [1, 2], "y": "z"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_path_fails_the_step_naming_the_reference() {
    let h = Harness::new();
    let steps = json!([
        {"id": "src", "tool": "test.echo", "parameters": {"key": "src", "n": 1}},
        {"id": "bad", "tool": "test.echo", "parameters": {"key": "bad", "v": "${src.result.missing}"},
         "on_fail": "continue"},
        {"id": "idx", "tool": "test.echo",
         "parameters": {"key": "idx", "deep": {"v": "${src.result.n.x}"}}, "on_fail": "continue"},
        {"id": "after", "tool": "test.echo", "parameters": {"key": "after", "v": "${bad.result}"}},
    ]);
    let result = h.run(plan(steps), config(2)).await;

    assert_eq!(step(&result, "bad").status, StepStatus::Failed);
    assert_eq!(h.probe.calls("bad"), 0, "the tool must not run with an unresolved argument");
    assert_eq!(step(&result, "after").status, StepStatus::Skipped);
    let events = h.observer.events();
    let error = finished_error(&events, "bad").unwrap();
    assert_eq!(
        error,
        "/parameters/v: reference ${src.result.missing}: `src.result` has no key `missing`; keys: \
         key, n"
    );
    let error = finished_error(&events, "idx").unwrap();
    assert!(error.starts_with("/parameters/deep/v: reference ${src.result.n.x}:"), "{error}");
    assert!(error.contains("has no `x`"), "{error}");
    // The journal keeps the message too.
    let stored = h.store().load_run(&result.run_id).unwrap();
    let bad = stored.steps.iter().find(|s| s.step_id == "bad").unwrap();
    assert!(bad.error.as_deref().unwrap().contains("${src.result.missing}"));
    assert_eq!(result.status, RunStatus::Partial);
    assert_eq!(
        codes(&result),
        vec![(ReasonCode::StepFailed, Some("bad")), (ReasonCode::StepFailed, Some("idx"))]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_to_an_unknown_step_fails_instead_of_running_empty() {
    let h = Harness::new();
    let steps = json!([
        {"id": "u", "tool": "test.echo", "parameters": {"key": "u", "v": "run ${nope.result.x}"}},
    ]);
    let result = h.run(plan(steps), config(1)).await;

    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(step(&result, "u").status, StepStatus::Failed);
    assert_eq!(h.probe.calls("u"), 0);
    let error = finished_error(&h.observer.events(), "u").unwrap();
    assert_eq!(
        error,
        "/parameters/v: reference ${nope.result.x}: step `nope` is unknown or not done"
    );
}

// Regression (fixed): why a step failed never reaches the run result. The engine keeps the error (a refused
// approval, a tool's message, an unresolvable reference) only in the step's journaled `error`
// and its `step.finished` event; `StepResult` has no error field and the engine does not add
// the error to the step's evidence, while `pev-verify`'s `step_failed` reason explains the
// failure with the step's last evidence. So the result of a failed run says
// "step 'u' (test.echo) failed" and nothing about why. Expected: the reason's message (or the
// step's evidence) carries the error, e.g. "... failed: /parameters/v: reference ...".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_failed_reason_says_why() {
    let h = Harness::new();
    let steps = json!([
        {"id": "t", "tool": "test.fail", "parameters": {"key": "t"}, "on_fail": "continue"},
        {"id": "u", "tool": "test.echo", "parameters": {"key": "u", "v": "${nope.result}"}},
    ]);
    let result = h.run(plan(steps), config(1)).await;
    let u = result.reasons.iter().find(|r| r.step.as_deref() == Some("u")).unwrap();
    let message = &u.message;
    assert!(message.contains("step `nope` is unknown or not done"), "{message}");
    let t = result.reasons.iter().find(|r| r.step.as_deref() == Some("t")).unwrap();
    assert!(t.message.contains("deliberate failure of `t`"), "{}", t.message);
}
