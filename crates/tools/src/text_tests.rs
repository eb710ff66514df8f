//! Unit tests of the capture decoder.

use super::*;

#[test]
fn valid_utf8_is_not_lossy() {
    let d = decode("héllo".as_bytes().to_vec(), false);
    assert_eq!(d, Decoded { text: "héllo".into(), lossy: false });
}

#[test]
fn a_cut_through_a_character_drops_it_without_flagging() {
    // "é" is two bytes; keep only the first.
    let mut bytes = b"abc".to_vec();
    bytes.push(0xc3);
    let d = decode(bytes, true);
    assert_eq!(d, Decoded { text: "abc".into(), lossy: false });
}

#[test]
fn an_incomplete_tail_without_a_cut_is_lossy() {
    let mut bytes = b"abc".to_vec();
    bytes.push(0xc3);
    let d = decode(bytes, false);
    assert_eq!(d, Decoded { text: "abc\u{fffd}".into(), lossy: true });
}

#[test]
fn invalid_bytes_in_the_middle_are_lossy_even_when_cut() {
    let d = decode(vec![b'a', 0xff, b'b'], true);
    assert_eq!(d, Decoded { text: "a\u{fffd}b".into(), lossy: true });
}
