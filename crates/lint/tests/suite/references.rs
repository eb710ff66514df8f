//! LOOP_DETECTED, UNKNOWN_REFERENCE and REFERENCE_NOT_DEPENDENCY: real cycles only (plan-lint
//! flags a step that mentions two other ids and misses a real 2-cycle), references that name no
//! step, and references whose order is implied rather than stated.

use pev_protocol::LintCode::{LoopDetected, ReferenceNotDependency, UnknownReference};
use pev_protocol::{Finding, LintCode, LintResult, LintStatus};
use serde_json::{Value, json};

use super::support::{findings, found, lint_default};

fn one(result: &LintResult, code: LintCode) -> Finding {
    let all = findings(result, code);
    assert_eq!(all.len(), 1, "expected one {code}: {result:#?}");
    all[0].clone()
}

fn plan(steps: &Value) -> String {
    json!({"goal": "g", "steps": steps}).to_string()
}

#[test]
fn two_cycle_through_depends_on() {
    let r = lint_default(&plan(&json!([
        {"id": "a", "tool": "file.read", "depends_on": ["b"]},
        {"id": "b", "tool": "file.read", "depends_on": ["a"]},
    ])));
    let f = one(&r, LoopDetected);
    assert_eq!((f.step, f.path.as_str()), (Some(0), "/steps/0/depends_on/0"));
    assert!(f.msg.contains("a -> b -> a"), "{}", f.msg);
    assert!(f.msg.contains("through depends_on"), "{}", f.msg);
    assert_eq!(r.status, LintStatus::Error);
}

#[test]
fn three_cycle_closed_by_a_reference() {
    let r = lint_default(&plan(&json!([
        {"id": "x", "tool": "file.read"},
        {"id": "a", "tool": "file.read", "depends_on": ["c"]},
        {"id": "b", "tool": "file.read", "depends_on": ["a"]},
        {"id": "c", "tool": "file.write", "parameters": {"path": "out", "content": "${b.result.content}"}},
    ])));
    let f = one(&r, LoopDetected);
    assert_eq!((f.step, f.path.as_str()), (Some(1), "/steps/1/depends_on/0"));
    assert!(f.msg.contains("a -> c -> b -> a"), "{}", f.msg);
    assert!(f.msg.contains("depends_on and references"), "{}", f.msg);
    assert!(f.msg.contains("c references b"), "{}", f.msg);
}

#[test]
fn cycle_of_references_is_reported_at_the_reference() {
    let r = lint_default(&plan(&json!([
        {"id": "a", "tool": "http.request", "parameters": {"url": "{{b.result.url}}"}},
        {"id": "b", "tool": "http.request", "parameters": {"url": "${a.result.body}"}},
    ])));
    let f = one(&r, LoopDetected);
    assert_eq!((f.step, f.path.as_str()), (Some(0), "/steps/0/parameters/url"));
    assert!(f.msg.contains("a -> b -> a") && f.msg.contains("through references"), "{}", f.msg);
}

#[test]
fn self_dependency_is_a_loop() {
    let r = lint_default(&plan(&json!([
        {"id": "a", "tool": "file.read"},
        {"id": "b", "tool": "file.read", "depends_on": ["a", "b"]},
    ])));
    let f = one(&r, LoopDetected);
    assert_eq!((f.step, f.path.as_str()), (Some(1), "/steps/1/depends_on/1"));
    assert!(f.msg.contains("b -> b") && f.msg.contains("waits for itself"), "{}", f.msg);
}

#[test]
fn two_separate_cycles_give_two_findings() {
    let r = lint_default(&plan(&json!([
        {"id": "a", "tool": "file.read", "depends_on": ["b"]},
        {"id": "b", "tool": "file.read", "depends_on": ["a"]},
        {"id": "c", "tool": "file.read", "depends_on": ["d"]},
        {"id": "d", "tool": "file.read", "depends_on": ["c"]},
    ])));
    assert_eq!(
        found(&r, LoopDetected),
        [
            (Some(0), "/steps/0/depends_on/0".to_owned()),
            (Some(2), "/steps/2/depends_on/0".to_owned())
        ]
    );
}

#[test]
fn referencing_two_earlier_steps_is_no_loop() {
    // plan-lint calls this a cycle because the arguments mention two other ids.
    let r = lint_default(&plan(&json!([
        {"id": "fetch", "tool": "db.query", "parameters": {"query": "SELECT 1"}},
        {"id": "price", "tool": "db.query", "parameters": {"query": "SELECT 2"}},
        {"id": "report", "tool": "file.write", "depends_on": ["fetch", "price"],
         "parameters": {"path": "r.txt",
                        "content": "${fetch.result.rows} and {{price.result.rows}}"},
         "assertions": [{"type": "file_exists", "path": "r.txt"}]},
        {"id": "note", "tool": "file.read", "parameters": {"path": "fetch-price.txt"}},
    ])));
    assert!(found(&r, LoopDetected).is_empty(), "{r:#?}");
    assert!(found(&r, UnknownReference).is_empty());
    assert!(found(&r, ReferenceNotDependency).is_empty());
}

#[test]
fn chain_of_100_000_steps_lints_without_overflow() {
    let steps: Vec<Value> = (0..100_000)
        .map(|i| {
            if i == 0 {
                json!({"id": "s0", "tool": "file.read", "parameters": {"path": "in"}})
            } else {
                json!({"id": format!("s{i}"), "tool": "file.read",
                       "depends_on": [format!("s{}", i - 1)],
                       "parameters": {"path": format!("${{s{}.result.content}}", i - 1),
                                      "first": "${s0.result.bytes}"}})
            }
        })
        .collect();
    let text = plan(&Value::Array(steps));
    let r = super::support::lint_with(&text, "max_steps: 200000");
    assert!(found(&r, LoopDetected).is_empty());
    assert!(found(&r, ReferenceNotDependency).is_empty());
    assert!(found(&r, UnknownReference).is_empty());
}

#[test]
fn unknown_and_self_references() {
    let r = lint_default(&plan(&json!([
        {"id": "a", "tool": "file.read", "parameters": {"path": "x"}},
        {"id": "b", "tool": "http.request",
         "parameters": {"url": "${ghost.result.url}", "headers": {"x": ["ok", "{{b.result.status}}"]},
                        "body": "${a.result.content} ${HOME} {{ name }}"},
         "depends_on": ["a"]},
    ])));
    let all = findings(&r, UnknownReference);
    let got: Vec<(Option<usize>, &str)> = all.iter().map(|f| (f.step, f.path.as_str())).collect();
    assert_eq!(
        got,
        [(Some(1), "/steps/1/parameters/url"), (Some(1), "/steps/1/parameters/headers/x/1")]
    );
    assert!(
        all[0].msg.contains("`ghost`") && all[0].msg.contains("not in the plan"),
        "{}",
        all[0].msg
    );
    assert!(all[1].msg.contains("own result"), "{}", all[1].msg);
    // A self-reference is not a cycle edge.
    assert!(found(&r, LoopDetected).is_empty());
}

#[test]
fn plan_lint_format_references_warn_but_do_not_fail() {
    let r = lint_default(&plan(&json!([
        {"id": "q", "tool": "db.query", "args": {"query": "SELECT price FROM items"}},
        {"id": "n", "tool": "notify.send",
         "args": {"to": "ops", "text": "price ${q.result.price}", "again": "{{q.result.price}}"}},
    ])));
    let f = one(&r, ReferenceNotDependency);
    assert_eq!((f.step, f.path.as_str()), (Some(1), "/steps/1/parameters/text"));
    assert!(f.msg.contains("`q`") && f.msg.contains("depends_on"), "{}", f.msg);
    assert!(r.warnings.iter().any(|w| w.code == ReferenceNotDependency));
    assert!(r.errors.iter().all(|e| e.code != ReferenceNotDependency));
}

#[test]
fn transitive_dependencies_cover_references() {
    let r = lint_default(&plan(&json!([
        {"id": "a", "tool": "file.read", "parameters": {"path": "x"}},
        {"id": "b", "tool": "file.read", "parameters": {"path": "y"}, "depends_on": ["a"]},
        {"id": "c", "tool": "file.read", "depends_on": ["b"],
         "parameters": {"path": "${a.result.content}"}},
        {"id": "d", "tool": "file.read", "depends_on": ["c"],
         "parameters": {"path": "${x.v2.result.content}"}},
        {"id": "x.v2", "tool": "file.read", "parameters": {"path": "z"}},
    ])));
    let f = one(&r, ReferenceNotDependency);
    assert_eq!((f.step, f.path.as_str()), (Some(3), "/steps/3/parameters/path"));
    assert!(f.msg.contains("`x.v2`"), "{}", f.msg);
}
