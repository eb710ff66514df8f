use super::{climbs_out, is_absolute};

#[test]
fn climbing_out_is_decided_after_normalisation() {
    for path in ["..", "../x", "a/../../x", "a\\..\\..\\x", "./../x", "a/./../..", "a/b/../../../c"]
    {
        assert!(climbs_out(path), "{path:?}");
    }
    for path in [
        "docs/../docs/readme.md",
        "a/..",
        "a/b/../../c",
        "a\\..\\b",
        "./x",
        "a..b",
        "..foo",
        "dir/...",
        "",
        ".",
        "a//b/../c",
    ] {
        assert!(!climbs_out(path), "{path:?}");
    }
}

#[test]
fn absolute_paths() {
    for path in ["/etc", "\\x", "\\\\server\\share", "C:\\Windows", "c:/x", "C:"] {
        assert!(is_absolute(path), "{path:?}");
    }
    for path in ["x", "./x", "c:notes.txt", "notes/a:b", "1:", "é:/x", ""] {
        assert!(!is_absolute(path), "{path:?}");
    }
}
