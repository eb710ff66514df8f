//! Unit tests of the lexical path rules (the file-system side is in tests/suite/sandbox.rs).

use super::*;

fn escape(path: &str) -> bool {
    matches!(lexical(path), Err(SandboxError::Escape { .. }))
}

#[test]
fn plain_and_dotted_paths_normalise_inside() {
    assert_eq!(lexical("a/b.txt").unwrap(), PathBuf::from("a/b.txt"));
    assert_eq!(lexical("./a/./b").unwrap(), PathBuf::from("a/b"));
    assert_eq!(lexical("a/../b").unwrap(), PathBuf::from("b"));
    assert_eq!(lexical("a/b/../../c").unwrap(), PathBuf::from("c"));
    assert!(is_root(&lexical("").unwrap()));
    assert!(is_root(&lexical(".").unwrap()));
    assert!(is_root(&lexical("a/..").unwrap()));
}

#[test]
fn leaving_the_root_is_an_escape() {
    for path in ["..", "../x", "a/../../x", "./../x", "a/b/../../../x", "/etc/passwd", "/"] {
        assert!(escape(path), "{path}");
    }
}

#[test]
fn a_nul_byte_is_an_invalid_path_not_a_lookup() {
    let err = lexical("a\0b").unwrap_err();
    assert!(matches!(err, SandboxError::InvalidPath { reason: "it contains a NUL byte", .. }));
    assert_eq!(err.to_string(), "path `a\0b` is not valid: it contains a NUL byte");
}

#[test]
fn escape_message_names_the_path_as_given() {
    let err = lexical("a/../../x").unwrap_err();
    assert_eq!(err.to_string(), "path `a/../../x` leaves the workspace");
    assert!(err.is_fatal());
}

#[test]
fn hex_is_lower_case_and_two_digits_per_byte() {
    assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
    assert_eq!(hex(&[]), "");
}
