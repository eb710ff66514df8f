//! Unit tests of the wire-name table: the plain mapping, collisions both ways, order
//! independence, and the two properties every table must have (valid wire names, one-to-one).

use super::*;
use crate::Registry;

fn table(names: &[&str]) -> ToolNames {
    ToolNames::new(names)
}

fn wire<'a>(table: &'a ToolNames, plan: &str) -> &'a str {
    table.wire(plan).map_or_else(|| panic!("no wire name for {plan:?}"), WireName::as_str)
}

/// `^[a-zA-Z0-9_-]{1,64}$`, checked character by character (independently of `is_wire_name`).
fn matches_wire_pattern(name: &str) -> bool {
    (1..=64).contains(&name.chars().count())
        && name.chars().all(|c| matches!(c, 'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-'))
}

/// The suffix a colliding name gets: `_` and eight lower-case hex digits.
fn hash_suffix(wire: &str) -> Option<&str> {
    let (_, suffix) = wire.rsplit_once('_')?;
    (suffix.len() == 8 && suffix.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()))
        .then_some(suffix)
}

/// Both properties of a table over `names`: every wire name valid, and the map one-to-one both
/// ways over exactly these names.
fn assert_sound(names: &[&str]) -> ToolNames {
    let t = table(names);
    let distinct: BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(t.len(), distinct.len());
    let mut seen = BTreeSet::new();
    for plan in &distinct {
        let w = wire(&t, plan);
        assert!(matches_wire_pattern(w), "{plan:?} -> {w:?}");
        assert!(seen.insert(w.to_owned()), "{w:?} is the wire name of two plan names: {names:?}");
        assert_eq!(t.plan(w), Some(*plan), "{w:?} does not map back to {plan:?}");
    }
    t
}

#[test]
fn dots_become_underscores() {
    let t = table(&["file.read", "file.patch", "shell.exec", "http.request"]);
    assert_eq!(wire(&t, "file.read"), "file_read");
    assert_eq!(wire(&t, "file.patch"), "file_patch");
    assert_eq!(wire(&t, "shell.exec"), "shell_exec");
    assert_eq!(wire(&t, "http.request"), "http_request");
    assert_eq!(t.plan("file_patch"), Some("file.patch"));
}

#[test]
fn a_valid_name_that_collides_with_nothing_stays_itself() {
    let t = table(&["plan_create", "todo-write", "Grep2", "file.read"]);
    assert_eq!(wire(&t, "plan_create"), "plan_create");
    assert_eq!(wire(&t, "todo-write"), "todo-write");
    assert_eq!(wire(&t, "Grep2"), "Grep2");
    assert_eq!(wire(&t, "file.read"), "file_read");
}

#[test]
fn every_invalid_character_becomes_one_underscore() {
    let t = table(&["mcp/github:create issue", "ünï.cödé", "a+b", "x@y.z"]);
    assert_eq!(wire(&t, "mcp/github:create issue"), "mcp_github_create_issue");
    assert_eq!(wire(&t, "ünï.cödé"), "_n__c_d_");
    assert_eq!(wire(&t, "a+b"), "a_b");
    assert_eq!(wire(&t, "x@y.z"), "x_y_z");
    assert_sound(&["mcp/github:create issue", "ünï.cödé", "a+b", "x@y.z"]);
}

#[test]
fn the_empty_name_gets_a_valid_wire_name() {
    let t = assert_sound(&["", "file.read"]);
    assert_eq!(wire(&t, ""), "_");
}

#[test]
fn a_long_name_is_cut_to_64() {
    let long = format!("mcp.{}", "a".repeat(100));
    let t = assert_sound(&[long.as_str()]);
    assert_eq!(wire(&t, &long), format!("mcp_{}", "a".repeat(60)));
    // Exactly 64 valid characters is already a wire name.
    let exact = "b".repeat(64);
    assert_eq!(wire(&table(&[exact.as_str()]), &exact), exact);
}

#[test]
fn a_dotted_name_and_its_underscore_twin_both_get_a_suffix() {
    let t = assert_sound(&["file.read", "file_read", "file.write"]);
    let dotted = wire(&t, "file.read");
    let plain = wire(&t, "file_read");
    assert_ne!(dotted, plain);
    for w in [dotted, plain] {
        assert!(w.starts_with("file_read_") && hash_suffix(w).is_some(), "{w:?}");
    }
    // Neither keeps `file_read`: a model calling it would be ambiguous, so nobody gets it.
    assert_eq!(t.plan("file_read"), None);
    // The uninvolved name is untouched.
    assert_eq!(wire(&t, "file.write"), "file_write");
}

#[test]
fn names_that_differ_only_past_64_characters_both_get_a_suffix() {
    let stem = "s".repeat(70);
    let one = format!("{stem}.one");
    let two = format!("{stem}.two");
    let t = assert_sound(&[one.as_str(), two.as_str()]);
    let (w1, w2) = (wire(&t, &one), wire(&t, &two));
    assert_ne!(w1, w2);
    assert_eq!(w1.len(), 64);
    assert!(w1.starts_with(&"s".repeat(55)) && hash_suffix(w1).is_some(), "{w1:?}");
    assert!(w2.starts_with(&"s".repeat(55)) && hash_suffix(w2).is_some(), "{w2:?}");
}

#[test]
fn three_way_collisions_and_invalid_twins_are_told_apart() {
    assert_sound(&["a.b", "a_b", "a/b", "a b", "a-b"]);
}

#[test]
fn a_name_equal_to_a_suffixed_name_is_told_apart_too() {
    // First find what `file.read` becomes next to `file_read`, then register a tool under
    // exactly that name: the table still gives three distinct names.
    let first = table(&["file.read", "file_read"]);
    let taken = wire(&first, "file.read").to_owned();
    let t = assert_sound(&["file.read", "file_read", taken.as_str()]);
    assert_eq!(t.len(), 3);
}

#[test]
fn the_table_does_not_depend_on_the_order_of_names() {
    let stem = "q".repeat(64);
    let long_one = format!("{stem}1");
    let long_two = format!("{stem}2");
    let names = ["file.read", "file_read", "x.y", long_one.as_str(), long_two.as_str(), "b"];
    let forward = table(&names);
    let mut reversed = names;
    reversed.reverse();
    assert_eq!(forward, table(&reversed));
    let mut rotated = names;
    rotated.rotate_left(2);
    assert_eq!(forward, table(&rotated));
    // Registering one at a time gives the same table as registering them together.
    let mut growing = ToolNames::default();
    let mut so_far = Vec::new();
    for name in reversed {
        so_far.push(name);
        growing = table(&so_far);
    }
    assert_eq!(forward, growing);
}

#[test]
fn duplicates_count_once() {
    let t = table(&["file.read", "file.read"]);
    assert_eq!(t.len(), 1);
    assert_eq!(wire(&t, "file.read"), "file_read");
}

#[test]
fn unknown_names_map_to_nothing() {
    let t = table(&["file.read"]);
    assert_eq!(t.wire("file.write"), None);
    assert_eq!(t.plan("file_write"), None);
    // A model calling the dotted name is not answered with the tool.
    assert_eq!(t.plan("file.read"), None);
    assert_eq!(t.plan(""), None);
}

#[test]
fn every_builtin_tool_round_trips_through_a_valid_wire_name() {
    let registry = Registry::builtin();
    let names = registry.names();
    assert_eq!(names.len(), 6);
    for tool in registry.iter() {
        let plan = tool.name();
        let w = names.wire(plan).unwrap_or_else(|| panic!("{plan} has no wire name"));
        assert!(matches_wire_pattern(w.as_str()), "{plan} -> {w}");
        assert_eq!(w.as_str(), plan.replace('.', "_"), "a built-in needs no suffix");
        assert_eq!(names.plan(w.as_str()), Some(plan));
    }
    for def in registry.definitions() {
        assert_eq!(Some(&def.wire), names.wire(def.name));
    }
}

#[test]
fn registering_a_twin_renames_both_in_the_registry() {
    struct Twin;
    impl crate::Tool for Twin {
        fn name(&self) -> &'static str {
            "file_read"
        }
        fn effect(&self) -> pev_protocol::tool::Effect {
            pev_protocol::tool::Effect::Read
        }
        fn description(&self) -> &'static str {
            "a tool whose name is file.read's wire name"
        }
        fn parameters_schema(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        fn call<'a>(
            &'a self,
            _ctx: &'a crate::ToolContext,
            _args: serde_json::Value,
        ) -> crate::BoxFuture<'a, Result<serde_json::Value, crate::ToolError>> {
            Box::pin(async { Ok(serde_json::Value::Null) })
        }
    }
    let mut registry = Registry::builtin();
    registry.register(std::sync::Arc::new(Twin)).unwrap();
    let names = registry.names();
    assert_eq!(names.len(), 7);
    let dotted = names.wire("file.read").map(WireName::as_str);
    let twin = names.wire("file_read").map(WireName::as_str);
    assert!(dotted.is_some_and(|w| hash_suffix(w).is_some()), "{dotted:?}");
    assert!(twin.is_some_and(|w| hash_suffix(w).is_some()), "{twin:?}");
    assert_ne!(dotted, twin);
    let defs = registry.definitions();
    assert_eq!(defs.len(), 7);
    assert!(defs.iter().all(|d| matches_wire_pattern(d.wire.as_str())));
}

#[test]
fn generated_names_always_give_a_sound_table() {
    // Names from a small alphabet of valid and invalid characters, lengths around the limit:
    // many collide at level 0, some differ only past character 64.
    let alphabet = ['a', '.', '_', '/', 'é', '-'];
    let mut names = Vec::new();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..200_usize {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len: usize = [1, 2, 3, 63, 64, 65, 70][i % 7];
        let name: String = (0..len)
            .map(|j| {
                let pick = (seed >> ((j % 16) * 4)) as usize;
                if j < len.saturating_sub(3) { 'x' } else { alphabet[pick % alphabet.len()] }
            })
            .collect();
        names.push(name);
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let t = assert_sound(&refs);
    let suffixed = t.wire_names().filter(|w| hash_suffix(w.as_str()).is_some()).count();
    assert!(suffixed >= 20, "the generator must produce collisions: {suffixed} suffixed");
}

#[test]
fn wire_name_parse_checks_the_pattern() {
    assert!(WireName::parse("file_read").is_some());
    assert!(WireName::parse("a-B_9").is_some());
    assert!(WireName::parse(&"z".repeat(64)).is_some());
    for bad in ["", "file.read", "a b", "é", &"z".repeat(65)] {
        assert!(WireName::parse(bad).is_none(), "{bad:?}");
        assert!(!is_wire_name(bad));
    }
    let name = WireName::parse("file_read").unwrap();
    assert_eq!(name.to_string(), "file_read");
    assert_eq!(serde_json::to_value(&name).unwrap(), serde_json::json!("file_read"));
}

#[test]
fn messages_to_the_model_name_tools_by_their_wire_names() {
    let names = ToolNames::new(["file.read", "file.write", "file.patch", "db.query_ro"]);
    let cases = [
        (
            "invalid arguments for file.read: unknown field `patth`",
            "invalid arguments for file_read: unknown field `patth`",
        ),
        (
            "file.patch: `a.bin` is not UTF-8 text; use file.write to replace it",
            "file_patch: `a.bin` is not UTF-8 text; use file_write to replace it",
        ),
        ("use file.write.", "use file_write."),
        ("`db.query_ro` refused", "`db_query_ro` refused"),
        // Inside a path or a longer name it is not the tool.
        ("cannot open src/file.read", "cannot open src/file.read"),
        ("file.read.bak is missing", "file.read.bak is missing"),
        ("myfile.read failed", "myfile.read failed"),
        ("nothing to change", "nothing to change"),
    ];
    for (text, want) in cases {
        assert_eq!(names.in_wire_terms(text), want, "{text}");
    }
}
