//! pev's own namespaces, for a machine without bubblewrap: where the kernel lets an
//! unprivileged process make a user namespace, stage 2 makes one with private mount, IPC and
//! (unless the network is open) network namespaces, and mounts over what a command must not
//! reach, as bubblewrap would: the journal's directories become empty read-only tmpfs, the
//! run's oracle files are bound read-only onto themselves, the secrets and the shared journal's
//! socket directory are covered, and so is `/run` (host sockets: Docker's, D-Bus, a database's)
//! when the network is closed, or the known host sockets one by one when it is open.
//!
//! Every mount is then made read-only but the writable roots, as bubblewrap's `--ro-bind / /`
//! and `--bind ROOT ROOT`: Landlock refuses a command's writes outside them but not a change of
//! an outside file's mode, owner, times or extended attributes (`chmod`, `chown`, `touch -d`,
//! `setfattr` on anything the user owns), and a read-only mount refuses those.
//!
//! `/tmp` is a fresh tmpfs with the workspace, the run's `TMPDIR` and the `PATH` entries under it
//! bound back (other programs' sockets live there). What bubblewrap gives and this does not: a
//! private pid namespace (commands see host processes, though Landlock keeps them from
//! signalling any). The probe tries it in a throw-away process; `PEV_SANDBOX_NAMESPACES=off`
//! turns it off (to test the partial sandbox, or where a kernel misbehaves).

use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

use crate::spec::{Network, Spec};

/// Host sockets covered one by one when the network is open (`/run` stays for DNS).
pub(crate) const HOST_SOCKETS: &[&str] = &[
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd",
    "/run/podman",
    "/run/dbus",
    "/run/user",
    "/run/systemd/private",
    "/run/snapd.socket",
    "/run/postgresql",
    "/var/run/postgresql",
    "/run/mysqld",
    "/tmp/.X11-unix",
];

/// The variable that turns pev's namespaces off.
pub const NAMESPACES_VAR: &str = "PEV_SANDBOX_NAMESPACES";

/// Enter the namespaces and mount what `spec` asks for. Stage 2 calls it first, while it still
/// may (seccomp refuses `unshare` and `mount` afterwards).
pub(crate) fn enter(spec: &Spec) -> Result<(), String> {
    private(spec.network == Network::Closed)?;
    read_only_but(&spec.writable)?;
    if spec.network == Network::Closed && Path::new("/run").is_dir() {
        cover(Path::new("/run"))?;
        for extra in HOST_SOCKETS.iter().filter(|p| !p.starts_with("/run/")) {
            cover_if_there(Path::new(extra))?;
        }
    } else {
        for path in HOST_SOCKETS {
            cover_if_there(Path::new(path))?;
        }
    }
    // The command's own PATH stays: a virtualenv or a tool installed under /tmp is the user's.
    let path = spec.env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_str()).unwrap_or("");
    let mut keep: Vec<&Path> = spec.writable.iter().map(PathBuf::as_path).collect();
    keep.push(&spec.cwd);
    keep.extend(path.split(':').filter(|d| d.starts_with('/')).map(Path::new));
    cover_tmp(&keep)?;
    for path in &spec.read_only {
        cover_if_there(path)?;
    }
    for path in spec.frozen.iter().filter(|p| p.is_file()) {
        read_only_bind(path)?;
    }
    for path in &spec.hidden {
        cover_if_there(path)?;
    }
    Ok(())
}

/// `/tmp` emptied, as bubblewrap does it: other users' and programs' sockets live there (tmux's
/// and ssh-agent's give a shell outside), as do their files. The paths in `keep` that lie under
/// it (the workspace, the run's `TMPDIR`, a `PATH` entry) are opened first and bound back into
/// the fresh tmpfs through their descriptors (`/proc/self/fd/N` names the original directory
/// even once it is covered).
fn cover_tmp(keep: &[&Path]) -> Result<(), String> {
    let tmp = Path::new("/tmp");
    if !tmp.is_dir() {
        return Ok(());
    }
    let mut under: Vec<PathBuf> = keep
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .filter(|p| p.starts_with(tmp) && p.is_dir())
        .collect();
    if under.iter().any(|p| p == tmp) {
        return Ok(()); // the workspace is /tmp itself: nothing to cover it with
    }
    under.sort();
    under.dedup();
    // Only the outermost of nested paths is bound (the rest comes with it).
    let outer: Vec<PathBuf> = under
        .iter()
        .filter(|p| !under.iter().any(|q| q != *p && p.starts_with(q)))
        .cloned()
        .collect();
    let held: Vec<(PathBuf, std::fs::File)> = outer
        .into_iter()
        .map(|p| std::fs::File::open(&p).map(|f| (p.clone(), f)))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("opening a directory under /tmp: {e}"))?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    mount(Some("tmpfs"), tmp, Some("tmpfs"), flags, Some("mode=1777"))
        .map_err(|e| format!("covering /tmp: {e}"))?;
    for (path, dir) in &held {
        std::fs::create_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let source = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(dir));
        mount(
            Some(source.as_str()),
            path,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|e| format!("binding {} back: {e}", path.display()))?;
    }
    Ok(())
}

/// A user namespace mapping this user to itself, with private mount and IPC (and network)
/// namespaces; mounts made from now on are this process's alone.
fn private(network: bool) -> Result<(), String> {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWIPC;
    if network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|e| format!("unshare: {e}"))?;
    let write =
        |file: &str, text: String| std::fs::write(file, text).map_err(|e| format!("{file}: {e}"));
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
        .map_err(|e| format!("making / private: {e}"))
}

/// Every mount of this namespace read-only, but the `writable` roots (each bound onto itself
/// first, with the mounts beneath it, so it keeps its own flags). Each mount point is remounted
/// once, on its own, with the flags of the mount on top there as `statvfs` reads them (a user
/// namespace may not clear a `nosuid`, `nodev`, `noexec` or atime setting it inherited; the
/// table's line may be a mount stacked beneath, with other flags). One it cannot reach (`EACCES`,
/// `ENOENT`: under a directory it may not enter, or gone; `EINVAL`: no longer a mount point, its
/// parent mounted over) is skipped, as bubblewrap skips it; `/` must succeed.
fn read_only_but(writable: &[PathBuf]) -> Result<(), String> {
    let roots: Vec<PathBuf> = writable.iter().filter_map(|p| p.canonicalize().ok()).collect();
    for root in &roots {
        mount(Some(root), root, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
            .map_err(|e| format!("binding {} onto itself: {e}", root.display()))?;
    }
    let table =
        std::fs::read("/proc/self/mountinfo").map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let mut done = std::collections::HashSet::new();
    for at in mounts(&table) {
        if roots.iter().any(|root| at.starts_with(root)) || !done.insert(at.clone()) {
            continue;
        }
        let root = at == Path::new("/");
        match remount_read_only(&at) {
            Ok(()) => {}
            Err(nix::Error::EACCES | nix::Error::ENOENT | nix::Error::EINVAL) if !root => {}
            Err(e) => return Err(format!("making {} read-only: {e}", at.display())),
        }
    }
    Ok(())
}

/// The mount on top at `at` remounted read-only, keeping its other flags.
fn remount_read_only(at: &Path) -> Result<(), nix::Error> {
    let flags = kept(nix::sys::statvfs::statvfs(at)?.flags());
    let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | flags;
    mount(None::<&str>, at, None::<&str>, flags, None::<&str>)
}

/// The mount points of a `/proc/self/mountinfo` table, in its order (parents before the mounts
/// beneath them). Bytes, not text: a mount point may be any bytes but `/` and NUL.
fn mounts(table: &[u8]) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    table
        .split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').nth(4))
        .map(|at| PathBuf::from(std::ffi::OsStr::from_bytes(&unescape(at))))
        .collect()
}

/// A mountinfo path: space, tab, newline and backslash are written `\ooo` (octal).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field.get(i + 1..i + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) if field[i] == b'\\' => {
                let value = d.iter().fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            _ => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

/// `MS_NOSYMFOLLOW` (Linux 5.10), which nix does not name; `ST_NOSYMFOLLOW` is its statvfs flag.
const MS_NOSYMFOLLOW: libc::c_ulong = 256;
const ST_NOSYMFOLLOW: libc::c_ulong = 0x2000;

/// The flags of a mount (as `statvfs` gives them) that a remount must keep.
fn kept(have: nix::sys::statvfs::FsFlags) -> MsFlags {
    use nix::sys::statvfs::FsFlags;
    let pairs = [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
    ];
    let mut flags = MsFlags::empty();
    for (st, ms) in pairs {
        if have.contains(st) {
            flags |= ms;
        }
    }
    if have.bits() & ST_NOSYMFOLLOW != 0 {
        flags |= MsFlags::from_bits_retain(MS_NOSYMFOLLOW);
    }
    flags
        | if have.contains(FsFlags::ST_NOATIME) {
            MsFlags::MS_NOATIME
        } else if have.contains(FsFlags::ST_RELATIME) {
            MsFlags::MS_RELATIME
        } else {
            MsFlags::MS_STRICTATIME
        }
}

fn cover_if_there(path: &Path) -> Result<(), String> {
    if path.symlink_metadata().is_ok() { cover(path) } else { Ok(()) }
}

/// An empty read-only tmpfs over a directory, `/dev/null` over anything else.
fn cover(path: &Path) -> Result<(), String> {
    let flags = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    let done = if path.is_dir() {
        mount(Some("tmpfs"), path, Some("tmpfs"), flags, Some("size=4k,mode=0555"))
    } else {
        mount(Some("/dev/null"), path, None::<&str>, MsFlags::MS_BIND, None::<&str>)
    };
    done.map_err(|e| format!("covering {}: {e}", path.display()))
}

/// `path` bound onto itself, read-only: readable, and neither writable nor removable.
fn read_only_bind(path: &Path) -> Result<(), String> {
    let failed = |e: nix::Error| format!("freezing {}: {e}", path.display());
    mount(Some(path), path, None::<&str>, MsFlags::MS_BIND, None::<&str>).map_err(failed)?;
    // With the flags the bind inherited (a workspace on a `nosuid,nodev` /tmp keeps them).
    remount_read_only(path).map_err(failed)
}

/// Whether this process can make the namespaces (run in the probe's throw-away process).
pub(crate) fn available() -> Result<(), String> {
    if std::env::var(NAMESPACES_VAR).as_deref() == Ok("off") {
        return Err(format!("pev's namespaces: turned off ({NAMESPACES_VAR}=off)"));
    }
    private(true).map_err(|e| format!("pev's namespaces: {e}"))?;
    read_only_but(&[std::env::temp_dir()]).map_err(|e| format!("pev's namespaces: {e}"))?;
    cover(Path::new("/proc/self/attr"))
        .or_else(|_| cover(&std::env::temp_dir()))
        .map_err(|e| format!("pev's namespaces: {e}"))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use nix::mount::MsFlags;
    use nix::sys::statvfs::FsFlags;

    use super::{kept, mounts};

    #[test]
    fn the_mount_table_gives_each_mount_point_as_bytes() {
        let table = b"\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
24 22 0:40 / /mnt/my\\040disk ro,noatime shared:1 - vfat /dev/sdb1 rw
25 22 0:41 / /back\\134slash\\011tab rw - tmpfs tmpfs rw
26 22 0:42 / /media/caf\xe9 rw - vfat /dev/sdc1 rw
";
        let got = mounts(table);
        use std::os::unix::ffi::OsStrExt;
        let latin1 = PathBuf::from(std::ffi::OsStr::from_bytes(b"/media/caf\xe9"));
        let want: Vec<PathBuf> = ["/", "/proc", "/mnt/my disk", "/back\\slash\ttab"]
            .map(PathBuf::from)
            .into_iter()
            .chain([latin1])
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_remount_keeps_the_flags_a_user_namespace_may_not_clear() {
        assert_eq!(
            kept(
                FsFlags::ST_NOSUID | FsFlags::ST_NODEV | FsFlags::ST_NOEXEC | FsFlags::ST_RELATIME
            ),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RELATIME
        );
        assert_eq!(kept(FsFlags::ST_RDONLY | FsFlags::ST_NOATIME), MsFlags::MS_NOATIME);
        assert_eq!(kept(FsFlags::ST_NODIRATIME), MsFlags::MS_NODIRATIME | MsFlags::MS_STRICTATIME);
        assert_eq!(kept(FsFlags::empty()), MsFlags::MS_STRICTATIME);
        let nosymfollow = FsFlags::from_bits_retain(0x2000);
        assert_eq!(
            kept(nosymfollow),
            MsFlags::from_bits_retain(256) | MsFlags::MS_STRICTATIME,
            "nosymfollow is kept"
        );
    }
}
