//! Unit tests of the edit application rules (the tool itself is tested in tests/suite).

use super::*;

fn edit(old: &str, new: &str, replace_all: Option<bool>) -> Edit {
    Edit { old: old.into(), new: new.into(), replace_all }
}

fn message(err: &ToolError) -> String {
    assert!(!err.is_fatal(), "{err}");
    err.message().to_owned()
}

#[test]
fn edits_apply_in_order_to_the_evolving_text() {
    let (out, n) = apply("a b c", &[edit("a", "x", None), edit("x b", "y", None)], "f").unwrap();
    assert_eq!(out, "y c");
    assert_eq!(n, 2);
}

#[test]
fn replace_all_replaces_every_occurrence() {
    let (out, n) = apply("a a a", &[edit("a", "b", Some(true))], "f").unwrap();
    assert_eq!(out, "b b b");
    assert_eq!(n, 3);
}

#[test]
fn an_ambiguous_edit_names_its_index_and_count() {
    let err = apply("x a a", &[edit("x", "y", None), edit("a", "b", None)], "f.txt").unwrap_err();
    let msg = message(&err);
    assert!(
        msg.contains("edits[1].old occurs 2 times in `f.txt` (after the earlier edits)"),
        "{msg}"
    );
    assert!(msg.contains("replace_all"), "{msg}");
}

#[test]
fn a_missing_edit_names_its_index() {
    let err = apply("abc", &[edit("zzz", "y", None)], "f.txt").unwrap_err();
    assert_eq!(
        message(&err),
        "file.patch: edits[0].old was not found in `f.txt`; no edit was applied"
    );
}

#[test]
fn an_empty_old_is_refused() {
    let err = apply("abc", &[edit("", "y", None)], "f").unwrap_err();
    assert!(message(&err).contains("edits[0].old is empty"));
}

#[test]
fn an_edit_that_restores_the_text_is_not_a_change() {
    let (out, _) = apply("abc", &[edit("b", "x", None), edit("x", "b", None)], "f").unwrap();
    assert_eq!(out, "abc");
}
