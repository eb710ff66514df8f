//! What a write did to a file: byte and line counts before and after, the no-op flag
//! (`file_mutations` of CONTRACTS.md §4), and the line diff `pev show` colours.
//!
//! Lines are compared with `similar`'s line diff on the text decoded lossily, so a binary or
//! non-UTF-8 file still gets counts (bytes exactly, lines approximately) instead of an error.
//! The diff has a deadline: on a pathological pair of big files `similar` then returns a valid
//! but not minimal diff, which only makes the counts a little high, never wrong in kind.

use std::borrow::Cow;
use std::time::Duration;

use pev_protocol::run::FileMutation;
use serde::Serialize;
use similar::{ChangeTag, TextDiff};

/// The longest a line diff may take before `similar` settles for a non-minimal one.
const DIFF_DEADLINE: Duration = Duration::from_millis(500);

/// Lines of context around each change in [`diff_lines`].
const CONTEXT: usize = 3;

/// What `path` went through, from `before` to `after` (`None` = absent). `no_op` when both are
/// the same bytes (or both absent).
pub fn mutation(path: &str, before: Option<&[u8]>, after: Option<&[u8]>) -> FileMutation {
    let size = |b: Option<&[u8]>| b.map_or(0, |b| u64::try_from(b.len()).unwrap_or(u64::MAX));
    let no_op = before == after;
    let (lines_added, lines_removed) = if no_op {
        (0, 0)
    } else {
        let old = decode(before.unwrap_or_default());
        let new = decode(after.unwrap_or_default());
        count_lines(&old, &new)
    };
    FileMutation {
        path: path.to_owned(),
        bytes_before: size(before),
        bytes_after: size(after),
        lines_added,
        lines_removed,
        no_op,
    }
}

/// One line of a unified diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffTag {
    Equal,
    Insert,
    Delete,
}

/// A line of [`diff_lines`]: its tag, its text (without the line break), and its 1-based line
/// numbers in the old and new text (`None` on the side it is not in). A jump in the numbers
/// between two lines is where a hunk ends and the next begins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffLine {
    pub tag: DiffTag,
    pub text: String,
    pub old_line: Option<usize>,
    pub new_line: Option<usize>,
}

/// The changed lines of `before` -> `after` with 3 lines of context around each change, in
/// order, as `pev show` prints them. Equal texts give an empty diff.
pub fn diff_lines(before: &str, after: &str) -> Vec<DiffLine> {
    let diff = TextDiff::configure().timeout(DIFF_DEADLINE).diff_lines(before, after);
    let mut out = Vec::new();
    for group in diff.grouped_ops(CONTEXT) {
        for op in &group {
            for change in diff.iter_changes(op) {
                let tag = match change.tag() {
                    ChangeTag::Equal => DiffTag::Equal,
                    ChangeTag::Insert => DiffTag::Insert,
                    ChangeTag::Delete => DiffTag::Delete,
                };
                let text = change.value();
                let text = text.strip_suffix('\n').unwrap_or(text);
                let text = text.strip_suffix('\r').unwrap_or(text);
                out.push(DiffLine {
                    tag,
                    text: text.to_owned(),
                    old_line: change.old_index().map(|i| i.saturating_add(1)),
                    new_line: change.new_index().map(|i| i.saturating_add(1)),
                });
            }
        }
    }
    out
}

/// Lines added and removed from `old` to `new`.
fn count_lines(old: &str, new: &str) -> (u64, u64) {
    let diff = TextDiff::configure().timeout(DIFF_DEADLINE).diff_lines(old, new);
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let (mut added, mut removed) = (0u64, 0u64);
    for op in diff.ops() {
        // Equal ops are skipped whole: the ranges say how many lines changed.
        let (tag, old_range, new_range) = op.as_tag_tuple();
        if tag != similar::DiffTag::Equal {
            removed = removed.saturating_add(count(old_range.len()));
            added = added.saturating_add(count(new_range.len()));
        }
    }
    (added, removed)
}

fn decode(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

#[cfg(test)]
#[path = "mutation_tests.rs"]
mod tests;
