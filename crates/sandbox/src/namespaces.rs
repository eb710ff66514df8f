//! pev's own namespaces, for a machine without bubblewrap: where the kernel lets an
//! unprivileged process make a user namespace, stage 2 makes one with private mount, IPC and
//! (unless the network is open) network namespaces, and mounts over what a command must not
//! reach, as bubblewrap would: the journal's directories become empty read-only tmpfs, the
//! run's oracle files are bound read-only onto themselves, the secrets and the shared journal's
//! socket directory are covered, and so is `/run` (host sockets: Docker's, D-Bus, a database's)
//! when the network is closed, or the known host sockets one by one when it is open.
//!
//! Everything in `/tmp` is covered but the workspace and the run's `TMPDIR` (other programs'
//! sockets live there). What bubblewrap gives and this does not: a private pid namespace
//! (commands see host processes, though Landlock keeps them from signalling any), and entries
//! made in `/tmp` after the command started are not covered. The probe tries it in a throw-away process; `PEV_SANDBOX_NAMESPACES=off`
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

/// Everything in `/tmp` but what holds (or lies in) a path in `keep` (the workspace, the run's
/// `TMPDIR`): other users' and programs' sockets live there (tmux's and ssh-agent's give a
/// shell outside), as do their files. Bubblewrap mounts an empty `/tmp` and binds the kept
/// paths back; without it each entry is covered where it is.
fn cover_tmp(keep: &[&Path]) -> Result<(), String> {
    let tmp = Path::new("/tmp");
    let Ok(entries) = std::fs::read_dir(tmp) else { return Ok(()) };
    let resolve = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let keep: Vec<PathBuf> = keep.iter().map(|p| resolve(p)).collect();
    for entry in entries.flatten() {
        let path = entry.path();
        if keep.iter().any(|k| k.starts_with(&path) || path.starts_with(k)) {
            continue;
        }
        // Something that vanished since the listing needs no cover.
        if let Err(e) = cover(&path)
            && path.symlink_metadata().is_ok()
        {
            return Err(e);
        }
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
