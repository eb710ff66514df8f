//! Every way out of the workspace we could think of, through the tools and through the helpers
//! the verifier reuses. An escape is a fatal error naming the path; nothing outside is read or
//! written.

use pev_tools::{SandboxError, ToolError};
use serde_json::json;

use super::support::Fixture;

const LEAVES: &str = "leaves the workspace";

async fn assert_read_escapes(f: &Fixture, path: &str) {
    let msg = f.fatal("file.read", json!({ "path": path })).await;
    assert_eq!(msg, format!("path `{path}` {LEAVES}"));
}

#[tokio::test]
async fn dot_dot_is_refused() {
    let f = Fixture::new();
    assert_read_escapes(&f, "../outside/secret.txt").await;
    assert_read_escapes(&f, "..").await;
    assert_read_escapes(&f, "a/../../outside/secret.txt").await;
    assert_read_escapes(&f, "./a/b/../../../outside/secret.txt").await;
}

#[tokio::test]
async fn absolute_paths_are_refused() {
    let f = Fixture::new();
    assert_read_escapes(&f, "/etc/passwd").await;
    let secret = f.outside().join("secret.txt");
    assert_read_escapes(&f, secret.to_str().unwrap()).await;
    // Even an absolute path that points *into* the workspace: plans use relative paths.
    let inside = f.path("x.txt");
    f.write("x.txt", "x");
    assert_read_escapes(&f, inside.to_str().unwrap()).await;
}

#[tokio::test]
async fn a_symlink_to_etc_is_refused_for_every_tool() {
    let f = Fixture::new();
    f.symlink("/etc", "etc");
    assert_read_escapes(&f, "etc/passwd").await;
    let msg = f.fatal("file.list", json!({"path": "etc"})).await;
    assert_eq!(msg, format!("path `etc` {LEAVES}"));
    let msg = f.fatal("file.write", json!({"path": "etc/pev-test", "content": "x"})).await;
    assert_eq!(msg, format!("path `etc/pev-test` {LEAVES}"));
    let msg = f
        .fatal("file.patch", json!({"path": "etc/hostname", "edits": [{"old": "a", "new": "b"}]}))
        .await;
    assert_eq!(msg, format!("path `etc/hostname` {LEAVES}"));
}

#[tokio::test]
async fn a_symlink_to_a_file_outside_is_refused() {
    let f = Fixture::new();
    f.symlink(f.outside().join("secret.txt"), "abs-link");
    f.symlink("../outside/secret.txt", "rel-link");
    for link in ["abs-link", "rel-link"] {
        assert_read_escapes(&f, link).await;
        let msg = f.fatal("file.write", json!({"path": link, "content": "pwned"})).await;
        assert_eq!(msg, format!("path `{link}` {LEAVES}"));
    }
    f.assert_outside_untouched();
}

#[tokio::test]
async fn a_symlink_to_the_parent_directory_is_refused() {
    let f = Fixture::new();
    f.symlink("..", "up");
    assert_read_escapes(&f, "up/outside/secret.txt").await;
    let msg = f.fatal("file.write", json!({"path": "up/outside/new.txt", "content": "x"})).await;
    assert_eq!(msg, format!("path `up/outside/new.txt` {LEAVES}"));
    let msg = f.fatal("file.list", json!({"path": "up/outside"})).await;
    assert!(msg.ends_with(LEAVES), "{msg}");
    f.assert_outside_untouched();
}

#[tokio::test]
async fn a_symlink_swapped_in_after_a_successful_read_is_refused() {
    let f = Fixture::new();
    f.write("data.txt", "harmless\n");
    let first = f.ok("file.read", json!({"path": "data.txt"})).await;
    assert_eq!(first["content"], "harmless\n");

    std::fs::remove_file(f.path("data.txt")).unwrap();
    f.symlink(f.outside().join("secret.txt"), "data.txt");
    assert_read_escapes(&f, "data.txt").await;
    let msg = f.fatal("file.write", json!({"path": "data.txt", "content": "pwned"})).await;
    assert!(msg.ends_with(LEAVES), "{msg}");
    let msg = f
        .fatal("file.patch", json!({"path": "data.txt", "edits": [{"old": "top", "new": "x"}]}))
        .await;
    assert!(msg.ends_with(LEAVES), "{msg}");
    f.assert_outside_untouched();
}

#[tokio::test]
async fn a_directory_swapped_for_a_symlink_is_refused() {
    let f = Fixture::new();
    f.write("sub/f.txt", "inside\n");
    f.ok("file.read", json!({"path": "sub/f.txt"})).await;
    f.ok("file.write", json!({"path": "sub/g.txt", "content": "g"})).await;

    std::fs::rename(f.path("sub"), f.path("old-sub")).unwrap();
    f.symlink("../outside", "sub");
    assert_read_escapes(&f, "sub/secret.txt").await;
    let msg = f.fatal("file.write", json!({"path": "sub/g.txt", "content": "pwned"})).await;
    assert!(msg.ends_with(LEAVES), "{msg}");
    let msg = f.fatal("file.write", json!({"path": "sub/new.txt", "content": "pwned"})).await;
    assert!(msg.ends_with(LEAVES), "{msg}");
    f.assert_outside_untouched();
}

#[tokio::test]
async fn a_dangling_symlink_inside_is_missing_and_not_written_through() {
    let f = Fixture::new();
    f.symlink("missing.txt", "dangling");
    let msg = f.respond("file.read", json!({"path": "dangling"})).await;
    assert_eq!(msg, "`dangling` does not exist");
    assert!(!f.ws().exists("dangling").unwrap());
    assert_eq!(f.ws().sha256("dangling").unwrap(), None);
    let msg = f.respond("file.write", json!({"path": "dangling", "content": "x"})).await;
    assert_eq!(msg, "`dangling` is a symlink to a missing file");
    assert!(!f.path("missing.txt").exists());
}

#[tokio::test]
async fn a_dangling_symlink_pointing_outside_is_an_escape() {
    let f = Fixture::new();
    f.symlink(f.outside().join("not-yet.txt"), "dangling-out");
    f.symlink("../outside/not-yet.txt", "dangling-rel");
    for link in ["dangling-out", "dangling-rel"] {
        assert_read_escapes(&f, link).await;
        let msg = f.fatal("file.write", json!({"path": link, "content": "x"})).await;
        assert!(msg.ends_with(LEAVES), "{msg}");
        // "Does not exist" would let `file_not_exists` pass on a path outside.
        assert!(matches!(f.ws().exists(link), Err(SandboxError::Escape { .. })));
    }
    f.assert_outside_untouched();
}

#[tokio::test]
async fn a_path_with_a_nul_byte_is_refused_before_any_lookup() {
    let f = Fixture::new();
    f.write("a", "a");
    let msg = f.respond("file.read", json!({"path": "a\u{0}/../../outside/secret.txt"})).await;
    assert!(msg.ends_with("is not valid: it contains a NUL byte"), "{msg}");
    let msg = f.respond("file.write", json!({"path": "b\u{0}", "content": "x"})).await;
    assert!(msg.ends_with("it contains a NUL byte"), "{msg}");
}

#[tokio::test]
async fn symlinks_that_stay_inside_are_followed() {
    let f = Fixture::new();
    f.write("real/target.txt", "real\n");
    f.symlink("real/target.txt", "link.txt");
    f.symlink("real", "dirlink");
    let out = f.ok("file.read", json!({"path": "link.txt"})).await;
    assert_eq!(out["content"], "real\n");
    let out = f.ok("file.read", json!({"path": "dirlink/target.txt"})).await;
    assert_eq!(out["content"], "real\n");
    // Writing through the link updates the target and keeps the link.
    f.ok("file.write", json!({"path": "link.txt", "content": "new\n"})).await;
    assert_eq!(f.read("real/target.txt"), "new\n");
    assert!(std::fs::symlink_metadata(f.path("link.txt")).unwrap().file_type().is_symlink());
    // A new file below a symlinked directory lands in the real directory.
    f.ok("file.write", json!({"path": "dirlink/new.txt", "content": "n"})).await;
    assert_eq!(f.read("real/new.txt"), "n");
}

#[tokio::test]
async fn a_dangling_directory_symlink_in_the_way_of_a_write_is_the_models_problem() {
    let f = Fixture::new();
    f.symlink("missing-dir", "dl");
    let msg = f.respond("file.write", json!({"path": "dl/x.txt", "content": "x"})).await;
    assert_eq!(msg, "`dl/x.txt`: a component of the path is not a directory");
}

#[tokio::test]
async fn fifos_are_refused_instead_of_blocking() {
    let f = Fixture::new();
    let status = std::process::Command::new("mkfifo").arg(f.path("pipe")).status().unwrap();
    assert!(status.success());
    let msg = f.respond("file.read", json!({"path": "pipe"})).await;
    assert_eq!(msg, "`pipe` is not a regular file");
    assert!(matches!(f.ws().sha256("pipe"), Err(SandboxError::NotAFile { .. })));
    let listed = f.ok("file.list", json!({"path": "."})).await;
    assert_eq!(listed["entries"], json!([{"path": "pipe", "kind": "other", "bytes": 0}]));
}

#[tokio::test]
async fn listing_never_descends_into_symlinks() {
    let f = Fixture::new();
    f.write("a.txt", "a");
    f.symlink("/etc", "etc");
    f.symlink("..", "up");
    let out = f.ok("file.list", json!({"path": ".", "recursive": true})).await;
    assert_eq!(
        out["entries"],
        json!([
            {"path": "a.txt", "kind": "file", "bytes": 1},
            {"path": "etc", "kind": "symlink", "bytes": 0},
            {"path": "up", "kind": "symlink", "bytes": 0},
        ])
    );
}

#[test]
fn the_verifier_helpers_refuse_escapes_too() {
    let f = Fixture::new();
    f.symlink("/etc", "etc");
    for path in ["../outside/secret.txt", "/etc/passwd", "etc/passwd"] {
        assert!(matches!(f.ws().read(path), Err(SandboxError::Escape { .. })), "{path}");
        assert!(matches!(f.ws().exists(path), Err(SandboxError::Escape { .. })), "{path}");
        assert!(matches!(f.ws().sha256(path), Err(SandboxError::Escape { .. })), "{path}");
        assert!(matches!(f.ws().metadata(path), Err(SandboxError::Escape { .. })), "{path}");
        let write = f.ws().write(path, b"x");
        assert!(matches!(write, Err(SandboxError::Escape { .. })), "{path}: {write:?}");
    }
    let err: ToolError = f.ws().read("../x").unwrap_err().into();
    assert!(err.is_fatal());
    assert_eq!(err.message(), "path `../x` leaves the workspace");
    f.assert_outside_untouched();
}

#[tokio::test]
async fn the_journal_directory_is_out_of_bounds() {
    let f = Fixture::new();
    f.write(".pev/pev.db", "journal");
    f.write("keep.txt", "k");
    let reserved = "inside `.pev`, pev's journal directory";
    for path in [".pev/pev.db", "./.pev/pev.db", "a/../.pev/pev.db", ".pev"] {
        let msg = f.fatal("file.write", json!({"path": path, "content": "x"})).await;
        assert!(msg.contains(reserved), "{path}: {msg}");
    }
    let msg = f.fatal("file.read", json!({"path": ".pev/pev.db"})).await;
    assert!(msg.contains(reserved), "{msg}");
    // A symlink elsewhere that leads into `.pev` does not get around it.
    f.symlink(".pev/pev.db", "db-link");
    let msg = f.fatal("file.write", json!({"path": "db-link", "content": "x"})).await;
    assert!(msg.contains(reserved), "{msg}");
    assert_eq!(std::fs::read_to_string(f.path(".pev/pev.db")).unwrap(), "journal");
    // And a listing of the root does not show it.
    let out = f.ok("file.list", json!({"path": ".", "recursive": true})).await;
    let paths: Vec<&str> =
        out["entries"].as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"keep.txt"), "{paths:?}");
    assert!(!paths.iter().any(|p| p.starts_with(".pev")), "{paths:?}");
}

#[test]
fn stale_temporary_files_of_a_write_are_removed_and_nothing_else() {
    let f = Fixture::new();
    f.write("d/a.txt", "A");
    f.write("d/.a.txt.pev-tmp-123-4", "half");
    f.write("d/.a.txt.pev-tmp-9-0", "half");
    f.write("d/.b.txt.pev-tmp-1-1", "other file's");
    f.write("d/.a.txt.keep", "not ours");
    f.write(".top.txt.pev-tmp-1-1", "root");
    let ws = &f.ctx.workspace;
    assert_eq!(ws.remove_stale_temps("d/a.txt").unwrap(), 2);
    assert!(!f.path("d/.a.txt.pev-tmp-123-4").exists());
    assert!(!f.path("d/.a.txt.pev-tmp-9-0").exists());
    for kept in ["d/a.txt", "d/.b.txt.pev-tmp-1-1", "d/.a.txt.keep", ".top.txt.pev-tmp-1-1"] {
        assert!(f.path(kept).exists(), "{kept} must stay");
    }
    assert_eq!(ws.remove_stale_temps("top.txt").unwrap(), 1);
    assert_eq!(ws.remove_stale_temps("missing/dir/x.txt").unwrap(), 0);
    assert!(ws.remove_stale_temps("../x.txt").unwrap_err().is_escape());
}

/// `Workspace::remove_file` goes through the workspace's own handle (issue 31: `pev replay`
/// removed a created file with `std::fs` and the path `resolve` gives, relative to the
/// workspace, so it removed the file of that name in the current directory instead).
#[test]
fn remove_file_removes_inside_the_workspace_only() {
    // The removal that must not touch the current directory's file runs in a child of this test
    // binary started in `elsewhere`: changing this process's directory would move every test
    // running beside this one.
    const ROOT_VAR: &str = "PEV_TEST_REMOVE_FILE_ROOT";
    if let Some(root) = std::env::var_os(ROOT_VAR) {
        let ws = pev_tools::Workspace::open(std::path::Path::new(&root)).unwrap();
        ws.remove_file("notes/changelog.txt").unwrap();
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    for dir in [root.path(), elsewhere.path()] {
        std::fs::create_dir_all(dir.join("notes")).unwrap();
        std::fs::write(dir.join("notes/changelog.txt"), "1.2\n").unwrap();
    }
    let ws = pev_tools::Workspace::open(root.path()).unwrap();
    // The same relative path exists where the process stands: it must be left alone.
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "suite::sandbox::remove_file_removes_inside_the_workspace_only"])
        .args(["--test-threads", "1", "--quiet"])
        .env(ROOT_VAR, root.path())
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(child.status.success(), "{stdout}{}", String::from_utf8_lossy(&child.stderr));
    assert!(stdout.contains("1 passed"), "the child ran the removal: {stdout}");
    assert!(!root.path().join("notes/changelog.txt").exists(), "removed in the workspace");
    assert!(elsewhere.path().join("notes/changelog.txt").exists(), "not in the current directory");
    // Already absent, or its directory absent: nothing to do.
    ws.remove_file("notes/changelog.txt").unwrap();
    ws.remove_file("gone/x.txt").unwrap();

    // A symlink is removed itself, never what it points to; nothing outside is reachable.
    let outside = elsewhere.path().join("notes/changelog.txt");
    std::os::unix::fs::symlink(&outside, root.path().join("link")).unwrap();
    ws.remove_file("link").unwrap();
    assert!(outside.exists() && !root.path().join("link").exists());
    std::os::unix::fs::symlink(elsewhere.path(), root.path().join("out")).unwrap();
    assert!(
        ws.remove_file("out/notes/changelog.txt").is_err(),
        "through a link out of the workspace"
    );
    assert!(outside.exists());
    assert!(matches!(ws.remove_file("../x"), Err(SandboxError::Escape { .. })));
    std::fs::create_dir_all(root.path().join(".pev")).unwrap();
    std::fs::write(root.path().join(".pev/pev.db"), "journal").unwrap();
    assert!(matches!(ws.remove_file(".pev/pev.db"), Err(SandboxError::Reserved { .. })));
    assert!(matches!(ws.remove_file("notes"), Err(SandboxError::IsDirectory { .. })));
}
