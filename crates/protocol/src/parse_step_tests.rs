//! The hand-written step reader against serde's derive: wherever it accepts a text, the derive
//! must accept it too and give an equal step (the parameter map's spare room aside, which
//! `PartialEq` does not see and which is the point).

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::json;

use super::*;

/// What the derive gives (the oracle).
fn derived(text: &str) -> Option<Step> {
    serde_json::from_str::<Step>(text).ok()
}

fn fast(text: &str) -> Option<Step> {
    let mut step = Step::default();
    read(text, &mut step).then_some(step)
}

/// Checks one text; returns whether the fast reader accepted it.
fn agree(text: &str) -> bool {
    let mine = fast(text);
    if let Some(mine) = &mine {
        assert_eq!(Some(mine), derived(text).as_ref(), "the fast reader differs on {text}");
    }
    mine.is_some()
}

#[test]
fn an_ordinary_step_is_read_as_the_derive_reads_it() {
    let text = json!({
        "id": "s1", "title": "T", "description": "d", "tool": "shell.exec",
        "parameters": {"command": "echo ${s0.result.out}", "n": [1, 2.5, -0, 1e2, null, {"a": {}}],
                       "dup": 1, "esc\"aped": "\u{1F600}\n"},
        "depends_on": ["s0"], "on_fail": "retry", "acceptance_criteria": ["ok"],
        "assertions": [{"type": "file_exists", "path": "a"}, {"type": "exit_code_eq", "code": 0}],
        "expected_outputs": ["x"], "complexity": "high", "requires_approval": true,
        "max_attempts": 3, "delegate": {"goal": "g", "mode": "loop", "scope": "src",
        "budget": {"max_usd": 2, "max_tokens": 10, "max_turns": 3}},
        "may_change_oracle": true, "repeatable": false,
        "colour": {"r": [255]}, "refs": [1], "extra": {"x": 1}
    })
    .to_string();
    assert!(agree(&text));
    let step = fast(&text).expect("read");
    assert_eq!(step.extra.len(), 3, "unknown keys, `refs` and `extra` included, go to extra");
    assert_eq!(step.parameters.len(), 4);
    assert!(step.refs.is_empty(), "references are indexed by the finisher, not here");
}

#[test]
fn aliases_and_defaults_match() {
    for text in [
        r#"{"step_id":"a","name":"n","args":{"k":"v"},"dependencies":["b"],"estimated_complexity":"low"}"#,
        r#"{"id":"a"}"#,
        r#"{"id":"a","title":null,"tool":null,"max_attempts":null,"delegate":null,"repeatable":null,"complexity":null}"#,
        r#"{"id":"a","on_fail":{"continue":null}}"#,
        r#"{"id":"a","x":1,"x":2,"y":[],"x":{"z":3}}"#,
        r#"{"id":"a","args":{"k":1,"j":2,"k":3}}"#,
        r#"{"\u0069d":"a","t\u0069tle":"t"}"#,
        r#"{"id":"a","delegate":["g","pev"]}"#,
        r#"{"id":"a","parameters":{}}"#,
        "  {\"id\" : \"a\" }  \n",
    ] {
        assert!(agree(text), "the fast reader should accept {text}");
    }
}

#[test]
fn what_the_derive_rejects_is_declined() {
    for text in [
        r#"{"title":"no id"}"#,
        r#"{"id":"a","id":"b"}"#,
        r#"{"id":"a","step_id":"b"}"#,
        r#"{"id":"a","title":"x","name":"y"}"#,
        r#"{"id":"a","args":{},"parameters":{}}"#,
        r#"{"id":"a","depends_on":[],"dependencies":[]}"#,
        r#"{"id":"a","complexity":"low","estimated_complexity":"low"}"#,
        r#"{"id":"a","parameters":null}"#,
        r#"{"id":"a","parameters":[1]}"#,
        r#"{"id":"a","on_fail":null}"#,
        r#"{"id":"a","on_fail":"Retry"}"#,
        r#"{"id":"a","max_attempts":1.5}"#,
        r#"{"id":"a","max_attempts":-1}"#,
        r#"{"id":"a","max_attempts":"2"}"#,
        r#"{"id":"a","requires_approval":null}"#,
        r#"{"id":"a","requires_approval":"yes"}"#,
        r#"{"id":"a","assertions":[{"assert":"file_exists","path":"p"}]}"#,
        r#"{"id":"a","assertions":[{"type":"file_exists","path":"p","patern":"x"}]}"#,
        r#"{"id":"a","delegate":{"goal":"g","extra":1}}"#,
        r#"{"id":"a","delegate":{"goal":"g","budget":{"max_turns":-1}}}"#,
        r#"{"id":1}"#,
        r#"["a"]"#,
        r#"{"id":"a"} x"#,
        r#"{"id":"a""#,
    ] {
        assert!(fast(text).is_none(), "the fast reader should decline {text}");
    }
}

/// Values of every kind, including the edges of each field's type.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![Just(0.5f64), Just(-0.0), Just(1e300), Just(3.0)].prop_map(Value::from),
        prop_oneof![
            Just("a"),
            Just("s-1.x_y"),
            Just(""),
            Just("retry"),
            Just("continue"),
            Just("low"),
            Just("HIGH"),
            Just("${a.result.x}"),
            Just("{{ b.result }}"),
            Just("é\"\\\n"),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-c]{1,2}|type|path|goal|mode|code", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Values shaped for a field (often valid, sometimes not), or anything.
fn field_value(key: &'static str) -> BoxedStrategy<Value> {
    let shaped: BoxedStrategy<Value> = match key {
        "id" | "step_id" | "title" | "name" | "description" | "tool" => {
            prop_oneof![Just(json!("a")), Just(json!("s.1")), Just(json!(null))].boxed()
        }
        "depends_on" | "dependencies" | "acceptance_criteria" | "expected_outputs" => {
            prop_oneof![Just(json!([])), Just(json!(["a", "b"])), Just(json!([1]))].boxed()
        }
        "on_fail" => prop_oneof![
            Just(json!("abort")),
            Just(json!("replan")),
            Just(json!({"retry": null})),
            Just(json!({"retry": {}})),
            Just(json!({"retry": 1})),
        ]
        .boxed(),
        "complexity" | "estimated_complexity" => {
            prop_oneof![Just(json!("medium")), Just(json!("High"))].boxed()
        }
        "requires_approval" | "may_change_oracle" | "repeatable" => {
            prop_oneof![Just(json!(true)), Just(json!(false))].boxed()
        }
        "max_attempts" => {
            prop_oneof![Just(json!(0)), Just(json!(4_294_967_296u64)), Just(json!(2.0))].boxed()
        }
        "assertions" => prop_oneof![
            Just(json!([{"type": "file_exists", "path": "p"}])),
            Just(json!([{"type": "http_200", "url": "u"}])),
            Just(json!([{"type": "command_succeeds", "command": "c", "timeout_s": 1}])),
            Just(json!([{"type": "socket_open", "host": "h", "port": 70000}])),
            Just(json!([{"path": "p"}])),
        ]
        .boxed(),
        "delegate" => prop_oneof![
            Just(json!({"goal": "g"})),
            Just(json!({"goal": "g", "budget": {"max_usd": 1}})),
            Just(json!({"goal": "g", "budget": {}})),
            Just(json!({"goal": "g", "mode": "swarm"})),
        ]
        .boxed(),
        "parameters" | "args" => prop::collection::vec(("[a-d]{1,2}", any_value()), 0..5)
            .prop_map(|kv| {
                // Written as a map below, duplicates and all.
                Value::Array(kv.into_iter().map(|(k, v)| json!([k, v])).collect())
            })
            .boxed(),
        _ => any_value().boxed(),
    };
    prop_oneof![4 => shaped, 1 => any_value()].boxed()
}

const KEYS: &[&str] = &[
    "id",
    "step_id",
    "title",
    "name",
    "description",
    "tool",
    "parameters",
    "args",
    "depends_on",
    "dependencies",
    "on_fail",
    "acceptance_criteria",
    "assertions",
    "expected_outputs",
    "complexity",
    "estimated_complexity",
    "requires_approval",
    "max_attempts",
    "delegate",
    "may_change_oracle",
    "repeatable",
    "refs",
    "extra",
    "colour",
    "notes",
];

/// A step's text from its entries, keys in the given order and possibly repeated (which a
/// `Value` cannot hold); parameters given as pairs are written as an object the same way.
fn step_text(entries: &[(&str, Value)]) -> String {
    let mut out = String::from("{");
    for (k, (key, value)) in entries.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        out.push_str(&Value::from(*key).to_string());
        out.push(':');
        match (*key, value) {
            ("parameters" | "args", Value::Array(pairs))
                if pairs.iter().all(|p| p.as_array().is_some_and(|p| p.len() == 2)) =>
            {
                out.push('{');
                for (j, pair) in pairs.iter().enumerate() {
                    if j > 0 {
                        out.push(',');
                    }
                    out.push_str(&pair[0].to_string());
                    out.push(':');
                    out.push_str(&pair[1].to_string());
                }
                out.push('}');
            }
            _ => out.push_str(&value.to_string()),
        }
    }
    out.push('}');
    out
}

fn any_entries() -> impl Strategy<Value = Vec<(&'static str, Value)>> {
    let entry = prop::sample::select(KEYS).prop_flat_map(|key| (Just(key), field_value(key)));
    (prop::collection::vec(entry, 0..8), any::<bool>()).prop_map(|(mut entries, with_id)| {
        if with_id {
            entries.insert(0, ("id", json!("s0")));
        }
        entries
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn the_fast_reader_agrees_with_the_derive(entries in any_entries()) {
        agree(&step_text(&entries));
    }
}

/// Enough of the generated steps are accepted for the comparison above to mean something.
#[test]
fn generated_steps_are_mostly_accepted() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut accepted, mut derive_accepted) = (0, 0);
    for _ in 0..2000 {
        let entries = any_entries().new_tree(&mut runner).expect("a value").current();
        let text = step_text(&entries);
        accepted += usize::from(agree(&text));
        derive_accepted += usize::from(derived(&text).is_some());
    }
    assert!(derive_accepted > 300, "the derive accepted only {derive_accepted}");
    // The fast reader declines duplicated known fields only where the derive rejects them too,
    // so it accepts exactly as often.
    assert_eq!(accepted, derive_accepted);
}

/// Every plan in the repository (JSON and YAML): each step read as the derive reads it.
#[test]
fn every_plan_in_the_repository_is_read_as_the_derive_reads_it() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut stack: Vec<std::path::PathBuf> =
        ["examples", "evals", "crates", "python", "bench"].iter().map(|d| root.join(d)).collect();
    let (mut plans, mut steps) = (0, 0);
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_dir() {
                if !matches!(name, "target" | "node_modules" | "out" | ".venv") {
                    stack.push(path);
                }
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else { continue };
            let document: Option<Value> = if name.ends_with(".json") {
                serde_json::from_str(&text).ok()
            } else if name.ends_with(".yaml") || name.ends_with(".yml") {
                serde_yaml_ng::from_str(&text).ok()
            } else {
                None
            };
            let Some(Value::Array(items)) =
                document.and_then(|mut d| d.get_mut("steps").map(Value::take))
            else {
                continue;
            };
            plans += 1;
            for item in items {
                steps += 1;
                agree(&item.to_string());
                agree(&serde_json::to_string_pretty(&item).expect("serialises"));
            }
        }
    }
    assert!(plans >= 25 && steps >= 60, "found {plans} plans, {steps} steps");
}
