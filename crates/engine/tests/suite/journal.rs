//! What a run leaves behind: the event stream (dense `seq`, one `step.started` per attempt,
//! paired tool events, `run.finished` last, the same in the journal as shown to the observer)
//! and the journal's rows (step states, tool calls, hashes, mutations, the stored result).

use std::collections::HashMap;

use pev_protocol::event::EventBody;
use pev_protocol::run::{FileMutation, ReasonCode, RunStatus, StepStatus};
use pev_store::{HashPhase, ToolCallStatus};
use serde_json::json;

use super::support::{Harness, codes, config, plan, reason_message, step, warnings};

fn mixed_plan() -> serde_json::Value {
    plan(json!([
        {"id": "f", "tool": "test.flaky", "parameters": {"key": "f", "fail_times": 1},
         "on_fail": "retry", "max_attempts": 2},
        {"id": "w", "tool": "file.write", "parameters": {"path": "out/new.txt",
         "content": "one\ntwo\n"}, "assertions": [{"type": "file_contains", "path": "out/new.txt",
         "pattern": "two"}]},
        {"id": "r", "tool": "file.read", "parameters": {"path": "out/new.txt"}, "depends_on": ["w"]},
        {"id": "e", "tool": "test.echo", "parameters": {"key": "e", "from": "${f.result.calls}"}},
    ]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_is_dense_paired_and_ends_with_the_result() {
    let h = Harness::new();
    let result = h.run(mixed_plan(), config(3)).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    let events = h.observer.events();

    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..events.len() as u64).collect::<Vec<_>>(), "dense from 0");
    assert!(events.iter().all(|e| e.run_id == result.run_id && e.at.ends_with('Z')));
    assert!(matches!(events[0].body, EventBody::RunStarted { resumed: false, .. }));
    assert!(matches!(events[1].body, EventBody::PlanCreated { version: 1, steps: 4 }));
    let EventBody::RunFinished { result: last } = &events.last().unwrap().body else {
        panic!("run.finished must be last, got {:?}", events.last());
    };
    assert_eq!(**last, result);
    let verify = events.iter().position(|e| e.body.name() == "verify.finished").unwrap();
    assert_eq!(verify, events.len() - 2, "verify.finished just before run.finished");

    // One step.started per attempt, with the attempt number.
    let mut started: HashMap<&str, Vec<u32>> = HashMap::new();
    for e in &events {
        if let EventBody::StepStarted { step, attempt } = &e.body {
            started.entry(step.as_str()).or_default().push(*attempt);
        }
    }
    for s in &result.steps {
        let expected: Vec<u32> = (1..=s.attempts).collect();
        assert_eq!(started.get(s.id.as_str()), Some(&expected), "{}", s.id);
    }
    assert_eq!(started["f"], [1, 2]);

    // Every tool.called has exactly one tool.finished, later, with the same call id and tool.
    let mut open: HashMap<String, (usize, String)> = HashMap::new();
    let mut pairs = 0;
    for (i, e) in events.iter().enumerate() {
        match &e.body {
            EventBody::ToolCalled { call_id, tool, .. } => {
                assert!(open.insert(call_id.clone(), (i, tool.clone())).is_none(), "{call_id}");
            }
            EventBody::ToolFinished { call_id, tool, .. } => {
                let (at, called) = open.remove(call_id).expect("tool.finished without tool.called");
                assert!(at < i);
                assert_eq!(&called, tool);
                pairs += 1;
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "unfinished calls: {open:?}");
    assert_eq!(pairs, 5);
    assert_eq!(result.usage.tool_calls, 5);
    // Call ids are `<step>#<attempt>.<session>`.
    let ids: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolCalled { step, call_id, .. } if step == "f" => Some(call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["f#1.0", "f#2.0"]);
    // Each step's step.finished comes after its last step.started, and is emitted once.
    for s in &result.steps {
        let finished = events
            .iter()
            .filter(|e| matches!(&e.body, EventBody::StepFinished { step, .. } if *step == s.id))
            .count();
        assert_eq!(finished, 1, "{}", s.id);
    }

    // The journal holds the same events.
    let stored = h.store().events(&result.run_id).unwrap();
    assert_eq!(stored, events);
}

// Regression (fixed): the warning before a retry ("attempt 1 of 2 failed: …; trying again") is emitted as a
// `warning` event but not added to the run's warnings, unlike every other warning (silent
// failures, replan, a re-run exec on resume). `pev resume` rebuilds the warnings from the
// journal's `warning` events, so the same run reports this warning after a resume but not in
// its first result. Expected: `result.warnings` holds the message of every `warning` event
// (step.rs `drive` should push the retry message into `report.warnings`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_result_warnings_are_the_warning_events() {
    let h = Harness::new();
    let result = h.run(mixed_plan(), config(3)).await;
    let events = warnings(&h.observer.events());
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(result.warnings, events);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_holds_step_states_calls_hashes_and_mutations() {
    let h = Harness::new();
    let result = h.run(mixed_plan(), config(3)).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert!(result.goal_actions_executed, "file.write is goal work");
    assert_eq!(h.read("out/new.txt"), "one\ntwo\n");
    let run = h.store().load_run(&result.run_id).unwrap();

    assert_eq!(run.status, "success");
    assert_eq!(run.result.as_ref(), Some(&result));
    for s in &run.steps {
        assert_eq!(s.status, StepStatus::Done, "{}", s.step_id);
        assert_eq!(s.output, step(&result, &s.step_id).output, "{}", s.step_id);
        assert!(s.started_at.is_some() && s.ended_at.is_some(), "{}", s.step_id);
    }
    assert_eq!(run.steps.len(), 4);
    assert_eq!(run.steps.iter().find(|s| s.step_id == "f").unwrap().attempts, 2);
    let r = step(&result, "r").output.clone().unwrap();
    assert_eq!(r["content"], json!("one\ntwo\n"));
    assert_eq!(step(&result, "e").output.as_ref().unwrap()["from"], json!(2));

    let calls: Vec<(&str, u32, ToolCallStatus)> =
        run.tool_calls.iter().map(|c| (c.step_id.as_str(), c.attempt, c.status)).collect();
    assert_eq!(calls.len(), 5);
    assert!(calls.contains(&("f", 1, ToolCallStatus::Failed)));
    assert!(calls.contains(&("f", 2, ToolCallStatus::Finished)));
    let w = run.tool_calls.iter().find(|c| c.step_id == "w").unwrap();
    assert_eq!(w.status, ToolCallStatus::Finished);
    assert_eq!(w.path.as_deref(), Some("out/new.txt"));
    assert_eq!(w.pre_sha256, None, "the file did not exist");
    assert_eq!(w.intended_sha256.as_deref(), w.output.as_ref().unwrap()["sha256"].as_str());
    assert!(w.duration_ms.is_some() && w.ended_at.is_some());

    let hashes: Vec<(HashPhase, Option<&str>)> = run
        .file_hashes
        .iter()
        .filter(|f| f.step_id == "w")
        .map(|f| (f.phase, f.sha256.as_deref()))
        .collect();
    assert_eq!(
        hashes,
        [(HashPhase::Before, None), (HashPhase::After, w.intended_sha256.as_deref())]
    );

    let expected = FileMutation {
        path: "out/new.txt".into(),
        bytes_before: 0,
        bytes_after: 8,
        lines_added: 2,
        lines_removed: 0,
        no_op: false,
    };
    assert_eq!(result.file_mutations, std::slice::from_ref(&expected));
    assert_eq!(run.mutations.len(), 1);
    assert_eq!(run.mutations[0].step_id, "w");
    assert_eq!(run.mutations[0].mutation, expected);
    assert_eq!(run.mutations[0].before_sha256, None);
    let after = run.mutations[0].after_sha256.clone().unwrap();
    assert_eq!(h.store().blob(&after).unwrap().as_deref(), Some(&b"one\ntwo\n"[..]));
    assert!(step(&result, "w").evidence.iter().any(|e| e.contains("changed out/new.txt")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_of_identical_content_is_a_no_op_mutation() {
    let h = Harness::new();
    h.write("same.txt", "a\nb\n");
    let steps = json!([
        {"id": "edit", "tool": "file.write", "parameters": {"path": "same.txt", "content": "a\nc\n"}},
        {"id": "again", "tool": "file.write", "parameters": {"path": "same.txt", "content": "a\nc\n"},
         "depends_on": ["edit"]},
    ]);
    let result = h.run(plan(steps), config(2)).await;

    assert_eq!(result.status, RunStatus::Partial, "{:?}", result.reasons);
    assert_eq!(codes(&result), vec![(ReasonCode::NoOpMutation, Some("again"))]);
    assert_eq!(
        reason_message(&result, ReasonCode::NoOpMutation),
        "step 'again' wrote same.txt but left it byte-for-byte unchanged (4 bytes)"
    );
    let flags: Vec<(u64, u64, u64, u64, bool)> = result
        .file_mutations
        .iter()
        .map(|m| (m.bytes_before, m.bytes_after, m.lines_added, m.lines_removed, m.no_op))
        .collect();
    assert_eq!(flags, [(4, 4, 1, 1, false), (4, 4, 0, 0, true)]);
    let run = h.store().load_run(&result.run_id).unwrap();
    let no_ops: Vec<(&str, bool)> =
        run.mutations.iter().map(|m| (m.step_id.as_str(), m.mutation.no_op)).collect();
    assert_eq!(no_ops, [("edit", false), ("again", true)]);
    assert_eq!(run.mutations[1].before_sha256, run.mutations[1].after_sha256);
    assert!(step(&result, "again").evidence.iter().any(|e| e.contains("left same.txt unchanged")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_asking_for_change_with_only_reads_has_no_effects() {
    let h = Harness::new();
    h.write("site.css", "body { }\n");
    let plan = json!({"goal": "Change the background to green", "steps": [
        {"id": "look", "tool": "file.read", "parameters": {"path": "site.css"}},
    ]});
    let result = h.run(plan, config(1)).await;
    assert!(!result.goal_actions_executed);
    assert_eq!(codes(&result), vec![(ReasonCode::NoEffects, None)]);
    assert_eq!(result.status, RunStatus::Partial);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_assertion_fails_the_step_by_assertion() {
    let h = Harness::new();
    let steps = json!([
        {"id": "w", "tool": "file.write", "parameters": {"path": "x.txt", "content": "red\n"},
         "assertions": [{"type": "file_contains", "path": "x.txt", "pattern": "green"}]},
    ]);
    let result = h.run(plan(steps), config(1)).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(step(&result, "w").status, StepStatus::Failed);
    assert_eq!(codes(&result), vec![(ReasonCode::AssertionFailed, Some("w"))]);
    assert!(!step(&result, "w").assertions[0].passed);
    let run = h.store().load_run(&result.run_id).unwrap();
    let w = &run.steps[0];
    assert!(w.error.as_deref().unwrap().starts_with("assertion file_contains failed"));
    // The write itself finished: its call is journaled as such, and its mutation is kept.
    assert_eq!(run.tool_calls[0].status, ToolCallStatus::Finished);
    assert_eq!(result.file_mutations.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_effect_call_is_journaled_durably_before_it_runs() {
    let h = Harness::new();
    let steps = json!([
        {"id": "p", "tool": "test.peek", "parameters": {"key": "p"}},
    ]);
    let result = h.run(plan(steps), config(1)).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    // What another connection saw while the tool ran.
    let seen = step(&result, "p").output.clone().unwrap();
    assert_eq!(seen["call"], json!("started"));
    assert_eq!(seen["step"], json!("in_progress"));
    // Without a target path there is no hash the call will leave.
    assert_eq!(seen["intended"], json!(null));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postconditions_are_checked_at_the_end() {
    let h = Harness::new();
    h.write("page.css", "body { color: red }\n");
    let plan = json!({"goal": "engine test", "steps": [
        {"id": "w", "tool": "file.write",
         "parameters": {"path": "page.css", "content": "body { color: green }\n"}},
    ], "postconditions": [
        {"description": "css changed", "assertions": [{"type": "content_changed", "path": "page.css"}]},
        {"description": "green", "assertions": [{"type": "file_contains", "path": "page.css",
         "pattern": "green"}]},
        "The page looks right",
    ]});
    let result = h.run(plan, config(1)).await;
    let satisfied: Vec<(&str, bool)> =
        result.postconditions.iter().map(|p| (p.description.as_str(), p.satisfied)).collect();
    assert_eq!(
        satisfied,
        [("css changed", true), ("green", true), ("The page looks right", false)]
    );
    assert_eq!(codes(&result), vec![(ReasonCode::PostconditionUnverified, None)]);
    assert!(
        reason_message(&result, ReasonCode::PostconditionUnverified)
            .contains("The page looks right")
    );
    assert_eq!(result.status, RunStatus::Partial);
    let checked = h
        .observer
        .events()
        .iter()
        .filter(|e| {
            matches!(
                &e.body,
                EventBody::AssertionChecked { postcondition: Some(_), step: None, .. }
            )
        })
        .count();
    assert_eq!(checked, 2);
}
