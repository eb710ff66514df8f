//! `pev check`: assertions against a workspace outside a run, by the checkers a run uses.

use serde_json::Value;

use super::support::{pev, run};

fn check(ws: &std::path::Path, stdin: &str, args: &[&str]) -> (i32, Value, String) {
    let mut cmd = pev();
    cmd.current_dir(ws).write_stdin(stdin.to_owned());
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    let out = run(&mut cmd, &all);
    let json = if out.stdout.trim().is_empty() { Value::Null } else { out.json() };
    (out.code, json, out.stderr)
}

fn site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("style.css"), "body { background: #013220; }\n").unwrap();
    dir
}

#[test]
fn assertions_that_hold_pass_and_one_that_does_not_fails_the_check() {
    let ws = site();
    let all = r##"[{"type": "file_exists", "path": "style.css"},
                  {"assert": "file_contains", "path": "style.css", "pattern": "#013220"},
                  {"type": "command_succeeds", "command": "test -f style.css"}]"##;
    let (code, out, err) = check(ws.path(), all, &["-"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out["passed"], true);
    let kinds: Vec<&str> =
        out["results"].as_array().unwrap().iter().map(|r| r["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["file_exists", "file_contains", "command_succeeds"]);

    let (code, out, _) =
        check(ws.path(), r#"{"type": "command_succeeds", "command": "false"}"#, &["-"]);
    assert_eq!((code, &out["passed"]), (1, &Value::Bool(false)), "{out}");
    let (code, out, _) =
        check(ws.path(), r#"[{"type": "file_exists", "path": "../outside"}]"#, &["-"]);
    assert_eq!(code, 1);
    assert!(
        out["results"][0]["detail"].as_str().unwrap().contains("leaves the workspace"),
        "{out}"
    );
}

#[test]
fn a_yaml_file_and_stdin_give_the_same_answer() {
    let ws = site();
    let file = ws.path().join("checks.yaml");
    std::fs::write(&file, "- type: file_contains\n  path: style.css\n  pattern: background\n")
        .unwrap();
    let (code, from_file, _) = check(ws.path(), "", &[file.to_str().unwrap()]);
    let (_, from_stdin, _) = check(
        ws.path(),
        r#"[{"type": "file_contains", "path": "style.css", "pattern": "background"}]"#,
        &["-"],
    );
    assert_eq!(code, 0);
    assert_eq!(from_file, from_stdin);
}

#[test]
fn bad_input_is_exit_2_naming_the_assertion_and_content_changed_needs_a_run() {
    let ws = site();
    let (code, out, err) =
        check(ws.path(), r#"[{"type": "file_exists", "path": "a"}, {"type": "no_such"}]"#, &["-"]);
    assert_eq!((code, out), (2, Value::Null));
    assert!(err.contains("standard input: assertion 1: unknown variant `no_such`"), "{err}");
    let (code, _, err) = check(ws.path(), "", &["-"]);
    assert_eq!(code, 2);
    assert!(err.contains("no assertion"), "{err}");
    let (code, _, err) = check(ws.path(), "", &["missing.json"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read missing.json"), "{err}");

    let (code, out, _) =
        check(ws.path(), r#"{"type": "content_changed", "path": "style.css"}"#, &["-"]);
    assert_eq!(code, 1);
    assert!(out["results"][0]["detail"].as_str().unwrap().contains("needs a run"), "{out}");
}

#[test]
fn step_outputs_come_from_the_outputs_file() {
    let ws = site();
    let outputs = ws.path().join("outputs.json");
    std::fs::write(&outputs, r#"{"build": {"stdout": "all 12 tests passed", "exit_code": 0}}"#)
        .unwrap();
    let checks = r#"[{"type": "output_contains", "step": "build", "pattern": "12 tests passed"},
                    {"type": "exit_code_eq", "step": "build", "code": 0}]"#;
    let (code, out, err) = check(ws.path(), checks, &["-", "--outputs", outputs.to_str().unwrap()]);
    assert_eq!(code, 0, "{out} {err}");
    let (code, out, _) = check(ws.path(), checks, &["-"]);
    assert_eq!(code, 1, "without the outputs the step has none: {out}");
}
