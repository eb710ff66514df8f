//! pev's own namespaces, for a machine without bubblewrap: where the kernel lets an
//! unprivileged process make a user namespace, stage 2 makes one with private mount, IPC and
//! (unless the network is open) network namespaces, and mounts over what a command must not
//! reach, as bubblewrap would: the journal's directories become empty read-only tmpfs, the
//! run's oracle files are bound read-only onto themselves, the secrets and the shared journal's
//! socket directory are covered, and so is `/run` (host sockets: Docker's, D-Bus, a database's)
//! when the network is closed, or the known host sockets one by one when it is open.
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
    let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    mount(None::<&str>, path, None::<&str>, flags, None::<&str>).map_err(failed)
}

/// Whether this process can make the namespaces (run in the probe's throw-away process).
pub(crate) fn available() -> Result<(), String> {
    if std::env::var(NAMESPACES_VAR).as_deref() == Ok("off") {
        return Err(format!("pev's namespaces: turned off ({NAMESPACES_VAR}=off)"));
    }
    private(true).map_err(|e| format!("pev's namespaces: {e}"))?;
    cover(Path::new("/proc/self/attr"))
        .or_else(|_| cover(&std::env::temp_dir()))
        .map_err(|e| format!("pev's namespaces: {e}"))
}
