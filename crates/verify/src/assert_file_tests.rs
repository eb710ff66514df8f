//! Tests of the file assertions through `check`: each type passing and failing, sandbox
//! escapes, invalid regexes, binary and oversized files.

use serde_json::json;

use super::MAX_SEARCH_BYTES;
use crate::test_support::{Fixture, failed, failed_with, passed};

const CSS: &str = "body {\n  background: white;\n}\n";

fn site() -> Fixture {
    let fx = Fixture::new();
    fx.write("site/style.css", CSS);
    fx
}

#[tokio::test]
async fn file_exists_pass_and_fail() {
    let fx = site();
    let r = fx.check(json!({"type": "file_exists", "path": "site/style.css"})).await;
    assert_eq!(r.kind, "file_exists");
    passed(&r, "site/style.css exists (file, 30 bytes)");
    let r = fx.check(json!({"type": "file_exists", "path": "site"})).await;
    passed(&r, "site exists (a directory)");
    let r = fx.check(json!({"type": "file_exists", "path": "site/missing.css"})).await;
    failed(&r, "site/missing.css does not exist");
    // Through a file as if it were a directory: not there either.
    let r = fx.check(json!({"type": "file_exists", "path": "site/style.css/x"})).await;
    failed(&r, "site/style.css/x does not exist");
}

#[tokio::test]
async fn file_not_exists_pass_and_fail() {
    let fx = site();
    let r = fx.check(json!({"type": "file_not_exists", "path": "site/old.css"})).await;
    assert_eq!(r.kind, "file_not_exists");
    passed(&r, "site/old.css does not exist");
    let r = fx.check(json!({"type": "file_not_exists", "path": "site/style.css"})).await;
    failed(&r, "site/style.css exists (file, 30 bytes)");
}

#[tokio::test]
async fn file_contains_literal_and_regex() {
    let fx = site();
    let r = fx
        .check(json!({"type": "file_contains", "path": "site/style.css", "pattern": "background"}))
        .await;
    assert_eq!(r.kind, "file_contains");
    passed(
        &r,
        "pattern 'background' found in site/style.css (30 bytes) at line 2: `background: white;`",
    );
    let r = fx
        .check(json!({"type": "file_contains", "path": "site/style.css", "pattern": "#013220"}))
        .await;
    failed(&r, "pattern '#013220' not found in site/style.css (30 bytes)");
    let r = fx
        .check(json!({"type": "file_contains", "path": "site/style.css",
                      "pattern": "background:\\s*(white|#fff)", "regex": true}))
        .await;
    passed(
        &r,
        "regex 'background:\\s*(white|#fff)' found in site/style.css (30 bytes) at line 2: \
         `background: white;`",
    );
    // Without `regex`, the same text is a literal and is not found.
    let r = fx
        .check(json!({"type": "file_contains", "path": "site/style.css", "pattern": "white|#fff"}))
        .await;
    failed(&r, "pattern 'white|#fff' not found in site/style.css (30 bytes)");
}

#[tokio::test]
async fn file_not_contains_pass_and_fail() {
    let fx = site();
    let r = fx
        .check(json!({"type": "file_not_contains", "path": "site/style.css", "pattern": "red"}))
        .await;
    assert_eq!(r.kind, "file_not_contains");
    passed(&r, "pattern 'red' not found in site/style.css (30 bytes)");
    let r = fx
        .check(json!({"type": "file_not_contains", "path": "site/style.css",
                      "pattern": "wh.te", "regex": true}))
        .await;
    failed(&r, "regex 'wh.te' found in site/style.css (30 bytes) at line 2: `background: white;`");
    // A missing file contains nothing, but that is not evidence: it fails.
    let r =
        fx.check(json!({"type": "file_not_contains", "path": "gone.css", "pattern": "red"})).await;
    failed(&r, "`gone.css` does not exist");
}

#[tokio::test]
async fn invalid_regex_fails_and_says_so() {
    let fx = site();
    for kind in ["file_contains", "file_not_contains"] {
        let r = fx
            .check(json!({"type": kind, "path": "site/style.css", "pattern": "a(b", "regex": true}))
            .await;
        failed_with(&r, &["invalid regex 'a(b'", "unclosed group"]);
        assert!(!r.detail.contains('\n'), "{}", r.detail);
    }
}

#[tokio::test]
async fn binary_files_are_searched_lossily() {
    let fx = Fixture::new();
    fx.write("blob.bin", [0xff, 0x00, b'M', b'A', b'R', b'K', 0xfe, b'\n']);
    let r = fx.check(json!({"type": "file_contains", "path": "blob.bin", "pattern": "MARK"})).await;
    assert!(r.passed, "{}", r.detail);
    assert!(
        r.detail.starts_with("pattern 'MARK' found in blob.bin (8 bytes) at line 1"),
        "{}",
        r.detail
    );
}

#[tokio::test]
async fn files_over_the_cap_fail_clearly() {
    let fx = Fixture::new();
    let file = std::fs::File::create(fx.root().join("big.log")).unwrap();
    file.set_len(MAX_SEARCH_BYTES + 1).unwrap();
    let r = fx.check(json!({"type": "file_contains", "path": "big.log", "pattern": "x"})).await;
    failed(&r, "big.log is 64.0 MB (67108865 bytes); pev searches files of at most 64.0 MB");
    let r = fx.check(json!({"type": "file_not_contains", "path": "big.log", "pattern": "x"})).await;
    assert!(!r.passed);
    // Size and existence need no read.
    let r = fx.check(json!({"type": "file_size_gt", "path": "big.log", "bytes": 1})).await;
    passed(&r, "big.log is 67108865 bytes (> 1)");
}

#[tokio::test]
async fn file_size_gt_pass_and_fail() {
    let fx = site();
    let r = fx.check(json!({"type": "file_size_gt", "path": "site/style.css", "bytes": 20})).await;
    assert_eq!(r.kind, "file_size_gt");
    passed(&r, "site/style.css is 30 bytes (> 20)");
    let r = fx.check(json!({"type": "file_size_gt", "path": "site/style.css", "bytes": 200})).await;
    failed(&r, "site/style.css is 30 bytes; needed > 200");
    let r = fx.check(json!({"type": "file_size_gt", "path": "site/style.css", "bytes": 30})).await;
    failed(&r, "site/style.css is 30 bytes; needed > 30");
    let r = fx.check(json!({"type": "file_size_gt", "path": "nope", "bytes": 0})).await;
    failed(&r, "nope does not exist; needed > 0 bytes");
    let r = fx.check(json!({"type": "file_size_gt", "path": "site", "bytes": 0})).await;
    failed(&r, "site is a directory, not a file");
}

#[tokio::test]
async fn content_changed_compares_with_the_hash_before() {
    let mut fx = site();
    fx.snapshot("site/style.css");
    let r = fx.check(json!({"type": "content_changed", "path": "site/style.css"})).await;
    assert_eq!(r.kind, "content_changed");
    failed_with(&r, &["site/style.css is unchanged: sha256 ", " before and after"]);
    fx.write("site/style.css", CSS.replace("white", "#013220"));
    let r = fx.check(json!({"type": "content_changed", "path": "site/style.css"})).await;
    assert!(r.passed, "{}", r.detail);
    assert!(r.detail.starts_with("site/style.css changed: sha256 "), "{}", r.detail);
    assert!(r.detail.contains(" -> "), "{}", r.detail);
}

#[tokio::test]
async fn content_changed_created_deleted_and_absent() {
    let mut fx = site();
    fx.snapshot("new.txt");
    fx.snapshot("site/style.css");
    fx.snapshot("never.txt");
    fx.write("new.txt", "hello");
    std::fs::remove_file(fx.root().join("site/style.css")).unwrap();
    let r = fx.check(json!({"type": "content_changed", "path": "new.txt"})).await;
    assert!(r.passed, "{}", r.detail);
    assert!(
        r.detail
            .starts_with("new.txt was created (it did not exist before; sha256 now 2cf24dba5fb0"),
        "{}",
        r.detail
    );
    let r = fx.check(json!({"type": "content_changed", "path": "site/style.css"})).await;
    assert!(r.passed, "{}", r.detail);
    assert!(r.detail.starts_with("site/style.css was deleted (sha256 before "), "{}", r.detail);
    let r = fx.check(json!({"type": "content_changed", "path": "never.txt"})).await;
    failed(&r, "never.txt did not exist before the step and does not exist now");
}

#[tokio::test]
async fn content_changed_without_a_hash_before_fails() {
    let fx = site();
    let r = fx.check(json!({"type": "content_changed", "path": "site/style.css"})).await;
    failed(&r, "no hash was taken before the step for site/style.css");
}

#[tokio::test]
async fn content_changed_finds_the_hash_under_another_spelling() {
    let mut fx = site();
    fx.snapshot("./site//style.css");
    fx.write("site/style.css", "changed");
    let r = fx.check(json!({"type": "content_changed", "path": "site/style.css"})).await;
    assert!(r.passed, "{}", r.detail);
}

/// Every file assertion on `path` must fail with a refusal naming it.
async fn all_refused(fx: &Fixture, path: &str) {
    let checks = [
        json!({"type": "file_exists", "path": path}),
        json!({"type": "file_not_exists", "path": path}),
        json!({"type": "file_contains", "path": path, "pattern": "root"}),
        json!({"type": "file_not_contains", "path": path, "pattern": "zzz"}),
        json!({"type": "file_size_gt", "path": path, "bytes": 0}),
        json!({"type": "content_changed", "path": path}),
    ];
    for check in checks {
        let r = fx.check(check.clone()).await;
        failed(&r, &format!("refused: path `{path}` leaves the workspace"));
    }
}

#[tokio::test]
async fn dot_dot_and_absolute_paths_are_refused() {
    let mut fx = site();
    fx.before.insert("../secret.txt".into(), None);
    for path in ["../secret.txt", "site/../../secret.txt", "/etc/passwd", "/"] {
        all_refused(&fx, path).await;
    }
    // The file outside really exists: the refusal is not a "not found".
    assert!(fx.dir.path().join("secret.txt").exists());
}

#[tokio::test]
async fn symlinks_out_of_the_workspace_are_refused() {
    let fx = site();
    std::os::unix::fs::symlink("/etc", fx.root().join("etc")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", fx.root().join("passwd")).unwrap();
    std::os::unix::fs::symlink(fx.dir.path().join("secret.txt"), fx.root().join("site/secret"))
        .unwrap();
    for path in ["etc/passwd", "passwd", "site/secret"] {
        all_refused(&fx, path).await;
    }
}

#[tokio::test]
async fn symlinks_inside_the_workspace_are_followed() {
    let fx = site();
    std::os::unix::fs::symlink("style.css", fx.root().join("site/alias.css")).unwrap();
    let r = fx
        .check(json!({"type": "file_contains", "path": "site/alias.css", "pattern": "body"}))
        .await;
    assert!(r.passed, "{}", r.detail);
    let r = fx.check(json!({"type": "file_exists", "path": "./site/alias.css"})).await;
    passed(&r, "./site/alias.css exists (file, 30 bytes)");
}
