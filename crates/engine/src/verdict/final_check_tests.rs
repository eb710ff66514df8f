//! Naming the later calls that may have undone a piece of evidence.

use std::collections::HashMap;

use pev_protocol::run::{EvidenceOf, Regression, StepStatus};
use pev_protocol::tool::Effect;
use pev_store::{ToolCallRecord, ToolCallStatus};
use serde_json::json;

use super::*;

fn call(
    step: &str,
    tool: &str,
    effect: Effect,
    path: Option<&str>,
    command: Option<&str>,
) -> ToolCallRecord {
    ToolCallRecord {
        run_id: "r".into(),
        call_id: format!("{step}#1"),
        step_id: step.into(),
        attempt: 1,
        tool: tool.into(),
        effect,
        arguments: command.map_or_else(|| json!({"path": path}), |c| json!({"command": c})),
        path: path.map(str::to_owned),
        pre_sha256: None,
        intended_sha256: None,
        started_at: "2026-11-23T00:00:00.000Z".into(),
        status: ToolCallStatus::Finished,
        output: None,
        error: None,
        ended_at: None,
        duration_ms: None,
    }
}

fn regression(step: &str, path: Option<&str>) -> Regression {
    Regression {
        of: EvidenceOf::Step(step.into()),
        kind: if path.is_some() { "file_contains" } else { "command_succeeds" }.into(),
        path: path.map(str::to_owned),
        then: "found".into(),
        now: "not found".into(),
        changed_by: Vec::new(),
    }
}

fn journal() -> Vec<ToolCallRecord> {
    vec![
        call("setup", "file.write", Effect::Write, Some("a.css"), None),
        call("patch", "file.read", Effect::Read, Some("a.css"), None),
        call("patch", "file.patch", Effect::Write, Some("a.css"), None),
        call("other", "file.write", Effect::Write, Some("b.css"), None),
        call("undo", "file.write", Effect::Write, Some("./a.css"), None),
        call("clean", "shell.exec", Effect::Exec, None, Some("rm -rf build")),
    ]
}

fn mark_after_step(calls: &[ToolCallRecord]) -> impl Fn(&EvidenceOf) -> Option<usize> + '_ {
    move |of| match of {
        EvidenceOf::Step(id) => after_last_call_of(calls, id),
        EvidenceOf::Postcondition(_) => None,
    }
}

#[test]
fn a_file_regression_names_the_later_writes_of_that_path_only() {
    let calls = journal();
    let mut found = vec![regression("patch", Some("a.css"))];
    name_later_calls(&mut found, &calls, mark_after_step(&calls));
    // Not the step's own patch, not setup's earlier write, not b.css, not the command (a write
    // to the path explains it).
    assert_eq!(found[0].changed_by, ["file.write ./a.css (step 'undo')"]);
}

#[test]
fn with_no_later_write_of_the_path_the_later_commands_are_named() {
    let calls = journal();
    let mut found = vec![regression("undo", Some("a.css"))];
    name_later_calls(&mut found, &calls, mark_after_step(&calls));
    assert_eq!(found[0].changed_by, ["shell.exec `rm -rf build` (step 'clean')"]);
}

#[test]
fn a_regression_without_a_path_names_every_later_write_and_command() {
    let calls = journal();
    let mut found = vec![regression("other", None)];
    name_later_calls(&mut found, &calls, mark_after_step(&calls));
    assert_eq!(
        found[0].changed_by,
        ["file.write ./a.css (step 'undo')", "shell.exec `rm -rf build` (step 'clean')"]
    );
}

#[test]
fn nothing_later_names_nothing_and_an_unknown_mark_looks_at_the_whole_run() {
    let calls = journal();
    let mut found = vec![regression("clean", Some("b.css"))];
    name_later_calls(&mut found, &calls, mark_after_step(&calls));
    assert!(found[0].changed_by.is_empty(), "{:?}", found[0].changed_by);
    assert_eq!(after_last_call_of(&calls, "never-ran"), None);
    let mut found = vec![regression("never-ran", Some("b.css"))];
    name_later_calls(&mut found, &calls, mark_after_step(&calls));
    assert_eq!(found[0].changed_by, ["file.write b.css (step 'other')"]);
}

#[test]
fn long_commands_are_clipped_and_the_list_is_capped() {
    let long = "x".repeat(200);
    let calls: Vec<ToolCallRecord> = (0..15)
        .map(|i| call(&format!("c{i}"), "shell.exec", Effect::Exec, None, Some(&long)))
        .collect();
    let mut found = vec![regression("nobody", None)];
    name_later_calls(&mut found, &calls, |_| Some(0));
    assert_eq!(found[0].changed_by.len(), KEPT_CALLS);
    assert!(found[0].changed_by[0].ends_with("…` (step 'c0')"), "{}", found[0].changed_by[0]);
}

#[test]
fn only_done_steps_with_assertions_hold_evidence() {
    let plan: Plan = serde_json::from_value(json!({
        "goal": "g",
        "steps": [
            {"id": "done", "tool": "file.read", "parameters": {"path": "a"},
             "assertions": [{"type": "file_exists", "path": "a"}]},
            {"id": "bare", "tool": "file.read", "parameters": {"path": "a"}},
            {"id": "failed", "tool": "file.read", "parameters": {"path": "a"},
             "assertions": [{"type": "file_exists", "path": "a"}]},
            {"id": "pending", "tool": "file.read", "parameters": {"path": "a"},
             "assertions": [{"type": "file_exists", "path": "a"}]},
            {"id": "skipped", "tool": "file.read", "parameters": {"path": "a"},
             "assertions": [{"type": "file_exists", "path": "a"}]},
            {"id": "also", "tool": "file.read", "parameters": {"path": "a"},
             "assertions": [{"type": "file_exists", "path": "a"}]}
        ]
    }))
    .unwrap();
    let slot = |status| Slot { status, ..Slot::default() };
    let slots = [
        slot(StepStatus::Done),
        slot(StepStatus::Done),
        slot(StepStatus::Failed),
        slot(StepStatus::Pending),
        slot(StepStatus::Skipped),
        slot(StepStatus::Done),
    ];
    let held = held_steps(&plan, &slots);
    assert_eq!(held, [(EvidenceOf::Step("done".into()), 0), (EvidenceOf::Step("also".into()), 5)]);
}

#[tokio::test]
async fn the_done_steps_assertions_run_again_on_the_workspace_as_it_is_now() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kept.txt"), "still here").unwrap();
    let ctx = ToolContext::new(pev_tools::Workspace::open(dir.path()).unwrap());
    let plan: Plan = serde_json::from_value(json!({
        "goal": "g",
        "steps": [
            {"id": "kept", "tool": "file.read", "parameters": {"path": "kept.txt"},
             "assertions": [{"type": "file_exists", "path": "kept.txt"}]},
            {"id": "gone", "tool": "file.read", "parameters": {"path": "gone.txt"},
             "assertions": [{"type": "file_exists", "path": "gone.txt"},
                            {"type": "output_contains", "pattern": "hello"}]},
            {"id": "failed", "tool": "file.read", "parameters": {"path": "gone.txt"},
             "assertions": [{"type": "file_exists", "path": "gone.txt"}]}
        ]
    }))
    .unwrap();
    let slot = |status| Slot { status, ..Slot::default() };
    let slots = [slot(StepStatus::Done), slot(StepStatus::Done), slot(StepStatus::Failed)];
    let outputs = HashMap::from([("gone".to_owned(), json!({"content": "hello"}))]);
    let check = recheck_steps(&plan, &slots, &ctx, &outputs).await;
    // The failed step's assertion is not evidence the run relies on; the output one still holds.
    assert_eq!(check.rechecked, 3);
    assert_eq!(check.regressed.len(), 1, "{check:?}");
    assert_eq!(check.regressed[0].of, EvidenceOf::Step("gone".into()));
    assert_eq!(check.regressed[0].kind, "file_exists");
}

/// A delegated step's child claims, kept in its output: read back as assertions (anything else
/// is none), and they make a done step without assertions of its own one whose evidence is
/// re-checked.
#[tokio::test]
async fn a_delegated_steps_child_claims_are_held_and_rechecked() {
    let claims = json!({"child_run": "r.d.1", "child_claims": [
        {"type": "file_contains", "path": "a/out.txt", "pattern": "alpha"},
        {"type": "file_exists", "path": "a/out.txt"}
    ]});
    assert_eq!(child_claims(Some(&claims)).len(), 2);
    assert!(child_claims(Some(&json!({"child_claims": "nonsense"}))).is_empty());
    assert!(child_claims(Some(&json!({"summary": "x"}))).is_empty());
    assert!(child_claims(None).is_empty());

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("a")).unwrap();
    std::fs::write(dir.path().join("a/out.txt"), "gone").unwrap();
    let ctx = pev_tools::ToolContext::new(pev_tools::Workspace::open(dir.path()).unwrap());
    let plan: Plan = serde_json::from_value(json!({"goal": "g", "steps": [
        {"id": "d", "delegate": {"goal": "write alpha"}},
        {"id": "plain", "tool": "file.read", "parameters": {"path": "a/out.txt"}}
    ]}))
    .unwrap();
    let done = |output: Option<serde_json::Value>| Slot {
        status: StepStatus::Done,
        output,
        ..Slot::default()
    };
    let slots = vec![done(Some(claims)), done(Some(json!({"content": "gone"})))];
    let check = recheck_steps(&plan, &slots, &ctx, &HashMap::new()).await;
    assert_eq!(check.rechecked, 2, "{check:?}");
    assert_eq!(check.regressed.len(), 1, "{check:?}");
    assert_eq!(check.regressed[0].of, EvidenceOf::Step("d".into()));
    assert_eq!(check.regressed[0].kind, "file_contains");

    // Not done: nothing of it is held.
    let slots = vec![Slot { status: StepStatus::Failed, ..slots[0].clone() }, slots[1].clone()];
    let check = recheck_steps(&plan, &slots, &ctx, &HashMap::new()).await;
    assert_eq!(check.rechecked, 0, "{check:?}");
}

fn once(step: &str, path: Option<&str>) -> CheckedOnce {
    CheckedOnce {
        of: EvidenceOf::Step(step.into()),
        kind: if path.is_some() { "content_changed" } else { "command_succeeds" }.into(),
        why: "marked `repeatable: false`".into(),
        path: path.map(str::to_owned),
    }
}

fn mutation(step: &str, path: &str) -> MutationRecord {
    MutationRecord {
        run_id: "r".into(),
        step_id: step.into(),
        mutation: pev_protocol::run::FileMutation {
            path: path.into(),
            bytes_before: 1,
            bytes_after: 2,
            lines_added: 1,
            lines_removed: 1,
            no_op: false,
        },
        before_sha256: None,
        after_sha256: None,
    }
}

#[test]
fn checked_once_evidence_of_a_named_file_is_undone_by_a_later_write_of_it_only() {
    let calls = journal();
    // `patch` checked a.css once; `undo` writes ./a.css later, `other` writes b.css.
    let stale = stale_once(&[once("patch", Some("a.css"))], &calls, &[], &[]);
    assert_eq!(stale.len(), 1, "{stale:?}");
    let r = &stale[0];
    assert_eq!(
        (r.of.step(), r.kind.as_str(), r.path.as_deref()),
        (Some("patch"), "content_changed", Some("a.css"))
    );
    assert_eq!(r.changed_by, vec!["file.write ./a.css (step 'undo')".to_owned()]);
    assert_eq!(r.then, "passed, checked once (marked `repeatable: false`)");
    assert_eq!(r.now, "not run again, and a.css changed after it was checked");
    // Nothing later wrote b.css; a read of a.css changes nothing; the setup write was earlier.
    assert!(stale_once(&[once("other", Some("b.css"))], &calls, &[], &[]).is_empty());
    let reads = vec![
        call("patch", "file.patch", Effect::Write, Some("a.css"), None),
        call("look", "file.read", Effect::Read, Some("a.css"), None),
    ];
    assert!(stale_once(&[once("patch", Some("a.css"))], &reads, &[], &[]).is_empty());
    assert!(stale_once(&[once("setup", Some("z.css"))], &calls, &[], &[]).is_empty());
}

#[test]
fn without_a_file_it_depends_on_what_its_step_changed_and_commands_count_by_their_changes() {
    let calls = vec![
        call("release", "shell.exec", Effect::Exec, None, Some("echo v1 > release.txt")),
        call("build", "shell.exec", Effect::Exec, None, Some("make")),
        call("rollback", "shell.exec", Effect::Exec, None, Some("git checkout release.txt")),
    ];
    let mutations = vec![
        mutation("release", "release.txt"),
        mutation("build", "out/app"),
        mutation("rollback", "release.txt"),
    ];
    let stale = stale_once(&[once("release", None)], &calls, &mutations, &[]);
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert_eq!(
        stale[0].changed_by,
        vec!["shell.exec `git checkout release.txt` (step 'rollback')".to_owned()]
    );
    assert_eq!(stale[0].now, "not run again, and release.txt changed after it was checked");
    // The build's command changed other files: the evidence stands.
    assert!(stale_once(&[once("release", None)], &calls[..2], &mutations, &[]).is_empty());
    // Two files changed by the step: the message says "what it depends on".
    let two = [
        mutation("release", "release.txt"),
        mutation("release", "VERSION"),
        mutation("rollback", "VERSION"),
    ];
    let stale = stale_once(&[once("release", None)], &calls, &two, &[]);
    assert_eq!(stale[0].now, "not run again, and what it depends on changed after it was checked");
    // A step that changed nothing and names no file (a health check): nothing to undo.
    assert!(
        stale_once(&[once("build", None)], &calls, &[mutation("rollback", "x")], &[]).is_empty()
    );
}

#[test]
fn a_postcondition_or_a_step_without_calls_is_not_judged_stale() {
    let calls = journal();
    let post =
        CheckedOnce { of: EvidenceOf::Postcondition("p".into()), ..once("patch", Some("a.css")) };
    assert!(stale_once(&[post], &calls, &[], &[]).is_empty());
    assert!(stale_once(&[once("never-called", Some("a.css"))], &calls, &[], &[]).is_empty());
}

/// A step reused from the cache made no call in this run: it was checked when it ended, so a
/// later write of its file undoes its evidence, and an earlier one does not.
#[test]
fn a_cache_reused_step_is_judged_from_when_it_ended() {
    let at = |step: &str, t: &str| ToolCallRecord {
        started_at: t.into(),
        ..call(step, "file.write", Effect::Write, Some("a.css"), None)
    };
    let calls =
        vec![at("setup", "2026-11-23T00:00:01.000Z"), at("undo", "2026-11-23T00:00:03.000Z")];
    let ended = |t: Option<&str>| pev_store::StepState {
        run_id: "r".into(),
        step_id: "cached".into(),
        status: StepStatus::Done,
        attempts: 0,
        output: None,
        error: None,
        started_at: None,
        ended_at: t.map(str::to_owned),
        assertions: vec![],
        evidence: vec![],
    };
    let stale = stale_once(
        &[once("cached", Some("a.css"))],
        &calls,
        &[],
        &[ended(Some("2026-11-23T00:00:02.000Z"))],
    );
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert_eq!(stale[0].changed_by, vec!["file.write a.css (step 'undo')".to_owned()]);
    // Ended after the last write: it stands; never ended: nothing to judge.
    assert!(
        stale_once(
            &[once("cached", Some("a.css"))],
            &calls,
            &[],
            &[ended(Some("2026-11-23T00:00:04.000Z"))]
        )
        .is_empty()
    );
    assert!(stale_once(&[once("cached", Some("a.css"))], &calls, &[], &[ended(None)]).is_empty());
}
