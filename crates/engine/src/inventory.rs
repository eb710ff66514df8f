//! What a command changed in the workspace (and, through `take` and `changes`, what an MCP
//! client changed since `pev mcp` took its snapshot). A `shell.exec` call names no file, so the
//! files it writes are found by taking the workspace's inventory before and after it (through the
//! workspace sandbox, `.pev/` and `.git/` left out): created, changed and removed files become
//! the step's mutations, with diffs, like a write's.
//!
//! Only a command that ran while no other step did is credited: with steps in parallel an
//! inventory sees every step's writes, and crediting them to one would be false. Otherwise the
//! step's evidence says the files were not attributed ([`Activity`] tells which).
//!
//! Bounded so that a big tree cannot make every command slow: at most [`MAX_FILES`] files (past
//! that no inventory is taken, and the step's evidence says so), and contents kept only for
//! files up to [`MAX_CONTENT`], [`MAX_TOTAL`] in all; a larger file is compared by size alone
//! and, when it changed, reported without a line count. After the command a file with the size
//! and modification time it had is not read again (a rewrite of the same size within the
//! file system's timestamp granularity is therefore missed: this listing is evidence of what
//! changed, not a verdict).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use pev_tools::{EntryKind, ListOptions, Workspace};

/// The most files an inventory holds.
pub const MAX_FILES: usize = 5_000;
/// The largest file whose content is kept (source files, configs, small outputs).
const MAX_CONTENT: u64 = 256 * 1024;
/// The most content one inventory keeps.
const MAX_TOTAL: u64 = 32 * 1024 * 1024;

/// Which steps are running: a command's changes are its own only if it ran alone.
#[derive(Debug, Default)]
pub struct Activity {
    running: AtomicUsize,
    started: AtomicU64,
}

/// A step running; dropped when its task ends.
pub(crate) struct Running<'a>(&'a Activity);

impl Activity {
    pub(crate) fn enter(&self) -> Running<'_> {
        self.started.fetch_add(1, Ordering::SeqCst);
        self.running.fetch_add(1, Ordering::SeqCst);
        Running(self)
    }

    /// A mark to compare with later: `Some` when the caller's step is the only one running.
    pub(crate) fn alone(&self) -> Option<u64> {
        (self.running.load(Ordering::SeqCst) == 1).then(|| self.started.load(Ordering::SeqCst))
    }

    /// Whether the step is still alone and no step started since `mark`.
    pub(crate) fn still_alone(&self, mark: u64) -> bool {
        self.alone() == Some(mark)
    }

    /// The calling step stops counting as running until the guard drops: a delegated step
    /// while its child run's steps (which count in the same tree-wide activity) run.
    pub(crate) fn step_out(&self) -> SteppedOut<'_> {
        self.running.fetch_sub(1, Ordering::SeqCst);
        SteppedOut(self)
    }
}

/// A step that stepped out ([`Activity::step_out`]); counts as running again when dropped.
pub(crate) struct SteppedOut<'a>(&'a Activity);

impl Drop for SteppedOut<'_> {
    fn drop(&mut self) {
        // Back, it may write again: marks taken while it was away no longer hold.
        self.0.started.fetch_add(1, Ordering::SeqCst);
        self.0.running.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A file in an inventory: its size, and its content when kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    pub bytes: u64,
    pub modified: Option<std::time::SystemTime>,
    pub content: Option<Vec<u8>>,
}

impl FileState {
    /// The same size and modification time as `other` (known): taken as untouched, without
    /// reading it again.
    fn looks_like(&self, other: &FileState) -> bool {
        self.modified.is_some() && self.modified == other.modified && self.bytes == other.bytes
    }
}

/// The workspace's files (relative paths) at one moment.
#[derive(Debug, Default)]
pub struct Inventory {
    pub files: BTreeMap<String, FileState>,
}

/// What a command's step knew before it ran.
#[derive(Debug)]
pub(crate) enum Taken {
    /// The inventory, and the [`Activity`] mark it was taken under.
    Alone(Inventory, u64),
    /// Other steps were running: the command's changes cannot be told from theirs.
    NotAlone,
    /// More files than [`MAX_FILES`], or the workspace could not be listed.
    TooLarge,
}

/// Directories whose changes are not the command's work product.
fn ignored(path: &str) -> bool {
    [".pev", ".git"].iter().any(|d| path == *d || path.starts_with(&format!("{d}/")))
}

/// Before a command: the inventory, when its step runs alone.
pub(crate) fn before(ws: &Workspace, activity: &Activity) -> Taken {
    let Some(mark) = activity.alone() else { return Taken::NotAlone };
    match take(ws, None) {
        Some(inventory) => Taken::Alone(inventory, mark),
        None => Taken::TooLarge,
    }
}

/// The inventory of `ws`, or `None` when it has more than [`MAX_FILES`] files (or cannot be
/// listed). With `earlier`, a file whose size and modification time are as they were is not
/// read again.
pub fn take(ws: &Workspace, earlier: Option<&Inventory>) -> Option<Inventory> {
    // The top level first, so that `.git` (often the biggest tree) is never walked.
    let top =
        ws.list(".", ListOptions { recursive: false, glob: None, max_entries: MAX_FILES + 1 });
    let top = top.ok()?;
    if top.truncated {
        return None;
    }
    let mut files = Vec::new();
    for entry in top.entries.into_iter().filter(|e| !ignored(&e.path)) {
        match entry.kind {
            EntryKind::File => files.push(entry),
            EntryKind::Dir => {
                let left = (MAX_FILES + 1).saturating_sub(files.len());
                let options = ListOptions { recursive: true, glob: None, max_entries: left * 4 };
                let below = ws.list(&entry.path, options).ok()?;
                if below.truncated {
                    return None;
                }
                files.extend(below.entries.into_iter().filter(|e| e.kind == EntryKind::File));
            }
            _ => {}
        }
        if files.len() > MAX_FILES {
            return None;
        }
    }
    let mut kept = 0u64;
    let mut inventory = Inventory::default();
    for entry in files {
        let mut state = FileState { bytes: entry.bytes, modified: entry.modified, content: None };
        let untouched =
            earlier.and_then(|e| e.files.get(&entry.path)).is_some_and(|e| state.looks_like(e));
        if !untouched && entry.bytes <= MAX_CONTENT && kept + entry.bytes <= MAX_TOTAL {
            state.content = ws.read(&entry.path).ok();
            kept += state.content.as_ref().map_or(0, |c| c.len() as u64);
        }
        inventory.files.insert(entry.path, state);
    }
    Some(inventory)
}

/// One file a command created, changed or removed: its state before and after (`None` =
/// absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub before: Option<FileState>,
    pub after: Option<FileState>,
}

/// The files that differ between two inventories, in path order. Two states with contents
/// differ when the contents do; otherwise when the sizes do (a file too large to keep that kept
/// its size is taken as unchanged).
pub fn changes(before: &Inventory, after: &Inventory) -> Vec<Change> {
    let mut out = Vec::new();
    let paths: BTreeSet<&String> = before.files.keys().chain(after.files.keys()).collect();
    for path in paths {
        let (b, a) = (before.files.get(path), after.files.get(path));
        let differ = match (b, a) {
            (Some(b), Some(a)) if a.looks_like(b) => false,
            (Some(b), Some(a)) => match (&b.content, &a.content) {
                (Some(x), Some(y)) => x != y,
                _ => b.bytes != a.bytes,
            },
            (None, None) => false,
            _ => true,
        };
        if differ {
            out.push(Change { path: path.clone(), before: b.cloned(), after: a.cloned() });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(content: &str) -> FileState {
        FileState {
            bytes: content.len() as u64,
            modified: None,
            content: Some(content.as_bytes().to_vec()),
        }
    }

    #[test]
    fn created_changed_and_removed_files_are_changes_and_the_rest_are_not() {
        let mut before = Inventory::default();
        before.files.insert("same.txt".into(), state("a"));
        before.files.insert("edited.txt".into(), state("old"));
        before.files.insert("gone.txt".into(), state("x"));
        before
            .files
            .insert("big.bin".into(), FileState { bytes: 10, modified: None, content: None });
        let mut after = Inventory::default();
        after.files.insert("same.txt".into(), state("a"));
        after.files.insert("edited.txt".into(), state("new"));
        after.files.insert("made.txt".into(), state("y"));
        after
            .files
            .insert("big.bin".into(), FileState { bytes: 10, modified: None, content: None });
        let paths: Vec<String> = changes(&before, &after).into_iter().map(|c| c.path).collect();
        assert_eq!(paths, ["edited.txt", "gone.txt", "made.txt"]);
        after
            .files
            .insert("big.bin".into(), FileState { bytes: 11, modified: None, content: None });
        assert!(changes(&before, &after).iter().any(|c| c.path == "big.bin"));
    }

    #[test]
    fn the_journal_and_git_are_not_inventoried() {
        assert!(ignored(".pev/pev.db") && ignored(".git") && ignored(".git/HEAD"));
        assert!(!ignored(".github/workflows/ci.yml") && !ignored("src/.pevrc"));
    }

    #[test]
    fn a_step_is_alone_only_while_no_other_runs_or_starts() {
        let activity = Activity::default();
        let first = activity.enter();
        let mark = activity.alone().unwrap_or(u64::MAX);
        assert!(activity.still_alone(mark));
        {
            let _second = activity.enter();
            assert_eq!(activity.alone(), None);
        }
        // The other step ended, but it ran meanwhile: not alone since the mark.
        assert!(!activity.still_alone(mark));
        drop(first);
    }
}
