//! A write scope (a delegated child run's): writes only beneath one directory of the workspace,
//! whatever the path says or a symlink leads to; reads stay workspace-wide.

use pev_tools::{SandboxError, ToolContext};
use serde_json::json;

use super::support::Fixture;

fn scoped(f: &Fixture, scope: &str) -> ToolContext {
    ToolContext {
        workspace: f.ws().scoped(scope).expect("scope"),
        policy: f.ctx.policy.clone(),
        sandbox: std::sync::Arc::clone(&f.ctx.sandbox),
    }
}

#[test]
fn writes_inside_the_scope_pass_and_outside_it_are_refused() {
    let f = Fixture::new();
    let ws = f.ws().scoped("docs").expect("scope");
    assert!(f.path("docs").is_dir(), "the scope exists before anything runs in it");
    ws.write("docs/a.md", b"a").expect("inside");
    ws.write("./docs/sub/b.md", b"b").expect("inside, nested");
    for path in ["a.md", "docs2/x.md", "docs/../x.md", "src/docs/x.md"] {
        let err = ws.write(path, b"x").expect_err(path);
        assert!(matches!(err, SandboxError::OutOfScope { .. }), "{path}: {err:?}");
        assert_eq!(
            err.to_string(),
            format!("`{path}` is outside `docs`, the only directory this run may change")
        );
    }
    assert!(!f.path("a.md").exists() && !f.path("x.md").exists());
    assert_eq!(ws.write_scope(), Some(std::path::Path::new("docs")));
    assert_eq!(ws.write_root(), f.ws().root().join("docs"));
}

#[test]
fn a_symlink_in_the_scope_that_leads_out_of_it_is_refused() {
    let f = Fixture::new();
    f.write("outside-scope.txt", "keep");
    std::fs::create_dir_all(f.path("docs")).expect("mkdir");
    // Relative, so the link stays inside the workspace (an absolute one is an escape).
    f.symlink("../outside-scope.txt", "docs/link.txt");
    let ws = f.ws().scoped("docs").expect("scope");
    let err = ws.write("docs/link.txt", b"changed").expect_err("through the link");
    assert!(matches!(err, SandboxError::OutOfScope { .. }), "{err:?}");
    assert_eq!(f.read("outside-scope.txt"), "keep");
}

#[test]
fn a_scope_narrows_never_widens_and_never_leaves_the_workspace() {
    let f = Fixture::new();
    let docs = f.ws().scoped("docs").expect("scope");
    let api = docs.scoped("docs/api").expect("narrower");
    assert!(api.write("docs/api/x.md", b"x").is_ok());
    assert!(api.write("docs/y.md", b"y").is_err());
    assert!(matches!(docs.scoped("src"), Err(SandboxError::OutOfScope { .. })));
    assert!(matches!(f.ws().scoped("../elsewhere"), Err(SandboxError::Escape { .. })));
    assert!(matches!(f.ws().scoped(".pev"), Err(SandboxError::Reserved { .. })));
    // No scope under a scope keeps it.
    let same = docs.scoped("").expect("inherits");
    assert_eq!(same.write_scope(), Some(std::path::Path::new("docs")));
    // The root is the whole workspace.
    let whole = f.ws().scoped(".").expect("root");
    assert_eq!(whole.write_scope(), None);
    assert!(whole.write("anywhere.txt", b"x").is_ok());
}

#[tokio::test]
async fn the_write_tools_tell_the_model_and_reads_stay_wide() {
    let f = Fixture::new();
    f.write("README.md", "read me");
    let ctx = scoped(&f, "docs");
    let tool = pev_tools::Registry::builtin();
    let write = tool.get("file.write").expect("file.write");
    let err = write
        .call(&ctx, json!({"path": "README.md", "content": "x"}))
        .await
        .expect_err("outside the scope");
    assert!(!err.is_fatal(), "the model is told, the step is not ended: {err:?}");
    assert!(err.message().contains("outside `docs`"), "{err:?}");
    let read = tool.get("file.read").expect("file.read");
    let out = read.call(&ctx, json!({"path": "README.md"})).await.expect("read outside the scope");
    assert_eq!(out["content"], "read me");
    let patch = tool.get("file.patch").expect("file.patch");
    let err = patch
        .call(&ctx, json!({"path": "README.md", "edits": [{"old": "read", "new": "x"}]}))
        .await
        .expect_err("patch outside the scope");
    assert!(err.message().contains("outside `docs`"), "{err:?}");
    assert_eq!(f.read("README.md"), "read me");
}

#[test]
fn a_symlinked_directory_in_the_scope_cannot_carry_a_new_file_out_of_it() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.path("docs")).expect("mkdir");
    std::fs::create_dir_all(f.path("src")).expect("mkdir");
    f.symlink("../src", "docs/l");
    let ws = f.ws().scoped("docs").expect("scope");
    for path in ["docs/l/x.rs", "docs/l/new/deeper.rs"] {
        let err = ws.write(path, b"x").expect_err(path);
        assert!(matches!(err, SandboxError::OutOfScope { .. }), "{path}: {err:?}");
    }
    assert!(!f.path("src/x.rs").exists() && !f.path("src/new").exists());
    // A real directory inside the scope still takes new files, however deep.
    ws.write("docs/new/deeper/x.md", b"x").expect("inside");
}

#[test]
fn a_scope_that_is_a_symlink_is_refused() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.path("src")).expect("mkdir");
    f.symlink("src", "docs");
    let err = f.ws().scoped("docs").expect_err("a symlinked scope");
    assert!(err.to_string().contains("symlink"), "{err}");
}
