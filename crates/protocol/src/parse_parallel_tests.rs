use super::*;
use crate::parse::{Format, parse_plan};

/// Any size, on two threads.
const ALL: Reading = Reading { min_bytes: 0, min_steps: 0, threads: true };

/// What the ordinary path gives: the whole text through serde_json, each step finished.
fn serial(text: &str) -> Option<Plan> {
    let mut plan: Plan = serde_json::from_str(text).ok()?;
    let mut finisher = StepFinisher::default();
    for step in &mut plan.steps {
        finisher.finish(step);
    }
    Some(plan)
}

/// A plan of `n` varied steps: references of both spellings, escapes, nested parameters,
/// assertions (one with the `assert` alias left out: the fast path declines those), unknown
/// fields, aliases, and strings that hold brackets, commas and quotes.
fn plan_text(n: usize, pretty: bool) -> String {
    let steps: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let tool = ["shell.exec", "file.write", "db.query"][i % 3];
            let mut step = serde_json::json!({
                "id": format!("s{i}"),
                "tool": tool,
                "args": {
                    "command": format!("echo \"}},{{\\\" ] [ {i}\" ${{s{}.result.out}}", i.saturating_sub(1)),
                    "nested": {"list": [1, 2.5, {"deep": [[["{{s0.result}}"]]]}], "é": "ü\u{1F600}\n\t"},
                },
                "depends_on": if i > 0 { vec![format!("s{}", i - 1)] } else { vec![] },
            });
            if i % 7 == 0 {
                step["assertions"] = serde_json::json!([{"type": "file_exists", "path": "a"}]);
            }
            if i % 11 == 0 {
                step["colour"] = serde_json::json!({"r": [255, {"x": null}]});
            }
            if i % 13 == 0 {
                step["requires_approval"] = serde_json::json!(true);
            }
            step
        })
        .collect();
    let plan = serde_json::json!({"goal": "g [\"steps\"]", "context": {"steps": [1, 2]},
        "steps": steps, "meta": {"x": "]"}});
    if pretty { serde_json::to_string_pretty(&plan).unwrap() } else { plan.to_string() }
}

#[test]
fn two_threads_read_exactly_what_one_reads() {
    for pretty in [false, true] {
        let text = plan_text(5000, pretty);
        let parallel = parse_from(&text, ALL).expect("parallel path applies");
        assert_eq!(Some(&parallel), serial(&text).as_ref());
        let one = parse_from(&text, Reading { threads: false, ..ALL }).expect("applies");
        assert_eq!(one, parallel);
        assert_eq!(parallel.steps.len(), 5000);
        assert!(!parallel.steps[4].refs.is_empty());
    }
}

#[test]
fn the_whole_parse_uses_it_and_agrees_with_the_staged_path() {
    let text = plan_text(3000, false);
    assert!(text.len() >= MIN_BYTES, "{}", text.len());
    let fast = parse_plan(&text, Format::Json).expect("parses");
    let staged = super::super::from_value(serde_json::from_str(&text).unwrap()).expect("staged");
    assert_eq!(fast.plan, staged.plan);
    assert_eq!(fast.plan.steps.iter().map(|s| s.refs.len()).sum::<usize>(), 2 * 3000);
}

#[test]
fn the_layout_finds_each_element() {
    let text = r#" {"a": {"steps": [1]}, "steps" : [ {"id":"a"} ,{"id":"b]},{"}
    ], "z": "\"steps\""} "#;
    let found = layout(text).expect("a layout");
    let spans: Vec<&str> = found.elements.iter().map(|&(s, e)| &text[s..e]).collect();
    assert_eq!(spans, [r#"{"id":"a"}"#, r#"{"id":"b]},{"}"#]);
    assert_eq!(&text[found.open..=found.open], "[");
    assert_eq!(&text[found.close..=found.close], "]");
    let empty = layout(r#"{"steps":[]}"#).expect("empty array");
    assert!(empty.elements.is_empty());
}

#[test]
fn shapes_it_cannot_vouch_for_are_declined() {
    for text in [
        r#"[{"steps":[]}]"#,              // not an object
        r#"{"steps":{"a":{}}}"#,          // steps not an array
        r#"{"steps":[{"id":"a"}, "b"]}"#, // an element that is not an object
        r#"{"steps":[{"id":"a"}, 1]}"#,
        r#"{"steps":[{"id":"a"},]}"#,            // trailing comma
        r#"{"steps":[,{"id":"a"}]}"#,            // leading comma
        r#"{"steps":[{"id":"a"} {"id":"b"}]}"#,  // missing comma
        r#"{"steps":[{"id":"a"},,{"id":"b"}]}"#, // two commas
        r#"{"steps":[{"id":"a"}}"#,              // the array closed by `}`
        r#"{"steps":[{"id":"a"}]} x"#,           // text after the plan
        r#"{"steps":[{"id":"a"}]"#,              // unclosed
        r#"{"steps":[{"id":"a}]}"#,              // unterminated string
        r#"{"st\u0065ps":[{"id":"a"}]}"#,        // an escaped key: left to serde_json
    ] {
        assert_eq!(layout(text), None, "{text}");
    }
    let deep = format!(r#"{{"steps":[{{"id":"a","p":{}{}}}]}}"#, "[".repeat(120), "]".repeat(120));
    assert_eq!(layout(&deep), None);
}

#[test]
fn invalid_plans_are_declined_whole() {
    let good = plan_text(3000, false);
    // A duplicate `steps` key, a bad step in the middle, a syntax error inside a step, and
    // text that nests too deep: the ordinary path decides (and reports) each.
    let duplicate = format!("{},\"steps\":[]}}", &good[..good.len() - 1]);
    let bad_step = good.replacen(r#""id":"s1500""#, r#""id":1500"#, 1);
    let syntax = good.replacen(r#""id":"s2500""#, r#""id":"s2500"x"#, 1);
    for text in [&duplicate, &bad_step, &syntax] {
        assert!(serial(text).is_none());
        assert_eq!(parse_from(text, ALL), None);
    }
    // Small plans are read on one thread.
    assert_eq!(parse_from(&good, Reading { min_steps: 3001, ..ALL }), None);
    assert_eq!(parse_from(&good, Reading { min_bytes: good.len() + 1, ..ALL }), None);
}

#[test]
fn strings_are_skipped_whatever_their_alignment() {
    for pad in 0..20 {
        for tail in [r#"""#, r#"\\""#, r#"\"x""#, r#"\\\"\\""#] {
            let body = format!("{}{tail}", "a".repeat(pad));
            let text = format!("\"{body} rest");
            let end = skip_string(text.as_bytes(), 1).expect("closed");
            let expected: String = serde_json::from_str(&text[..end]).expect("a string");
            assert_eq!(serde_json::to_string(&expected).unwrap().len(), end, "{text}");
            assert_eq!(&text[end..], " rest");
        }
    }
    assert_eq!(skip_string(br#""abc\"#, 1), None);
}
