use super::*;
use crate::plan::OnFail;

fn ok(text: &str) -> ParsedPlan {
    parse_plan(text, Format::sniff(text)).unwrap()
}

fn schema_err(text: &str) -> Vec<SchemaIssue> {
    match parse_plan(text, Format::sniff(text)) {
        Err(ParseError::Schema(issues)) => issues,
        other => panic!("expected a schema error, got {other:?}"),
    }
}

#[test]
fn canonical_plan_parses() {
    let p = ok(r#"{"goal":"g","steps":[{"id":"a","tool":"file.read","parameters":{"path":"x"},
        "depends_on":[],"on_fail":"continue","complexity":"low","max_attempts":2}],
        "postconditions":["done",{"description":"d","assertions":[{"type":"file_exists","path":"x"}]}]}"#);
    let step = &p.plan.steps[0];
    assert_eq!(step.on_fail, OnFail::Continue);
    assert_eq!(step.max_attempts, Some(2));
    assert_eq!(p.plan.postconditions[0].description, "done");
    assert_eq!(p.plan.postconditions[1].assertions.len(), 1);
    assert!(p.issues.is_empty());
}

#[test]
fn aliases_are_accepted() {
    let p = ok(r#"{"objective":"g","success_criteria":["s"],"steps":[{"step_id":"a","name":"A",
        "args":{"q":1},"dependencies":["b"],"estimated_complexity":"high"},{"step_id":"b"}]}"#);
    let step = &p.plan.steps[0];
    assert_eq!(p.plan.goal, "g");
    assert_eq!(step.id.as_str(), "a");
    assert_eq!(step.title.as_deref(), Some("A"));
    assert_eq!(step.parameters.get("q").and_then(crate::ValueRef::as_f64), Some(1.0));
    assert_eq!(step.depends_on[0].as_str(), "b");
    assert_eq!(p.plan.postconditions[0].description, "s");
}

#[test]
fn unknown_fields_are_kept() {
    let p = ok(r#"{"goal":"g","colour":"red","steps":[{"id":"a","dependson":["x"]}]}"#);
    assert!(p.plan.extra.contains_key("colour"));
    assert!(p.plan.steps[0].extra.contains_key("dependson"));
}

#[test]
fn yaml_is_accepted() {
    let p = ok("goal: g\nsteps:\n  - id: a\n    tool: shell.exec\n    args: {command: ls}\n");
    assert_eq!(p.plan.steps[0].tool.as_deref(), Some("shell.exec"));
}

#[test]
fn syntax_errors_carry_line_and_column() {
    let err = parse_plan("{\n  \"goal\": \"g\",\n  \"steps\": [\n}", Format::Json).unwrap_err();
    match err {
        ParseError::Syntax { line, column, .. } => assert_eq!((line, column), (4, 1)),
        other => panic!("{other:?}"),
    }
    let err = parse_plan("goal: g\nsteps: [\n  - a: : b\n", Format::Yaml).unwrap_err();
    assert!(matches!(err, ParseError::Syntax { line, .. } if line >= 2), "{err}");
}

#[test]
fn schema_errors_name_pointer_and_expected_type() {
    let issues = schema_err(r#"{"goal":"g","steps":[{"id":"a"},{"id":"b","depends_on":"a"}]}"#);
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].pointer, "/steps/1/depends_on");
    assert_eq!(issues[0].step, Some(1));
    assert!(issues[0].message.contains("expected a sequence"), "{}", issues[0].message);
}

#[test]
fn every_bad_step_is_reported() {
    let issues = schema_err(r#"{"goal":"g","steps":[{"id":1},{"tool":"x"},{"id":"bad id"}]}"#);
    let pointers: Vec<_> = issues.iter().map(|i| i.pointer.as_str()).collect();
    assert_eq!(pointers, ["/steps/0/id", "/steps/1", "/steps/2/id"]);
}

#[test]
fn missing_goal_and_steps_are_schema_errors() {
    let issues = schema_err(r#"{"goal": 3}"#);
    assert!(issues.iter().any(|i| i.pointer == "/steps"));
    assert!(issues.iter().any(|i| i.pointer == "/goal"));
    assert_eq!(schema_err("[]")[0].pointer, "");
    assert_eq!(schema_err("")[0].pointer, "");
}

#[test]
fn invalid_assertions_are_set_aside_not_fatal() {
    let p = ok(r#"{"goal":"g","steps":[{"id":"a","assertions":[
        {"assert":"file_exists","path":"x"},
        {"type":"file_contains","path":"x","patern":"y"},
        {"type":"no_such_type"},
        {"type":"http_200","url":"http://127.0.0.1/"}]}]}"#);
    let a = &p.plan.steps[0].assertions;
    assert_eq!(a.len(), 2);
    assert_eq!(a[0].kind(), "file_exists");
    assert!(matches!(a[1], Assertion::HttpStatus { status: 200, .. }));
    let pointers: Vec<_> = p
        .issues
        .iter()
        .map(|PlanIssue::InvalidAssertion { pointer, .. }| pointer.as_str())
        .collect();
    assert_eq!(pointers, ["/steps/0/assertions/1", "/steps/0/assertions/2"]);
}

#[test]
fn references_are_indexed_with_pointers() {
    let p = ok(r#"{"goal":"g","steps":[{"id":"a"},{"id":"b","args":{"q":{"x":["${a.result.v}"]},
        "s":"n={{a.result.n}} m=${a.result.m}"}}]}"#);
    let refs = &p.plan.steps[1].refs;
    assert_eq!(refs.len(), 3);
    assert_eq!(refs[0].pointer, "/parameters/q/x/0");
    assert!(refs[0].whole);
    assert_eq!(refs[1].pointer, "/parameters/s");
    assert!(!refs[1].whole);
}

#[test]
fn references_match_index_references_and_step_lists_are_trimmed() {
    let text = r#"{"goal":"g","steps":[{"id":"a"},{"id":"b","depends_on":["a"],
        "args":{"q":"${a.result.v}","e":{"K":"{{a.result}}"},"l":["x","${a.result.w}"]},
        "assertions":[{"type":"file_exists","path":"o.txt"}]}]}"#;
    // The fast path and, with the `assert` alias, the staged path.
    for text in
        [text.to_owned(), text.replace(r#""type":"file_exists""#, r#""assert":"file_exists""#)]
    {
        let p = ok(&text);
        let step = &p.plan.steps[1];
        let mut again = step.clone();
        again.index_references();
        assert_eq!(step.refs, again.refs);
        let pointers: Vec<_> = step.refs.iter().map(|r| r.pointer.as_str()).collect();
        assert_eq!(pointers, ["/parameters/q", "/parameters/e/K", "/parameters/l/1"]);
        // A long plan keeps these for the whole lint: no room for more than they hold.
        assert_eq!((step.refs.len(), step.refs.capacity()), (3, 3));
        assert_eq!(step.depends_on.capacity(), 1);
        assert_eq!(step.assertions.capacity(), 1);
    }
}

#[test]
fn fast_path_agrees_with_the_staged_path() {
    let texts = [
        include_str!("../../../examples/lint/dark-green.json"),
        r#"{"objective":"g","success_criteria":["s"],"x":1,"steps":[{"step_id":"a","args":{"q":"${b.result.v}"},
            "dependencies":["b"],"zz":true},{"id":"b","assertions":[{"type":"http_200","url":"http://127.0.0.1/"}]}]}"#,
    ];
    for text in texts {
        let fast = parse_json_fast(text).expect("fast path takes a valid plan");
        let staged = from_value(parse_document(text, Format::Json).unwrap()).unwrap();
        assert_eq!(fast.plan, staged.plan);
        assert_eq!(
            fast.plan.steps.iter().map(|s| &s.refs).collect::<Vec<_>>(),
            staged.plan.steps.iter().map(|s| &s.refs).collect::<Vec<_>>()
        );
    }
}

#[test]
fn fast_path_declines_what_needs_the_staged_path() {
    for text in [
        r#"{"goal":"g","steps":[{"id":"a","assertions":[{"assert":"file_exists","path":"x"}]}]}"#,
        r#"{"goal":"g","steps":[{"id":"a","assertions":[{"type":"nope"}]}]}"#,
        r#"{"goal":"g","steps":[{"id":"bad id"}]}"#,
        r#"{"goal":"g","steps":[{"id":"a","assertions":null}]}"#,
        r#"{"goal":"g","steps":"#,
    ] {
        assert!(parse_json_fast(text).is_none(), "{text}");
    }
}
