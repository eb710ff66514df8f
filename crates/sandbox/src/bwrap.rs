//! The bubblewrap layer: the arguments that build the namespaces a command runs in.
//!
//! The whole file system read-only; an empty `/tmp` (and, unless the network is open, an empty
//! `/run`: no host sockets such as docker's or D-Bus's); the writable roots bound read-write on
//! top; each protected directory (the journal's) replaced by an empty read-only tmpfs, so a
//! command can neither read, lock nor change it, and a mount point cannot be renamed or removed
//! either; secrets covered by an empty tmpfs (directories) or `/dev/null` (files); a fresh
//! `/dev` and `/proc`; private pid and IPC namespaces (the command sees only its own processes,
//! which all die with it, and no host System V IPC); and a private network namespace unless the
//! policy opens ports or the network.

use std::path::Path;

use crate::spec::{Network, Spec};

use crate::namespaces::HOST_SOCKETS;

/// The arguments for `spec`, whose helper binary is `helper` (bound read-only onto itself last,
/// so that it can start wherever pev is installed: under `/tmp`, which the command sees empty,
/// or under a hidden directory).
pub(crate) fn args(spec: &Spec, root: bool, helper: &Path) -> Vec<String> {
    let mut out: Vec<String> =
        ["--die-with-parent", "--unshare-pid", "--unshare-ipc", "--new-session"]
            .into_iter()
            .map(String::from)
            .collect();
    if spec.network == Network::Closed {
        out.push("--unshare-net".into());
    }
    if root {
        // bwrap keeps a root caller's capabilities unless told; stage 2 drops them again.
        out.extend(["--cap-drop".into(), "ALL".into()]);
    }
    out.extend(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"].map(String::from));
    out.extend(["--tmpfs".into(), "/tmp".into()]);
    if spec.network == Network::Open {
        for path in HOST_SOCKETS.iter().map(Path::new).filter(|p| p.exists()) {
            cover(&mut out, path);
        }
    } else if Path::new("/run").is_dir() {
        out.extend(["--tmpfs".into(), "/run".into()]);
    }
    for path in &spec.writable {
        let p = path.display().to_string();
        out.extend(["--bind".into(), p.clone(), p]);
    }
    for path in &spec.read_only {
        let p = path.display().to_string();
        if path.is_dir() {
            out.extend(["--tmpfs".into(), p.clone(), "--remount-ro".into(), p]);
        } else {
            out.extend(["--ro-bind".into(), "/dev/null".into(), p]);
        }
    }
    // Bound read-only onto themselves: readable, and neither writable nor removable or
    // renamable (a mount point is busy).
    for path in spec.frozen.iter().filter(|p| p.is_file()) {
        let p = path.display().to_string();
        out.extend(["--ro-bind".into(), p.clone(), p]);
    }
    for path in &spec.hidden {
        cover(&mut out, path);
    }
    let helper = helper.display().to_string();
    out.extend(["--ro-bind".into(), helper.clone(), helper]);
    out.extend(["--chdir".into(), spec.cwd.display().to_string()]);
    out
}

/// Hide `path`: an empty tmpfs over a directory, `/dev/null` over anything else.
fn cover(out: &mut Vec<String>, path: &Path) {
    let p = path.display().to_string();
    if path.is_dir() {
        out.extend(["--tmpfs".into(), p]);
    } else {
        out.extend(["--ro-bind".into(), "/dev/null".into(), p]);
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::spec::{Layers, Limits};

    fn spec(network: Network) -> Spec {
        Spec {
            argv: vec!["true".into()],
            cwd: PathBuf::from("/ws"),
            env: Vec::new(),
            writable: vec![PathBuf::from("/ws"), PathBuf::from("/tmp/t")],
            read_only: vec![PathBuf::from("/ws/.pev")],
            frozen: Vec::new(),
            hidden: Vec::new(),
            network,
            limits: Limits::default(),
            layers: Layers {
                landlock: true,
                seccomp: true,
                bubblewrap: true,
                namespaces: false,
                strict: false,
            },
        }
    }

    #[test]
    fn the_journal_is_hidden_read_only_after_the_workspace_is_bound() {
        // A directory is covered by a read-only tmpfs (it must exist to be seen as one).
        let dir = std::env::temp_dir().join(format!("pev-bwrap-test-{}", std::process::id()));
        let journal_dir = dir.join(".pev");
        let _ = std::fs::create_dir_all(&journal_dir);
        let mut spec = spec(Network::Closed);
        spec.read_only = vec![journal_dir.clone(), dir.join("journal.db")];
        let args = args(&spec, false, Path::new("/opt/pev")).join(" ");
        let _ = std::fs::remove_dir_all(&dir);
        let j = journal_dir.display();
        let tmp = args.find("--tmpfs /tmp ").unwrap_or(usize::MAX);
        let ws = args.find("--bind /ws /ws").unwrap_or(usize::MAX);
        let journal = args.find(&format!("--tmpfs {j} --remount-ro {j}")).unwrap_or(0);
        // A file (or one not there yet) is covered by /dev/null.
        assert!(
            args.contains(&format!("--ro-bind /dev/null {}", dir.join("journal.db").display())),
            "{args}"
        );
        assert!(tmp < ws && ws < journal, "{args}");
        assert!(args.contains("--unshare-net") && args.contains("--unshare-ipc"), "{args}");
        assert!(!args.contains("--cap-drop"), "{args}");
        // The helper is visible last, whatever covers its directory.
        assert!(args.ends_with("--ro-bind /opt/pev /opt/pev --chdir /ws"), "{args}");
    }

    #[test]
    fn open_ports_share_the_host_network() {
        let args = args(&spec(Network::Ports { ports: vec![8080] }), true, Path::new("/opt/pev"))
            .join(" ");
        assert!(!args.contains("--unshare-net"), "{args}");
        assert!(args.contains("--cap-drop ALL"), "{args}");
    }
}
