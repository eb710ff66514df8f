//! Tests of what the plan tools do: creation and the rewrite rule, step updates with evidence
//! checked by assertions, postcondition verification, and the refusal texts the model reads.

use pev_tools::{ToolContext, Workspace};
use serde_json::{Value, json};
use tempfile::TempDir;

use super::*;

struct Fixture {
    _dir: TempDir,
    ctx: ToolContext,
    book: PlanBook,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(Workspace::open(dir.path()).unwrap());
        Self { _dir: dir, ctx, book: PlanBook::default() }
    }

    fn write(&self, path: &str, content: &str) {
        std::fs::write(self.ctx.workspace.root().join(path), content).unwrap();
    }

    async fn call(&mut self, tool: &str, input: Value) -> Reply {
        self.book.call(tool, input, &self.ctx).await
    }

    fn status(&self, id: &str) -> StepStatus {
        self.book.plan.as_ref().unwrap().step(id).unwrap().status
    }
}

fn css_plan() -> Value {
    json!({
        "objective": "Make the page background dark green",
        "steps": [
            {"id": "read", "title": "Read the stylesheet"},
            {"id": "patch", "title": "Patch the body rule", "assertions": [
                {"type": "file_contains", "path": "style.css", "pattern": "#006400",
                 "recovery": "edit the body rule"},
                {"type": "content_changed", "path": "style.css"}
            ]},
            {"id": "check", "title": "Check the page"}
        ],
        "postconditions": [
            {"description": "The stylesheet sets #006400",
             "assertions": [{"type": "file_contains", "path": "style.css", "pattern": "#006400"}]},
            {"description": "Nothing else changed"}
        ]
    })
}

#[tokio::test]
async fn plan_create_makes_revision_one_and_renders_it() {
    let mut f = Fixture::new();
    let reply = f.call("plan_create", css_plan()).await.unwrap();
    assert!(
        reply.starts_with("Plan created (revision 1): 3 steps, 2 postconditions.\n\nObjective: "),
        "{reply}"
    );
    assert!(
        reply.contains(
            "[ ] 2. patch: Patch the body rule [checks: file_contains, content_changed]\n"
        )
    );
    assert!(reply.contains("[✗] p2. Nothing else changed — not verified\n"));
    assert_eq!(f.book.revisions.len(), 1);
    assert_eq!(f.book.revisions[0].number, 1);
    assert!(f.book.revisions[0].dropped.is_empty());
    assert_eq!(Some(&f.book.revisions[0].plan), f.book.plan.as_ref());
    let plan = f.book.plan.as_ref().unwrap();
    let ids: Vec<&str> = plan.postconditions.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["p1", "p2"]);
}

#[tokio::test]
async fn steps_without_ids_are_numbered_by_position() {
    let mut f = Fixture::new();
    let plan = json!({"objective": "o", "steps": [{"title": "A"}, {"id": " b ", "title": "B"}, {"title": "C"}]});
    f.call("plan_create", plan).await.unwrap();
    let ids: Vec<String> =
        f.book.plan.as_ref().unwrap().steps.iter().map(|s| s.id.clone()).collect();
    assert_eq!(ids, ["s1", "b", "s3"]);
}

#[tokio::test]
async fn a_bad_plan_is_refused_with_every_problem() {
    let mut f = Fixture::new();
    let plan = json!({
        "objective": " ",
        "steps": [{"id": "a", "title": "A"}, {"id": "a", "title": " "}, {"id": "no spaces", "title": "C"}],
        "postconditions": [{"description": ""}]
    });
    let err = f.call("plan_create", plan).await.unwrap_err();
    assert_eq!(
        err,
        "plan_create refused:\n\
         - the objective is empty\n\
         - step 2: the id `a` is used twice\n\
         - step 2 (`a`): the title is empty\n\
         - step 3: the id `no spaces` is not valid (use 1-64 letters, digits, `-`, `_` or `.`)\n\
         - postcondition 1: the description is empty"
    );
    assert!(f.book.plan.is_none());
    assert!(f.book.revisions.is_empty());

    let err = f.call("plan_create", json!({"objective": "o", "steps": []})).await.unwrap_err();
    assert_eq!(err, "plan_create refused:\n- a plan needs at least one step");
}

#[tokio::test]
async fn a_malformed_assertion_is_a_clear_error_naming_where_it_is() {
    let mut f = Fixture::new();
    let plan = json!({"objective": "o", "steps": [
        {"title": "A"},
        {"title": "B", "assertions": [{"type": "file_contains", "path": "x", "patern": "y"}]}
    ]});
    let err = f.call("plan_create", plan).await.unwrap_err();
    assert!(
        err.starts_with("invalid arguments for plan_create at steps[1].assertions[0]: "),
        "{err}"
    );
    assert!(err.contains("patern"), "{err}");

    let err = f.call("plan_create", json!({"objective": "o"})).await.unwrap_err();
    assert_eq!(err, "invalid arguments for plan_create: missing field `steps`");
    let err = f.call("step_update", json!({"id": "a", "status": "finished"})).await.unwrap_err();
    assert!(
        err.starts_with("invalid arguments for step_update at status: unknown variant `finished`"),
        "{err}"
    );
}

#[tokio::test]
async fn a_rewrite_must_keep_or_drop_every_old_step() {
    let mut f = Fixture::new();
    f.call("plan_create", css_plan()).await.unwrap();
    let posts = css_plan()["postconditions"].clone();
    let rewrite = json!({"objective": "Easier", "steps": [{"id": "read", "title": "Read"}],
        "postconditions": posts});
    let err = f.call("plan_create", rewrite).await.unwrap_err();
    assert_eq!(
        err,
        "plan_create refused:\n- the new plan leaves out step(s) `patch`, `check` of the current \
         plan: keep each one (same id) or list it in `dropped` with a reason"
    );
    // Dropping the hard step with a reason is allowed; losing the postcondition it served is not.
    let rewrite = json!({"objective": "Easier", "steps": [{"id": "read", "title": "Read"}, {"id": "check", "title": "C"}],
        "dropped": [{"id": "patch", "reason": "too hard"}],
        "postconditions": [{"description": "Nothing else changed"}]});
    let err = f.call("plan_create", rewrite).await.unwrap_err();
    assert_eq!(
        err,
        "plan_create refused:\n- the new plan leaves out postcondition(s) p1 (The stylesheet sets \
         #006400) of the current plan: a rewrite may add postconditions but must keep every one \
         (same description)"
    );
    assert_eq!(f.book.revisions.len(), 1);
    assert_eq!(f.book.plan.as_ref().unwrap().objective, "Make the page background dark green");

    // A drop without a reason, of an unknown step, or of a kept one, is refused too.
    let rewrite = json!({"objective": "Easier", "steps": [{"id": "read", "title": "Read"}, {"id": "check", "title": "C"}],
        "dropped": [{"id": "patch", "reason": " "}, {"id": "ghost", "reason": "x"}, {"id": "check", "reason": "y"}],
        "postconditions": css_plan()["postconditions"].clone()});
    let err = f.call("plan_create", rewrite).await.unwrap_err();
    assert_eq!(
        err,
        "plan_create refused:\n\
         - dropped step `patch` needs a reason\n\
         - dropped step `ghost` is not a step of the current plan\n\
         - step `check` is both kept and dropped"
    );
}

#[tokio::test]
async fn a_rewrite_with_reasons_is_recorded_and_done_steps_stay_done() {
    let mut f = Fixture::new();
    f.call("plan_create", css_plan()).await.unwrap();
    f.call("step_update", json!({"id": "read", "status": "done", "evidence": "body is white"}))
        .await
        .unwrap();
    f.call("step_update", json!({"id": "check", "status": "in_progress"})).await.unwrap();
    let rewrite = json!({
        "objective": "Green page",
        "steps": [{"id": "read", "title": "Read again"}, {"id": "check", "title": "Check"}, {"title": "New"}],
        "dropped": [{"id": "patch", "reason": "the theme file sets the colour instead"}],
        "postconditions": css_plan()["postconditions"].clone()
    });
    let reply = f.call("plan_create", rewrite).await.unwrap();
    assert!(
        reply.starts_with(
            "Plan rewritten (revision 2): 3 steps, 2 postconditions.\nDropped `patch`: the theme \
             file sets the colour instead\n\n"
        ),
        "{reply}"
    );
    assert!(reply.contains("[x] 1. read: Read again — body is white\n"), "{reply}");
    // Only done steps keep their progress.
    assert_eq!(f.status("check"), StepStatus::Pending);
    assert_eq!(f.status("s3"), StepStatus::Pending);
    let revision = &f.book.revisions[1];
    assert_eq!(revision.number, 2);
    assert_eq!(
        revision.dropped,
        vec![DroppedStep {
            id: "patch".into(),
            reason: "the theme file sets the colour instead".into()
        }]
    );
    assert_eq!(f.book.revisions[0].plan.steps.len(), 3);
}

#[tokio::test]
async fn step_updates_need_a_plan_a_known_id_evidence_and_reasons() {
    let mut f = Fixture::new();
    let err = f.call("step_update", json!({"id": "a", "status": "done", "evidence": "x"})).await;
    assert_eq!(
        err.unwrap_err(),
        "step_update refused: there is no plan yet: call plan_create first"
    );
    f.call("plan_create", css_plan()).await.unwrap();

    let err = f.call("step_update", json!({"id": "nope", "status": "done"})).await.unwrap_err();
    assert_eq!(
        err,
        "step_update refused: unknown step `nope`; the plan's steps are: read, patch, check"
    );
    for evidence in [json!(null), json!("  "), json!("Done."), json!("ok")] {
        let err = f
            .call("step_update", json!({"id": "read", "status": "done", "evidence": evidence}))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            "step_update refused: evidence is required to mark step `read` done: say what you \
             changed and how you checked it"
        );
    }
    let err = f.call("step_update", json!({"id": "read", "status": "blocked"})).await.unwrap_err();
    assert_eq!(
        err,
        "step_update refused: a reason is required to mark step `read` blocked: say what stops it"
    );
    assert_eq!(f.status("read"), StepStatus::Pending);

    let reply = f
        .call("step_update", json!({"id": "check", "status": "blocked", "reason": "no browser"}))
        .await
        .unwrap();
    assert!(reply.starts_with("Step `check` is now blocked.\n\n"), "{reply}");
    assert!(reply.contains("[!] 3. check: Check the page — blocked: no browser\n"));
}

#[tokio::test]
async fn at_most_one_step_is_in_progress() {
    let mut f = Fixture::new();
    f.call("plan_create", css_plan()).await.unwrap();
    f.call("step_update", json!({"id": "read", "status": "in_progress"})).await.unwrap();
    // Again on the same step is fine.
    f.call("step_update", json!({"id": "read", "status": "in_progress"})).await.unwrap();
    let err =
        f.call("step_update", json!({"id": "patch", "status": "in_progress"})).await.unwrap_err();
    assert_eq!(
        err,
        "step_update refused: step `read` is already in progress; mark it done, blocked or \
         pending before starting `patch` (at most one step may be in progress)"
    );
    assert_eq!(f.status("patch"), StepStatus::Pending);
    f.call("step_update", json!({"id": "read", "status": "pending"})).await.unwrap();
    f.call("step_update", json!({"id": "patch", "status": "in_progress"})).await.unwrap();
    assert_eq!(f.status("patch"), StepStatus::InProgress);
}

#[tokio::test]
async fn done_runs_the_steps_assertions_and_refuses_with_what_was_seen() {
    let mut f = Fixture::new();
    f.write("style.css", "body { background: white; }");
    f.call("plan_create", css_plan()).await.unwrap();
    f.call("step_update", json!({"id": "patch", "status": "in_progress"})).await.unwrap();

    let done = json!({"id": "patch", "status": "done", "evidence": "set the body to #006400"});
    let err = f.call("step_update", done.clone()).await.unwrap_err();
    assert!(
        err.starts_with(
            "step_update refused: step `patch` stays in_progress: 2 of 2 assertions failed:\n\
             - file_contains: "
        ),
        "{err}"
    );
    assert!(
        err.contains("\n  recovery: edit the body rule\n- content_changed: style.css is unchanged"),
        "{err}"
    );
    assert!(err.ends_with("\nFix the work, then mark the step done again."), "{err}");
    assert_eq!(f.status("patch"), StepStatus::InProgress);

    f.write("style.css", "body { background: #006400; }");
    let reply = f.call("step_update", done).await.unwrap();
    assert!(
        reply.starts_with("Step `patch` is done. Checked by the harness: file_contains: "),
        "{reply}"
    );
    assert!(reply.contains("content_changed: style.css changed: sha256 "), "{reply}");
    let plan = f.book.plan.as_ref().unwrap();
    assert_eq!(plan.step("patch").unwrap().evidence.as_deref(), Some("set the body to #006400"));
}

#[tokio::test]
async fn the_content_changed_baseline_is_taken_when_the_step_starts() {
    let mut f = Fixture::new();
    f.write("style.css", "v1 #006400");
    f.call("plan_create", css_plan()).await.unwrap();
    // Changed after the plan but before the step started: the step's own baseline is later.
    f.write("style.css", "v2 #006400");
    f.call("step_update", json!({"id": "patch", "status": "in_progress"})).await.unwrap();
    let done = json!({"id": "patch", "status": "done", "evidence": "edited it"});
    let err = f.call("step_update", done.clone()).await.unwrap_err();
    assert!(err.contains("content_changed: style.css is unchanged"), "{err}");
    // Going back to pending and starting again keeps the first baseline.
    f.call("step_update", json!({"id": "patch", "status": "pending"})).await.unwrap();
    f.write("style.css", "v3 #006400");
    f.call("step_update", json!({"id": "patch", "status": "in_progress"})).await.unwrap();
    f.call("step_update", done).await.unwrap();
}

#[tokio::test]
async fn a_step_never_started_uses_the_baseline_of_plan_create() {
    let mut f = Fixture::new();
    f.write("style.css", "white");
    f.call("plan_create", css_plan()).await.unwrap();
    let done = json!({"id": "patch", "status": "done", "evidence": "edited it"});
    f.write("style.css", "white #006400");
    f.call("step_update", done).await.unwrap();
    assert_eq!(f.status("patch"), StepStatus::Done);
}

#[tokio::test]
async fn postconditions_are_verified_by_assertions_or_recorded_as_claims() {
    let mut f = Fixture::new();
    let err = f.call("postcondition_verify", json!({"id": 1, "evidence": "x"})).await.unwrap_err();
    assert_eq!(err, "postcondition_verify refused: there is no plan yet: call plan_create first");
    f.write("style.css", "white");
    f.call("plan_create", css_plan()).await.unwrap();

    let err =
        f.call("postcondition_verify", json!({"id": "p9", "evidence": "x"})).await.unwrap_err();
    assert_eq!(
        err,
        "postcondition_verify refused: unknown postcondition `p9`; the plan's postconditions are: p1, p2"
    );
    let err = f.call("postcondition_verify", json!({"id": 0, "evidence": "x"})).await.unwrap_err();
    assert!(err.contains("unknown postcondition `0`"), "{err}");
    let err =
        f.call("postcondition_verify", json!({"id": "p1", "evidence": ""})).await.unwrap_err();
    assert_eq!(
        err,
        "postcondition_verify refused: evidence is required to verify p1 (The stylesheet sets \
         #006400): say what shows it holds"
    );

    let err = f
        .call("postcondition_verify", json!({"id": "p1", "evidence": "it is green"}))
        .await
        .unwrap_err();
    assert!(
        err.starts_with(
            "postcondition_verify refused: p1 (The stylesheet sets #006400) is not verified: 1 \
             of 1 assertions failed:\n- file_contains: "
        ),
        "{err}"
    );
    assert!(err.ends_with("\nFix the work, then verify it again."), "{err}");
    assert!(!f.book.plan.as_ref().unwrap().postconditions[0].verified);

    f.write("style.css", "body { background: #006400; }");
    let reply = f
        .call("postcondition_verify", json!({"id": 1, "evidence": "grep shows it"}))
        .await
        .unwrap();
    assert!(reply.starts_with("Postcondition p1 (The stylesheet sets #006400) is verified. Checked by the harness: file_contains: "), "{reply}");
    let reply = f
        .call("postcondition_verify", json!({"id": "2", "evidence": "git diff is one line"}))
        .await
        .unwrap();
    assert!(
        reply.starts_with(
            "Postcondition p2 (Nothing else changed) recorded as claimed: it has no assertions, so \
         the harness could not check it and reports it as not verified by the harness.\n\n"
        ),
        "{reply}"
    );
    let posts = &f.book.plan.as_ref().unwrap().postconditions;
    assert_eq!((posts[0].verified, posts[0].verified_by), (true, Some(VerifiedBy::Harness)));
    assert_eq!((posts[1].verified, posts[1].verified_by), (true, Some(VerifiedBy::Claim)));
    assert_eq!(posts[1].evidence.as_deref(), Some("git diff is one line"));

    // A rewrite keeps a verified postcondition only when it is unchanged (here p1's assertions
    // change, so it must be verified again; p2 is as it was).
    let mut rewrite = css_plan();
    rewrite["postconditions"][0]["assertions"][0]["pattern"] = json!("#013220");
    f.call("plan_create", rewrite).await.unwrap();
    let posts = &f.book.plan.as_ref().unwrap().postconditions;
    assert!(!posts[0].verified);
    assert!(posts[1].verified);
}

#[tokio::test]
async fn plan_show_renders_or_says_there_is_none() {
    let mut f = Fixture::new();
    assert_eq!(
        f.call("plan_show", json!({})).await.unwrap(),
        "No plan yet. Call plan_create with the objective, the steps and the postconditions."
    );
    f.call("plan_create", css_plan()).await.unwrap();
    let shown = f.call("plan_show", json!({})).await.unwrap();
    assert_eq!(shown, render_plan(f.book.plan.as_ref().unwrap()));
    assert!(is_plan_tool("plan_show") && !is_plan_tool("todo_write") && !is_plan_tool("file.read"));
}

#[tokio::test]
async fn a_failed_reverification_withdraws_an_earlier_verification() {
    use crate::agent::loop_mode::gate::{Decision, FinalGate, missing};

    let mut f = Fixture::new();
    f.write("style.css", "body { background: #006400; }");
    let plan = json!({
        "objective": "Green page",
        "steps": [{"id": "patch", "title": "Patch the body rule"}],
        "postconditions": [{"description": "The stylesheet sets #006400",
            "assertions": [{"type": "file_contains", "path": "style.css", "pattern": "#006400"}]}]
    });
    f.call("plan_create", plan).await.unwrap();
    f.call("step_update", json!({"id": "patch", "status": "done", "evidence": "set #006400"}))
        .await
        .unwrap();
    f.call("postcondition_verify", json!({"id": "p1", "evidence": "grep shows it"})).await.unwrap();
    let post = &f.book.plan.as_ref().unwrap().postconditions[0];
    assert_eq!((post.verified, post.verified_by), (true, Some(VerifiedBy::Harness)));
    assert!(missing(f.book.plan.as_ref(), true).is_empty());

    // The work is undone afterwards; verifying again is refused and takes the verification back.
    f.write("style.css", "body { background: white; }");
    let err = f
        .call("postcondition_verify", json!({"id": "p1", "evidence": "still green"}))
        .await
        .unwrap_err();
    assert!(
        err.starts_with(
            "postcondition_verify refused: p1 (The stylesheet sets #006400) is not verified: "
        ),
        "{err}"
    );
    let post = &f.book.plan.as_ref().unwrap().postconditions[0];
    assert!(!post.verified, "a refused re-verification must leave p1 unverified: {post:?}");
    assert_eq!(post.verified_by, None);
    assert!(f.call("plan_show", json!({})).await.unwrap().contains("— not verified"));

    // And the finalization gate sees it.
    assert_eq!(
        missing(f.book.plan.as_ref(), true),
        vec![
            "postcondition p1 (The stylesheet sets #006400) is not verified: call \
             postcondition_verify with evidence"
        ]
    );
    let mut gate = FinalGate::new(true, 3, "make the page green");
    assert!(matches!(gate.on_final_answer(f.book.plan.as_ref()), Decision::Refuse(_)));
}

/// A plan_create argument of `steps` steps and `posts` postconditions, all well-formed.
fn sized_plan(steps: usize, posts: usize) -> Value {
    let steps: Vec<Value> =
        (1..=steps).map(|i| json!({"id": format!("s{i}"), "title": format!("Step {i}")})).collect();
    let posts: Vec<Value> =
        (1..=posts).map(|i| json!({"description": format!("Condition {i}")})).collect();
    json!({"objective": "o", "steps": steps, "postconditions": posts})
}

#[tokio::test]
async fn the_step_cap_is_inclusive() {
    assert_eq!(MAX_STEPS, 50);
    let mut f = Fixture::new();
    let reply = f.call("plan_create", sized_plan(MAX_STEPS, 1)).await.unwrap();
    assert!(reply.starts_with("Plan created (revision 1): 50 steps, 1 postconditions."), "{reply}");

    let mut f = Fixture::new();
    let err = f.call("plan_create", sized_plan(MAX_STEPS + 1, 1)).await.unwrap_err();
    assert_eq!(err, "plan_create refused:\n- 51 steps is too many (at most 50)");
    assert!(f.book.plan.is_none() && f.book.revisions.is_empty());
}

#[tokio::test]
async fn the_postcondition_cap_is_inclusive() {
    assert_eq!(MAX_POSTCONDITIONS, 20);
    let mut f = Fixture::new();
    let reply = f.call("plan_create", sized_plan(1, MAX_POSTCONDITIONS)).await.unwrap();
    assert!(reply.starts_with("Plan created (revision 1): 1 steps, 20 postconditions."), "{reply}");

    let mut f = Fixture::new();
    let err = f.call("plan_create", sized_plan(1, MAX_POSTCONDITIONS + 1)).await.unwrap_err();
    assert_eq!(err, "plan_create refused:\n- 21 postconditions is too many (at most 20)");
    assert!(f.book.plan.is_none() && f.book.revisions.is_empty());
}

#[tokio::test]
async fn a_step_dropped_twice_is_refused() {
    let mut f = Fixture::new();
    f.call("plan_create", css_plan()).await.unwrap();
    let rewrite = json!({
        "objective": "Easier",
        "steps": [{"id": "read", "title": "Read"}, {"id": "check", "title": "Check"}],
        "dropped": [{"id": "patch", "reason": "not needed"}, {"id": " patch ", "reason": "again"}],
        "postconditions": css_plan()["postconditions"].clone()
    });
    let err = f.call("plan_create", rewrite).await.unwrap_err();
    assert_eq!(err, "plan_create refused:\n- step `patch` is dropped twice");
    assert_eq!(f.book.revisions.len(), 1);
    assert_eq!(f.book.plan.as_ref().unwrap().steps.len(), 3);
}

#[tokio::test]
async fn a_blank_step_id_is_numbered_like_a_missing_one() {
    let mut f = Fixture::new();
    let plan = json!({
        "objective": "o",
        "steps": [{"id": "  ", "title": "First"}, {"id": "two", "title": "Second"}],
        "postconditions": []
    });
    f.call("plan_create", plan).await.unwrap();
    let ids: Vec<String> =
        f.book.plan.as_ref().unwrap().steps.iter().map(|s| s.id.clone()).collect();
    assert_eq!(ids, ["s1", "two"]);
}

#[tokio::test]
async fn the_marks_record_where_and_against_what_each_piece_of_evidence_was_taken() {
    let mut f = Fixture::new();
    f.write("style.css", "body { background: white; }");
    f.book.note_position(Some(3));
    f.call("plan_create", css_plan()).await.unwrap();
    // The baseline of content_changed is taken when the plan names the path.
    let first = f.book.marks().first_seen;
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(matches!(first.get("style.css"), Some(Some(hash)) if hash.len() == 64), "{first:?}");

    f.book.note_position(Some(5));
    f.call("step_update", json!({"id": "patch", "status": "in_progress"})).await.unwrap();
    f.write("style.css", "body { background: #006400; }");
    f.book.note_position(Some(7));
    f.call(
        "step_update",
        json!({"id": "patch", "status": "done", "evidence": "patched the body rule"}),
    )
    .await
    .unwrap();
    f.book.note_position(Some(9));
    f.call("postcondition_verify", json!({"id": "p1", "evidence": "the stylesheet sets it"}))
        .await
        .unwrap();
    // A claim without assertions is not harness evidence: no mark.
    f.book.note_position(Some(11));
    f.call("postcondition_verify", json!({"id": "p2", "evidence": "I looked at the page"}))
        .await
        .unwrap();

    let marks = f.book.marks();
    assert_eq!(marks.step_at.get("patch"), Some(&7));
    assert_eq!(marks.postcondition_at.get("The stylesheet sets #006400"), Some(&9));
    assert_eq!(marks.postcondition_at.len(), 1, "{:?}", marks.postcondition_at);
    assert_eq!(
        marks.step_before.get("patch").map(|b| b.get("style.css")),
        Some(first.get("style.css"))
    );
    let results = marks.step_results.get("patch").unwrap();
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|r| r.passed), "{results:?}");
    let post = marks.postcondition_results.get("The stylesheet sets #006400").unwrap();
    assert_eq!(post.len(), 1);
    assert!(post[0].detail.contains("found"), "{post:?}");
    // Without a position (a gate that journals nothing) evidence is still kept, unmarked.
    f.book.note_position(None);
    f.call("step_update", json!({"id": "read", "status": "done", "evidence": "read style.css"}))
        .await
        .unwrap();
    assert!(!f.book.marks().step_at.contains_key("read"));
}

#[tokio::test]
async fn a_postcondition_number_one_past_the_last_is_unknown() {
    let mut f = Fixture::new();
    f.call("plan_create", css_plan()).await.unwrap();
    for id in [json!(3), json!("3"), json!(0)] {
        let err = f
            .call("postcondition_verify", json!({"id": id, "evidence": "it holds"}))
            .await
            .unwrap_err();
        assert!(
            err.contains("unknown postcondition")
                && err.ends_with("the plan's postconditions are: p1, p2"),
            "{id}: {err}"
        );
    }
}

/// Models write a step's position (or its id in another case) where its id is expected: taken
/// when it can mean one step only, and the reply names the step by its id.
#[tokio::test]
async fn a_step_is_found_by_position_or_case_when_that_is_unambiguous() {
    let mut f = Fixture::new();
    f.call("plan_create", css_plan()).await.unwrap();
    let cases = [
        ("1", Ok("Step `read` is now in progress.")),
        ("step 2", Ok("Step `patch` is now in progress.")),
        ("#3", Ok("Step `check` is now in progress.")),
        ("READ", Ok("Step `read` is now in progress.")),
        (
            "4",
            Err("step_update refused: unknown step `4`; the plan's steps are: read, patch, check"),
        ),
        (
            "0",
            Err("step_update refused: unknown step `0`; the plan's steps are: read, patch, check"),
        ),
    ];
    for (asked, want) in cases {
        let got = f.call("step_update", json!({"id": asked, "status": "in_progress"})).await;
        let first = got.as_deref().map(|r| r.lines().next().unwrap_or_default());
        assert_eq!(first.map_err(String::as_str), want, "{asked}");
        // Back to pending, so the next case may start a step.
        if got.is_ok() {
            f.call("step_update", json!({"id": asked, "status": "pending"})).await.unwrap();
        }
    }
}

/// A step whose id is a number is found by that id before any position.
#[tokio::test]
async fn an_id_that_is_a_number_wins_over_a_position() {
    let mut f = Fixture::new();
    let plan = json!({
        "objective": "o",
        "steps": [{"id": "2", "title": "first"}, {"id": "1", "title": "second"}],
        "postconditions": []
    });
    f.call("plan_create", plan).await.unwrap();
    let reply = f.call("step_update", json!({"id": "1", "status": "in_progress"})).await.unwrap();
    assert!(reply.starts_with("Step `1` is now in progress.\n"), "{reply}");
    assert_eq!(f.status("1"), StepStatus::InProgress);
    assert_eq!(f.status("2"), StepStatus::Pending);
}

#[test]
fn two_steps_in_one_case_fold_are_ambiguous() {
    let plan: ModelPlan = serde_json::from_value(json!({
        "objective": "o",
        "steps": [
            {"id": "Build", "title": "a", "status": "pending", "assertions": []},
            {"id": "build", "title": "b", "status": "pending", "assertions": []}
        ],
        "postconditions": []
    }))
    .unwrap();
    assert_eq!(find_step(&plan, "build"), Some(1));
    assert_eq!(find_step(&plan, "BUILD"), None);
    assert_eq!(find_step(&plan, "2"), Some(1));
}

/// A continued loop (resume): the workspace already holds the interrupted session's edit, but
/// the baseline is the file as that session saw it when the step started (what the journal
/// recorded before its write), so the step's `content_changed` holds as it did.
#[tokio::test]
async fn a_continued_loop_takes_its_baselines_from_what_the_session_saw() {
    let mut f = Fixture::new();
    f.write("style.css", "white #006400");
    let before = Some(crate::digest::sha256_hex(b"white"));
    f.book.note_recorded(HashMap::from([("style.css".to_owned(), before)]));
    f.call("plan_create", css_plan()).await.unwrap();
    f.call("step_update", json!({"id": "patch", "status": "in_progress"})).await.unwrap();
    let done = json!({"id": "patch", "status": "done", "evidence": "edited it"});
    f.call("step_update", done.clone()).await.unwrap();
    assert_eq!(f.status("patch"), StepStatus::Done);

    // Without it the same workspace reads as unchanged.
    let mut g = Fixture::new();
    g.write("style.css", "white #006400");
    g.call("plan_create", css_plan()).await.unwrap();
    g.call("step_update", json!({"id": "patch", "status": "in_progress"})).await.unwrap();
    let err = g.call("step_update", done).await.unwrap_err();
    assert!(err.contains("content_changed: style.css is unchanged"), "{err}");
}
