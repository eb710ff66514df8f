//! One writer of a file at a time within a run.
//!
//! Steps with no dependency between them run at once (`--jobs`), and so do the executors of
//! instruction steps. Two of them writing the same file did so without order: `file.patch` reads
//! the file, applies its edits and writes it back, so two patches at once could both read the
//! old content and the second write undid the first's change (a lost update: the run then failed
//! its final re-check, on a plan that had done its work). Each call that writes a file now holds
//! that file's lock from the state it records before the call to the recording of its change
//! (for a tool step, to the checks of its assertions), so what a write changes and what it
//! leaves are its own. Files are told apart by their workspace path as written, normalised
//! (`./a//b` is `a/b`); another name for the same file (a symlink) is another lock.
//!
//! Not covered: a command (`shell.exec`) takes no lock, as which files it writes is not known
//! before it runs; an executor's read and a later whole-file write are two calls, so a change
//! made between them is written over.
//!
//! A run and its child runs (delegated steps) share one set of locks when the caller hands the
//! same [`WriteLocks`] to their engines (`EngineConfig::write_locks`, as `pev agent` does), so a
//! child's write and a parent step's take turns too. Locks are keyed by absolute path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OwnedMutexGuard;

/// The file locks of a run (and of its child runs, when shared), one per path a write named.
#[derive(Debug, Default)]
pub struct WriteLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// The lock of one file, held until it is dropped.
pub(crate) type Held = OwnedMutexGuard<()>;

impl WriteLocks {
    /// Waits for `path`'s lock (as the workspace resolves it; a path it refuses is taken as
    /// written, and the call will be refused on its own) and holds it.
    pub(crate) async fn hold(&self, workspace: &pev_tools::Workspace, path: &str) -> Held {
        let key = workspace.resolve(path).map_or_else(
            |_| path.to_owned(),
            |p| workspace.root().join(p).to_string_lossy().into_owned(),
        );
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(locks.entry(key).or_default())
        };
        lock.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Whether `hold` is granted within `wait`.
    async fn granted(hold: impl std::future::Future<Output = Held>, wait: Duration) -> bool {
        tokio::time::timeout(wait, hold).await.is_ok()
    }

    const BUSY: Duration = Duration::from_millis(50);
    const FREE: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn one_holder_per_path_and_spellings_of_a_path_share_it() {
        let dir = tempfile::tempdir().unwrap();
        let ws = pev_tools::Workspace::open(dir.path()).unwrap();
        let locks = WriteLocks::default();
        let held = locks.hold(&ws, "a/b.txt").await;
        // Another path is free; the same path, spelled otherwise, waits.
        assert!(granted(locks.hold(&ws, "a/c.txt"), FREE).await, "another file's lock was taken");
        assert!(!granted(locks.hold(&ws, "./a//b.txt"), BUSY).await, "one file, two holders");
        drop(held);
        assert!(granted(locks.hold(&ws, "./a//b.txt"), FREE).await, "the lock was not released");
    }

    /// A child run works in a workspace scoped to a directory of its parent's: its writes and
    /// its parent's of one file take the same lock.
    #[tokio::test]
    async fn a_scoped_child_workspace_and_its_parent_share_a_files_lock() {
        let dir = tempfile::tempdir().unwrap();
        let parent = pev_tools::Workspace::open(dir.path()).unwrap();
        let child = parent.scoped("site").unwrap();
        let locks = WriteLocks::default();
        let _held = locks.hold(&parent, "site/style.css").await;
        assert!(
            !granted(locks.hold(&child, "site/style.css"), BUSY).await,
            "the child wrote the parent's file at the same time"
        );
    }
}
