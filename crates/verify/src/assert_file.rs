//! The file assertions: `file_exists`, `file_not_exists`, `file_contains`,
//! `file_not_contains`, `file_size_gt`, `content_changed`.
//!
//! Every path goes through the workspace sandbox, exactly as the tools' paths do: `..` past the
//! root, absolute paths and symlinks that lead outside are refused, and a refusal is a failure
//! (`file_not_exists` must not pass on `/etc/passwd` because it is "not in the workspace").
//! Content is searched as text decoded lossily, so a binary file can still be searched for a
//! marker; at most [`MAX_SEARCH_BYTES`] are read, and a bigger file fails clearly rather than
//! being half searched.

use std::io::Read;

use pev_protocol::Assertion;
use pev_tools::{EntryKind, FileInfo, SandboxError, Workspace};

use crate::assert::{Matcher, Verdict};
use crate::text::{CLIP, clip, human_size, line_at, short_hash};

/// The largest file `file_contains` and `file_not_contains` search: 64 MiB.
pub(crate) const MAX_SEARCH_BYTES: u64 = 64 * 1024 * 1024;

/// Check a file assertion. `before` is what `content_changed` compares with: `None` when no
/// hash was taken before the step, `Some(None)` when the file was absent then.
pub(crate) fn check(
    workspace: &Workspace,
    assertion: &Assertion,
    before: Option<Option<String>>,
) -> Verdict {
    match assertion {
        Assertion::FileExists { path, .. } => match stat(workspace, path) {
            Ok(Some(info)) => Verdict::pass(format!("{path} exists ({})", describe(info))),
            Ok(None) => Verdict::fail(format!("{path} does not exist")),
            Err(detail) => Verdict::fail(detail),
        },
        Assertion::FileNotExists { path, .. } => match stat(workspace, path) {
            Ok(None) => Verdict::pass(format!("{path} does not exist")),
            Ok(Some(info)) => Verdict::fail(format!("{path} exists ({})", describe(info))),
            Err(detail) => Verdict::fail(detail),
        },
        Assertion::FileContains { path, pattern, regex, .. } => {
            contains(workspace, path, pattern, *regex, true)
        }
        Assertion::FileNotContains { path, pattern, regex, .. } => {
            contains(workspace, path, pattern, *regex, false)
        }
        Assertion::FileSizeGt { path, bytes, .. } => size_gt(workspace, path, *bytes),
        Assertion::ContentChanged { path, .. } => content_changed(workspace, path, before),
        // The dispatcher sends only file assertions here.
        other => Verdict::fail(format!("{} is not a file assertion", other.kind())),
    }
}

/// What `path` is, `None` when it does not exist, or why it may not be looked at.
fn stat(workspace: &Workspace, path: &str) -> Result<Option<FileInfo>, String> {
    match workspace.metadata(path) {
        Ok(info) => Ok(Some(info)),
        Err(SandboxError::NotFound { .. } | SandboxError::NotDirectory { .. }) => Ok(None),
        Err(e) => Err(refusal(&e)),
    }
}

/// The detail for a sandbox error: it names the path and the reason.
pub(crate) fn refusal(err: &SandboxError) -> String {
    if err.is_escape() { format!("refused: {err}") } else { err.to_string() }
}

fn describe(info: FileInfo) -> String {
    match info.kind {
        EntryKind::File => format!("file, {}", human_size(info.bytes)),
        EntryKind::Dir => "a directory".to_owned(),
        EntryKind::Symlink => "a symlink".to_owned(),
        EntryKind::Other => "not a regular file".to_owned(),
    }
}

/// `file_contains` (`want` = true) and `file_not_contains` (`want` = false).
fn contains(workspace: &Workspace, path: &str, pattern: &str, regex: bool, want: bool) -> Verdict {
    let matcher = match Matcher::new(pattern, regex) {
        Ok(m) => m,
        Err(verdict) => return verdict,
    };
    let bytes = match read_capped(workspace, path) {
        Ok(bytes) => bytes,
        Err(detail) => return Verdict::fail(detail),
    };
    let size = human_size(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
    let text = String::from_utf8_lossy(&bytes);
    let what = matcher.describe();
    match (matcher.find(&text), want) {
        (Some(at), found_is_good) => {
            let (line, content) = line_at(&text, at);
            let detail = format!(
                "{what} found in {path} ({size}) at line {line}: `{}`",
                clip(content.trim(), CLIP)
            );
            if found_is_good { Verdict::pass(detail) } else { Verdict::fail(detail) }
        }
        (None, true) => Verdict::fail(format!("{what} not found in {path} ({size})")),
        (None, false) => Verdict::pass(format!("{what} not found in {path} ({size})")),
    }
}

/// The content of `path`, if it is at most [`MAX_SEARCH_BYTES`].
fn read_capped(workspace: &Workspace, path: &str) -> Result<Vec<u8>, String> {
    let file = workspace.open_read(path).map_err(|e| refusal(&e))?;
    let too_big = |bytes: u64| {
        format!(
            "{path} is {} ({bytes} bytes); pev searches files of at most {}",
            human_size(bytes),
            human_size(MAX_SEARCH_BYTES)
        )
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > MAX_SEARCH_BYTES {
        return Err(too_big(len));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    // One byte past the cap tells a file that grew since the stat from one that fits.
    file.take(MAX_SEARCH_BYTES.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > MAX_SEARCH_BYTES {
        return Err(too_big(read));
    }
    Ok(bytes)
}

fn size_gt(workspace: &Workspace, path: &str, min: u64) -> Verdict {
    let info = match stat(workspace, path) {
        Ok(Some(info)) => info,
        Ok(None) => return Verdict::fail(format!("{path} does not exist; needed > {min} bytes")),
        Err(detail) => return Verdict::fail(detail),
    };
    if info.kind != EntryKind::File {
        return Verdict::fail(format!("{path} is {}, not a file", describe(info)));
    }
    let bytes = info.bytes;
    if bytes > min {
        Verdict::pass(format!("{path} is {bytes} bytes (> {min})"))
    } else {
        Verdict::fail(format!("{path} is {bytes} bytes; needed > {min}"))
    }
}

fn content_changed(workspace: &Workspace, path: &str, before: Option<Option<String>>) -> Verdict {
    // The path first: a refusal says more than a missing hash.
    let now = match workspace.sha256(path) {
        Ok(now) => now,
        Err(e) => return Verdict::fail(refusal(&e)),
    };
    let Some(before) = before else {
        return Verdict::fail(format!("no hash was taken before the step for {path}"));
    };
    match (before, now) {
        (None, None) => {
            Verdict::fail(format!("{path} did not exist before the step and does not exist now"))
        }
        (None, Some(after)) => Verdict::pass(format!(
            "{path} was created (it did not exist before; sha256 now {})",
            short_hash(&after)
        )),
        (Some(before), None) => {
            Verdict::pass(format!("{path} was deleted (sha256 before {})", short_hash(&before)))
        }
        (Some(before), Some(after)) if before == after => Verdict::fail(format!(
            "{path} is unchanged: sha256 {} before and after",
            short_hash(&after)
        )),
        (Some(before), Some(after)) => Verdict::pass(format!(
            "{path} changed: sha256 {} -> {}",
            short_hash(&before),
            short_hash(&after)
        )),
    }
}

#[cfg(test)]
#[path = "assert_file_tests.rs"]
mod tests;
