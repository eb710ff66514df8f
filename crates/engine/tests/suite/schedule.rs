//! The scheduler: parallelism up to `jobs`, dependencies (declared and implied by references)
//! never overlapping, and what each `on_fail` does to the rest of the run.

use std::time::{Duration, Instant};

use pev_protocol::event::EventBody;
use pev_protocol::run::{ReasonCode, RunStatus, StepStatus};
use serde_json::{Value, json};

use super::support::{
    Harness, codes, config, finished_error, plan, reason_message, step, warnings,
};

fn sleep(id: &str, ms: u64) -> Value {
    json!({"id": id, "tool": "test.sleep", "parameters": {"key": id, "ms": ms}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_at_most_jobs_steps_at_once_and_really_overlaps() {
    let h = Harness::new();
    let steps: Vec<Value> = (0..8).map(|i| sleep(&format!("s{i}"), 100)).collect();
    let started = Instant::now();
    let result = h.run(plan(Value::Array(steps)), config(3)).await;
    let elapsed = started.elapsed();

    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert_eq!(h.probe.max_running(), 3, "jobs = 3 must be the observed maximum");
    // 8 steps of 100 ms, 3 at a time: three waves (~300 ms); one at a time would take 800 ms.
    assert!(elapsed < Duration::from_millis(700), "took {elapsed:?}: steps did not overlap");
    // The first three start together, before any of them ends.
    let first: Vec<_> = (0..3).map(|i| h.probe.span(&format!("s{i}"))).collect();
    let latest_start = first.iter().map(|s| s.start).max().unwrap();
    let earliest_end = first.iter().map(|s| s.end).min().unwrap();
    assert!(latest_start < earliest_end, "s0..s2 should run at the same time");
    assert_eq!(result.usage.tool_calls, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_one_runs_steps_one_after_another_in_plan_order() {
    let h = Harness::new();
    let steps = json!([sleep("a", 30), sleep("b", 30), sleep("c", 30)]);
    let result = h.run(plan(steps), config(1)).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert_eq!(h.probe.max_running(), 1);
    let (a, b, c) = (h.probe.span("a"), h.probe.span("b"), h.probe.span("c"));
    assert!(b.start >= a.end && c.start >= b.end, "plan order, no overlap");
}

fn nap(id: &str, ms: u64) -> Value {
    json!({"id": id, "tool": "test.nap", "parameters": {"key": id, "ms": ms}})
}

/// Steps that only read or write files in pev (here `test.nap`, which says so) run up to
/// `light_jobs` at once while no other step runs; a command waits until fewer than `jobs` run,
/// and beside it `jobs` bounds every step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_steps_run_wider_than_jobs_but_never_beside_more_than_jobs_steps() {
    let h = Harness::new();
    let wide = pev_engine::EngineConfig { light_jobs: 4, ..config(1) };
    let steps: Vec<Value> = (0..6).map(|i| nap(&format!("n{i}"), 100)).collect();
    let result = h.run(plan(Value::Array(steps)), wide.clone()).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert_eq!(h.probe.max_running(), 4, "light_jobs = 4 must be the observed maximum");

    let h = Harness::new();
    let mut steps: Vec<Value> = (0..3).map(|i| nap(&format!("a{i}"), 150)).collect();
    steps.push(sleep("cmd", 150));
    steps.extend((0..3).map(|i| nap(&format!("b{i}"), 150)));
    let two = pev_engine::EngineConfig { jobs: 2, ..wide };
    let result = h.run(plan(Value::Array(steps)), two).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    // Beside the command at most one step at any moment (jobs = 2): the spans that overlap it,
    // clipped to it, do not overlap each other.
    let cmd = h.probe.span("cmd");
    let beside: Vec<(&str, Instant, Instant)> = ["a0", "a1", "a2", "b0", "b1", "b2"]
        .into_iter()
        .map(|k| (k, h.probe.span(k)))
        .filter(|(_, s)| s.start < cmd.end && cmd.start < s.end)
        .map(|(k, s)| (k, s.start.max(cmd.start), s.end.min(cmd.end)))
        .collect();
    for (i, (x, x_start, x_end)) in beside.iter().enumerate() {
        for (y, y_start, y_end) in &beside[i + 1..] {
            assert!(
                x_end <= y_start || y_end <= x_start,
                "{x} and {y} both ran beside the command: jobs = 2 allows one"
            );
        }
    }
    let a_start = ["a0", "a1", "a2"].map(|k| h.probe.span(k).start).into_iter().max().unwrap();
    let a_end = ["a0", "a1", "a2"].map(|k| h.probe.span(k).end).into_iter().min().unwrap();
    assert!(a_start < a_end, "a0..a2 ran together, wider than jobs = 2");
    // In order: the waiting command kept b0..b2 from overtaking it (with room for four light
    // steps, b0 would have started beside a0..a2).
    for b in ["b0", "b1", "b2"] {
        assert!(h.probe.span(b).start >= a_end, "{b} overtook the command waiting before it");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependents_start_after_what_they_wait_for_including_reference_edges() {
    let h = Harness::new();
    let steps = json!([
        // `late` is listed first but waits for `a` through a reference only.
        {"id": "late", "tool": "test.sleep", "parameters": {"key": "late", "ms": "${a.result.ms}"}},
        sleep("a", 120),
        {"id": "b", "tool": "test.sleep", "parameters": {"key": "b", "ms": 60}, "depends_on": ["a"]},
        {"id": "c", "tool": "test.sleep", "parameters": {"key": "c", "ms": 40},
         "depends_on": ["b"]},
        // Waits for `b` (declared) and `late` (reference).
        {"id": "d", "tool": "test.echo", "parameters": {"key": "d", "x": "${late.result.ms}"},
         "depends_on": ["b"]},
        sleep("free", 100),
    ]);
    let result = h.run(plan(steps), config(4)).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    let p = &h.probe;
    assert!(p.span("late").start >= p.span("a").end, "reference edge late -> a");
    assert!(p.span("b").start >= p.span("a").end, "depends_on b -> a");
    assert!(p.span("c").start >= p.span("b").end, "depends_on c -> b");
    // The independent step overlaps `a`.
    assert!(p.span("free").start < p.span("a").end, "independent step should not wait");
    // `late` got `a`'s output number as its number of milliseconds.
    assert_eq!(step(&result, "late").output, Some(json!({"key": "late", "ms": 120})));
    assert_eq!(step(&result, "d").output.as_ref().unwrap()["x"], json!(120));
    // d's tool call came after both of its inputs finished.
    let events = h.observer.events();
    let pos = |want: &str, finished: bool| {
        events
            .iter()
            .position(|e| match &e.body {
                EventBody::StepFinished { step, .. } if finished => step == want,
                EventBody::StepStarted { step, .. } if !finished => step == want,
                _ => false,
            })
            .unwrap()
    };
    assert!(pos("d", false) > pos("late", true) && pos("d", false) > pos("b", true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_lets_running_steps_finish_and_starts_nothing_new() {
    let h = Harness::new();
    let steps = json!([
        sleep("slow", 150),
        {"id": "boom", "tool": "test.fail", "parameters": {"key": "boom"}},
        sleep("later1", 10),
        {"id": "later2", "tool": "test.echo", "parameters": {"key": "later2"}},
        {"id": "after", "tool": "test.echo", "parameters": {"key": "after"}, "depends_on": ["boom"]},
    ]);
    let result = h.run(plan(steps), config(2)).await;

    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(step(&result, "slow").status, StepStatus::Done, "the running sibling finishes");
    assert_eq!(step(&result, "boom").status, StepStatus::Failed);
    for id in ["later1", "later2", "after"] {
        assert_eq!(step(&result, id).status, StepStatus::Pending, "{id}");
        assert_eq!(step(&result, id).attempts, 0, "{id}");
    }
    assert!(!h.probe.has_span("later1") && h.probe.calls("later2") == 0);
    assert_eq!(
        codes(&result),
        vec![(ReasonCode::StepFailed, Some("boom")), (ReasonCode::StepsNotRun, None)]
    );
    assert_eq!(
        reason_message(&result, ReasonCode::StepsNotRun),
        "3 steps did not run: 'later1', 'later2', 'after'"
    );
    let events = h.observer.events();
    assert_eq!(
        finished_error(&events, "boom").as_deref(),
        Some("test.fail failed: deliberate failure of `boom`")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_skips_dependents_transitively_and_lets_independent_branches_finish() {
    let h = Harness::new();
    let steps = json!([
        {"id": "a", "tool": "test.fail", "parameters": {"key": "a"}, "on_fail": "continue"},
        {"id": "b", "tool": "test.echo", "parameters": {"key": "b"}, "depends_on": ["a"]},
        // Waits for `a` only through `b`, and for `b` only through a reference.
        {"id": "c", "tool": "test.echo", "parameters": {"key": "c", "v": "${b.result.key}"}},
        sleep("x", 50),
        {"id": "y", "tool": "test.echo", "parameters": {"key": "y", "v": "${x.result.ms}"}},
    ]);
    let result = h.run(plan(steps), config(2)).await;

    assert_eq!(result.status, RunStatus::Partial, "{:?}", result.reasons);
    assert_eq!(step(&result, "a").status, StepStatus::Failed);
    for id in ["b", "c"] {
        assert_eq!(step(&result, id).status, StepStatus::Skipped, "{id}");
        assert_eq!(h.probe.calls(id), 0, "{id} must not run");
    }
    assert_eq!(step(&result, "x").status, StepStatus::Done);
    assert_eq!(step(&result, "y").status, StepStatus::Done);
    assert_eq!(step(&result, "y").output.as_ref().unwrap()["v"], json!(50));
    // Skipped steps are not themselves a reason.
    assert_eq!(codes(&result), vec![(ReasonCode::StepFailed, Some("a"))]);
    let events = h.observer.events();
    for id in ["b", "c"] {
        assert_eq!(
            finished_error(&events, id).as_deref(),
            Some("skipped: it waits for `a`, which failed (on_fail: continue)"),
            "{id}"
        );
    }
    let stored = h.store().load_run(&result.run_id).unwrap();
    let c = stored.steps.iter().find(|s| s.step_id == "c").unwrap();
    assert_eq!(c.status, StepStatus::Skipped);
    assert!(c.error.as_deref().unwrap().contains("waits for `a`"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_succeeds_on_the_third_attempt_with_warnings() {
    let h = Harness::new();
    let steps = json!([
        {"id": "f", "tool": "test.flaky", "parameters": {"key": "f", "fail_times": 2},
         "on_fail": "retry", "max_attempts": 3},
    ]);
    let result = h.run(plan(steps), config(2)).await;

    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    let f = step(&result, "f");
    assert_eq!(f.status, StepStatus::Done);
    assert_eq!(f.attempts, 3);
    assert_eq!(f.output, Some(json!({"key": "f", "calls": 3})));
    assert_eq!(h.probe.calls("f"), 3);
    let events = h.observer.events();
    assert_eq!(
        warnings(&events),
        [
            "step `f`: attempt 1 of 3 failed: test.flaky failed: flaky failure 1; trying again",
            "step `f`: attempt 2 of 3 failed: test.flaky failed: flaky failure 2; trying again",
        ]
    );
    let attempts: Vec<u32> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::StepStarted { step, attempt } if step == "f" => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert_eq!(result.usage.tool_calls, 3);
    let stored = h.store().load_run(&result.run_id).unwrap();
    let calls: Vec<(u32, &str)> =
        stored.tool_calls.iter().map(|c| (c.attempt, c.status.as_str())).collect();
    assert_eq!(calls, [(1, "failed"), (2, "failed"), (3, "finished")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_fails_after_max_attempts_and_stops_like_abort() {
    let h = Harness::new();
    let steps = json!([
        {"id": "f", "tool": "test.flaky", "parameters": {"key": "f", "fail_times": 10},
         "on_fail": "retry", "max_attempts": 3},
        {"id": "next", "tool": "test.echo", "parameters": {"key": "next"}, "depends_on": ["f"]},
    ]);
    let result = h.run(plan(steps), config(2)).await;

    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(step(&result, "f").status, StepStatus::Failed);
    assert_eq!(step(&result, "f").attempts, 3);
    assert_eq!(h.probe.calls("f"), 3, "no fourth attempt");
    assert_eq!(step(&result, "next").status, StepStatus::Pending);
    assert_eq!(
        codes(&result),
        vec![(ReasonCode::StepFailed, Some("f")), (ReasonCode::StepsNotRun, None)]
    );
    assert!(reason_message(&result, ReasonCode::StepFailed).contains("after 3 attempts"));
    assert_eq!(warnings(&h.observer.events()).len(), 2, "a warning before each retry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_without_max_attempts_gets_three_and_other_steps_get_one() {
    let h = Harness::new();
    let steps = json!([
        {"id": "r", "tool": "test.flaky", "parameters": {"key": "r", "fail_times": 10},
         "on_fail": "retry"},
        {"id": "c", "tool": "test.flaky", "parameters": {"key": "c", "fail_times": 10},
         "on_fail": "continue"},
    ]);
    let result = h.run(plan(steps), config(2)).await;
    assert_eq!(h.probe.calls("r"), 3);
    assert_eq!(h.probe.calls("c"), 1);
    assert_eq!(step(&result, "c").attempts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replan_stops_like_abort_with_a_warning() {
    let h = Harness::new();
    let steps = json!([
        {"id": "p", "tool": "test.fail", "parameters": {"key": "p"}, "on_fail": "replan"},
        {"id": "q", "tool": "test.echo", "parameters": {"key": "q"}},
    ]);
    let result = h.run(plan(steps), config(1)).await;

    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(step(&result, "p").status, StepStatus::Failed);
    assert_eq!(step(&result, "q").status, StepStatus::Pending);
    assert_eq!(h.probe.calls("q"), 0);
    assert_eq!(
        codes(&result),
        vec![(ReasonCode::StepFailed, Some("p")), (ReasonCode::StepsNotRun, None)]
    );
    assert_eq!(result.warnings.len(), 1, "{:?}", result.warnings);
    assert!(result.warnings[0].contains("replan needs a planner model"));
    assert!(warnings(&h.observer.events())[0].contains("the run stops as for abort"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_does_not_hang_its_steps_just_do_not_run() {
    let h = Harness::new();
    let steps = json!([
        {"id": "x", "tool": "test.echo", "parameters": {"key": "x", "v": "${y.result}"}},
        {"id": "y", "tool": "test.echo", "parameters": {"key": "y"}, "depends_on": ["x"]},
        {"id": "z", "tool": "test.echo", "parameters": {"key": "z"}},
    ]);
    let run = h.run(plan(steps), config(2));
    let result = tokio::time::timeout(Duration::from_secs(10), run).await.expect("the run hung");
    assert_eq!(step(&result, "z").status, StepStatus::Done);
    assert_eq!(step(&result, "x").status, StepStatus::Pending);
    assert_eq!(step(&result, "y").status, StepStatus::Pending);
    assert_eq!(codes(&result), vec![(ReasonCode::StepsNotRun, None)]);
    assert_eq!(result.status, RunStatus::Partial);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_without_a_runnable_tool_are_refused_before_anything_runs() {
    let h = Harness::new();
    let steps = json!([
        {"id": "ok", "tool": "test.echo", "parameters": {"key": "ok"}},
        {"id": "think", "description": "decide what to do"},
        {"id": "magic", "tool": "no.such"},
    ]);
    let error = h.try_run(plan(steps), config(1)).await.expect_err("the plan must be refused");
    let message = error.to_string();
    assert!(matches!(error, pev_engine::EngineError::Plan(_)), "{error:?}");
    assert!(message.contains("step `think` has no `tool`"), "{message}");
    assert!(message.contains("step `magic` names tool `no.such`, which pev does not have"));
    assert!(message.contains("test.echo"), "the known tools are listed: {message}");
    assert_eq!(h.probe.calls("ok"), 0);
    assert!(h.observer.events().is_empty(), "nothing is announced for a refused plan");
}
