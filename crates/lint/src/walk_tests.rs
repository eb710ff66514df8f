//! Unit tests of the string walk: pointers, keys, and depth without recursion.

use serde_json::json;

use super::*;

#[test]
fn visits_nested_strings_with_pointers_and_keys() {
    let value = json!({
        "a": "x",
        "b": {"c/d": ["y", {"e~": "z"}], "n": 1},
        "empty": {},
    });
    let mut walker = StrWalker::new();
    let mut pointer = String::from("/p");
    let mut seen = Vec::new();
    walker.walk(&value, None, &mut pointer, |v| {
        seen.push((v.key.map(str::to_owned), v.value.to_owned(), v.pointer.to_owned()));
    });
    assert_eq!(pointer, "/p");
    assert_eq!(
        seen,
        vec![
            (Some("a".into()), "x".into(), "/p/a".into()),
            (Some("c/d".into()), "y".into(), "/p/b/c~1d/0".into()),
            (Some("e~".into()), "z".into(), "/p/b/c~1d/1/e~0".into()),
        ]
    );
}

#[test]
fn deep_nesting_does_not_recurse() {
    let mut value = json!("deep");
    for _ in 0..100_000 {
        value = Value::Array(vec![value]);
    }
    let mut walker = StrWalker::new();
    let mut pointer = String::new();
    let mut depth = 0;
    walker.walk(&value, None, &mut pointer, |v| depth = v.pointer.len() / 2);
    assert_eq!(depth, 100_000);
    // Dropping a deeply nested serde_json value recurses; leak it in the test instead.
    std::mem::forget(value);
}
