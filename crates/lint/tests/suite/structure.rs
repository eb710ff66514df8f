//! EMPTY_PLAN, UNKNOWN_FIELD, DUPLICATE_STEP_ID, UNKNOWN_DEPENDENCY, MAX_STEPS_EXCEEDED and
//! INVALID_ASSERTION: each with a plan that triggers it and near-misses that must stay quiet.

use pev_protocol::LintCode::{
    DuplicateStepId, EmptyPlan, InvalidAssertion, MaxStepsExceeded, UnknownDependency, UnknownField,
};
use pev_protocol::{Finding, LintCode, LintResult, LintStatus};
use serde_json::{Value, json};

use super::support::{findings, found, lint_default, lint_with};

/// The only finding with `code`; fails the test if there is not exactly one.
fn one(result: &LintResult, code: LintCode) -> Finding {
    let all = findings(result, code);
    assert_eq!(all.len(), 1, "expected one {code}: {result:#?}");
    all[0].clone()
}

/// A plan of two steps: `w` (shell.exec) and `s` which depends on it and has `assertions`.
fn with_assertions(assertions: &Value) -> String {
    json!({"goal": "g", "steps": [
        {"id": "w", "tool": "shell.exec", "parameters": {"command": "make"}},
        {"id": "s", "tool": "file.write", "parameters": {"path": "a.txt", "content": "x"},
         "depends_on": ["w"], "assertions": assertions},
    ]})
    .to_string()
}

/// The INVALID_ASSERTION findings as `(path, message)`.
fn invalid(plan: &str) -> Vec<(String, String)> {
    let result = lint_default(plan);
    findings(&result, InvalidAssertion).iter().map(|f| (f.path.clone(), f.msg.clone())).collect()
}

#[test]
fn empty_plan_is_a_plan_level_warning() {
    let r = lint_default(r#"{"goal": "g", "steps": []}"#);
    let f = one(&r, EmptyPlan);
    assert_eq!((f.step, f.path.as_str()), (None, "/steps"));
    assert!(f.msg.contains("no steps"), "{}", f.msg);
    assert_eq!(r.status, LintStatus::Warn);

    let r = lint_default(r#"{"goal": "g", "steps": [{"id": "a", "tool": "file.read"}]}"#);
    assert!(found(&r, EmptyPlan).is_empty());
}

#[test]
fn unknown_fields_are_reported_with_near_miss_suggestions() {
    let plan = json!({
        "goal": "g", "gaol": "typo", "owner": "me",
        "steps": [
            {"id": "a", "tool": "file.read", "paramters": {"path": "x"}},
            {"id": "b", "tool": "file.read", "dependson": ["a"], "depend_on": ["a"],
             "parameters": {"path": "x"}},
        ],
        "postconditions": [{"description": "d", "severity": "high"}],
    })
    .to_string();
    let r = lint_default(&plan);
    let all = findings(&r, UnknownField);
    let got: Vec<(Option<usize>, &str)> = all.iter().map(|f| (f.step, f.path.as_str())).collect();
    assert_eq!(
        got,
        [
            (None, "/gaol"),
            (None, "/owner"),
            (Some(0), "/steps/0/paramters"),
            (Some(1), "/steps/1/depend_on"),
            (Some(1), "/steps/1/dependson"),
            (None, "/postconditions/0/severity"),
        ]
    );
    let msg = |path: &str| all.iter().find(|f| f.path == path).map(|f| f.msg.clone()).unwrap();
    assert!(msg("/gaol").contains("did you mean `goal`?"), "{}", msg("/gaol"));
    assert!(msg("/steps/0/paramters").contains("did you mean `parameters`?"));
    assert!(msg("/steps/1/dependson").contains("did you mean `depends_on`?"));
    assert!(msg("/steps/1/depend_on").contains("did you mean `depends_on`?"));
    assert!(!msg("/owner").contains("did you mean"), "no suggestion for an unrelated word");
    assert!(!msg("/postconditions/0/severity").contains("did you mean"));
}

#[test]
fn aliases_and_canonical_fields_are_not_unknown() {
    let plan = json!({
        "objective": "g", "context": {}, "meta": {"planner": "p"}, "rollback_strategy": "none",
        "steps": [
            {"step_id": "a", "name": "A", "tool": "file.read", "args": {"path": "x"},
             "estimated_complexity": "low", "on_fail": "continue", "max_attempts": 2},
            {"id": "b", "title": "B", "description": "d", "tool": "file.read",
             "parameters": {"path": "y"}, "dependencies": ["a"], "complexity": "high",
             "acceptance_criteria": ["c"], "expected_outputs": ["y"], "requires_approval": false,
             "assertions": [{"type": "file_exists", "path": "y"}]},
        ],
        "success_criteria": ["done", {"description": "d", "assertions": []}],
    })
    .to_string();
    assert!(found(&lint_default(&plan), UnknownField).is_empty());
}

#[test]
fn duplicate_step_ids_flag_the_second_and_later() {
    let plan = r#"{"goal": "g", "steps": [
        {"id": "a", "tool": "file.read"}, {"id": "b", "tool": "file.read"},
        {"id": "a", "tool": "file.read"}, {"id": "a", "tool": "file.read"}]}"#;
    let r = lint_default(plan);
    assert_eq!(
        found(&r, DuplicateStepId),
        [(Some(2), "/steps/2/id".to_owned()), (Some(3), "/steps/3/id".to_owned())]
    );
    assert!(findings(&r, DuplicateStepId)[0].msg.contains("`a` is already used by step 0"));

    let near = r#"{"goal": "g", "steps": [{"id": "a", "tool": "file.read"},
        {"id": "a1", "tool": "file.read"}, {"id": "A", "tool": "file.read"}]}"#;
    assert!(found(&lint_default(near), DuplicateStepId).is_empty());
}

#[test]
fn unknown_dependency_points_at_the_entry() {
    let plan = r#"{"goal": "g", "steps": [{"id": "a", "tool": "file.read"},
        {"id": "b", "tool": "file.read", "depends_on": ["a", "zz"]}]}"#;
    let r = lint_default(plan);
    let f = one(&r, UnknownDependency);
    assert_eq!((f.step, f.path.as_str()), (Some(1), "/steps/1/depends_on/1"));
    assert!(f.msg.contains("`zz`"), "{}", f.msg);

    let near = r#"{"goal": "g", "steps": [{"id": "a", "tool": "file.read"},
        {"id": "b", "tool": "file.read", "depends_on": ["a"]}]}"#;
    assert!(found(&lint_default(near), UnknownDependency).is_empty());
}

#[test]
fn max_steps_from_the_policy() {
    let steps = |n: usize| {
        let steps: Vec<Value> =
            (0..n).map(|i| json!({"id": format!("s{i}"), "tool": "file.read"})).collect();
        json!({"goal": "g", "steps": steps}).to_string()
    };
    let r = lint_with(&steps(3), "max_steps: 2");
    let f = one(&r, MaxStepsExceeded);
    assert_eq!((f.step, f.path.as_str()), (None, "/steps"));
    assert!(f.msg.contains("3 steps") && f.msg.contains("at most 2"), "{}", f.msg);
    assert!(found(&lint_with(&steps(2), "max_steps: 2"), MaxStepsExceeded).is_empty());
    // The default is 100.
    assert!(found(&lint_default(&steps(100)), MaxStepsExceeded).is_empty());
    assert_eq!(found(&lint_default(&steps(101)), MaxStepsExceeded).len(), 1);
}

#[test]
fn unreadable_assertions_keep_their_position() {
    // The first assertion has an unknown type; the second parses and has a bad path. The parser
    // drops the first, so the second must still be reported at index 1.
    let plan = with_assertions(&json!([
        {"type": "file_exist", "path": "a.txt"},
        {"type": "file_exists", "path": "../a.txt"},
        {"type": "file_contains", "path": "a.txt", "patern": "x"},
        {"type": "file_exists", "path": "/etc/passwd"},
    ]));
    let got = invalid(&plan);
    let paths: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/steps/1/assertions/0",
            "/steps/1/assertions/2",
            "/steps/1/assertions/1/path",
            "/steps/1/assertions/3/path",
        ]
    );
    assert!(got[0].1.contains("file_exist"), "{}", got[0].1);
    assert!(got[1].1.contains("patern"), "{}", got[1].1);
    assert!(got[2].1.contains("`..`"), "{}", got[2].1);
    assert!(got[3].1.contains("absolute"), "{}", got[3].1);
}

#[test]
fn assertion_paths_may_not_leave_the_workspace() {
    for (path, reason) in [
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("\\\\server\\share", "absolute"),
        ("C:\\Windows", "absolute"),
        ("../secret", "`..`"),
        ("a/../../b", "`..`"),
        ("a\\..\\..\\b", "`..`"),
        ("~/.ssh/id_rsa", "`~`"),
    ] {
        let got = invalid(&with_assertions(&json!([{"type": "file_exists", "path": path}])));
        assert_eq!(got.len(), 1, "{path:?}: {got:?}");
        assert_eq!(got[0].0, "/steps/1/assertions/0/path");
        assert!(got[0].1.contains(reason), "{path:?}: {}", got[0].1);
    }
    // `..` that stays inside the workspace is what the sandbox accepts too.
    for path in [
        "a..b.txt",
        "a.b.txt",
        "dir/...",
        "site/.hidden/x..",
        "c:notes.txt",
        "x~",
        "docs/../docs/readme.md",
        "a\\..\\b",
    ] {
        let got = invalid(&with_assertions(&json!([{"type": "content_changed", "path": path}])));
        assert!(got.is_empty(), "{path:?}: {got:?}");
    }
}

#[test]
fn regexes_must_compile_when_regex_is_true() {
    let got = invalid(&with_assertions(&json!([
        {"type": "file_contains", "path": "a.txt", "pattern": "(unclosed", "regex": true},
        {"type": "file_contains", "path": "a.txt", "pattern": "(unclosed"},
        {"type": "file_not_contains", "path": "a.txt", "pattern": "^ok\\s+\\d+$", "regex": true},
        {"type": "output_contains", "pattern": "[z-a]", "regex": true},
    ])));
    let paths: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["/steps/1/assertions/0/pattern", "/steps/1/assertions/3/pattern"]);
    assert!(got[0].1.contains("not a valid regex") && got[0].1.contains("(unclosed"));
}

#[test]
fn assertion_steps_must_exist_and_have_run() {
    let plan = json!({"goal": "g", "steps": [
        {"id": "a", "tool": "shell.exec", "parameters": {"command": "make"}},
        {"id": "b", "tool": "shell.exec", "parameters": {"command": "make test"},
         "depends_on": ["a"]},
        {"id": "c", "tool": "file.read", "parameters": {"path": "x"}, "depends_on": ["b"],
         "assertions": [
            {"type": "output_contains", "pattern": "ok", "step": "a"},
            {"type": "exit_code_eq", "code": 0, "step": "b"},
            {"type": "output_contains", "pattern": "ok", "step": "c"},
            {"type": "output_contains", "pattern": "ok", "step": "d"},
            {"type": "exit_code_eq", "code": 0, "step": "ghost"},
         ]},
        {"id": "d", "tool": "shell.exec", "parameters": {"command": "later"}},
    ]})
    .to_string();
    let got = invalid(&plan);
    let paths: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["/steps/2/assertions/3/step", "/steps/2/assertions/4/step"]);
    assert!(got[0].1.contains("`d`") && got[0].1.contains("may not have run yet"), "{}", got[0].1);
    assert!(got[1].1.contains("`ghost`") && got[1].1.contains("not in the plan"), "{}", got[1].1);
}

#[test]
fn exit_codes_exist_only_for_shell_exec() {
    let plan = json!({"goal": "g", "steps": [
        {"id": "w", "tool": "file.write", "parameters": {"path": "a", "content": "x"},
         "assertions": [{"type": "exit_code_eq", "code": 0}]},
        {"id": "t", "description": "run the tests", "depends_on": ["w"],
         "assertions": [{"type": "exit_code_eq", "code": 0, "step": "w"}]},
        {"id": "x", "tool": "shell.exec", "parameters": {"command": "make"},
         "assertions": [{"type": "exit_code_eq", "code": 2}]},
    ]})
    .to_string();
    let r = lint_default(&plan);
    let all = findings(&r, InvalidAssertion);
    let got: Vec<(Option<usize>, &str)> = all.iter().map(|f| (f.step, f.path.as_str())).collect();
    assert_eq!(got, [(Some(0), "/steps/0/assertions/0"), (Some(1), "/steps/1/assertions/0/step")]);
    assert!(all[0].msg.contains("runs `file.write`") && all[0].msg.contains("no exit code"));
    assert!(all[1].msg.starts_with("exit_code_eq:"), "{}", all[1].msg);
}

#[test]
fn postconditions_must_name_the_step_they_read() {
    let plan = json!({"goal": "g",
    "steps": [{"id": "a", "tool": "shell.exec", "parameters": {"command": "make"},
               "assertions": [{"type": "output_contains", "pattern": "built"}]}],
    "postconditions": [
        {"description": "built", "assertions": [
            {"type": "output_contains", "pattern": "ok"},
            {"type": "output_contains", "pattern": "ok", "step": "a"},
            {"type": "exit_code_eq", "code": 0, "step": "a"},
            {"type": "exit_code_eq", "code": 0},
        ]},
    ]})
    .to_string();
    let r = lint_default(&plan);
    let all = findings(&r, InvalidAssertion);
    let got: Vec<(Option<usize>, &str)> = all.iter().map(|f| (f.step, f.path.as_str())).collect();
    assert_eq!(
        got,
        [(None, "/postconditions/0/assertions/0"), (None, "/postconditions/0/assertions/3")]
    );
    assert!(all[0].msg.contains("name one with `step`"), "{}", all[0].msg);
}

#[test]
fn success_criteria_pointers_use_the_key_the_plan_used() {
    let plan = json!({"goal": "g", "steps": [{"id": "a", "tool": "file.read"}],
        "success_criteria": [{"description": "d", "assertions": [
            {"type": "nope"}, {"type": "file_exists", "path": "../x"}]}]})
    .to_string();
    let paths: Vec<String> = invalid(&plan).into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        ["/success_criteria/0/assertions/0", "/success_criteria/0/assertions/1/path"]
    );
}

#[test]
fn network_and_command_assertion_values() {
    let got = invalid(&with_assertions(&json!([
        {"type": "socket_open", "host": "127.0.0.1", "port": 0},
        {"type": "socket_open", "host": "127.0.0.1", "port": 8080},
        {"type": "http_status", "url": "http://localhost:8080/", "status": 700},
        {"type": "http_status", "url": "ftp://example.com/"},
        {"type": "http_200", "url": "HTTPS://example.com/health"},
        {"type": "http_status", "url": "http://localhost", "status": 204},
        {"type": "command_succeeds", "command": "  "},
        {"type": "command_succeeds", "command": "make test", "timeout_s": 0},
        {"type": "command_succeeds", "command": "make test", "timeout_s": 30},
    ])));
    let paths: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/steps/1/assertions/0/port",
            "/steps/1/assertions/2/status",
            "/steps/1/assertions/3/url",
            "/steps/1/assertions/6/command",
            "/steps/1/assertions/7/timeout_s",
        ]
    );
    assert!(got[1].1.contains("700"), "{}", got[1].1);
    assert!(got[2].1.contains("ftp://example.com/"), "{}", got[2].1);
    assert!(got[4].1.contains("greater than 0"), "{}", got[4].1);
}
