//! The workspace when a client's plan was made, and what changed since. The client edits files
//! with its own tools, which pev never sees; so when the plan is created pev records every file's
//! sha256 and size (and keeps the contents of small files as blobs, for diffs), plus the git HEAD
//! and status when the workspace is a repository. At any later moment the workspace is listed
//! again and compared: created, changed and removed files become the run's mutations, computed by
//! pev from the files themselves.
//!
//! Bounded like the command inventory (`pev_engine::inventory`): past its file cap the snapshot
//! is marked truncated and changes are not tracked (the verdict says so). `.pev/` and `.git/` are
//! left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pev_engine::inventory::{self, Inventory};
use pev_protocol::run::FileMutation;
use pev_store::Store;
use pev_tools::Workspace;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How long `git status` may take before the snapshot goes on without it.
const GIT_TIMEOUT: Duration = Duration::from_secs(5);

/// One file as the snapshot saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub sha256: String,
    pub bytes: u64,
}

/// The workspace's files at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub files: BTreeMap<String, FileEntry>,
    /// `{head, status}` when the workspace is a git repository.
    pub git: Option<Value>,
    /// More files than a snapshot holds: nothing is tracked.
    pub truncated: bool,
}

/// A snapshot and the contents it keeps (sha256 → bytes), to be stored as blobs.
#[derive(Debug, Default)]
pub struct Taken {
    pub snapshot: Snapshot,
    pub blobs: Vec<(String, Vec<u8>)>,
}

/// What changed between a snapshot and the workspace now.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    /// Created, changed and removed files, in path order.
    pub mutations: Vec<FileMutation>,
    /// The snapshot (or the workspace now) could not be listed whole: changes are unknown.
    pub unknown: Option<String>,
}

impl Changes {
    /// The changed paths, in order.
    pub fn paths(&self) -> Vec<String> {
        self.mutations.iter().map(|m| m.path.clone()).collect()
    }
}

/// Takes the snapshot of `ws`.
pub fn take(ws: &Workspace) -> Taken {
    let git = git_state(ws.root());
    let Some(inventory) = inventory::take(ws, None) else {
        return Taken {
            snapshot: Snapshot { files: BTreeMap::new(), git, truncated: true },
            blobs: Vec::new(),
        };
    };
    let mut blobs = Vec::new();
    let files = hashed(ws, &inventory, Some(&mut blobs));
    Taken { snapshot: Snapshot { files, git, truncated: false }, blobs }
}

/// The files that differ between `snapshot` and `ws` now, with line counts where both contents
/// are known (the snapshot's from the journal's blobs).
pub fn changes(snapshot: &Snapshot, ws: &Workspace, store: Option<&Store>) -> Changes {
    if snapshot.truncated {
        return Changes {
            mutations: Vec::new(),
            unknown: Some(format!(
                "the workspace had more than {} files when the plan was made, so pev could not \
                 snapshot it and does not know which files changed",
                inventory::MAX_FILES
            )),
        };
    }
    let Some(now) = inventory::take(ws, None) else {
        return Changes {
            mutations: Vec::new(),
            unknown: Some(format!(
                "the workspace now has more than {} files (or cannot be listed), so pev does not \
                 know which files changed",
                inventory::MAX_FILES
            )),
        };
    };
    let hashes = hashed(ws, &now, None);
    let paths: BTreeSet<&String> = snapshot.files.keys().chain(hashes.keys()).collect();
    let ignored = ignored(ws.root());
    let is_ignored = |path: &str| {
        ignored.iter().any(|i| i == path || (i.ends_with('/') && path.starts_with(i.as_str())))
    };
    let products = pev_verify::oracle::BuildProducts::new(ws.root());
    let mut mutations = Vec::new();
    for path in paths {
        if is_ignored(path) || products.is_product(path) {
            continue;
        }
        let (before, after) = (snapshot.files.get(path), hashes.get(path));
        if before.map(|b| &b.sha256) == after.map(|a| &a.sha256) {
            continue;
        }
        let old = before.and_then(|b| store.and_then(|s| s.blob(&b.sha256).ok().flatten()));
        let new = now.files.get(path).and_then(|f| f.content.clone());
        let known_before = before.is_none() || old.is_some();
        let known_after = after.is_none() || new.is_some();
        let mutation = if known_before && known_after {
            pev_verify::mutation(path, old.as_deref(), new.as_deref())
        } else {
            FileMutation {
                path: path.clone(),
                bytes_before: before.map_or(0, |b| b.bytes),
                bytes_after: after.map_or(0, |a| a.bytes),
                lines_added: 0,
                lines_removed: 0,
                no_op: false,
            }
        };
        mutations.push(mutation);
    }
    Changes { mutations, unknown: None }
}

/// Each listed file's sha256 and size; with `blobs`, the kept contents are handed out too.
fn hashed(
    ws: &Workspace,
    inventory: &Inventory,
    mut blobs: Option<&mut Vec<(String, Vec<u8>)>>,
) -> BTreeMap<String, FileEntry> {
    let mut files = BTreeMap::new();
    for (path, state) in &inventory.files {
        let sha256 = match &state.content {
            Some(content) => sha256_hex(content),
            // Too large to keep: hashed from the file (a file that vanished meanwhile is left
            // out, as if the listing had missed it).
            None => match ws.sha256(path) {
                Ok(Some(sha)) => sha,
                Ok(None) | Err(_) => continue,
            },
        };
        if let (Some(blobs), Some(content)) = (blobs.as_deref_mut(), &state.content) {
            blobs.push((sha256.clone(), content.clone()));
        }
        files.insert(path.clone(), FileEntry { sha256, bytes: state.bytes });
    }
    files
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    pev_verify::oracle::sha256_of(bytes)
}

/// The git HEAD (read from `.git`, no process) and `git status --porcelain` (a process with the
/// repository's fsmonitor and hooks switched off, bounded in time), when `root` is a repository.
fn git_state(root: &Path) -> Option<Value> {
    let dir = root.join(".git");
    let head = std::fs::read_to_string(dir.join("HEAD")).ok()?;
    let head = head.trim();
    let commit = match head.strip_prefix("ref: ") {
        Some(name) => std::fs::read_to_string(dir.join(name))
            .ok()
            .map(|s| s.trim().to_owned())
            .or_else(|| packed_ref(&dir, name)),
        None => Some(head.to_owned()),
    };
    let status = git_status(root);
    Some(json!({
        "head": commit,
        "ref": head.strip_prefix("ref: "),
        "status": status,
    }))
}

fn packed_ref(dir: &Path, name: &str) -> Option<String> {
    let packed = std::fs::read_to_string(dir.join("packed-refs")).ok()?;
    packed.lines().find_map(|line| {
        let (sha, refname) = line.split_once(' ')?;
        (refname.trim() == name).then(|| sha.to_owned())
    })
}

fn git_status(root: &Path) -> Option<Vec<String>> {
    let out = git(root, &["status", "--porcelain", "--untracked-files=normal"])?;
    Some(out.lines().take(200).map(str::to_owned).collect())
}

/// The untracked paths git ignores (directories end in `/`), when `root` is a repository: build
/// outputs and caches (`target/`, `__pycache__/`, what `pev`'s own assertion commands leave) are
/// not the client's work.
fn ignored(root: &Path) -> Vec<String> {
    if !root.join(".git").exists() {
        return Vec::new();
    }
    git(root, &["ls-files", "--others", "--ignored", "--exclude-standard", "--directory"])
        .map(|out| out.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Runs git in `root` with the repository's fsmonitor and hooks off, reading its output while
/// it runs (a full pipe never blocks it), for at most [`GIT_TIMEOUT`].
fn git(root: &Path, args: &[&str]) -> Option<String> {
    let mut child = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"])
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ =
            std::io::Read::read_to_end(&mut std::io::Read::take(&mut stdout, 16 << 20), &mut out);
        out
    });
    let started = Instant::now();
    let ok = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.success(),
            Err(_) => break false,
            Ok(None) if started.elapsed() > GIT_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let out = reader.join().ok()?;
    ok.then(|| String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        (dir, ws)
    }

    #[test]
    fn finds_created_changed_and_removed_files_with_line_counts() {
        let (dir, ws) = ws();
        std::fs::write(dir.path().join("keep.txt"), "same\n").unwrap();
        std::fs::write(dir.path().join("edit.txt"), "one\ntwo\n").unwrap();
        std::fs::write(dir.path().join("gone.txt"), "bye\n").unwrap();
        std::fs::create_dir(dir.path().join(".pev")).unwrap();
        let taken = take(&ws);
        assert_eq!(taken.snapshot.files.len(), 3, "{:?}", taken.snapshot.files);
        assert!(taken.snapshot.git.is_none());
        let db = dir.path().join(".pev/pev.db");
        let store = Store::open(&db).unwrap();
        for (sha, content) in &taken.blobs {
            store
                .write(&pev_store::Record::Blob { sha256: sha.clone(), content: content.clone() })
                .unwrap();
        }
        std::fs::write(dir.path().join("edit.txt"), "one\n2\nthree\n").unwrap();
        std::fs::remove_file(dir.path().join("gone.txt")).unwrap();
        std::fs::write(dir.path().join("new.txt"), "hi\n").unwrap();
        let changes = changes(&taken.snapshot, &ws, Some(&store));
        assert_eq!(changes.unknown, None);
        assert_eq!(changes.paths(), ["edit.txt", "gone.txt", "new.txt"]);
        let edit = &changes.mutations[0];
        assert_eq!((edit.lines_added, edit.lines_removed), (2, 1));
        assert_eq!((changes.mutations[1].bytes_before, changes.mutations[1].bytes_after), (4, 0));
        assert!(changes.mutations.iter().all(|m| !m.no_op));
    }

    #[test]
    fn an_unchanged_workspace_has_no_changes_and_the_journal_is_left_out() {
        let (dir, ws) = ws();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let taken = take(&ws);
        std::fs::create_dir_all(dir.path().join(".pev")).unwrap();
        std::fs::write(dir.path().join(".pev/pev.db"), "journal").unwrap();
        let changes = changes(&taken.snapshot, &ws, None);
        assert!(changes.mutations.is_empty(), "{:?}", changes.mutations);
    }

    #[test]
    fn a_truncated_snapshot_knows_nothing_and_says_so() {
        let (_dir, ws) = ws();
        let snapshot = Snapshot { truncated: true, ..Snapshot::default() };
        let changes = changes(&snapshot, &ws, None);
        assert!(changes.unknown.unwrap().contains("more than 5000 files"));
    }

    #[test]
    fn files_git_ignores_are_not_changes() {
        let (dir, ws) = ws();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(args)
                .output()
                .map(|o| o.status.success());
            ok.unwrap_or(false)
        };
        if !git(&["init", "-q"]) {
            return; // no git on this machine: nothing to ignore with
        }
        std::fs::write(dir.path().join(".gitignore"), "cache/\n*.log\n").unwrap();
        let taken = take(&ws);
        assert!(taken.snapshot.git.is_some());
        std::fs::create_dir(dir.path().join("cache")).unwrap();
        std::fs::write(dir.path().join("cache/x.bin"), "x").unwrap();
        std::fs::write(dir.path().join("run.log"), "log").unwrap();
        std::fs::write(dir.path().join("src.txt"), "work").unwrap();
        assert_eq!(changes(&taken.snapshot, &ws, None).paths(), ["src.txt"]);
    }

    #[test]
    fn reads_the_git_head_without_running_git_hooks() {
        let (dir, _ws) = ws();
        let git = dir.path().join(".git");
        std::fs::create_dir_all(git.join("refs/heads")).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("packed-refs"), "# pack-refs\nabc123 refs/heads/main\n").unwrap();
        let state = git_state(dir.path()).unwrap();
        assert_eq!(state["head"], "abc123");
        assert_eq!(state["ref"], "refs/heads/main");
    }
}
