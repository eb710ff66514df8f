//! `--scratch`: run on a fresh temporary copy of the workspace, so that running an example never
//! dirties the repository and never depends on an earlier run.
//!
//! The copy keeps symlinks as symlinks (a link that leaves the workspace must still be refused by
//! the sandbox, not silently turned into a copy of its target) and leaves out the workspace's own
//! journal directory `.pev`. The copy is not deleted: the journal inside it is how the run is
//! shown and resumed, and the message says where it is.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Copies `workspace` into a new directory under the system temporary directory.
pub fn copy_workspace(workspace: &Path) -> Result<PathBuf, String> {
    let base = std::env::temp_dir();
    let name = workspace.file_name().map_or_else(|| "workspace".into(), |n| n.to_string_lossy());
    // A directory of its own, never one another copy made (`pev eval --jobs` copies from
    // several threads of one process): a counter besides the clock, and `create_dir`, which
    // fails on one that exists.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = loop {
        let stamp = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = base.join(format!("pev-scratch-{}-{:x}-{n}", std::process::id(), stamp));
        match fs::create_dir(&dir) {
            Ok(()) => break dir,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(format!("cannot create the scratch directory {}: {e}", dir.display()));
            }
        }
    };
    let target = dir.join(name.as_ref());
    fs::create_dir_all(&target)
        .map_err(|e| format!("cannot create the scratch directory {}: {e}", target.display()))?;
    copy_dir(workspace, &target)
        .map_err(|e| format!("cannot copy {} to {}: {e}", workspace.display(), target.display()))?;
    Ok(target)
}

/// `--scratch`: a copy of `workspace` to run on, and the two lines that say where it is and how
/// to remove it.
pub(crate) fn announced_copy(
    workspace: &Path,
    err: &mut dyn std::io::Write,
) -> Result<PathBuf, crate::shared::exit::Fail> {
    let copy = copy_workspace(workspace).map_err(crate::shared::exit::Fail::input)?;
    let _ = writeln!(
        err,
        "pev: running on a scratch copy of {} at {}",
        workspace.display(),
        copy.display()
    );
    let _ = writeln!(
        err,
        "pev: the copy stays (its journal is what `pev show` reads); remove it with `rm -rf {}` \
         when done",
        crate::view::run_summary::shell_quote(&copy.display().to_string())
    );
    Ok(copy)
}

fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == ".pev" {
            continue;
        }
        let src = entry.path();
        let dst = to.join(&name);
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            let link = fs::read_link(&src)?;
            std::os::unix::fs::symlink(link, &dst)?;
        } else if kind.is_dir() {
            fs::create_dir(&dst)?;
            copy_dir(&src, &dst)?;
        } else if kind.is_file() {
            fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_files_and_dirs_keeps_symlinks_and_skips_the_journal() {
        let src = tempfile::tempdir().unwrap();
        fs::write(src.path().join("a.txt"), "A").unwrap();
        fs::create_dir(src.path().join("sub")).unwrap();
        fs::write(src.path().join("sub/b.txt"), "B").unwrap();
        fs::create_dir(src.path().join(".pev")).unwrap();
        fs::write(src.path().join(".pev/pev.db"), "db").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.path().join("out")).unwrap();
        let copy = copy_workspace(src.path()).unwrap();
        assert_eq!(fs::read_to_string(copy.join("a.txt")).unwrap(), "A");
        assert_eq!(fs::read_to_string(copy.join("sub/b.txt")).unwrap(), "B");
        assert!(!copy.join(".pev").exists());
        assert_eq!(fs::read_link(copy.join("out")).unwrap(), PathBuf::from("/etc/passwd"));
        assert_ne!(copy, src.path());
        fs::remove_dir_all(copy.parent().unwrap()).unwrap();
    }
}
