//! What the planner is told about the workspace: the files in it with their sizes, as short lines
//! (`src/main.rs  (120 bytes)`), capped so that a big tree costs a bounded number of prompt
//! tokens.
//!
//! The walk goes through [`pev_tools::Workspace::list`], one directory at a time, so it sees
//! exactly what the tools and assertions see (the sandbox hides `.pev`, never follows symlinks,
//! lists in name order). Directories that hold build output or vendored code (`.git`, `target`,
//! `node_modules`) are named but not descended into: they would crowd out the files the goal is
//! about. Past the cap the walk goes on counting (up to a limit) so that the planner learns how
//! much it is not seeing.

use std::fmt::Write as _;

use pev_tools::{Entry, EntryKind, ListOptions, SandboxError, Workspace};

/// Directory names that are named in the summary but never listed.
const SKIPPED_DIRS: &[&str] = &[".git", "target", "node_modules"];

/// How many entries the walk looks at in all, shown or counted: past this a huge tree is only
/// said to have "at least" so many more entries, and the scan stays fast.
const SCAN_LIMIT: usize = 20_000;

/// One line of the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummaryEntry {
    /// A regular file and its size.
    File { path: String, bytes: u64 },
    /// A directory with nothing in it (a non-empty one shows through its files).
    EmptyDir { path: String },
    /// A directory that is not listed (`.git`, `target`, `node_modules`).
    SkippedDir { path: String },
    /// A symlink (never followed) or a special file.
    Other { path: String },
}

/// The workspace as the planner sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceSummary {
    /// What is shown, in the walk's order (depth first, by name).
    pub entries: Vec<SummaryEntry>,
    /// Entries past the cap, counted but not shown.
    pub more: usize,
    /// The count in `more` stopped at the scan limit: there are at least that many.
    pub more_is_lower_bound: bool,
}

impl WorkspaceSummary {
    /// Walks the workspace from its root, showing at most `max_entries` entries.
    pub fn scan(ws: &Workspace, max_entries: usize) -> Result<Self, SandboxError> {
        let mut summary = Self::default();
        let mut seen = 0usize;
        // One iterator per open directory: the top one is the directory being walked.
        let mut stack: Vec<std::vec::IntoIter<Entry>> = vec![list_dir(ws, "", &mut summary)?];
        while let Some(top) = stack.last_mut() {
            let Some(entry) = top.next() else {
                stack.pop();
                continue;
            };
            if seen >= SCAN_LIMIT {
                summary.more_is_lower_bound = true;
                break;
            }
            seen = seen.saturating_add(1);
            let line = match entry.kind {
                EntryKind::File => SummaryEntry::File { path: entry.path, bytes: entry.bytes },
                EntryKind::Dir if is_skipped(&entry.path) => {
                    SummaryEntry::SkippedDir { path: entry.path }
                }
                EntryKind::Dir => {
                    // A directory that cannot be read is shown as empty rather than failing
                    // the whole summary: one unreadable corner must not hide the rest.
                    let children = list_dir(ws, &entry.path, &mut summary).unwrap_or_default();
                    if !children.as_slice().is_empty() {
                        stack.push(children);
                        continue;
                    }
                    SummaryEntry::EmptyDir { path: entry.path }
                }
                EntryKind::Symlink | EntryKind::Other => SummaryEntry::Other { path: entry.path },
            };
            if summary.entries.len() < max_entries {
                summary.entries.push(line);
            } else {
                summary.more = summary.more.saturating_add(1);
            }
        }
        Ok(summary)
    }

    /// The summary as prompt text: one `path  (N bytes)` line per file, then the "… N more"
    /// note when the cap cut it short.
    pub fn render(&self) -> String {
        if self.entries.is_empty() && self.more == 0 {
            return "(the workspace is empty)\n".to_owned();
        }
        let mut out = String::new();
        for entry in &self.entries {
            // Writing to a String cannot fail.
            let _ = match entry {
                SummaryEntry::File { path, bytes } => writeln!(out, "{path}  ({bytes} bytes)"),
                SummaryEntry::EmptyDir { path } => writeln!(out, "{path}/  (empty directory)"),
                SummaryEntry::SkippedDir { path } => writeln!(out, "{path}/  (not listed)"),
                SummaryEntry::Other { path } => writeln!(out, "{path}  (symlink or special file)"),
            };
        }
        if self.more > 0 {
            let at_least = if self.more_is_lower_bound { "at least " } else { "" };
            let _ = writeln!(out, "… {at_least}{} more not shown", self.more);
        }
        out
    }
}

/// The entries of one directory, in name order. A directory with more entries than the scan
/// limit is cut there, and the summary says its count is a lower bound.
fn list_dir(
    ws: &Workspace,
    path: &str,
    summary: &mut WorkspaceSummary,
) -> Result<std::vec::IntoIter<Entry>, SandboxError> {
    let options = ListOptions { recursive: false, glob: None, max_entries: SCAN_LIMIT };
    let listing = ws.list(path, options)?;
    if listing.truncated {
        summary.more_is_lower_bound = true;
    }
    Ok(listing.entries.into_iter())
}

/// Whether a directory's last path component is one of [`SKIPPED_DIRS`].
fn is_skipped(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    SKIPPED_DIRS.contains(&name)
}
