//! Leftovers: the private temporary directories of pev processes that ended without removing
//! them.
//!
//! A sandbox makes a directory of its own in the system temp dir (the commands' `TMPDIR`, and a
//! copy of the helper when it lies in a writable place) and removes it when it is dropped. A
//! process that is killed, or crashes, leaves it behind, with whatever its commands wrote there;
//! a test suite that kills pev on purpose left a hundred a run. So each name says whose it is,
//! `PREFIX-BOOT.NS.PID-…` (the machine's boot id, the pid namespace, the process id), and the
//! first directory a process makes starts a sweep of the temp dir, on a thread of its own, for
//! those of processes that are gone.
//!
//! A directory is removed only when all of these hold: its name is one of ours with this boot's
//! id and this process's pid namespace (a temp dir shared with another machine, a container or
//! a VM is never judged: pids there are not ours), `kill(PID, 0)` says there is no such process
//! (asked of the kernel, so neither a `/proc` of another namespace nor `hidepid` can make a live
//! process look dead), it is a directory and not a symlink, and it belongs to this user. A pid
//! reused by another process keeps the directory for a later sweep; an older name, or one made
//! where the boot id or the namespace could not be read, is left alone.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

/// The prefix of a sandbox's `TMPDIR`.
pub(crate) const TMP_PREFIX: &str = "pev-sandbox";
/// The prefix of the directory of a copy of the helper.
pub(crate) const HELPER_PREFIX: &str = "pev-helper";
const PREFIXES: [&str; 2] = [TMP_PREFIX, HELPER_PREFIX];

/// This machine's boot and this process's pid namespace, `BOOT.NS`: what a directory's process id
/// is relative to. `None` when either cannot be read (no `/proc`).
fn origin() -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let boot: String = boot.trim().chars().filter(char::is_ascii_hexdigit).take(12).collect();
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let ns: u64 = link.to_str()?.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()?;
    (boot.len() == 12).then(|| format!("{boot}.{ns}"))
}

/// What this process's directory names say of it: `BOOT.NS.PID` (`x.PID` without an origin,
/// which no sweep removes).
pub(crate) fn owner_tag() -> String {
    let origin = origin().unwrap_or_else(|| "x".to_owned());
    format!("{origin}.{}", std::process::id())
}

/// Starts [`sweep`] of `base` on a thread of its own: a leftover can be large, and nobody waits
/// for it (a process that ends first leaves the rest to the next sweep).
pub(crate) fn sweep_in_background(base: std::path::PathBuf) {
    let _ = std::thread::Builder::new().name("pev-tmp-sweep".into()).spawn(move || sweep(&base));
}

/// Removes from `base` the directories of ended processes of this machine's boot and this pid
/// namespace; returns how many. Never fails: a directory it cannot judge or remove stays.
pub(crate) fn sweep(base: &Path) -> usize {
    let Some(origin) = origin() else { return 0 };
    sweep_with(base, &origin, &|pid| running(pid))
}

/// Whether process `pid` exists in this pid namespace: only `ESRCH` says it does not (`EPERM`
/// is another user's process).
fn running(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else { return true };
    !matches!(kill(Pid::from_raw(raw), None), Err(Errno::ESRCH))
}

fn sweep_with(base: &Path, origin: &str, running: &dyn Fn(u32) -> bool) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else { return 0 };
    let uid = nix::unistd::geteuid().as_raw();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|name| owner(name, origin)) else { continue };
        if running(pid) {
            continue;
        }
        let path = entry.path();
        // `symlink_metadata`: a symlink named like ours is someone else's doing, not followed.
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if !meta.is_dir() || meta.uid() != uid {
            continue;
        }
        if remove(&path) {
            removed += 1;
        }
    }
    removed
}

/// The process id in `name` when `name` is one of ours made under `origin`.
fn owner(name: &str, origin: &str) -> Option<u32> {
    let rest = PREFIXES.iter().find_map(|p| name.strip_prefix(p)?.strip_prefix('-'))?;
    let (tag, _) = rest.split_once('-')?;
    let (their_origin, pid) = tag.rsplit_once('.')?;
    (their_origin == origin).then(|| pid.parse().ok()).flatten()
}

/// Removes the directory `path`; a command may have left read-only directories in it, which
/// are made writable (never through a symlink) and the removal tried once more.
fn remove(path: &Path) -> bool {
    if std::fs::remove_dir_all(path).is_ok() {
        return true;
    }
    writable(path);
    std::fs::remove_dir_all(path).is_ok()
}

fn writable(dir: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(dir) else { return };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        writable(&entry.path());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGIN: &str = "0123456789ab.4026531836";

    #[test]
    fn only_dirs_of_this_origin_whose_process_ended_are_removed() {
        let base = tempfile::tempdir().unwrap();
        let make = |name: &str| {
            let dir = base.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("left.txt"), "a command's temp file").unwrap();
            dir
        };
        // Process 100 has ended, 200 runs.
        let running = |pid: u32| pid == 200;
        let gone = make(&format!("pev-sandbox-{ORIGIN}.100-0-0000abcd"));
        let helper = make(&format!("pev-helper-{ORIGIN}.100-3-00001234"));
        // A read-only directory a command left inside.
        std::fs::create_dir(gone.join("ro")).unwrap();
        std::fs::write(gone.join("ro/f"), "x").unwrap();
        std::fs::set_permissions(gone.join("ro"), std::fs::Permissions::from_mode(0o500)).unwrap();
        let kept = [
            make(&format!("pev-sandbox-{ORIGIN}.200-0-0000abcd")),
            make("pev-sandbox-0123456789ab.4026531837.100-0-0000abcd"),
            make("pev-sandbox-ffffffffffff.4026531836.100-0-0000abcd"),
            make("pev-sandbox-x.100-0-0000abcd"),
            make("pev-sandbox-100-0-0000abcd"),
            make(&format!("other-{ORIGIN}.100-0-0000abcd")),
        ];
        // A symlink named like an ended process's directory, to a directory with a file: the
        // link is not ours to judge, and what it points to is never touched.
        let target = make("target");
        let link = base.path().join(format!("pev-sandbox-{ORIGIN}.100-1-0000beef"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // A file named like one.
        let file = base.path().join(format!("pev-sandbox-{ORIGIN}.100-2-0000cafe"));
        std::fs::write(&file, "x").unwrap();

        assert_eq!(sweep_with(base.path(), ORIGIN, &running), 2);
        assert!(!gone.exists() && !helper.exists(), "the ended process's directories went");
        for dir in &kept {
            assert!(dir.join("left.txt").exists(), "{} must stay", dir.display());
        }
        assert!(link.symlink_metadata().is_ok() && target.join("left.txt").exists());
        assert!(file.exists());
        assert_eq!(sweep_with(base.path(), ORIGIN, &running), 0, "nothing more to remove");
        // Once 200 has ended, its directory goes too.
        assert_eq!(sweep_with(base.path(), ORIGIN, &|_| false), 1);
        assert!(!kept[0].exists());
    }

    #[test]
    fn another_users_directory_stays() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let theirs = base.path().join(format!("pev-sandbox-{ORIGIN}.100-0-0000abcd"));
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(12_345), None).unwrap();
        assert_eq!(sweep_with(base.path(), ORIGIN, &|_| false), 0);
        assert!(theirs.exists());
    }

    /// A pid that no process has now: a child that has been waited for.
    fn ended_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn the_origin_is_this_boot_and_this_pid_namespace() {
        if !Path::new("/proc/self/ns/pid").exists() {
            return;
        }
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        let ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
        let ns = ns.to_str().unwrap().trim_start_matches("pid:[").trim_end_matches(']');
        let boot12: String = boot.trim().replace('-', "")[..12].to_owned();
        assert_eq!(origin(), Some(format!("{boot12}.{ns}")));
    }

    #[test]
    fn a_sweep_of_the_real_origin_removes_an_ended_processs_directory_in_the_background() {
        let Some(origin) = origin() else { return };
        let base = tempfile::tempdir().unwrap();
        let dead = ended_pid();
        let left = base.path().join(format!("pev-sandbox-{origin}.{dead}-0-00000000"));
        std::fs::create_dir(&left).unwrap();
        assert_eq!(sweep(base.path()), 1);
        assert!(!left.exists());
        std::fs::create_dir(&left).unwrap();
        sweep_in_background(base.path().to_path_buf());
        let start = std::time::Instant::now();
        while left.exists() && start.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!left.exists(), "the background sweep removed it");
    }

    #[test]
    fn read_only_directories_are_made_writable_but_never_through_a_symlink() {
        let base = tempfile::tempdir().unwrap();
        let outside = base.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o500)).unwrap();
        let left = base.path().join("left");
        std::fs::create_dir_all(left.join("a/b")).unwrap();
        std::os::unix::fs::symlink(&outside, left.join("a/link")).unwrap();
        for dir in ["a/b", "a"] {
            std::fs::set_permissions(left.join(dir), std::fs::Permissions::from_mode(0o500))
                .unwrap();
        }
        writable(&left);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&left.join("a")), mode(&left.join("a/b"))), (0o700, 0o700));
        assert_eq!(mode(&outside), 0o500, "the symlink's target is not touched");
        assert!(remove(&left) && !left.exists() && outside.exists());
    }

    #[test]
    fn the_names_a_process_makes_are_the_names_its_sweep_reads() {
        let Some(origin) = origin() else { return };
        let dir = crate::make_private_dir(TMP_PREFIX).expect("a private dir");
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let _ = std::fs::remove_dir(&dir);
        assert_eq!(owner(&name, &origin), Some(std::process::id()), "{name}");
        assert_eq!(owner(&name, "ffffffffffff.1"), None);
        assert_eq!(owner_tag(), format!("{origin}.{}", std::process::id()));
    }

    #[test]
    fn a_process_is_running_until_the_kernel_says_it_is_not() {
        assert!(running(std::process::id()));
        assert!(running(1), "another user's or init: EPERM or alive, never dead");
        let pid = ended_pid();
        // Reaped: gone (unless the pid was reused within this moment, which would keep it).
        assert!(!running(pid) || std::path::Path::new(&format!("/proc/{pid}")).exists());
        assert!(running(u32::MAX), "a pid beyond i32 is not judged");
    }
}
