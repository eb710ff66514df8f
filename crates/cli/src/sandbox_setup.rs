//! The run's sandbox: its settings from the policy (which wins) and `pev.toml`, kept in the run's
//! options so a resumed run is confined the same way, and the [`Sandbox`] built from them with
//! this binary as the helper (`main` hands `pev __sandbox …` to `pev_sandbox::helper_main`).

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
    /// sandbox existed).
    pub(crate) fn from_options(options: &Value) -> Self {
        let Some(value) = options.get("sandbox") else { return Self::default() };
        let mode = value.get("mode").and_then(|m| serde_json::from_value(m.clone()).ok());
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

/// The sandbox of a run, probed now.
pub(crate) fn build(settings: Settings) -> Arc<Sandbox> {
    let helper = std::env::current_exe().ok();
    Arc::new(Sandbox::new(settings, helper))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let back = SandboxPolicy::from_options(&options).resolve(None);
        assert_eq!(back, settings);
        assert_eq!(SandboxPolicy::from_options(&json!({})).resolve(None).mode, Mode::Auto);
    }
}
