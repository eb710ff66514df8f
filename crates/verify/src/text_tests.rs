//! Tests of the detail helpers: sizes, clipping, line lookup.

use super::*;

#[test]
fn sizes_read_like_people_write_them() {
    assert_eq!(human_size(0), "0 bytes");
    assert_eq!(human_size(1), "1 byte");
    assert_eq!(human_size(1023), "1023 bytes");
    assert_eq!(human_size(1229), "1.2 KB");
    assert_eq!(human_size(3 * 1024 * 1024 + 400 * 1024), "3.4 MB");
    assert_eq!(human_size(u64::MAX), "16777216.0 TB");
}

#[test]
fn clip_cuts_at_char_boundaries_and_flattens_lines() {
    assert_eq!(clip("ééééé", 3), "ééé…");
    assert_eq!(clip("a\nb", 10), "a b");
    assert_eq!(clip("abc", 3), "abc");
}

#[test]
fn last_lines_skip_blank_lines() {
    assert_eq!(last_lines("one\n\ntwo\nthree\n\n", 2), "two | three");
    assert_eq!(last_lines("", 3), "");
}

#[test]
fn line_at_finds_number_and_text() {
    let text = "a\nbody {\r\n  color: red;\n}";
    let at = text.find("color").unwrap_or_default();
    assert_eq!(line_at(text, at), (3, "  color: red;"));
    assert_eq!(line_at(text, 0), (1, "a"));
    assert_eq!(line_at(text, 3), (2, "body {"));
}
