//! Tests of reference resolution: type preservation, embedded text, both syntaxes, nesting,
//! literal look-alikes, and every error with its pointer and message.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::{Problem, ResolveError, resolve_parameters};

/// Outputs of the steps that are "done" in these tests.
fn outputs() -> HashMap<String, Value> {
    let mut m = HashMap::new();
    m.insert(
        "read-css".to_owned(),
        json!({"content": "body { background: #fff; }", "bytes": 26, "sha256": "abc"}),
    );
    m.insert(
        "list".to_owned(),
        json!({"entries": [
            {"path": "a.txt", "kind": "file", "bytes": 3},
            {"path": "b.txt", "kind": "file", "bytes": 4}
        ]}),
    );
    m.insert(
        "sh".to_owned(),
        json!({"exit_code": 0, "ok": true, "signal": null, "stdout": "hi\n", "tags": ["x", "y"],
               "meta": {"n": 1.5, "deep": {"k": "v"}}}),
    );
    m.insert("scalar".to_owned(), json!(42));
    m.insert("v1.2".to_owned(), json!({"x": "dotted"}));
    m
}

fn params(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("test params must be an object, got {other}"),
    }
}

fn run(v: Value) -> Result<Map<String, Value>, ResolveError> {
    let outs = outputs();
    let lookup = |id: &str| outs.get(id);
    resolve_parameters(&params(v), &lookup)
}

fn ok(v: Value) -> Value {
    match run(v) {
        Ok(m) => Value::Object(m),
        Err(e) => panic!("expected success, got {e}"),
    }
}

/// A ResolveError, for comparing with what the resolver returned.
fn error(reference: &str, pointer: &str, problem: Problem) -> ResolveError {
    ResolveError {
        reference: reference.to_owned(),
        pointer: pointer.to_owned(),
        problem: Box::new(problem),
    }
}

fn err(v: Value) -> ResolveError {
    match run(v) {
        Ok(m) => panic!("expected an error, got {}", Value::Object(m)),
        Err(e) => e,
    }
}

#[test]
fn whole_reference_keeps_number_type() {
    let out = ok(json!({"n": "${read-css.result.bytes}", "code": "{{sh.result.exit_code}}"}));
    assert_eq!(out, json!({"n": 26, "code": 0}));
}

#[test]
fn whole_reference_keeps_bool_null_float() {
    let out = ok(json!({
        "b": "${sh.result.ok}",
        "z": "${sh.result.signal}",
        "f": "${sh.result.meta.n}"
    }));
    assert_eq!(out, json!({"b": true, "z": null, "f": 1.5}));
}

#[test]
fn whole_reference_keeps_object_and_array() {
    let out = ok(json!({"o": "${sh.result.meta}", "a": "${sh.result.tags}"}));
    assert_eq!(out, json!({"o": {"n": 1.5, "deep": {"k": "v"}}, "a": ["x", "y"]}));
}

#[test]
fn empty_path_is_the_whole_output() {
    let out = ok(json!({"all": "${scalar.result}", "v": "{{v1.2.result}}"}));
    assert_eq!(out, json!({"all": 42, "v": {"x": "dotted"}}));
}

#[test]
fn whole_string_reference_stays_a_string() {
    let out = ok(json!({"content": "${read-css.result.content}"}));
    assert_eq!(out, json!({"content": "body { background: #fff; }"}));
}

#[test]
fn mustache_with_inner_spaces_is_a_reference() {
    let out = ok(json!({"n": "{{ read-css.result.bytes }}"}));
    assert_eq!(out, json!({"n": 26}));
}

#[test]
fn embedded_references_become_text() {
    let out = ok(json!({
        "s": "size=${read-css.result.bytes} ok=${sh.result.ok} sig=${sh.result.signal}",
        "t": "out: {{sh.result.stdout}}!",
        "j": "meta=${sh.result.meta} tags={{sh.result.tags}}"
    }));
    assert_eq!(
        out,
        json!({
            "s": "size=26 ok=true sig=null",
            "t": "out: hi\n!",
            "j": "meta={\"n\":1.5,\"deep\":{\"k\":\"v\"}} tags=[\"x\",\"y\"]"
        })
    );
}

#[test]
fn two_adjacent_references_concatenate() {
    let out = ok(json!({"s": "${read-css.result.sha256}{{list.result.entries.1.path}}"}));
    assert_eq!(out, json!({"s": "abcb.txt"}));
}

#[test]
fn array_indexes_and_nested_containers() {
    let out = ok(json!({
        "edits": [
            {"old": "#fff", "new": "${list.result.entries.0.path}", "replace_all": false},
            {"old": "x", "new": "{{list.result.entries.1.bytes}}"}
        ],
        "deep": {"k": ["${sh.result.meta.deep.k}", 7, null]}
    }));
    assert_eq!(
        out,
        json!({
            "edits": [
                {"old": "#fff", "new": "a.txt", "replace_all": false},
                {"old": "x", "new": 4}
            ],
            "deep": {"k": ["v", 7, null]}
        })
    );
}

#[test]
fn literals_that_look_like_references_stay_literal() {
    let input = json!({
        "command": "echo ${HOME} && echo $HOME",
        "tmpl": "{{ name }} and {{x.results}} and ${a.result.}",
        "plain": "no references here",
        "n": 3, "b": false, "nil": null
    });
    assert_eq!(ok(input.clone()), input);
}

#[test]
fn only_the_exact_home_literal() {
    assert_eq!(ok(json!({"p": "${HOME}"})), json!({"p": "${HOME}"}));
}

#[test]
fn object_keys_are_not_resolved() {
    let out = ok(json!({"${sh.result.stdout}": {"{{sh.result.ok}}": "${sh.result.ok}"}}));
    assert_eq!(out, json!({"${sh.result.stdout}": {"{{sh.result.ok}}": true}}));
}

#[test]
fn key_order_is_kept() {
    let out = ok(json!({"z": 1, "a": "${scalar.result}", "m": 2}));
    let keys: Vec<&String> = out.as_object().map(|m| m.keys().collect()).unwrap_or_default();
    assert_eq!(keys, ["z", "a", "m"]);
}

#[test]
fn step_not_done_names_reference_and_pointer() {
    let e = err(json!({"edits": [{"old": "a", "new": "x${later.result.v}y"}]}));
    assert_eq!(
        e,
        error(
            "${later.result.v}",
            "/parameters/edits/0/new",
            Problem::StepNotDone { step: "later".into() }
        )
    );
    assert_eq!(
        e.to_string(),
        "/parameters/edits/0/new: reference ${later.result.v}: step `later` is unknown or not done"
    );
}

#[test]
fn missing_key_lists_available_keys() {
    let e = err(json!({"path": "{{read-css.result.contents}}"}));
    assert_eq!(
        e,
        error(
            "{{read-css.result.contents}}",
            "/parameters/path",
            Problem::MissingKey {
                at: "read-css.result".into(),
                key: "contents".into(),
                available: vec!["content".into(), "bytes".into(), "sha256".into()],
                total: 3,
            }
        )
    );
    assert_eq!(
        e.to_string(),
        "/parameters/path: reference {{read-css.result.contents}}: `read-css.result` has no key \
         `contents`; keys: content, bytes, sha256"
    );
}

#[test]
fn missing_key_lists_at_most_ten() {
    let big: Map<String, Value> = (0..14).map(|i| (format!("k{i:02}"), json!(i))).collect();
    let outs: HashMap<String, Value> = [("big".to_owned(), Value::Object(big))].into();
    let lookup = |id: &str| outs.get(id);
    let e = resolve_parameters(&params(json!({"a": "${big.result.nope}"})), &lookup);
    let Err(e) = e else { panic!("expected an error") };
    let Problem::MissingKey { available, total, .. } = &*e.problem else {
        panic!("expected MissingKey, got {e:?}")
    };
    assert_eq!(available.len(), 10);
    assert_eq!(available.first().map(String::as_str), Some("k00"));
    assert_eq!(available.last().map(String::as_str), Some("k09"));
    assert_eq!(*total, 14);
    assert!(
        e.to_string()
            .ends_with("keys: k00, k01, k02, k03, k04, k05, k06, k07, k08, k09 (and 4 more)"),
        "{e}"
    );
}

#[test]
fn missing_key_in_empty_object() {
    let outs: HashMap<String, Value> = [("e".to_owned(), json!({}))].into();
    let lookup = |id: &str| outs.get(id);
    let e = resolve_parameters(&params(json!({"a": "${e.result.x}"})), &lookup);
    let Err(e) = e else { panic!("expected an error") };
    assert_eq!(
        e.to_string(),
        "/parameters/a: reference ${e.result.x}: `e.result` has no key `x`; it is an empty object"
    );
}

#[test]
fn index_out_of_range_gives_length() {
    let e = err(json!({"args": {"files": ["${list.result.entries.2.path}"]}}));
    assert_eq!(
        e,
        error(
            "${list.result.entries.2.path}",
            "/parameters/args/files/0",
            Problem::IndexOutOfRange {
                at: "list.result.entries".into(),
                index: "2".into(),
                len: 2,
            }
        )
    );
    assert_eq!(
        e.to_string(),
        "/parameters/args/files/0: reference ${list.result.entries.2.path}: index 2 is out of \
         range: `list.result.entries` has 2 items"
    );
}

#[test]
fn huge_index_is_out_of_range_not_a_panic() {
    let e = err(json!({"p": "${list.result.entries.99999999999999999999999}"}));
    assert!(
        matches!(&*e.problem, Problem::IndexOutOfRange { len: 2, index, .. } if index == "99999999999999999999999"),
        "{e:?}"
    );
}

#[test]
fn non_numeric_segment_on_array() {
    let e = err(json!({"p": "${list.result.entries.first}"}));
    assert_eq!(
        e,
        error(
            "${list.result.entries.first}",
            "/parameters/p",
            Problem::NotAnIndex {
                at: "list.result.entries".into(),
                segment: "first".into(),
                len: 2,
            }
        )
    );
    assert!(e.to_string().contains("is not a decimal index"), "{e}");
}

#[test]
fn indexing_into_a_scalar() {
    let e = err(json!({"p": "n=${read-css.result.bytes.low}"}));
    assert_eq!(
        e,
        error(
            "${read-css.result.bytes.low}",
            "/parameters/p",
            Problem::NotIndexable {
                at: "read-css.result.bytes".into(),
                segment: "low".into(),
                kind: "a number",
            }
        )
    );
    assert_eq!(
        e.to_string(),
        "/parameters/p: reference ${read-css.result.bytes.low}: `read-css.result.bytes` is a \
         number, which has no `low`"
    );
    let e = err(json!({"p": "${sh.result.signal.x}"}));
    assert!(matches!(*e.problem, Problem::NotIndexable { kind: "null", .. }), "{e:?}");
    let e = err(json!({"p": "${scalar.result.0}"}));
    assert!(
        matches!(&*e.problem, Problem::NotIndexable { kind: "a number", at, .. } if at == "scalar.result"),
        "{e:?}"
    );
}

#[test]
fn pointer_escapes_slash_and_tilde_in_keys() {
    let e = err(json!({"a/b": {"c~d": "${nope.result}"}}));
    assert_eq!(e.pointer, "/parameters/a~1b/c~0d");
}

#[test]
fn first_error_wins_and_nothing_becomes_empty() {
    // The first reference fails: the error names it, and no partial result is returned.
    let e = err(json!({"s": "${gone.result.x}-${read-css.result.bytes}"}));
    assert_eq!(e.reference, "${gone.result.x}");
}

#[test]
fn empty_params_resolve_to_empty() {
    assert_eq!(ok(json!({})), json!({}));
}
