//! One `pev.toml` as written: the TOML tables, read strictly (an unknown key, an unknown role or
//! provider, a negative price is an error at its file, line and column), before the layers are
//! merged and paths resolved by the parent module.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Deserializer};

use super::ConfigError;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    #[serde(default)]
    pub roles: RolesTable,
    #[serde(default)]
    pub providers: ProvidersTable,
    /// Model name -> price, overriding (or adding to) the built-in prices.
    #[serde(default)]
    pub prices: BTreeMap<String, PriceEntry>,
    #[serde(default)]
    pub retry: RetryTable,
    #[serde(default)]
    pub hooks: HooksTable,
    /// `auto`, `require` or `off`: how commands are confined (a policy's `sandbox` wins).
    pub sandbox: Option<pev_protocol::policy::SandboxMode>,
    /// `[mcp_servers.NAME]`: MCP servers whose tools `pev agent` offers (the user's file only).
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerTable>,
    /// `[telemetry]`: where traces go (the user's file only).
    pub telemetry: Option<TelemetryTable>,
    /// `store = "postgres://…"`: the journal runs are kept in (the user's file only).
    pub store: Option<StoreUrl>,
    /// `[oracle]`: the files a run is checked by (a workspace's file may only add to them).
    pub oracle: Option<pev_protocol::oracle::OracleSettings>,
}

/// The `store` setting: a journal's path or URL, which may hold a password, so its `Debug`
/// shows the scheme only.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct StoreUrl(String);

impl StoreUrl {
    /// The setting as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.split_once(':') {
            Some((scheme, _)) => write!(f, "StoreUrl({scheme}:…)"),
            None => write!(f, "StoreUrl(…)"),
        }
    }
}

/// `[telemetry]`: an OTLP/HTTP endpoint for traces (the `OTEL_*` variables win).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TelemetryTable {
    /// The collector's base URL (`http://localhost:4318`); `/v1/traces` is appended.
    pub endpoint: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Goal, tool arguments and outputs, plans in the spans (off by default).
    pub capture_content: Option<bool>,
    #[serde(default, deserialize_with = "positive_ms")]
    pub timeout_ms: Option<u64>,
}

/// `[mcp_servers.NAME]`: a stdio MCP server.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpServerTable {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "positive_ms")]
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RolesTable {
    pub planner: Option<RoleTable>,
    pub executor: Option<RoleTable>,
    pub verifier: Option<RoleTable>,
}

/// `[roles.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RoleTable {
    pub provider: Option<ProviderSpec>,
    #[serde(default, deserialize_with = "non_empty")]
    pub model: Option<String>,
    #[serde(default, deserialize_with = "non_empty")]
    pub base_url: Option<String>,
    pub max_tokens: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProvidersTable {
    pub anthropic: Option<ProviderTable>,
    pub openai: Option<ProviderTable>,
}

/// `[providers.NAME]`: what every role using that provider shares.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProviderTable {
    #[serde(default, deserialize_with = "non_empty")]
    pub base_url: Option<String>,
    /// The environment variable that holds the key (instead of ANTHROPIC_API_KEY /
    /// OPENAI_API_KEY).
    #[serde(default, deserialize_with = "non_empty")]
    pub api_key_env: Option<String>,
    pub request_timeout_secs: Option<u32>,
    pub idle_timeout_secs: Option<u32>,
}

/// `[prices."MODEL"]`, USD per million tokens. Cache prices left out cost as plain input.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PriceEntry {
    #[serde(deserialize_with = "rate")]
    pub input_per_mtok: f64,
    #[serde(deserialize_with = "rate")]
    pub output_per_mtok: f64,
    #[serde(default, deserialize_with = "some_rate")]
    pub cache_read_per_mtok: Option<f64>,
    #[serde(default, deserialize_with = "some_rate")]
    pub cache_write_per_mtok: Option<f64>,
}

/// `[retry]`: the limits of [`crate::retry::RetryPolicy`]; those left out keep its defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetryTable {
    pub max_attempts: Option<u32>,
    pub base_delay_ms: Option<u32>,
    pub max_delay_secs: Option<u32>,
    pub max_total_wait_secs: Option<u32>,
}

/// `[hooks]`: each event's commands (one command line or a list of them) and how long each may
/// run.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HooksTable {
    #[serde(default, deserialize_with = "commands")]
    pub pre_tool_use: Vec<String>,
    #[serde(default, deserialize_with = "commands")]
    pub post_tool_use: Vec<String>,
    #[serde(default, deserialize_with = "commands")]
    pub step_finished: Vec<String>,
    #[serde(default, deserialize_with = "commands")]
    pub stop: Vec<String>,
    #[serde(default, deserialize_with = "positive_ms")]
    pub timeout_ms: Option<u64>,
}

/// `provider = "…"` as written: `anthropic`, `openai` or `script:PATH` (PATH not yet resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ProviderSpec {
    Anthropic,
    OpenAi,
    Script(String),
}

impl ProviderSpec {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "anthropic" => Ok(Self::Anthropic),
            "openai" => Ok(Self::OpenAi),
            other => match other.strip_prefix("script:") {
                Some(path) if !path.trim().is_empty() => Ok(Self::Script(path.trim().to_owned())),
                Some(_) => Err("`script:` needs a file: `script:PATH`".to_owned()),
                None => Err(format!(
                    "unknown provider `{other}`: expected `anthropic`, `openai` or `script:PATH`"
                )),
            },
        }
    }
}

impl<'de> Deserialize<'de> for ProviderSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

fn non_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let text = String::deserialize(deserializer)?;
    let text = text.trim();
    if text.is_empty() {
        Err(serde::de::Error::custom("must not be empty"))
    } else {
        Ok(Some(text.to_owned()))
    }
}

/// A hook: one command line, or a list of them; none may be blank.
fn commands<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    struct Commands;

    impl<'de> serde::de::Visitor<'de> for Commands {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a command line or a list of command lines")
        }

        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            command(text).map(|c| vec![c])
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(text) = seq.next_element::<String>()? {
                out.push(command(&text)?);
            }
            Ok(out)
        }
    }

    deserializer.deserialize_any(Commands)
}

fn command<E: serde::de::Error>(text: &str) -> Result<String, E> {
    if text.trim().is_empty() {
        Err(E::custom("a hook command must not be empty"))
    } else {
        Ok(text.to_owned())
    }
}

fn positive_ms<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    match u64::deserialize(deserializer)? {
        0 => Err(serde::de::Error::custom("timeout_ms must be at least 1")),
        ms => Ok(Some(ms)),
    }
}

fn rate<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    let value = f64::deserialize(deserializer)?;
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(serde::de::Error::custom(format!(
            "a price must be a non-negative number of USD per million tokens, not {value}"
        )))
    }
}

fn some_rate<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    rate(deserializer).map(Some)
}

/// Reads `path`: `Ok(None)` when there is no such file, an error when it cannot be read or
/// parsed.
pub(super) fn read(path: &Path) -> Result<Option<FileConfig>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(ConfigError::Read { path: path.to_path_buf(), message: e.to_string() });
        }
    };
    parse(path, &text).map(Some)
}

/// Parses the text of `path`.
pub(super) fn parse(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map_or((1, 1), |span| line_column(text, span.start));
        ConfigError::Parse {
            path: path.to_path_buf(),
            line,
            column,
            message: e.message().trim().to_owned(),
        }
    })
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    // Back off to a char boundary so the slice below cannot fail on a span inside a character.
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end = end.saturating_sub(1);
    }
    let before = text.get(..end).unwrap_or_default();
    let line = before.matches('\n').count().saturating_add(1);
    let line_start = before.rfind('\n').map_or(0, |i| i.saturating_add(1));
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()).saturating_add(1);
    (line, column)
}
