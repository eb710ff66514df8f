//! The lint and run policy, as written in YAML (CONTRACTS.md §6).
//!
//! plan-lint's keys keep their documented meaning; pev's additions sit beside them. Unknown keys
//! are an error naming the key (`deny_unknown_fields`): a misspelt `alow_tools` must not silently
//! allow every tool. This type is only the document; `pev-lint` compiles it (regexes, globs,
//! bounds) and reports what is wrong with it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a policy moves a code: to an error, to a warning, or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LevelOverride {
    Error,
    Warning,
    Off,
}

fn default_max_steps() -> usize {
    100
}

fn default_threshold() -> f64 {
    0.8
}

/// A policy document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Tools a plan may use: exact names or globs like `db.*`. Empty means all.
    #[serde(default)]
    pub allow_tools: Vec<String>,
    /// Tools a plan may never use (exact names or globs); wins over allow_tools.
    #[serde(default)]
    pub deny_tools: Vec<String>,
    /// Tools whose steps need a person's approval before they run.
    #[serde(default)]
    pub approve_tools: Vec<String>,
    /// Tools that must only read, in addition to `db.query_ro` and `sql.query_ro`.
    #[serde(default)]
    pub readonly_tools: Vec<String>,
    /// Tools whose results are sensitive. Default: `db.*`, `sql.*`, `file.read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitive_sources: Option<Vec<String>>,
    /// Tools that send data out. Default: `notify.*`, `http.request`, `email.*`, `payments.*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_sinks: Option<Vec<String>>,
    /// Hosts that assertions and http.request may reach besides loopback.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// `"<tool>.<arg>": [min, max]`; the tool name may contain dots (the longest match wins), and
    /// the argument may be a dotted path into nested parameters.
    #[serde(default)]
    pub bounds: BTreeMap<String, [f64; 2]>,
    /// Regexes that must not match any string value in the plan.
    #[serde(default)]
    pub deny_tokens_regex: Vec<String>,
    #[serde(default = "default_max_steps")]
    pub max_steps: usize,
    /// Risk weight per lint code (case-insensitive).
    #[serde(default)]
    pub risk_weights: BTreeMap<String, f64>,
    /// A risk score at or above this is an error.
    #[serde(default = "default_threshold")]
    pub fail_risk_threshold: f64,
    /// Per-code level overrides: `error`, `warning` or `off`.
    #[serde(default)]
    pub severity: BTreeMap<String, LevelOverride>,
    /// Paths (relative to the policy file) of Rego policies whose `violations` add findings.
    #[serde(default)]
    pub rego: Vec<String>,
    /// How `shell.exec` and `command_succeeds` are confined: `auto` (the strongest this machine
    /// offers, recorded), `require` (refuse to run a command without the full sandbox), `off`.
    /// Unset: `pev.toml`'s `sandbox`, else `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMode>,
    /// TCP ports commands may bind and connect to (servers on loopback that a later step uses).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandbox_ports: Vec<u16>,
    /// `closed` (default) or `open`: whether commands reach the network at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_network: Option<SandboxNetwork>,
    /// The largest file a command may write, in bytes (default 4 GiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_max_file_bytes: Option<u64>,
    /// The most processes a (non-root) user's commands may have at once (default 4096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_max_processes: Option<u64>,
    /// Files a run is checked by beyond the inferred tests (`protect`), and those its runs may
    /// change (`allow`): globs, as `[oracle]` in `pev.toml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle: Option<crate::oracle::PlanOracle>,
}

/// The `sandbox` key of a policy or `pev.toml`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    Off,
    Auto,
    Require,
}

/// The `sandbox_network` key of a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SandboxNetwork {
    Closed,
    Open,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            allow_tools: Vec::new(),
            deny_tools: Vec::new(),
            approve_tools: Vec::new(),
            readonly_tools: Vec::new(),
            sensitive_sources: None,
            external_sinks: None,
            allow_hosts: Vec::new(),
            bounds: BTreeMap::new(),
            deny_tokens_regex: Vec::new(),
            max_steps: default_max_steps(),
            risk_weights: BTreeMap::new(),
            fail_risk_threshold: default_threshold(),
            severity: BTreeMap::new(),
            rego: Vec::new(),
            sandbox: None,
            sandbox_ports: Vec::new(),
            sandbox_network: None,
            sandbox_max_file_bytes: None,
            sandbox_max_processes: None,
            oracle: None,
        }
    }
}

/// The default sensitive sources.
pub const DEFAULT_SENSITIVE_SOURCES: &[&str] = &["db.*", "sql.*", "file.read"];
/// The default external sinks.
pub const DEFAULT_EXTERNAL_SINKS: &[&str] = &["notify.*", "http.request", "email.*", "payments.*"];
