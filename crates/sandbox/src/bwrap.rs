//! The bubblewrap layer: the arguments that build the namespaces a command runs in.
//!
//! The whole file system read-only, the writable roots bound read-write on top, `.pev/` bound
//! read-only again on top of that (a mount point cannot be renamed or removed either), secrets
//! covered by an empty tmpfs (directories) or `/dev/null` (files), a fresh `/dev` and `/proc`, a
//! private pid namespace (the command sees only its own processes, and all die with it), and a
//! private network namespace unless the policy opens ports or the network.

use crate::spec::{Network, Spec};

pub(crate) fn args(spec: &Spec, root: bool) -> Vec<String> {
    let mut out: Vec<String> = ["--die-with-parent", "--unshare-pid", "--new-session"]
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
    for path in &spec.writable {
        let p = path.display().to_string();
        out.extend(["--bind".into(), p.clone(), p]);
    }
    for path in &spec.read_only {
        let p = path.display().to_string();
        out.extend(["--ro-bind".into(), p.clone(), p]);
    }
    for path in &spec.hidden {
        let p = path.display().to_string();
        if path.is_dir() {
            out.extend(["--tmpfs".into(), p]);
        } else {
            out.extend(["--ro-bind".into(), "/dev/null".into(), p]);
        }
    }
    out.extend(["--chdir".into(), spec.cwd.display().to_string()]);
    out
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
            hidden: Vec::new(),
            network,
            limits: Limits::default(),
            layers: Layers { landlock: true, seccomp: true, bubblewrap: true, strict: false },
        }
    }

    #[test]
    fn the_journal_is_bound_read_only_after_the_workspace_read_write() {
        let args = args(&spec(Network::Closed), false).join(" ");
        let ws = args.find("--bind /ws /ws").unwrap_or(usize::MAX);
        let journal = args.find("--ro-bind /ws/.pev /ws/.pev").unwrap_or(0);
        assert!(ws < journal, "{args}");
        assert!(args.contains("--unshare-net"), "{args}");
        assert!(!args.contains("--cap-drop"), "{args}");
    }

    #[test]
    fn open_ports_share_the_host_network() {
        let args = args(&spec(Network::Ports { ports: vec![8080] }), true).join(" ");
        assert!(!args.contains("--unshare-net"), "{args}");
        assert!(args.contains("--cap-drop ALL"), "{args}");
    }
}
