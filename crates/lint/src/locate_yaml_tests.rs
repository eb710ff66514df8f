//! Unit tests for the best-effort YAML locator.

use super::locations;
use crate::locate::Position;

fn at(line: usize, column: usize) -> Option<Position> {
    Some(Position { line, column })
}

const PLAN: &str = "\
# a comment
goal: Refund the order
steps:
  - id: find
    tool: db.query_ro
    args:
      query: |
        SELECT id: 1
        FROM orders
      params: [1,
        2]
    depends_on: [lookup]
  - id: refund
    name: Refund it
    tool: payments.refund
    args:
      amount: 5000
postconditions:
- The money is back
- description: logged
  assertions:
  - assert: file_exists
    path: log.txt
";

#[test]
fn block_mappings_and_sequences_are_followed() {
    let pointers = [
        "/goal",
        "/steps/0",
        "/steps/0/tool",
        "/steps/0/depends_on",
        "/steps/1/tool",
        "/steps/1/parameters/amount",
        "/steps/1/args/amount",
        "/steps/1/title",
        "/postconditions/1/description",
        "/postconditions/1/assertions/0/type",
        "/postconditions/1/assertions/0/path",
    ];
    let loc = locations(PLAN, pointers);
    assert_eq!(loc.get("/goal"), at(2, 1));
    assert_eq!(loc.get("/steps/0"), at(4, 3));
    assert_eq!(loc.get("/steps/0/tool"), at(5, 5));
    // The block scalar and the flow list spanning two lines are skipped, not misread.
    assert_eq!(loc.get("/steps/0/depends_on"), at(12, 5));
    assert_eq!(loc.get("/steps/1/tool"), at(15, 5));
    assert_eq!(loc.get("/steps/1/parameters/amount"), at(17, 7));
    assert_eq!(loc.get("/steps/1/args/amount"), at(17, 7));
    assert_eq!(loc.get("/steps/1/title"), at(14, 5));
    // A sequence written at its key's indentation.
    assert_eq!(loc.get("/postconditions/1/description"), at(20, 3));
    assert_eq!(loc.get("/postconditions/1/assertions/0/type"), at(22, 5));
    assert_eq!(loc.get("/postconditions/1/assertions/0/path"), at(23, 5));
}

#[test]
fn what_it_cannot_place_falls_back_to_an_ancestor() {
    let loc = locations(PLAN, ["/steps/0/parameters/query/3", "/steps/7/tool"]);
    assert_eq!(loc.get("/steps/0/parameters/query/3"), at(7, 7));
    assert_eq!(loc.get("/steps/7/tool"), at(3, 1));
}

#[test]
fn quoted_keys_and_keys_after_a_closed_nested_block() {
    let text = "\
steps:
  - id: a
    parameters:
      \"odd: key\": 1
      inner:
        deep: true
    tool: x
";
    let loc = locations(text, ["/steps/0/parameters/odd: key", "/steps/0/tool"]);
    assert_eq!(loc.get("/steps/0/parameters/odd: key"), at(4, 7));
    assert_eq!(loc.get("/steps/0/tool"), at(7, 5));
}

#[test]
fn nested_compact_sequences_keep_the_enclosing_mapping() {
    let text = "\
steps:
- id: a
  depends_on:
  - b
  - c
  tool: x
";
    let loc = locations(text, ["/steps/0/depends_on/1", "/steps/0/tool"]);
    assert_eq!(loc.get("/steps/0/depends_on/1"), at(5, 3));
    assert_eq!(loc.get("/steps/0/tool"), at(6, 3));
}

#[test]
fn odd_text_never_panics() {
    for text in [
        "",
        "-",
        "- -",
        ":",
        "a:\n- \n-",
        "  x: 1\ny: 2",
        "\"unterminated: 1",
        "a: [\n",
        "? complex\n: key",
    ] {
        let loc = locations(text, ["/a/0", "/y", ""]);
        let _ = loc.get("/a/0");
    }
}

#[test]
fn every_prefix_of_a_plan_is_scanned_without_panicking() {
    let pointers = ["/steps/1/parameters/amount", "/postconditions/1/assertions/0/path"];
    for (i, _) in PLAN.char_indices() {
        let loc = locations(&PLAN[..i], pointers);
        for p in pointers {
            if let Some(pos) = loc.get(p) {
                assert!(pos.line <= PLAN[..i].lines().count().max(1), "{i}: {pos:?}");
            }
        }
    }
}
