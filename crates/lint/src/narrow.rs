//! A policy from a file a run's commands could have written (one inside the workspace) may
//! narrow what the user's own configuration allows, never widen it.
//!
//! [`narrow`] keeps every key of such a document that tightens the default policy (more denied
//! tools and tokens, more approvals and bounds, a stricter sandbox, lower limits, a raised
//! severity) and drops every one that would loosen it (the sandbox off, the network or a port
//! opened, higher limits, hosts allowed, findings lowered or weighed less, fewer sensitive
//! sources or external sinks, tests the runs may change), saying what it dropped. The rule is
//! the one Codex and Claude Code apply to settings found in a project: they can only narrow
//! what the user allowed.

use pev_protocol::LintCode;
use pev_protocol::lint::Level;
use pev_protocol::policy::{
    DEFAULT_EXTERNAL_SINKS, DEFAULT_SENSITIVE_SOURCES, LevelOverride, Policy, SandboxMode,
    SandboxNetwork,
};

/// `policy` with every widening of the default policy removed, and one line per removal
/// (`key: what was asked`). `floor` is the sandbox mode the user's own configuration asks for
/// (`auto` when it says nothing): the document may raise it, never lower it.
pub fn narrow(mut policy: Policy, floor: SandboxMode) -> (Policy, Vec<String>) {
    let defaults = Policy::default();
    let mut dropped = Vec::new();
    if let Some(mode) = policy.sandbox
        && mode < floor
    {
        dropped.push(format!("sandbox: {} (below {})", mode_name(mode), mode_name(floor)));
        policy.sandbox = None;
    }
    if policy.sandbox_network == Some(SandboxNetwork::Open) {
        dropped.push("sandbox_network: open".into());
        policy.sandbox_network = None;
    }
    if !policy.sandbox_ports.is_empty() {
        let ports: Vec<String> = policy.sandbox_ports.iter().map(u16::to_string).collect();
        dropped.push(format!("sandbox_ports: [{}]", ports.join(", ")));
        policy.sandbox_ports.clear();
    }
    let limits = pev_limits();
    if let Some(bytes) = policy.sandbox_max_file_bytes.filter(|b| *b > limits.0) {
        dropped.push(format!("sandbox_max_file_bytes: {bytes} (above the default {})", limits.0));
        policy.sandbox_max_file_bytes = None;
    }
    if let Some(n) = policy.sandbox_max_processes.filter(|n| *n > limits.1) {
        dropped.push(format!("sandbox_max_processes: {n} (above the default {})", limits.1));
        policy.sandbox_max_processes = None;
    }
    if !policy.allow_hosts.is_empty() {
        dropped.push(format!("allow_hosts: {:?}", policy.allow_hosts));
        policy.allow_hosts.clear();
    }
    if policy.max_steps > defaults.max_steps {
        dropped.push(format!(
            "max_steps: {} (above the default {})",
            policy.max_steps, defaults.max_steps
        ));
        policy.max_steps = defaults.max_steps;
    }
    if policy.fail_risk_threshold > defaults.fail_risk_threshold {
        dropped.push(format!(
            "fail_risk_threshold: {} (above the default {})",
            policy.fail_risk_threshold, defaults.fail_risk_threshold
        ));
        policy.fail_risk_threshold = defaults.fail_risk_threshold;
    }
    policy.severity.retain(|key, level| {
        let Ok(code) = key.parse::<LintCode>() else { return true }; // refused when compiled
        let keep = rank(Some(*level)) >= rank(default_override(code.default_level()));
        if !keep {
            dropped.push(format!("severity.{key}: {}", override_name(*level)));
        }
        keep
    });
    policy.risk_weights.retain(|key, weight| {
        let Ok(code) = key.parse::<LintCode>() else { return true };
        let default = match code.default_level() {
            Level::Error => 0.2,
            Level::Warning => 0.05,
        };
        let keep = *weight >= default;
        if !keep {
            dropped.push(format!("risk_weights.{key}: {weight} (below the default {default})"));
        }
        keep
    });
    for (key, list, builtin) in [
        ("sensitive_sources", &mut policy.sensitive_sources, DEFAULT_SENSITIVE_SOURCES),
        ("external_sinks", &mut policy.external_sinks, DEFAULT_EXTERNAL_SINKS),
    ] {
        if let Some(items) = list.as_mut() {
            let missing: Vec<&str> =
                builtin.iter().copied().filter(|d| !items.iter().any(|i| i == d)).collect();
            if !missing.is_empty() {
                dropped.push(format!("{key} without {missing:?} (kept)"));
                items.extend(missing.into_iter().map(str::to_owned));
            }
        }
    }
    if let Some(oracle) = policy.oracle.as_mut()
        && !oracle.allow.is_empty()
    {
        dropped.push(format!("oracle.allow: {:?}", oracle.allow));
        oracle.allow.clear();
    }
    (policy, dropped)
}

/// The sandbox's default limits (file bytes, processes), as `pev-sandbox` sets them.
fn pev_limits() -> (u64, u64) {
    (4 * 1024 * 1024 * 1024, 4096)
}

/// Strictness of a level: off < warning < error.
fn rank(level: Option<LevelOverride>) -> u8 {
    match level {
        Some(LevelOverride::Off) | None => 0,
        Some(LevelOverride::Warning) => 1,
        Some(LevelOverride::Error) => 2,
    }
}

fn default_override(level: Level) -> Option<LevelOverride> {
    Some(match level {
        Level::Error => LevelOverride::Error,
        Level::Warning => LevelOverride::Warning,
    })
}

fn override_name(level: LevelOverride) -> &'static str {
    match level {
        LevelOverride::Error => "error",
        LevelOverride::Warning => "warning",
        LevelOverride::Off => "off",
    }
}

fn mode_name(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::Off => "off",
        SandboxMode::Auto => "auto",
        SandboxMode::Require => "require",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Policy {
        serde_yaml_ng::from_str(yaml).expect("policy")
    }

    #[test]
    fn every_widening_is_dropped_and_named() {
        let (policy, dropped) = narrow(
            parse(
                "sandbox: off\nsandbox_network: open\nsandbox_ports: [5432]\n\
                 sandbox_max_file_bytes: 99999999999999\nsandbox_max_processes: 100000\n\
                 allow_hosts: [evil.example]\nmax_steps: 1000\nfail_risk_threshold: 1.0\n\
                 severity: {PATH_TRAVERSAL: off}\nrisk_weights: {PATH_TRAVERSAL: 0.0}\n\
                 sensitive_sources: []\nexternal_sinks: [x.*]\n\
                 oracle: {allow: ['tests/**'], protect: ['spec/**']}\n",
            ),
            SandboxMode::Auto,
        );
        assert_eq!(policy.sandbox, None);
        assert_eq!(policy.sandbox_network, None);
        assert!(policy.sandbox_ports.is_empty() && policy.allow_hosts.is_empty());
        assert_eq!((policy.sandbox_max_file_bytes, policy.sandbox_max_processes), (None, None));
        assert_eq!((policy.max_steps, policy.fail_risk_threshold), (100, 0.8));
        assert!(policy.severity.is_empty() && policy.risk_weights.is_empty());
        let defaults: Vec<String> =
            DEFAULT_SENSITIVE_SOURCES.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(policy.sensitive_sources, Some(defaults));
        let sinks = policy.external_sinks.expect("sinks");
        assert!(sinks.contains(&"x.*".to_string()) && sinks.contains(&"http.request".into()));
        let oracle = policy.oracle.expect("oracle");
        assert!(oracle.allow.is_empty() && oracle.protect == ["spec/**"]);
        assert_eq!(dropped.len(), 13, "{dropped:#?}");
        assert!(dropped[0].starts_with("sandbox: off"), "{dropped:?}");
    }

    #[test]
    fn every_tightening_is_kept_and_nothing_is_said() {
        let text = "sandbox: require\nsandbox_network: closed\nsandbox_max_file_bytes: 1000\n\
                    sandbox_max_processes: 64\ndeny_tools: [shell.exec]\nallow_tools: [file.*]\n\
                    approve_tools: [file.write]\ndeny_tokens_regex: ['rm -rf']\nmax_steps: 5\n\
                    fail_risk_threshold: 0.3\nseverity: {ORACLE_WRITE: error}\n\
                    risk_weights: {PATH_TRAVERSAL: 0.9}\nbounds: {'db.delete.limit': [0, 10]}\n\
                    oracle: {protect: ['spec/**']}\n";
        let (policy, dropped) = narrow(parse(text), SandboxMode::Auto);
        assert!(dropped.is_empty(), "{dropped:?}");
        assert_eq!(policy, parse(text));
    }

    #[test]
    fn the_users_own_mode_is_the_floor() {
        let (policy, dropped) = narrow(parse("sandbox: auto\n"), SandboxMode::Require);
        assert_eq!(policy.sandbox, None);
        assert_eq!(dropped, ["sandbox: auto (below require)"]);
        let (policy, dropped) = narrow(parse("sandbox: require\n"), SandboxMode::Require);
        assert_eq!((policy.sandbox, dropped.len()), (Some(SandboxMode::Require), 0));
        // Raising a warning to an error tightens; lowering an error to a warning does not.
        let (policy, dropped) =
            narrow(parse("severity: {PATH_TRAVERSAL: warning}\n"), SandboxMode::Auto);
        assert!(policy.severity.is_empty());
        assert_eq!(dropped, ["severity.PATH_TRAVERSAL: warning"]);
    }
}
