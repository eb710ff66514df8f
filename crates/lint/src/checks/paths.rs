//! Where a path from a plan points, read lexically from the workspace root, as the sandbox reads
//! it (`pev-tools`' `sandbox::lexical`): `.` and empty components are nothing, `..` goes up one,
//! and a path leaves the workspace only when a `..` goes above the root or it is absolute. Both
//! `/` and `\` separate components here, so a plan written for Windows is read the same way.
//!
//! This is the static half: a symlink inside the workspace can still point out of it, which the
//! sandbox refuses when the path is opened.

/// Whether `path`, read from the workspace root, goes above it with `..` (`../x`, `a/../../x`;
/// not `docs/../docs/readme.md`, `a..b` or `..foo`).
pub(super) fn climbs_out(path: &str) -> bool {
    let mut depth = 0usize;
    for component in path.split(['/', '\\']) {
        match component {
            "" | "." => {}
            ".." => match depth.checked_sub(1) {
                Some(up) => depth = up,
                None => return true,
            },
            _ => depth = depth.saturating_add(1),
        }
    }
    false
}

/// Whether `path` is absolute: `/x`, `\x`, `\\server\share`, `C:\x`, `C:/x` or `C:`.
pub(super) fn is_absolute(path: &str) -> bool {
    let b = path.as_bytes();
    let drive = matches!(b, [letter, b':', ..] if letter.is_ascii_alphabetic())
        && matches!(b.get(2), None | Some(b'/' | b'\\'));
    path.starts_with(['/', '\\']) || drive
}

#[cfg(test)]
#[path = "paths_tests.rs"]
mod tests;
