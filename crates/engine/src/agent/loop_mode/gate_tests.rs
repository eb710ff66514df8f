//! Tests of the finalization gate's decisions and messages, the multi-step heuristic, and the
//! reminder.

use super::*;
use crate::agent::loop_mode::plan_tools::{ModelPostcondition, ModelStep, VerifiedBy};

fn plan(statuses: &[StepStatus], verified: bool) -> ModelPlan {
    ModelPlan {
        objective: "Green page".into(),
        steps: statuses
            .iter()
            .enumerate()
            .map(|(i, status)| ModelStep {
                id: format!("s{}", i + 1),
                title: format!("Step {}", i + 1),
                status: *status,
                evidence: Some("did it".into()),
                blocked_reason: Some("stuck".into()),
                assertions: Vec::new(),
            })
            .collect(),
        postconditions: vec![ModelPostcondition {
            id: "p1".into(),
            description: "Page is green".into(),
            assertions: Vec::new(),
            verified,
            verified_by: verified.then_some(VerifiedBy::Harness),
            evidence: verified.then(|| "checked".to_owned()),
        }],
    }
}

#[test]
fn what_is_missing_lists_unfinished_steps_and_unverified_postconditions() {
    let p = plan(
        &[StepStatus::Done, StepStatus::Pending, StepStatus::InProgress, StepStatus::Blocked],
        false,
    );
    assert_eq!(
        missing(Some(&p), false),
        vec![
            "step `s2` (Step 2) is pending",
            "step `s3` (Step 3) is still in progress",
            "postcondition p1 (Page is green) is not verified: call postcondition_verify with evidence",
        ]
    );
    let finished = plan(&[StepStatus::Done, StepStatus::Blocked], true);
    assert!(missing(Some(&finished), true).is_empty());
    assert!(missing(None, false).is_empty());
    assert_eq!(
        missing(None, true),
        vec![
            "no plan: this goal has several parts, so call plan_create with its steps and \
             postconditions, then carry them out"
        ]
    );
}

#[test]
fn the_refusal_message_is_exact() {
    let p = plan(&[StepStatus::Done, StepStatus::Pending], false);
    let text = refusal_message(Some(&p), &missing(Some(&p), false), 1, 3);
    assert_eq!(
        text,
        "Final answer refused (1 of 3; at 3 the run ends unfinished): the task is not finished.\n\
         What is missing:\n\
         - step `s2` (Step 2) is pending\n\
         - postcondition p1 (Page is green) is not verified: call postcondition_verify with evidence\n\
         Do the remaining work with the tools and record it (step_update with evidence, \
         postcondition_verify), or mark a step blocked with a reason if it truly cannot be done. \
         Then give your final answer.\n\n\
         Current plan:\n\
         Objective: Green page\n\
         Steps:\n\
         [x] 1. s1: Step 1 — did it\n\
         [ ] 2. s2: Step 2\n\
         Postconditions:\n\
         [✗] p1. Page is green — not verified\n"
    );
    let none = refusal_message(None, &missing(None, true), 2, 3);
    assert!(none.starts_with("Final answer refused (2 of 3; at 3 the run ends unfinished)"));
    assert!(none.ends_with("Then give your final answer.\n\nCurrent plan: none.\n"), "{none}");
}

#[test]
fn the_gate_refuses_until_its_cap_then_ends_the_loop() {
    let mut gate = FinalGate::new(true, 3, "Fix the parser and update the docs");
    assert!(gate.multi_step());
    let p = plan(&[StepStatus::Pending], true);
    let Decision::Refuse(first) = gate.on_final_answer(None) else { panic!("expected a refusal") };
    assert!(first.starts_with("Final answer refused (1 of 3;"), "{first}");
    assert!(first.contains("- no plan: this goal has several parts"));
    let Decision::Refuse(second) = gate.on_final_answer(Some(&p)) else {
        panic!("expected a refusal")
    };
    assert!(second.starts_with("Final answer refused (2 of 3;"), "{second}");
    assert_eq!(
        gate.on_final_answer(Some(&p)),
        Decision::Exhausted(
            "the finalization gate refused 3 final answers: step `s1` (Step 1) is pending".into()
        )
    );
    assert_eq!((gate.refusals, gate.premature), (3, 3));
}

#[test]
fn the_gate_accepts_finished_work_and_counts_nothing() {
    let mut gate = FinalGate::new(true, 3, "Fix the parser and update the docs");
    let p = plan(&[StepStatus::Done, StepStatus::Blocked], true);
    assert_eq!(gate.on_final_answer(Some(&p)), Decision::Accept { premature: false });
    assert_eq!((gate.refusals, gate.premature), (0, 0));
    // A single-step goal needs no plan.
    let mut single = FinalGate::new(true, 3, "Change the site background to dark green");
    assert_eq!(single.on_final_answer(None), Decision::Accept { premature: false });
}

#[test]
fn with_the_gate_off_a_premature_answer_is_accepted_and_counted() {
    let mut gate = FinalGate::new(false, 3, "Fix the parser and update the docs");
    assert_eq!(gate.on_final_answer(None), Decision::Accept { premature: true });
    assert_eq!((gate.refusals, gate.premature), (0, 1));
}

#[test]
fn a_zero_cap_ends_at_the_first_premature_answer() {
    let mut gate = FinalGate::new(true, 0, "Fix the parser and update the docs");
    assert!(matches!(gate.on_final_answer(None), Decision::Exhausted(_)));
    assert_eq!(gate.refusals, 1);
}

#[test]
fn the_multi_step_heuristic() {
    for goal in [
        "Fix the parser and update the docs",
        "Read the config. Then write a summary",
        "Add a test; make it pass",
        "Rename foo to bar then run the tests",
        "Compare src/a.rs with src/b.rs",
        "Merge notes.txt into README.md",
        "- write the file\n- commit it",
    ] {
        assert!(goal_is_multi_step(goal), "{goal}");
    }
    for goal in [
        "Change the site background to dark green",
        "Add tests for foo and bar",
        "Fix the typo in README.md",
        "Bump the version to 1.5 in Cargo.toml",
        "Explain what this does, e.g. the main loop",
        "Fetch https://example.com/a/b and",
        "",
    ] {
        assert!(!goal_is_multi_step(goal), "{goal}");
    }
}

#[test]
fn the_reminder_names_the_rounds_and_shows_the_plan() {
    let text = reminder_message(10, None);
    assert_eq!(
        text,
        "Reminder: 10 rounds without a plan or todo update. Keep your progress recorded: \
         step_update (in_progress when you start a step, done with evidence when it is \
         finished), plan_create to rewrite the plan, todo_write for the todo list.\n\n\
         There is no plan yet: for a task of several parts, call plan_create."
    );
    let p = plan(&[StepStatus::InProgress], false);
    assert!(reminder_message(4, Some(&p)).ends_with(
        "[~] 1. s1: Step 1 (in progress)\nPostconditions:\n[✗] p1. Page is green — not verified\n"
    ));
}

#[test]
fn a_blocking_stop_hook_is_a_refusal_that_counts_toward_the_cap() {
    let mut gate = FinalGate::new(true, 2, "Change the site background to dark green");
    match gate.on_stop_blocked("run the tests first") {
        Decision::Refuse(message) => {
            assert!(message.starts_with("Final answer refused (1 of 2;"), "{message}");
            assert!(message.contains("the stop hook blocked it: run the tests first"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    match gate.on_stop_blocked("still no tests") {
        Decision::Exhausted(message) => {
            assert!(message.contains("blocked by the stop hook: still no tests"), "{message}");
        }
        other => panic!("expected the cap, got {other:?}"),
    }
    // With the gate off the hook still blocks: a stop hook is never bypassed.
    let mut off = FinalGate::new(false, 3, "Change the site background to dark green");
    assert!(matches!(off.on_stop_blocked("no"), Decision::Refuse(_)));
}

#[test]
fn what_looks_like_a_file() {
    for word in ["src/main.rs", "site/", "a/", "README.md", "a.rs", "ab.c", "style.css", "x.y2"] {
        assert!(looks_like_file(word), "{word} looks like a file");
    }
    for word in [
        "/",
        "e.g",
        "i.e",
        "x.y",
        "1.5",
        "v1.2",
        "ab.3",
        ".env",
        "name.",
        "a.toolong",
        "http://a/b",
    ] {
        assert!(!looks_like_file(word), "{word} does not look like a file");
    }
}
