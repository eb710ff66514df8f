//! The final re-check: a step's evidence that a later step (or someone outside the run) undoes
//! is not `success`, the reason names the step and the later call; evidence that still holds
//! leaves the run `success`; what cannot be repeated is reported as checked once.

use pev_engine::ApprovalMode;
use pev_protocol::run::{EvidenceOf, ReasonCode, RunStatus, StepStatus};
use serde_json::json;

use super::support::{Harness, codes, config, plan, reason_message, step, warnings};

/// Writes a dark green stylesheet over the white one and asserts it: contains, and changed.
fn green() -> serde_json::Value {
    json!({"id": "green", "tool": "file.write",
    "parameters": {"path": "site/style.css", "content": "body { background: darkgreen; }\n"},
    "assertions": [
        {"type": "file_contains", "path": "site/style.css", "pattern": "darkgreen"},
        {"type": "content_changed", "path": "site/style.css"}
    ]})
}

#[tokio::test]
async fn a_later_step_that_undoes_a_verified_step_keeps_the_run_from_success() {
    let h = Harness::new();
    h.write("site/style.css", "body { background: white; }\n");
    let result = h
        .run(
            plan(json!([
                green(),
                {"id": "tidy", "tool": "file.write", "depends_on": ["green"],
                 "parameters": {"path": "site/style.css", "content": "body { background: white; }\n"}}
            ])),
            config(1),
        )
        .await;
    // Both steps did what they said, each one's evidence held when it finished.
    assert_eq!(step(&result, "green").status, StepStatus::Done);
    assert_eq!(step(&result, "tidy").status, StepStatus::Done);
    assert!(step(&result, "green").assertions.iter().all(|a| a.passed));
    assert_ne!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert_eq!(result.status, RunStatus::Partial);
    assert_eq!(
        codes(&result),
        [
            (ReasonCode::EvidenceRegressed, Some("green")),
            (ReasonCode::EvidenceRegressed, Some("green"))
        ]
    );
    let message = reason_message(&result, ReasonCode::EvidenceRegressed);
    assert!(message.contains("step 'green''s evidence no longer holds"), "{message}");
    assert!(message.contains("file_contains"), "{message}");
    assert!(message.contains("file.write site/style.css (step 'tidy')"), "{message}");
    let check = result.final_check.as_ref().unwrap();
    assert_eq!(check.rechecked, 2);
    assert_eq!(check.regressed.len(), 2);
    assert_eq!(check.regressed[1].kind, "content_changed");
    assert_eq!(check.regressed[0].of, EvidenceOf::Step("green".into()));
    assert_eq!(check.regressed[0].changed_by, ["file.write site/style.css (step 'tidy')"]);
}

#[tokio::test]
async fn evidence_that_still_holds_at_the_end_is_success() {
    let h = Harness::new();
    h.write("site/style.css", "body { background: white; }\n");
    let result = h
        .run(
            plan(json!([
                green(),
                {"id": "more", "tool": "file.write", "depends_on": ["green"],
                 "parameters": {"path": "site/style.css", "content": "body { background: darkgreen; color: white; }\n"},
                 "assertions": [{"type": "file_contains", "path": "site/style.css", "pattern": "color"}]},
                {"id": "notes", "tool": "file.write",
                 "parameters": {"path": "notes.md", "content": "done\n"},
                 "assertions": [{"type": "file_exists", "path": "notes.md"}]}
            ])),
            config(2),
        )
        .await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    let check = result.final_check.as_ref().unwrap();
    assert_eq!(check.rechecked, 4);
    assert!(check.regressed.is_empty() && check.checked_once.is_empty(), "{check:?}");
}

#[tokio::test]
async fn a_command_marked_not_repeatable_is_checked_once_not_run_again() {
    let h = Harness::new();
    let result = h
        .run(
            plan(json!([
                {"id": "count", "tool": "file.write", "parameters": {"path": "a.txt", "content": "a"},
                 "assertions": [
                    {"type": "command_succeeds", "command": "echo x >> ran", "repeatable": false},
                    {"type": "command_succeeds", "command": "echo y >> ran-twice"}
                 ]}
            ])),
            config(1),
        )
        .await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    // Once when the step finished; the repeatable one again at the end.
    assert_eq!(h.read("ran").lines().count(), 1);
    assert_eq!(h.read("ran-twice").lines().count(), 2);
    let check = result.final_check.as_ref().unwrap();
    assert_eq!(check.rechecked, 1);
    assert_eq!(check.checked_once.len(), 1);
    assert_eq!(check.checked_once[0].kind, "command_succeeds");
    let warned = warnings(&h.observer.events());
    assert!(
        warned.iter().any(|w| w.contains("step 'count': command_succeeds was checked once")),
        "{warned:?}"
    );
    assert!(result.warnings.iter().any(|w| w.contains("checked once")), "{:?}", result.warnings);
}

#[tokio::test]
async fn after_resume_evidence_undone_outside_the_run_is_found_against_the_journaled_baseline() {
    let h = Harness::new();
    h.write("a.txt", "old\n");
    let plan = plan(json!([
        {"id": "write", "tool": "file.write", "parameters": {"path": "a.txt", "content": "new\n"},
         "assertions": [{"type": "content_changed", "path": "a.txt"}]},
        {"id": "gate", "tool": "test.echo", "parameters": {"key": "g"}, "depends_on": ["write"],
         "requires_approval": true}
    ]));
    let first = h.run(plan, config(1)).await;
    assert_eq!(first.status, RunStatus::AwaitingApproval, "{:?}", first.reasons);
    // Between the sessions someone puts the file back.
    h.write("a.txt", "old\n");
    let yes = pev_engine::EngineConfig { approval: ApprovalMode::All, ..config(1) };
    let resumed = h.resume(&first.run_id, yes).await;
    assert_eq!(step(&resumed, "gate").status, StepStatus::Done);
    assert_eq!(resumed.status, RunStatus::Partial, "{:?}", resumed.reasons);
    assert_eq!(codes(&resumed), [(ReasonCode::EvidenceRegressed, Some("write"))]);
    let message = reason_message(&resumed, ReasonCode::EvidenceRegressed);
    assert!(message.contains("content_changed"), "{message}");
    assert!(message.contains("the journal records no later call that wrote a.txt"), "{message}");
}
