//! Tests of the silent-failure scan: each stderr marker, the exit-code condition, HTTP
//! statuses, and the empty outputs that must *not* warn.

use serde_json::json;

use super::*;

fn shell(exit_code: i64, stdout: &str, stderr: &str) -> Value {
    json!({"exit_code": exit_code, "stdout": stdout, "stderr": stderr, "timed_out": false})
}

#[test]
fn each_stderr_marker_warns_on_exit_zero() {
    for (stderr, quoted) in [
        ("warning: x\nerror: linker failed\n", "error: linker failed"),
        ("ERROR: disk full", "ERROR: disk full"),
        ("cat: a.txt: No such file or directory", "cat: a.txt: No such file or directory"),
        ("sh: 1: ./run: Permission denied", "sh: 1: ./run: Permission denied"),
        (
            "Traceback (most recent call last):\n  File \"x.py\"",
            "Traceback (most recent call last):",
        ),
        ("sh: 1: frobnicate: command not found", "sh: 1: frobnicate: command not found"),
    ] {
        let warnings = silent_failures("shell.exec", &shell(0, "", stderr));
        assert_eq!(warnings.len(), 1, "{stderr:?}: {warnings:?}");
        assert!(warnings[0].contains(&format!("`{quoted}`")), "{stderr:?}: {}", warnings[0]);
        assert!(warnings[0].starts_with("shell.exec exited 0, but stderr line"), "{}", warnings[0]);
    }
}

#[test]
fn the_warning_names_the_line_and_counts_the_rest() {
    let stderr = "compiling\nerror: one\nerror: two\nerror: three\n";
    let warnings = silent_failures("shell.exec", &shell(0, "", stderr));
    assert_eq!(
        warnings,
        vec![
            "shell.exec exited 0, but stderr line 2 says: `error: one` (and 2 more lines like it)"
        ]
    );
}

#[test]
fn long_lines_are_clipped() {
    let stderr = format!("error: {}", "x".repeat(1000));
    let warnings = silent_failures("shell.exec", &shell(0, "", &stderr));
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].len() < 300, "{}", warnings[0]);
    assert!(warnings[0].contains('…'));
}

#[test]
fn no_warning_when_the_exit_code_already_says_failure() {
    assert!(silent_failures("shell.exec", &shell(1, "", "error: boom")).is_empty());
}

#[test]
fn no_warning_for_clean_or_quiet_commands() {
    assert!(silent_failures("shell.exec", &shell(0, "", "")).is_empty());
    assert!(silent_failures("shell.exec", &shell(0, "ok\n", "warning: unused\n")).is_empty());
    // "error:" on stdout (a test listing, say) is content, not a failure report.
    assert!(silent_failures("shell.exec", &shell(0, "test error: handled ... ok", "")).is_empty());
    // "errors: 0" is not "error:".
    assert!(silent_failures("shell.exec", &shell(0, "", "errors: 0")).is_empty());
}

#[test]
fn process_shaped_outputs_of_other_tools_are_scanned_too() {
    let warnings = silent_failures("mcp.shell", &shell(0, "", "error: x"));
    assert_eq!(warnings, vec!["mcp.shell exited 0, but stderr line 1 says: `error: x`"]);
}

#[test]
fn http_errors_that_did_not_fail_the_call_warn() {
    let out = json!({"status": 404, "headers": {}, "body": "\n  Not Found  \nmore"});
    assert_eq!(
        silent_failures("http.request", &out),
        vec![
            "http.request returned status 404 without failing the step; the body begins: `Not Found`"
        ]
    );
    let out = json!({"status": 500, "headers": {}, "body": ""});
    assert_eq!(
        silent_failures("http.request", &out),
        vec!["http.request returned status 500 without failing the step (empty body)"]
    );
}

#[test]
fn successful_http_with_an_empty_body_is_fine() {
    for status in [200, 204, 301, 399] {
        let out = json!({"status": status, "headers": {}, "body": ""});
        assert!(silent_failures("http.request", &out).is_empty(), "{status}");
    }
}

#[test]
fn empty_content_is_fine_but_an_empty_result_is_not() {
    let read = json!({"content": "", "bytes": 0, "sha256": "e3b0"});
    assert!(silent_failures("file.read", &read).is_empty());
    assert!(silent_failures("file.list", &json!({"entries": []})).is_empty());
    for empty in [json!(null), json!({}), json!([]), json!("")] {
        let warnings = silent_failures("mcp.fetch", &empty);
        assert_eq!(warnings.len(), 1, "{empty}");
        assert!(warnings[0].starts_with("mcp.fetch returned an empty result"), "{}", warnings[0]);
    }
}
