//! file.read, file.list, file.write, file.patch: outputs and errors.

use std::os::unix::fs::PermissionsExt;

use pev_tools::{ListOptions, ToolPolicy};
use serde_json::json;

use super::support::Fixture;

fn sha256_hex(bytes: &[u8]) -> String {
    // coreutils' sha256sum: an implementation independent of the one under test.
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(bytes)?;
            child.wait_with_output()
        })
        .unwrap();
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_owned()
}

// ---- file.read ----

#[tokio::test]
async fn read_returns_content_size_and_hash_of_the_whole_file() {
    let f = Fixture::new();
    f.write("dir/a.txt", "hello\nworld\n");
    let out = f.ok("file.read", json!({"path": "dir/a.txt"})).await;
    assert_eq!(out["content"], "hello\nworld\n");
    assert_eq!(out["bytes"], 12);
    assert_eq!(out["sha256"], sha256_hex(b"hello\nworld\n"));
    assert_eq!(out["total_lines"], 2);
    assert_eq!(out["truncated"], false);
    assert_eq!(out["lossy"], false);
}

#[tokio::test]
async fn read_offset_and_limit_select_lines_but_hash_everything() {
    let f = Fixture::new();
    f.write("l.txt", "l0\nl1\nl2\nl3");
    let out = f.ok("file.read", json!({"path": "l.txt", "offset": 1, "limit": 2})).await;
    assert_eq!(out["content"], "l1\nl2\n");
    assert_eq!(out["bytes"], 11);
    assert_eq!(out["total_lines"], 4);
    assert_eq!(out["sha256"], sha256_hex(b"l0\nl1\nl2\nl3"));
    let tail = f.ok("file.read", json!({"path": "l.txt", "offset": 3})).await;
    assert_eq!(tail["content"], "l3");
    let past = f.ok("file.read", json!({"path": "l.txt", "offset": 10})).await;
    assert_eq!(past["content"], "");
    let none = f.ok("file.read", json!({"path": "l.txt", "limit": 0})).await;
    assert_eq!(none["content"], "");
}

#[tokio::test]
async fn read_caps_content_at_the_policy_limit() {
    let f = Fixture::with_policy(ToolPolicy { max_output_bytes: 10, ..ToolPolicy::default() });
    f.write("big.txt", &"abcdefgh\n".repeat(100));
    let out = f.ok("file.read", json!({"path": "big.txt"})).await;
    assert_eq!(out["content"], "abcdefgh\na");
    assert_eq!(out["truncated"], true);
    assert_eq!(out["bytes"], 900);
    assert_eq!(out["total_lines"], 100);
}

#[tokio::test]
async fn read_of_binary_content_is_lossy_and_says_so() {
    let f = Fixture::new();
    std::fs::write(f.path("bin"), [b'o', b'k', 0xff, 0xfe]).unwrap();
    let out = f.ok("file.read", json!({"path": "bin"})).await;
    assert_eq!(out["content"], "ok\u{fffd}\u{fffd}");
    assert_eq!(out["lossy"], true);
    assert_eq!(out["bytes"], 4);
}

#[tokio::test]
async fn read_errors_go_back_to_the_model() {
    let f = Fixture::new();
    f.write("d/x", "x");
    assert_eq!(
        f.respond("file.read", json!({"path": "nope.txt"})).await,
        "`nope.txt` does not exist"
    );
    assert_eq!(f.respond("file.read", json!({"path": "d"})).await, "`d` is a directory");
    assert_eq!(f.respond("file.read", json!({"path": "."})).await, "`.` is a directory");
    assert_eq!(
        f.respond("file.read", json!({"path": "d/x/y"})).await,
        "`d/x/y`: a component of the path is not a directory"
    );
    let msg = f.respond("file.read", json!({"patth": "a"})).await;
    assert!(msg.starts_with("invalid arguments for file.read: unknown field `patth`"), "{msg}");
    let msg = f.respond("file.read", json!({})).await;
    assert!(msg.contains("missing field `path`"), "{msg}");
    let msg = f.respond("file.read", json!({"path": "d/x", "offset": -1})).await;
    assert!(msg.contains("invalid value"), "{msg}");
}

// ---- file.list ----

#[tokio::test]
async fn list_is_sorted_with_kinds_and_sizes() {
    let f = Fixture::new();
    f.write("b.txt", "bb");
    f.write("a.css", "a");
    f.write("sub/c.txt", "ccc");
    f.write("sub/deeper/d.css", "dddd");
    let out = f.ok("file.list", json!({"path": "."})).await;
    assert_eq!(
        out,
        json!({"entries": [
            {"path": "a.css", "kind": "file", "bytes": 1},
            {"path": "b.txt", "kind": "file", "bytes": 2},
            {"path": "sub", "kind": "dir", "bytes": 0},
        ], "truncated": false})
    );
    let out = f.ok("file.list", json!({"path": "sub", "recursive": true})).await;
    let paths: Vec<_> =
        out["entries"].as_array().unwrap().iter().map(|e| e["path"].clone()).collect();
    assert_eq!(paths, [json!("sub/c.txt"), json!("sub/deeper"), json!("sub/deeper/d.css")]);
}

#[tokio::test]
async fn list_glob_matches_names_or_relative_paths() {
    let f = Fixture::new();
    f.write("a.css", "a");
    f.write("b.txt", "b");
    f.write("sub/c.css", "c");
    f.write("sub/deeper/d.css", "d");
    let paths = |v: serde_json::Value| -> Vec<String> {
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap().to_owned())
            .collect()
    };
    let out = f.ok("file.list", json!({"path": ".", "recursive": true, "glob": "*.css"})).await;
    assert_eq!(paths(out), ["a.css", "sub/c.css", "sub/deeper/d.css"]);
    let out = f.ok("file.list", json!({"path": ".", "recursive": true, "glob": "sub/*.css"})).await;
    assert_eq!(paths(out), ["sub/c.css"]);
    let out = f.ok("file.list", json!({"path": ".", "recursive": true, "glob": "**/d.css"})).await;
    assert_eq!(paths(out), ["sub/deeper/d.css"]);
    let msg = f.respond("file.list", json!({"path": ".", "glob": "a[.css"})).await;
    assert!(msg.starts_with("invalid glob `a[.css`"), "{msg}");
}

#[tokio::test]
async fn list_of_a_file_or_a_missing_path() {
    let f = Fixture::new();
    f.write("sub/c.txt", "ccc");
    let out = f.ok("file.list", json!({"path": "sub/c.txt"})).await;
    assert_eq!(out["entries"], json!([{"path": "sub/c.txt", "kind": "file", "bytes": 3}]));
    assert_eq!(f.respond("file.list", json!({"path": "nope"})).await, "`nope` does not exist");
}

#[tokio::test]
async fn list_is_capped_at_ten_thousand_entries() {
    let f = Fixture::new();
    std::fs::create_dir(f.path("many")).unwrap();
    for i in 0..10_001 {
        std::fs::File::create(f.path(&format!("many/{i:05}"))).unwrap();
    }
    let out = f.ok("file.list", json!({"path": "many"})).await;
    let entries = out["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 10_000);
    assert_eq!(out["truncated"], true);
    assert_eq!(entries[0]["path"], "many/00000");
    assert_eq!(entries[9_999]["path"], "many/09999");
}

#[test]
fn list_cap_counts_only_matching_entries() {
    let f = Fixture::new();
    for name in ["a.txt", "b.css", "c.txt", "d.css", "e.txt"] {
        f.write(name, "x");
    }
    let options = ListOptions { recursive: false, glob: Some("*.txt"), max_entries: 2 };
    let listing = f.ws().list("", options).unwrap();
    let paths: Vec<_> = listing.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "c.txt"]);
    assert!(listing.truncated);
    let options = ListOptions { max_entries: 3, ..options };
    assert!(!f.ws().list("", options).unwrap().truncated);
}

// ---- file.write ----

#[tokio::test]
async fn write_creates_parents_and_reports_size_and_hash() {
    let f = Fixture::new();
    let out = f.ok("file.write", json!({"path": "new/dir/f.txt", "content": "héllo"})).await;
    assert_eq!(out, json!({"bytes": 6, "sha256": sha256_hex("héllo".as_bytes()), "created": true}));
    assert_eq!(f.read("new/dir/f.txt"), "héllo");
    let out = f.ok("file.write", json!({"path": "new/dir/f.txt", "content": ""})).await;
    assert_eq!(out["created"], false);
    assert_eq!(out["bytes"], 0);
    assert_eq!(f.read("new/dir/f.txt"), "");
    // No temporary file is left beside it.
    let names: Vec<_> =
        std::fs::read_dir(f.path("new/dir")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["f.txt"]);
}

#[tokio::test]
async fn write_keeps_the_permissions_of_the_file_it_replaces() {
    let f = Fixture::new();
    f.write("run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(f.path("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    f.ok("file.write", json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"})).await;
    let mode = std::fs::metadata(f.path("run.sh")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);
}

#[tokio::test]
async fn write_errors() {
    let f = Fixture::new();
    f.write("d/x", "x");
    assert_eq!(
        f.respond("file.write", json!({"path": "d", "content": "x"})).await,
        "`d` is a directory"
    );
    let msg = f.respond("file.write", json!({"path": ".", "content": "x"})).await;
    assert_eq!(msg, "path `.` is not valid: it names the workspace root, not a file");
    let msg = f.respond("file.write", json!({"path": "d/x/y", "content": "x"})).await;
    assert_eq!(msg, "`d/x/y`: a component of the path is not a directory");
    let msg = f.respond("file.write", json!({"path": "a"})).await;
    assert!(msg.contains("missing field `content`"), "{msg}");
}

// ---- file.patch ----

#[tokio::test]
async fn patch_replaces_exact_text() {
    let f = Fixture::new();
    f.write("site/style.css", "body {\n  background: white;\n}\n");
    let out = f
        .ok(
            "file.patch",
            json!({"path": "site/style.css", "edits": [{"old": "background: white", "new": "background: darkgreen"}]}),
        )
        .await;
    assert_eq!(out["changed"], true);
    assert_eq!(out["bytes_before"], 30);
    assert_eq!(out["bytes_after"], 34);
    assert_eq!(out["replacements"], 1);
    assert_eq!(f.read("site/style.css"), "body {\n  background: darkgreen;\n}\n");
    assert_eq!(out["sha256"], sha256_hex(f.read("site/style.css").as_bytes()));
}

#[tokio::test]
async fn patch_is_all_or_nothing() {
    let f = Fixture::new();
    f.write("f.txt", "one two three\n");
    let msg = f
        .respond(
            "file.patch",
            json!({"path": "f.txt", "edits": [{"old": "one", "new": "1"}, {"old": "four", "new": "4"}]}),
        )
        .await;
    assert_eq!(
        msg,
        "file.patch: edits[1].old was not found in `f.txt` (after the earlier edits); no edit was applied"
    );
    assert_eq!(f.read("f.txt"), "one two three\n");
}

#[tokio::test]
async fn patch_requires_a_unique_match_unless_replace_all() {
    let f = Fixture::new();
    f.write("f.txt", "a-a-a");
    let msg = f
        .respond("file.patch", json!({"path": "f.txt", "edits": [{"old": "a", "new": "b"}]}))
        .await;
    assert!(msg.starts_with("file.patch: edits[0].old occurs 3 times in `f.txt`"), "{msg}");
    assert_eq!(f.read("f.txt"), "a-a-a");
    let out = f
        .ok(
            "file.patch",
            json!({"path": "f.txt", "edits": [{"old": "a", "new": "b", "replace_all": true}]}),
        )
        .await;
    assert_eq!(out["replacements"], 3);
    assert_eq!(f.read("f.txt"), "b-b-b");
}

#[tokio::test]
async fn patch_that_changes_nothing_says_so_and_does_not_write() {
    let f = Fixture::new();
    f.write("f.txt", "same");
    let before = std::fs::metadata(f.path("f.txt")).unwrap();
    let out = f
        .ok("file.patch", json!({"path": "f.txt", "edits": [{"old": "same", "new": "same"}]}))
        .await;
    assert_eq!(out["changed"], false);
    assert_eq!(out["bytes_before"], out["bytes_after"]);
    let after = std::fs::metadata(f.path("f.txt")).unwrap();
    // Not replaced: same inode.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(before.ino(), after.ino());
}

#[tokio::test]
async fn patch_errors() {
    let f = Fixture::new();
    std::fs::write(f.path("bin"), [0xff, 0xfe]).unwrap();
    let msg =
        f.respond("file.patch", json!({"path": "bin", "edits": [{"old": "a", "new": "b"}]})).await;
    assert_eq!(msg, "file.patch: `bin` is not UTF-8 text; use file.write to replace it");
    let msg =
        f.respond("file.patch", json!({"path": "nope", "edits": [{"old": "a", "new": "b"}]})).await;
    assert_eq!(msg, "`nope` does not exist");
    let msg = f.respond("file.patch", json!({"path": "bin", "edits": []})).await;
    assert!(msg.contains("`edits` is empty"), "{msg}");
    let msg =
        f.respond("file.patch", json!({"path": "bin", "edits": [{"old": "a", "neww": "b"}]})).await;
    assert!(msg.contains("unknown field `neww`"), "{msg}");
}
