//! Unit tests for the JSON pointer locator.

use super::{Locations, Position};

fn at(line: usize, column: usize) -> Option<Position> {
    Some(Position { line, column })
}

const PLAN: &str = r#"{
  "goal": "g",
  "steps": [
    {"id": "a", "tool": "file.read"},
    {
      "id": "b",
      "tool": "db.exec",
      "parameters": {"sql": "DELETE", "nested": [1, {"deep": true}]}
    }
  ]
}"#;

#[test]
fn members_are_found_at_their_key_and_elements_at_their_value() {
    let pointers = ["/goal", "/steps/1/tool", "/steps/0", "/steps/1/parameters/nested/1/deep", ""];
    let loc = Locations::json(PLAN, pointers);
    assert_eq!(loc.get("/goal"), at(2, 3));
    assert_eq!(loc.get("/steps/1/tool"), at(7, 7));
    assert_eq!(loc.get("/steps/0"), at(4, 5));
    assert_eq!(loc.get("/steps/1/parameters/nested/1/deep"), at(8, 54));
    assert_eq!(loc.get(""), at(1, 1));
}

#[test]
fn a_pointer_past_what_the_text_has_falls_back_to_its_nearest_ancestor() {
    let loc = Locations::json(PLAN, ["/steps/1/parameters/sql/3", "/steps/9/tool"]);
    assert_eq!(loc.get("/steps/1/parameters/sql/3"), at(8, 22));
    assert_eq!(loc.get("/steps/9/tool"), at(3, 3));
}

#[test]
fn only_the_pointers_asked_for_are_kept() {
    let loc = Locations::json(PLAN, ["/steps/0/id"]);
    assert_eq!(loc.get("/steps/0/id"), at(4, 6));
    // `/goal` was not asked for, nor is it an ancestor: it falls back to the root.
    assert_eq!(loc.get("/goal"), at(1, 1));
}

#[test]
fn aliases_are_found_under_their_canonical_names_and_as_written() {
    let text = r#"{"objective": "g", "steps": [
  {"step_id": "a", "name": "A", "tool": "db.exec", "args": {"sql": "x"},
   "dependencies": [], "estimated_complexity": "low",
   "assertions": [{"assert": "file_exists", "path": "p"}]}
]}"#;
    let pointers = [
        "/goal",
        "/steps/0/id",
        "/steps/0/title",
        "/steps/0/parameters/sql",
        "/steps/0/args/sql",
        "/steps/0/depends_on",
        "/steps/0/complexity",
        "/steps/0/assertions/0/type",
    ];
    let loc = Locations::json(text, pointers);
    assert_eq!(loc.get("/goal"), at(1, 2));
    assert_eq!(loc.get("/steps/0/id"), at(2, 4));
    assert_eq!(loc.get("/steps/0/title"), at(2, 20));
    assert_eq!(loc.get("/steps/0/parameters/sql"), at(2, 61));
    assert_eq!(loc.get("/steps/0/args/sql"), at(2, 61));
    assert_eq!(loc.get("/steps/0/depends_on"), at(3, 4));
    assert_eq!(loc.get("/steps/0/complexity"), at(3, 24));
    assert_eq!(loc.get("/steps/0/assertions/0/type"), at(4, 20));
}

#[test]
fn a_parameter_named_like_an_alias_is_not_renamed() {
    let text = r#"{"steps": [{"id": "a", "parameters": {"name": "x", "args": [1]}}]}"#;
    let loc = Locations::json(text, ["/steps/0/parameters/name", "/steps/0/parameters/title"]);
    assert_eq!(loc.get("/steps/0/parameters/name"), at(1, 39));
    // No `title` exists: the parameters object is the nearest place.
    assert_eq!(loc.get("/steps/0/parameters/title"), at(1, 24));
}

#[test]
fn escaped_keys_and_pointer_escapes() {
    let text = "{\"a/b\": 1, \"t~x\": 2, \"\\u00e9\\\"q\": 3, \"\\ud83d\\ude00\": 4}";
    let loc = Locations::json(text, ["/a~1b", "/t~0x", "/\u{e9}\"q", "/\u{1F600}"]);
    assert_eq!(loc.get("/a~1b"), at(1, 2));
    assert_eq!(loc.get("/t~0x"), at(1, 12));
    assert_eq!(loc.get("/\u{e9}\"q"), at(1, 22));
    assert_eq!(loc.get("/\u{1F600}"), at(1, 38));
}

#[test]
fn strings_with_brackets_commas_and_escaped_quotes_do_not_confuse_it() {
    let text = "{\"a\": \"x}], \\\"{[\", \"b\": [\"[\", \"]\", \"ü\"], \"c\": 3}";
    let loc = Locations::json(text, ["/b/2", "/c"]);
    assert_eq!(loc.get("/b/2"), at(1, 36));
    assert_eq!(loc.get("/c"), at(1, 42));
}

#[test]
fn columns_count_characters_not_bytes() {
    let text = "{\"é\": \"ü\", \"k\": 1}";
    let loc = Locations::json(text, ["/k"]);
    assert_eq!(loc.get("/k"), at(1, 12));
}

#[test]
fn broken_or_truncated_text_never_panics_and_keeps_what_it_found() {
    let inputs = [
        "",
        "{",
        "[",
        "{\"a\"",
        "{\"a\": ",
        "{\"a\": [1, 2",
        "{\"a\": \"\\",
        "{\"a\": \"\\u12",
        "{\"\\ud800\": 1}",
        "}}]]",
        "{1: 2}",
        "[1 2]",
        "\u{feff}{}",
    ];
    for text in inputs {
        let loc = Locations::json(text, ["/a/1", "/0", ""]);
        let _ = loc.get("/a/1");
    }
    let loc = Locations::json("{\"a\": [1, 2", ["/a/1"]);
    assert_eq!(loc.get("/a/1"), at(1, 11));
}

#[test]
fn none_finds_nothing() {
    assert_eq!(Locations::none().get("/steps/0"), None);
}

#[test]
fn every_prefix_of_a_plan_is_scanned_without_panicking() {
    let pointers = ["/steps/1/parameters/nested/1/deep", "/goal", "/steps/0/tool"];
    for (i, _) in PLAN.char_indices() {
        let loc = Locations::json(&PLAN[..i], pointers);
        // Whatever was found lies within the prefix.
        for p in pointers {
            if let Some(pos) = loc.get(p) {
                assert!(pos.line <= PLAN[..i].lines().count().max(1), "{i}: {pos:?}");
            }
        }
    }
}
