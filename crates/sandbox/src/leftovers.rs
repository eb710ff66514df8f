//! Leftovers: the private temporary directories of pev processes that ended without removing
//! them.
//!
//! A sandbox makes a directory of its own in the system temp dir (the commands' `TMPDIR`, and a
//! copy of the helper when it lies in a writable place) and removes it when it is dropped. A
//! process that is killed, or crashes, leaves it behind, with whatever its commands wrote there;
//! a test suite that kills pev on purpose leaves a hundred a run. So each name says whose it is,
//! `PREFIX-NS.PID-…` (the pid namespace and the process id), and the first directory a process
//! makes sweeps the temp dir once for those of processes that are gone.
//!
//! A directory is removed only when all of these hold: its name is one of ours with the same pid
//! namespace as this process (so `/proc` speaks of the same processes; a directory of another
//! namespace sharing the temp dir is never judged), that process is not running (`/proc/PID` is
//! absent while `/proc/self` is present), it is a directory and not a symlink, and it belongs to
//! this user. A pid reused by another process keeps the directory for a later sweep; an older
//! name without a namespace is left alone.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The prefix of a sandbox's `TMPDIR`.
pub(crate) const TMP_PREFIX: &str = "pev-sandbox";
/// The prefix of the directory of a copy of the helper.
pub(crate) const HELPER_PREFIX: &str = "pev-helper";
const PREFIXES: [&str; 2] = [TMP_PREFIX, HELPER_PREFIX];

/// The pid namespace of this process (the inode of `/proc/self/ns/pid`), `None` when it cannot
/// be read (no `/proc`).
pub(crate) fn pid_namespace() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let link = link.to_str()?;
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// Where this process's directory names say whose they are: `NS.PID` (or `x.PID` without a
/// namespace, which no sweep removes).
pub(crate) fn owner_tag() -> String {
    match pid_namespace() {
        Some(ns) => format!("{ns}.{}", std::process::id()),
        None => format!("x.{}", std::process::id()),
    }
}

/// Removes from `base` the directories named `PREFIX-NS.PID-…` of this namespace whose process
/// has ended; returns how many. Never fails: a directory it cannot judge or remove stays.
pub(crate) fn sweep(base: &Path) -> usize {
    let Some(ns) = pid_namespace() else { return 0 };
    let proc = Path::new("/proc");
    if !proc.join("self").exists() || !proc.join(std::process::id().to_string()).exists() {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(base) else { return 0 };
    let uid = nix::unistd::geteuid().as_raw();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|name| dead_owner(name, ns, proc)) else {
            continue;
        };
        let path = entry.path();
        // `symlink_metadata`: a symlink named like ours is someone else's doing, not followed.
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if !meta.is_dir() || meta.uid() != uid {
            continue;
        }
        // Checked again right before: the process may have been a moment from starting.
        if proc.join(pid.to_string()).exists() {
            continue;
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The pid of `name`'s owner when `name` is one of ours, of namespace `ns`, whose process is
/// not running.
fn dead_owner(name: &str, ns: u64, proc: &Path) -> Option<u32> {
    let rest = PREFIXES.iter().find_map(|p| name.strip_prefix(p)?.strip_prefix('-'))?;
    let (tag, _) = rest.split_once('-')?;
    let (their_ns, pid) = tag.split_once('.')?;
    let (their_ns, pid): (u64, u32) = (their_ns.parse().ok()?, pid.parse().ok()?);
    (their_ns == ns && pid != std::process::id() && !proc.join(pid.to_string()).exists())
        .then_some(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid that no process has now: a child that has been waited for.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn only_our_namespaces_dirs_of_ended_processes_are_removed() {
        let Some(ns) = pid_namespace() else { return };
        let base = tempfile::tempdir().unwrap();
        let dead = dead_pid();
        let mut live = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let make = |name: &str| {
            let dir = base.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("left.txt"), "a command's temp file").unwrap();
            dir
        };
        let gone = make(&format!("pev-sandbox-{ns}.{dead}-0-0000abcd"));
        let helper = make(&format!("pev-helper-{ns}.{dead}-3-00001234"));
        let kept = [
            make(&format!("pev-sandbox-{ns}.{}-0-0000abcd", live.id())),
            make(&format!("pev-sandbox-{ns}.{}-0-0000abcd", std::process::id())),
            make(&format!("pev-sandbox-{}.{dead}-0-0000abcd", ns + 1)),
            make(&format!("pev-sandbox-x.{dead}-0-0000abcd")),
            make(&format!("pev-sandbox-{dead}-0-0000abcd")),
            make(&format!("other-{ns}.{dead}-0-0000abcd")),
        ];
        // A symlink named like an ended process's directory, to a directory with a file: the
        // link is not ours to judge, and what it points to is never touched.
        let target = make("target");
        let link = base.path().join(format!("pev-sandbox-{ns}.{dead}-1-0000beef"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // A file named like one.
        let file = base.path().join(format!("pev-sandbox-{ns}.{dead}-2-0000cafe"));
        std::fs::write(&file, "x").unwrap();

        assert_eq!(sweep(base.path()), 2);
        assert!(!gone.exists() && !helper.exists(), "the ended process's directories went");
        for dir in &kept {
            assert!(dir.join("left.txt").exists(), "{} must stay", dir.display());
        }
        assert!(link.symlink_metadata().is_ok() && target.join("left.txt").exists());
        assert!(file.exists());
        assert_eq!(sweep(base.path()), 0, "nothing more to remove");
        // Once the live process has ended, its directory goes too.
        live.kill().unwrap();
        live.wait().unwrap();
        assert_eq!(sweep(base.path()), 1);
        assert!(!kept[0].exists());
    }

    #[test]
    fn the_tag_names_this_process_and_its_namespace() {
        let tag = owner_tag();
        let (ns, pid) = tag.split_once('.').unwrap();
        assert_eq!(pid, std::process::id().to_string());
        match pid_namespace() {
            Some(n) => assert_eq!(ns, n.to_string()),
            None => assert_eq!(ns, "x"),
        }
        assert!(dead_owner(&format!("pev-sandbox-{tag}-0-0"), 0, Path::new("/proc")).is_none());
    }
}
