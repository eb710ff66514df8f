//! What this machine can enforce, found by trying it in child processes (a restriction cannot be
//! undone, so pev never probes in its own process).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

/// The facts a sandbox is chosen from; `pev doctor` prints them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Probe {
    /// The kernel's Landlock ABI, when a restriction actually applied in a child.
    pub landlock_abi: Option<i32>,
    /// A seccomp filter applied in a child.
    pub seccomp: bool,
    /// `bwrap` on PATH, with its version, when it ran a command in new pid and mount namespaces.
    pub bubblewrap: Option<Bubblewrap>,
    /// Unprivileged user namespaces are enabled (what bubblewrap needs when not run as root).
    pub user_namespaces: bool,
    /// pev's own helper made its user, mount, IPC and network namespaces in a child (what it
    /// uses in bubblewrap's place).
    #[serde(default)]
    pub namespaces: bool,
    pub root: bool,
    /// Why a probe failed, for `pev doctor`.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bubblewrap {
    pub path: PathBuf,
    pub version: String,
}

/// What the helper's `probe` stage prints (one JSON object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Inside {
    pub landlock_abi: Option<i32>,
    pub seccomp: bool,
    #[serde(default)]
    pub namespaces: bool,
    pub notes: Vec<String>,
}

/// Run inside the `probe` stage: restrict this (throw-away) process and report what applied.
pub(crate) fn inside() -> Inside {
    let mut notes = Vec::new();
    // First: the namespaces must be made before the restrictions below forbid it.
    let namespaces = match crate::namespaces::available() {
        Ok(()) => true,
        Err(e) => {
            notes.push(e);
            false
        }
    };
    let spec = crate::spec::Spec {
        argv: Vec::new(),
        cwd: PathBuf::from("/"),
        env: Vec::new(),
        writable: Vec::new(),
        read_only: Vec::new(),
        frozen: Vec::new(),
        hidden: Vec::new(),
        network: crate::spec::Network::Closed,
        limits: crate::spec::Limits::default(),
        layers: crate::spec::Layers {
            landlock: true,
            seccomp: true,
            bubblewrap: false,
            namespaces: false,
            strict: false,
        },
    };
    match crate::confine::restrict(&spec) {
        Ok(applied) => {
            if applied.landlock_abi.is_none() {
                notes.push("Landlock: not enabled in this kernel".into());
            }
            Inside {
                landlock_abi: applied.landlock_abi,
                seccomp: applied.seccomp,
                namespaces,
                notes,
            }
        }
        Err(e) => {
            notes.push(e);
            Inside { landlock_abi: None, seccomp: false, namespaces, notes }
        }
    }
}

/// Probe the machine, running `helper` for the kernel features.
pub fn probe(helper: Option<&Path>) -> Probe {
    let mut probe = Probe {
        root: nix::unistd::geteuid().is_root(),
        user_namespaces: user_namespaces(),
        ..Probe::default()
    };
    match helper {
        Some(helper) => match run_inside(helper) {
            Ok(inside) => {
                probe.landlock_abi = inside.landlock_abi;
                probe.seccomp = inside.seccomp;
                probe.namespaces = inside.namespaces;
                probe.notes.extend(inside.notes);
            }
            Err(e) => probe.notes.push(e),
        },
        None => probe.notes.push("no sandbox helper binary: kernel features not probed".into()),
    }
    match bubblewrap() {
        Ok(found) => probe.bubblewrap = Some(found),
        Err(e) => probe.notes.push(e),
    }
    probe
}

fn run_inside(helper: &Path) -> Result<Inside, String> {
    let mut command = Command::new(helper);
    command.args(["__sandbox", "probe"]).env_clear();
    if let Some(v) = std::env::var_os(crate::namespaces::NAMESPACES_VAR) {
        command.env(crate::namespaces::NAMESPACES_VAR, v);
    }
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run the sandbox probe `{}`: {e}", helper.display()))?;
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "the sandbox probe printed no report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}

/// `bwrap` on PATH that can really make the namespaces pev uses.
fn bubblewrap() -> Result<Bubblewrap, String> {
    let path = find_on_path("bwrap").ok_or("bubblewrap: `bwrap` is not on PATH")?;
    let version = Command::new(&path)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("bubblewrap: cannot run {}: {e}", path.display()))?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let trial = Command::new(&path)
        .args(["--die-with-parent", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/"])
        .args(["--dev", "/dev", "--proc", "/proc", "--", "/bin/sh", "-c", "exit 0"])
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("bubblewrap: cannot run {}: {e}", path.display()))?;
    if !trial.status.success() {
        return Err(format!(
            "bubblewrap: {} is installed but cannot create namespaces here: {}",
            path.display(),
            String::from_utf8_lossy(&trial.stderr).trim()
        ));
    }
    Ok(Bubblewrap { path, version })
}

pub(crate) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
}

fn user_namespaces() -> bool {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string());
    let max = read("/proc/sys/user/max_user_namespaces").and_then(|s| s.parse::<u64>().ok());
    let debian = read("/proc/sys/kernel/unprivileged_userns_clone");
    max.is_some_and(|m| m > 0) && debian.is_none_or(|v| v != "0")
}

/// The cgroup v2 directory this process could place a run's commands in (memory and
/// process-count limits, killing a whole group at once), or why there is none: a v1 or hybrid
/// hierarchy, no `memory`/`pids` controller, or a group this user cannot write (not delegated).
/// Reported by `pev doctor`; runs do not use cgroups yet.
pub fn cgroup_v2() -> Result<PathBuf, String> {
    let root = Path::new("/sys/fs/cgroup");
    if !root.join("cgroup.controllers").is_file() {
        return Err("/sys/fs/cgroup is not a cgroup v2 (unified) hierarchy".into());
    }
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let rel = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("this process is in no cgroup v2 group")?;
    let dir = root.join(rel.trim_start_matches('/'));
    let controllers = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    let missing: Vec<&str> = ["memory", "pids"]
        .into_iter()
        .filter(|c| !controllers.split_whitespace().any(|x| x == *c))
        .collect();
    if !missing.is_empty() {
        return Err(format!("{}: no {} controller", dir.display(), missing.join(" or ")));
    }
    let writable = nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK).is_ok();
    if !writable {
        return Err(format!("{} is not delegated to this user", dir.display()));
    }
    Ok(dir)
}
