//! The run's sandbox: its settings from the policy (which wins) and `pev.toml`, kept in the run's
//! options so a resumed run is confined the same way, and the [`Sandbox`] built from them with
//! this binary as the helper (`main` hands `pev __sandbox …` to `pev_sandbox::helper_main`).

use std::path::Path;
use std::sync::Arc;

use pev_protocol::Policy;
use pev_protocol::policy::{SandboxMode, SandboxNetwork};
use pev_sandbox::{Limits, Mode, Network, Sandbox, Settings};
use serde_json::{Value, json};

/// What the policy says about the sandbox (its mode may be unset: `pev.toml` then decides).
#[derive(Debug, Clone, Default)]
pub(crate) struct SandboxPolicy {
    pub mode: Option<SandboxMode>,
    pub network: Network,
    pub limits: Limits,
}

impl SandboxPolicy {
    pub(crate) fn from_policy(policy: &Policy) -> Self {
        let network = match (policy.sandbox_network, policy.sandbox_ports.is_empty()) {
            (Some(SandboxNetwork::Open), _) => Network::Open,
            (_, true) => Network::Closed,
            (_, false) => Network::Ports { ports: policy.sandbox_ports.clone() },
        };
        let defaults = Limits::default();
        Self {
            mode: policy.sandbox,
            network,
            limits: Limits {
                file_bytes: policy.sandbox_max_file_bytes.unwrap_or(defaults.file_bytes),
                processes: policy.sandbox_max_processes.unwrap_or(defaults.processes),
            },
        }
    }

    /// The settings of a run: the policy's mode, else `pev.toml`'s, else `auto`.
    pub(crate) fn resolve(&self, file_mode: Option<SandboxMode>) -> Settings {
        let mode = match self.mode.or(file_mode).unwrap_or(SandboxMode::Auto) {
            SandboxMode::Auto => Mode::Auto,
            SandboxMode::Require => Mode::Require,
            SandboxMode::Off => Mode::Off,
        };
        Settings { mode, network: self.network.clone(), limits: self.limits }
    }

    /// The settings a run started with, from its options (`auto` for runs from before the
    /// sandbox existed). The options row is not hash-chained and a command of a run without
    /// bubblewrap can write it, so on resume the mode is never looser than `pev.toml`'s (or
    /// `auto`): a run started with `sandbox: off` resumes confined.
    ///
    /// When the journal cannot vouch for the options (`verified` false: no keyed chain), the
    /// network and limits are not read back either: commands get a closed network and the
    /// default limits, as a run started without a policy would.
    pub(crate) fn from_options(
        options: &Value,
        file_mode: Option<SandboxMode>,
        verified: bool,
    ) -> Self {
        let floor = file_mode.unwrap_or(SandboxMode::Auto);
        let Some(value) = options.get("sandbox").filter(|_| verified) else {
            let stored: Option<SandboxMode> = options
                .pointer("/sandbox/mode")
                .and_then(|m| serde_json::from_value(m.clone()).ok());
            return Self { mode: Some(stored.map_or(floor, |m| m.max(floor))), ..Self::default() };
        };
        let stored: Option<SandboxMode> =
            value.get("mode").and_then(|m| serde_json::from_value(m.clone()).ok());
        let mode = Some(stored.map_or(floor, |m| m.max(floor)));
        let network = value
            .get("network")
            .and_then(|n| serde_json::from_value(n.clone()).ok())
            .unwrap_or_default();
        let limits = value
            .get("limits")
            .and_then(|l| serde_json::from_value(l.clone()).ok())
            .unwrap_or_default();
        Self { mode, network, limits }
    }
}

/// The run options' `sandbox` entry.
pub(crate) fn to_options(settings: &Settings) -> Value {
    json!({
        "mode": settings.mode.as_str(),
        "network": settings.network,
        "limits": settings.limits,
    })
}

/// The binary that runs the sandbox helper: the small `pev-sandbox` installed beside `pev`
/// (cheaper to start, twice per command), else `pev` itself (`main` hands `__sandbox` to the
/// helper too).
fn helper() -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let sibling = exe.with_file_name("pev-sandbox");
    Some(if sibling.is_file() { sibling } else { exe })
}

/// The sandbox of a run, probed now; the run's journal `db` is kept out of every command's
/// reach: its directory, or, when that directory holds the workspace, the journal's files; and
/// `also` (a shared journal's unix socket directories: a command must not reach the server
/// through them as the user).
pub(crate) fn build(
    settings: Settings,
    journal: Option<(&Path, &Path)>,
    also: &[std::path::PathBuf],
) -> Arc<Sandbox> {
    let helper = helper();
    let mut sandbox = Sandbox::new(settings, helper);
    for path in also {
        sandbox.hide(path.clone());
    }
    if let Some((workspace, db)) = journal {
        let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let ws = canonical(workspace);
        match db.parent().map(canonical) {
            Some(dir) if !ws.starts_with(&dir) => sandbox.protect(dir),
            Some(dir) => {
                let name =
                    db.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                for suffix in ["", "-wal", "-shm", "-journal"] {
                    sandbox.protect(dir.join(format!("{name}{suffix}")));
                }
            }
            None => {}
        }
    }
    Arc::new(sandbox)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "postgres")]
    #[test]
    fn a_shared_journals_socket_directory_is_kept_from_commands() {
        let at = pev_store::Location::parse("postgresql:///j?host=/run/pg-sock&user=u").unwrap();
        assert_eq!(at.local_sockets(), [std::path::PathBuf::from("/run/pg-sock")]);
        let settings = SandboxPolicy::from_policy(&Policy::default()).resolve(None);
        let sandbox = build(settings, None, &at.local_sockets());
        assert!(sandbox.hidden().contains(&std::path::PathBuf::from("/run/pg-sock")));
        let tcp = pev_store::Location::parse("postgres://u@db.internal/j").unwrap();
        assert!(tcp.local_sockets().is_empty());
    }

    #[test]
    fn the_policy_mode_wins_over_the_file_and_auto_is_the_default() {
        let policy = Policy { sandbox: Some(SandboxMode::Off), ..Policy::default() };
        let settings = SandboxPolicy::from_policy(&policy).resolve(Some(SandboxMode::Require));
        assert_eq!(settings.mode, Mode::Off);
        let settings = SandboxPolicy::from_policy(&Policy::default()).resolve(None);
        assert_eq!(settings.mode, Mode::Auto);
        let settings =
            SandboxPolicy::from_policy(&Policy::default()).resolve(Some(SandboxMode::Require));
        assert_eq!(settings.mode, Mode::Require);
    }

    #[test]
    fn ports_and_open_network_and_limits_come_from_the_policy() {
        let policy = Policy {
            sandbox_ports: vec![8080],
            sandbox_max_file_bytes: Some(10),
            ..Policy::default()
        };
        let settings = SandboxPolicy::from_policy(&policy).resolve(None);
        assert_eq!(settings.network, Network::Ports { ports: vec![8080] });
        assert_eq!(settings.limits.file_bytes, 10);
        let open = Policy {
            sandbox_network: Some(SandboxNetwork::Open),
            sandbox_ports: vec![1],
            ..Policy::default()
        };
        assert_eq!(SandboxPolicy::from_policy(&open).resolve(None).network, Network::Open);
    }

    #[test]
    fn options_round_trip() {
        let policy = Policy {
            sandbox: Some(SandboxMode::Require),
            sandbox_ports: vec![9],
            ..Policy::default()
        };
        let settings = SandboxPolicy::from_policy(&policy).resolve(None);
        let options = json!({ "sandbox": to_options(&settings) });
        let back = SandboxPolicy::from_options(&options, None, true).resolve(None);
        assert_eq!(back, settings);
        let none = SandboxPolicy::from_options(&json!({}), None, true).resolve(None);
        assert_eq!(none.mode, Mode::Auto);
        // Options the journal cannot vouch for: the mode is kept (never below the floor), the
        // network and the limits are not.
        let unverified = SandboxPolicy::from_options(&options, None, false).resolve(None);
        assert_eq!(unverified.mode, Mode::Require);
        assert_eq!(unverified.network, Network::Closed);
        assert_eq!(unverified.limits, Limits::default());
    }

    #[test]
    fn a_resumed_run_is_never_confined_less_than_the_files_say() {
        let off = Policy { sandbox: Some(SandboxMode::Off), ..Policy::default() };
        let options =
            json!({ "sandbox": to_options(&SandboxPolicy::from_policy(&off).resolve(None)) });
        for verified in [true, false] {
            let resumed = SandboxPolicy::from_options(&options, None, verified).resolve(None);
            assert_eq!(resumed.mode, Mode::Auto, "an `off` in the options is raised to auto");
            let resumed =
                SandboxPolicy::from_options(&options, Some(SandboxMode::Require), verified)
                    .resolve(None);
            assert_eq!(resumed.mode, Mode::Require);
        }
    }
}
