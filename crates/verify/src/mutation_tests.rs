//! Tests of file mutations (line counts, no-op, created, deleted, binary) and of the unified
//! line diff.

use super::*;

#[test]
fn one_line_changed() {
    let before = b"body {\n  background: white;\n}\n";
    let after = b"body {\n  background: #013220;\n}\n";
    let m = mutation("site/style.css", Some(before), Some(after));
    assert_eq!(
        m,
        FileMutation {
            path: "site/style.css".into(),
            bytes_before: 30,
            bytes_after: 32,
            lines_added: 1,
            lines_removed: 1,
            no_op: false,
        }
    );
}

#[test]
fn lines_added_and_removed_are_counted_separately() {
    let m = mutation("a", Some(b"1\n2\n3\n"), Some(b"1\n3\n4\n5\n"));
    assert_eq!((m.lines_added, m.lines_removed, m.no_op), (2, 1, false));
    let m = mutation("a", Some(b"1\n2\n3\n4\n"), Some(b"1\n4\n"));
    assert_eq!((m.lines_added, m.lines_removed), (0, 2));
}

#[test]
fn identical_bytes_are_a_no_op() {
    let m = mutation("a.txt", Some(b"same\n"), Some(b"same\n"));
    assert!(m.no_op);
    assert_eq!((m.bytes_before, m.bytes_after, m.lines_added, m.lines_removed), (5, 5, 0, 0));
    // An empty file rewritten empty is still a no-op; an absent one created empty is not.
    assert!(mutation("e", Some(b""), Some(b"")).no_op);
    assert!(!mutation("e", None, Some(b"")).no_op);
}

#[test]
fn a_created_file_adds_all_its_lines() {
    let m = mutation("new.txt", None, Some(b"a\nb\nc"));
    assert_eq!((m.bytes_before, m.bytes_after, m.lines_added, m.lines_removed), (0, 5, 3, 0));
    assert!(!m.no_op);
}

#[test]
fn a_deleted_file_removes_all_its_lines() {
    let m = mutation("old.txt", Some(b"a\nb\n"), None);
    assert_eq!((m.bytes_before, m.bytes_after, m.lines_added, m.lines_removed), (4, 0, 0, 2));
    assert!(!m.no_op);
}

#[test]
fn a_missing_final_newline_counts_as_a_changed_line() {
    let m = mutation("a", Some(b"x\ny"), Some(b"x\ny\n"));
    assert_eq!((m.lines_added, m.lines_removed), (1, 1));
}

#[test]
fn binary_content_gets_byte_counts_and_lossy_lines() {
    let before: &[u8] = &[0xff, 0xfe, b'\n', 0x00, 0x01];
    let after: &[u8] = &[0xff, 0xfe, b'\n', 0x00, 0x02, b'\n', 0x80];
    let m = mutation("blob.bin", Some(before), Some(after));
    assert_eq!((m.bytes_before, m.bytes_after), (5, 7));
    assert_eq!((m.lines_added, m.lines_removed), (2, 1));
    assert!(!m.no_op);
    // Two different invalid sequences decode to the same text but are different bytes.
    let m = mutation("blob.bin", Some(&[0xff]), Some(&[0xfe]));
    assert!(!m.no_op);
    assert_eq!((m.bytes_before, m.bytes_after), (1, 1));
}

#[test]
fn diff_lines_has_three_lines_of_context() {
    let before: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    let after = before.replace("line 10\n", "line ten\n");
    let diff = diff_lines(&before, &after);
    let shown: Vec<(DiffTag, &str)> = diff.iter().map(|l| (l.tag, l.text.as_str())).collect();
    assert_eq!(
        shown,
        vec![
            (DiffTag::Equal, "line 7"),
            (DiffTag::Equal, "line 8"),
            (DiffTag::Equal, "line 9"),
            (DiffTag::Delete, "line 10"),
            (DiffTag::Insert, "line ten"),
            (DiffTag::Equal, "line 11"),
            (DiffTag::Equal, "line 12"),
            (DiffTag::Equal, "line 13"),
        ]
    );
    assert_eq!((diff[0].old_line, diff[0].new_line), (Some(7), Some(7)));
    assert_eq!((diff[3].old_line, diff[3].new_line), (Some(10), None));
    assert_eq!((diff[4].old_line, diff[4].new_line), (None, Some(10)));
}

#[test]
fn distant_changes_make_separate_hunks() {
    let before: String = (1..=30).map(|i| format!("{i}\n")).collect();
    let after = before.replace("\n2\n", "\ntwo\n").replace("\n28\n", "\ntwenty-eight\n");
    let diff = diff_lines(&before, &after);
    let old: Vec<Option<usize>> = diff.iter().map(|l| l.old_line).collect();
    // 1-5 around line 2, then a gap, then 25-30 around line 28.
    assert_eq!(
        old,
        vec![
            Some(1),
            Some(2),
            None,
            Some(3),
            Some(4),
            Some(5),
            Some(25),
            Some(26),
            Some(27),
            Some(28),
            None,
            Some(29),
            Some(30)
        ]
    );
}

#[test]
fn equal_texts_have_an_empty_diff_and_crlf_is_stripped() {
    assert!(diff_lines("a\nb\n", "a\nb\n").is_empty());
    let diff = diff_lines("a\r\n", "b\r\n");
    assert_eq!(diff.len(), 2);
    assert_eq!(diff[0].text, "a");
    assert_eq!(diff[1].text, "b");
}
