//! Directory listings inside the sandbox: sorted, capped, never following symlinks.
//!
//! The walk is depth-first with each directory's entries sorted by name, so the output is
//! deterministic (the same tree always lists the same way) and the cap can stop the walk early
//! instead of reading a huge tree only to throw most of it away. Symlinks are listed as symlinks
//! and never descended into: that keeps the walk inside the workspace and free of loops.

use std::path::{Path, PathBuf};

use glob::{MatchOptions, Pattern};
use serde::Serialize;

use crate::error::SandboxError;
use crate::sandbox::{EntryKind, Workspace, is_root, lexical};

/// How to list.
#[derive(Debug, Clone, Copy)]
pub struct ListOptions<'a> {
    /// Descend into subdirectories.
    pub recursive: bool,
    /// Keep only entries matching this glob: against the file name when it has no `/`, else
    /// against the path relative to the listed directory (`**` crosses directories).
    pub glob: Option<&'a str>,
    /// Stop after this many entries and say so.
    pub max_entries: usize,
}

/// One entry, with its path relative to the workspace root (usable as-is by `file.read`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub path: String,
    pub kind: EntryKind,
    /// Size in bytes for files; 0 for directories and symlinks.
    pub bytes: u64,
    /// When a file was last modified (not shown to models: `file.list`'s output is unchanged);
    /// what pev compares to tell which files a command touched.
    #[serde(skip)]
    pub modified: Option<std::time::SystemTime>,
}

/// A listing, and whether the cap cut it short.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listing {
    pub entries: Vec<Entry>,
    pub truncated: bool,
}

const MATCH: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

struct Filter {
    pattern: Pattern,
    /// Match the whole relative path rather than the file name.
    on_path: bool,
}

impl Filter {
    fn matches(&self, relative: &str, name: &str) -> bool {
        let subject = if self.on_path { relative } else { name };
        self.pattern.matches_with(subject, MATCH)
    }
}

/// A directory entry waiting to be emitted (and maybe descended into).
struct Pending {
    /// Relative to the workspace root.
    rel: PathBuf,
    /// Relative to the listed directory, `/`-separated, for glob matching.
    below: String,
    name: String,
    kind: EntryKind,
    bytes: u64,
    modified: Option<std::time::SystemTime>,
}

impl Workspace {
    /// List `path` (a directory, or a single file).
    pub fn list(&self, path: &str, options: ListOptions<'_>) -> Result<Listing, SandboxError> {
        let filter = match options.glob {
            Some(glob) => Some(Filter {
                pattern: Pattern::new(glob).map_err(|e| SandboxError::InvalidGlob {
                    glob: glob.to_owned(),
                    reason: e.msg.to_owned(),
                })?,
                on_path: glob.contains('/'),
            }),
            None => None,
        };
        let rel = lexical(path)?;
        let info = self.metadata(path)?;
        if info.kind != EntryKind::Dir {
            let name =
                rel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let keep = filter.as_ref().is_none_or(|f| f.matches(&name, &name));
            let entries = if keep {
                vec![Entry {
                    path: display(&rel),
                    kind: info.kind,
                    bytes: info.bytes,
                    modified: None,
                }]
            } else {
                Vec::new()
            };
            return Ok(Listing { entries, truncated: false });
        }

        let mut entries = Vec::new();
        let mut truncated = false;
        // Entries to emit, in reverse order (the next one is at the end).
        let mut stack = self.children(&rel, "", path)?;
        while let Some(item) = stack.pop() {
            if crate::sandbox::is_reserved(&item.rel) {
                continue;
            }
            let keep = filter.as_ref().is_none_or(|f| f.matches(&item.below, &item.name));
            if keep {
                if entries.len() >= options.max_entries {
                    truncated = true;
                    break;
                }
                let bytes = if item.kind == EntryKind::File { item.bytes } else { 0 };
                let modified = item.modified;
                entries.push(Entry { path: display(&item.rel), kind: item.kind, bytes, modified });
            }
            if options.recursive && item.kind == EntryKind::Dir {
                // A subdirectory that cannot be read (permissions) is listed but not walked;
                // one unreadable corner must not hide the rest of the tree.
                if let Ok(children) = self.children(&item.rel, &item.below, path) {
                    stack.extend(children);
                }
            }
        }
        Ok(Listing { entries, truncated })
    }

    /// The entries of one directory, sorted by name and reversed for the stack.
    fn children(&self, rel: &Path, below: &str, given: &str) -> Result<Vec<Pending>, SandboxError> {
        let dir = &self.inner.dir;
        let read = if is_root(rel) { dir.entries() } else { dir.read_dir(rel) }
            .map_err(|e| SandboxError::from_io("list", given, e))?;
        let mut out = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| SandboxError::from_io("list", given, e))?;
            let file_name = entry.file_name();
            let name = file_name.to_string_lossy().into_owned();
            let kind = entry.file_type().map_or(EntryKind::Other, EntryKind::of);
            let meta = (kind == EntryKind::File).then(|| entry.metadata().ok()).flatten();
            let bytes = meta.as_ref().map_or(0, |m| m.len());
            let modified =
                meta.and_then(|m| m.modified().ok()).map(cap_std::time::SystemTime::into_std);
            let below = if below.is_empty() { name.clone() } else { format!("{below}/{name}") };
            let rel = rel.join(&file_name);
            out.push((file_name, Pending { rel, below, name, kind, bytes, modified }));
        }
        out.sort_by(|a, b| b.0.cmp(&a.0));
        Ok(out.into_iter().map(|(_, p)| p).collect())
    }
}

/// A relative path as `/`-separated text.
fn display(rel: &Path) -> String {
    let mut out = String::new();
    for part in rel.iter() {
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(&part.to_string_lossy());
    }
    out
}
