//! The plan-execution mismatch rule in loop mode: a step whose title names the files it changes
//! cannot be marked done while none of them changed; the refusal names the files expected and
//! the files changed. Read-only steps, and a named file changed before the plan was written
//! (seen by the journal), are not refused.

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
        std::fs::create_dir(dir.path().join("site")).unwrap();
        let ctx = ToolContext::new(Workspace::open(dir.path()).unwrap());
        let f = Self { _dir: dir, ctx, book: PlanBook::default() };
        f.write("site/style.css", "body { background: white; }\n");
        f.write("site/theme.css", ":root { --accent: blue; }\n");
        f
    }

    fn write(&self, path: &str, content: &str) {
        std::fs::write(self.ctx.workspace.root().join(path), content).unwrap();
    }

    async fn call(&mut self, tool: &str, input: Value) -> Reply {
        self.book.call(tool, input, &self.ctx).await
    }

    async fn done(&mut self, id: &str) -> Reply {
        let evidence = "changed the stylesheet and read it back";
        self.call("step_update", json!({"id": id, "status": "done", "evidence": evidence})).await
    }

    fn status(&self, id: &str) -> StepStatus {
        self.book.plan.as_ref().unwrap().step(id).unwrap().status
    }
}

fn plan() -> Value {
    json!({
        "objective": "Make the page background dark green",
        "steps": [
            {"id": "look", "title": "Read site/style.css"},
            {"id": "patch", "title": "Patch the body rule in site/style.css"}
        ]
    })
}

#[tokio::test]
async fn a_step_that_changed_another_file_is_refused_naming_both() {
    let mut f = Fixture::new();
    f.call("plan_create", plan()).await.unwrap();
    f.call("step_update", json!({"id": "patch", "status": "in_progress"})).await.unwrap();
    f.write("site/theme.css", "body { background: #013220; }\n");
    f.book.note_changes(vec!["site/theme.css".into()]);
    let refused = f.done("patch").await.unwrap_err();
    assert!(
        refused.starts_with(
            "step_update refused: step `patch` stays in_progress: plan-execution mismatch: the \
             step was to change site/style.css, but it changed site/theme.css instead"
        ),
        "{refused}"
    );
    assert_eq!(f.status("patch"), StepStatus::InProgress);

    // Changing the named file (by any means: here not through the journal) lets it be done.
    f.write("site/style.css", "body { background: #013220; }\n");
    f.done("patch").await.unwrap();
    assert_eq!(f.status("patch"), StepStatus::Done);
}

#[tokio::test]
async fn a_step_that_changed_nothing_is_refused_and_a_read_only_step_is_not() {
    let mut f = Fixture::new();
    f.call("plan_create", plan()).await.unwrap();
    f.done("look").await.unwrap();
    assert_eq!(f.status("look"), StepStatus::Done);
    let refused = f.done("patch").await.unwrap_err();
    assert!(refused.contains("the step was to change site/style.css, but it changed no file"));
    assert_eq!(f.status("patch"), StepStatus::Pending);
}

#[tokio::test]
async fn a_named_file_the_journal_saw_changed_before_the_plan_counts() {
    // The model did the work first and planned afterwards: the plan's baseline already has the
    // change, but the journal's record of the loop's calls shows it.
    let mut f = Fixture::new();
    f.write("site/style.css", "body { background: #013220; }\n");
    f.book.note_changes(vec!["site/style.css".into()]);
    f.call("plan_create", plan()).await.unwrap();
    f.done("patch").await.unwrap();
    assert_eq!(f.status("patch"), StepStatus::Done);
}

#[tokio::test]
async fn the_refusal_names_only_what_changed_since_the_step_started() {
    let mut f = Fixture::new();
    f.book.note_changes(vec!["site/index.html".into()]);
    f.call("plan_create", plan()).await.unwrap();
    f.call("step_update", json!({"id": "patch", "status": "in_progress"})).await.unwrap();
    f.book.note_changes(vec!["site/index.html".into(), "site/theme.css".into()]);
    let refused = f.done("patch").await.unwrap_err();
    assert!(refused.contains("but it changed site/theme.css instead"), "{refused}");
}
