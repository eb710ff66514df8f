//! Which model plays which role: `pev.toml` maps the planner, the executor and the verifier to a
//! provider and a model, sets provider endpoints and key variables, and overrides prices.
//!
//! ```toml
//! [roles.planner]            # also executor, verifier
//! provider = "anthropic"     # or "openai", or "script:PATH" (relative to this file's dir)
//! model = "claude-opus-4-6"
//! base_url = "…"             # optional: this role's endpoint
//! max_tokens = 8192          # optional
//!
//! [providers.openai]         # also anthropic; every key optional
//! base_url = "http://localhost:11434/v1"
//! api_key_env = "MY_KEY_VAR" # read the key from this variable instead of OPENAI_API_KEY
//! request_timeout_secs = 300  # one call, not streamed (default 300)
//! idle_timeout_secs = 60      # silence allowed inside a stream (default 60)
//!
//! [prices."qwen2.5:7b"]      # USD per million tokens; cache prices default to the input price
//! input_per_mtok = 0.0
//! output_per_mtok = 0.0
//! cache_read_per_mtok = 0.0
//! cache_write_per_mtok = 0.0
//!
//! [retry]                    # every key optional; see RetryPolicy
//! max_attempts = 3          # defaults shown
//! base_delay_ms = 500
//! max_delay_secs = 30
//! max_total_wait_secs = 60
//!
//! [hooks]                    # every key optional; see HooksConfig
//! pre_tool_use = "./hooks/guard.sh"            # a command line (sh -c, in the workspace) …
//! post_tool_use = ["./hooks/a.sh", "./hooks/b.sh"]  # … or a list of them, run in order
//! step_finished = "…"
//! stop = "…"
//! timeout_ms = 5000          # per command, for this file's hooks
//! ```
//!
//! Any other key is an error naming the file, line and column.
//!
//! Where each value comes from, highest first, decided per key:
//!
//! 1. the environment: `PEV_PLANNER_MODEL`, `PEV_EXECUTOR_MODEL`, `PEV_VERIFIER_MODEL` (a role's
//!    model); `PEV_PLANNER_PROVIDER`, `PEV_EXECUTOR_PROVIDER`, `PEV_VERIFIER_PROVIDER` (a role's
//!    provider), then `PEV_PROVIDER` (every role's provider); `ANTHROPIC_BASE_URL`,
//!    `OPENAI_BASE_URL` (a provider's endpoint). A `script:PATH` from the environment is
//!    relative to the workspace. Empty variables count as unset;
//! 2. the workspace's `pev.toml`;
//! 3. the user's `pev.toml`: `$XDG_CONFIG_HOME/pev/pev.toml`, else `$HOME/.config/pev/pev.toml`;
//! 4. the built-in defaults: a strong planner (`claude-opus-4-6`), a balanced executor
//!    (`claude-sonnet-4-5`) and a cheap verifier (`claude-haiku-4-5`), all on `anthropic`.
//!
//! The environment goes first because it is the per-invocation override
//! (`PEV_PLANNER_MODEL=… pev run`); the workspace beats the user because a project's needs are
//! more specific than a person's habits. A role's own `base_url` is more specific than its
//! provider's (`[providers.NAME] base_url` or `*_BASE_URL`) and wins over it, but only when it
//! comes from the layer that chose the role's provider or a higher one: a URL meant for a local
//! OpenAI-compatible server is not sent to Anthropic because a higher layer switched providers.
//!
//! Keys are read from `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`, or the variable named by
//! `[providers.NAME] api_key_env`, and are never shown: [`Config`]'s `Debug` redacts them and
//! [`Config::key_vars`] says only whether each is set. Every resolved value records its
//! [`Source`], for `pev doctor`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::ModelClient;
use crate::anthropic::{AnthropicClient, AnthropicConfig};
use crate::cost::{Price, PriceMatch, PriceTable};
use crate::error::ProviderError;
use crate::http::Timeouts;
use crate::openai::{OpenAiClient, OpenAiConfig};
use crate::retry::{RetryPolicy, Retrying};
use crate::script::ScriptedClient;

mod file;
pub use file::{StoreUrl, TelemetryTable};
mod resolve;

/// The file name looked for in the workspace and in the user's config dir.
pub const FILE_NAME: &str = "pev.toml";

/// A role a model plays in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Planner,
    Executor,
    Verifier,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Planner, Role::Executor, Role::Verifier];

    pub fn name(self) -> &'static str {
        match self {
            Self::Planner => "planner",
            Self::Executor => "executor",
            Self::Verifier => "verifier",
        }
    }

    /// The model a role gets when nothing says otherwise.
    pub fn default_model(self) -> &'static str {
        match self {
            Self::Planner => "claude-opus-4-6",
            Self::Executor => "claude-sonnet-4-5",
            Self::Verifier => "claude-haiku-4-5",
        }
    }

    pub(crate) fn env_prefix(self) -> &'static str {
        match self {
            Self::Planner => "PEV_PLANNER",
            Self::Executor => "PEV_EXECUTOR",
            Self::Verifier => "PEV_VERIFIER",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Planner => 0,
            Self::Executor => 1,
            Self::Verifier => 2,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The API a role's model is reached through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
    /// OpenAI-compatible Chat Completions (hosted, Ollama, vLLM, llama.cpp).
    OpenAi,
    /// A scripted model: the JSON file of its turns (resolved to a full path).
    Script(PathBuf),
}

impl Provider {
    /// `anthropic`, `openai` or `script`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
            Self::Script(_) => "script",
        }
    }

    /// The endpoint used when nothing sets one; none for a script.
    pub fn default_base_url(&self) -> Option<&'static str> {
        match self {
            Self::Anthropic => Some(AnthropicConfig::DEFAULT_BASE_URL),
            Self::OpenAi => Some(crate::openai::DEFAULT_BASE_URL),
            Self::Script(_) => None,
        }
    }

    /// The variable that holds the key unless `api_key_env` names another; none for a script.
    pub fn default_key_var(&self) -> Option<&'static str> {
        match self {
            Self::Anthropic => Some(crate::anthropic::API_KEY_VAR),
            Self::OpenAi => Some("OPENAI_API_KEY"),
            Self::Script(_) => None,
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Script(path) => write!(f, "script:{}", path.display()),
            other => f.write_str(other.kind()),
        }
    }
}

/// Where a resolved value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// pev's built-in default (or built-in price).
    Default,
    /// The user's `pev.toml`.
    User(PathBuf),
    /// The workspace's `pev.toml`.
    Workspace(PathBuf),
    /// An environment variable (its name).
    Env(String),
}

impl Source {
    /// The layer's rank: higher wins.
    fn rank(&self) -> u8 {
        match self {
            Self::Default => 0,
            Self::User(_) => 1,
            Self::Workspace(_) => 2,
            Self::Env(_) => 3,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::User(path) => write!(f, "user {}", path.display()),
            Self::Workspace(path) => write!(f, "workspace {}", path.display()),
            Self::Env(var) => write!(f, "env {var}"),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
}

impl<T> Sourced<T> {
    fn new(value: T, source: Source) -> Self {
        Self { value, source }
    }
}

/// One role, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleConfig {
    pub role: Role,
    pub provider: Sourced<Provider>,
    pub model: Sourced<String>,
    /// The endpoint; `None` for a script.
    pub base_url: Option<Sourced<String>>,
    /// The variable that holds the key; `None` for a script.
    pub key_var: Option<Sourced<String>>,
    /// The role's `max_tokens`, when a file sets one.
    pub max_tokens: Option<Sourced<u32>>,
    pub timeouts: Timeouts,
}

/// One hook command and where it was configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookCommand {
    /// A command line for `sh -c`, run in the workspace.
    pub command: String,
    /// How long it may run: its file's `timeout_ms`, else [`HooksConfig::DEFAULT_TIMEOUT`].
    pub timeout: Duration,
    pub source: Source,
}

/// `[hooks]`: commands run at points of a run (see `pev_engine::hooks` for what they receive
/// and answer).
///
/// The files' hooks add up, the user's first: a workspace's `pev.toml` cannot switch off a
/// guard the user's own file installs, it can only add its own. Each command keeps the
/// `timeout_ms` of the file that names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HooksConfig {
    /// Before each tool call; may deny it.
    pub pre_tool_use: Vec<HookCommand>,
    /// After each tool call; may add context.
    pub post_tool_use: Vec<HookCommand>,
    /// When a step reaches its final status; may add evidence.
    pub step_finished: Vec<HookCommand>,
    /// When the agent gives its final answer; may block it.
    pub stop: Vec<HookCommand>,
}

impl HooksConfig {
    /// How long a hook may run when its file sets no `timeout_ms`.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(5000);

    /// No hook is configured.
    pub fn is_empty(&self) -> bool {
        self.pre_tool_use.is_empty()
            && self.post_tool_use.is_empty()
            && self.step_finished.is_empty()
            && self.stop.is_empty()
    }
}

/// An MCP server from `[mcp_servers.NAME]` of the user's `pev.toml`: its tools are offered to the
/// executor and the loop model as `mcp__NAME__TOOL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// How long one call may take (`timeout_ms`, default 60 s).
    pub timeout: Duration,
    pub source: Source,
}

/// Which `pev.toml` files were looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    pub path: PathBuf,
    /// `workspace` or `user`.
    pub scope: &'static str,
    pub found: bool,
}

/// A key variable and whether it is set (never its value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyVar {
    pub name: String,
    pub set: bool,
    /// The roles that read it.
    pub roles: Vec<Role>,
}

/// A value that must not be shown.
#[derive(Clone, PartialEq, Eq)]
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Why the configuration cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {message}", path.display())]
    Read { path: PathBuf, message: String },
    /// Bad TOML, an unknown key, a bad value: where, and what.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Parse { path: PathBuf, line: usize, column: usize, message: String },
    #[error("environment variable {var}: {message}")]
    Env { var: String, message: String },
    /// A setting the file may not make.
    #[error("{}: {message}", path.display())]
    Refused { path: PathBuf, message: String },
}

impl From<ConfigError> for ProviderError {
    fn from(e: ConfigError) -> Self {
        ProviderError::Config(e.to_string())
    }
}

/// The resolved configuration: the three roles, the prices, the retry limits, and the key
/// variables' values (kept to build clients, never shown).
#[derive(Debug, Clone)]
pub struct Config {
    roles: [RoleConfig; 3],
    files: Vec<ConfigFile>,
    prices: PriceTable,
    price_sources: BTreeMap<String, Source>,
    retry: RetryPolicy,
    hooks: HooksConfig,
    keys: BTreeMap<String, Option<Secret>>,
    sandbox: Option<pev_protocol::policy::SandboxMode>,
    mcp_servers: Vec<McpServerConfig>,
    telemetry: Option<TelemetryTable>,
    store: Option<Sourced<StoreUrl>>,
    oracle: pev_protocol::oracle::OracleSettings,
}

impl Config {
    /// The `store` of the user's pev.toml, reading no other file (see [`Config::store`]).
    pub fn user_store(
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Sourced<StoreUrl>>, ConfigError> {
        resolve::user_store(vars)
    }

    /// Loads `WORKSPACE/pev.toml` and the user's `pev.toml` (when they exist) and the
    /// environment as `vars` reads it, over the defaults.
    pub fn load(
        workspace: &Path,
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        resolve::load(workspace, vars)
    }

    /// [`Config::load`] with the process environment.
    pub fn from_env(workspace: &Path) -> Result<Self, ConfigError> {
        Self::load(workspace, &|k| std::env::var(k).ok())
    }

    /// The three roles, in order.
    pub fn roles(&self) -> &[RoleConfig; 3] {
        &self.roles
    }

    pub fn role(&self, role: Role) -> &RoleConfig {
        // `index` is 0, 1 or 2: always inside the array.
        &self.roles[role.index()]
    }

    /// The `pev.toml` files looked for, found or not.
    pub fn files(&self) -> &[ConfigFile] {
        &self.files
    }

    /// The price table: built-in prices with the files' overrides.
    pub fn prices(&self) -> &PriceTable {
        &self.prices
    }

    /// The price of `role`'s model and where it came from; `None` when it has no price.
    pub fn price_for(&self, role: Role) -> Option<(PriceMatch<'_>, Source)> {
        let found = self.prices.lookup(&self.role(role).model.value)?;
        let source = self.price_sources.get(found.key).cloned().unwrap_or(Source::Default);
        Some((found, source))
    }

    /// The retry policy: [`RetryPolicy::default`] with `[retry]`'s limits.
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// The `sandbox` key: the strictest of the files that set it.
    pub fn sandbox(&self) -> Option<pev_protocol::policy::SandboxMode> {
        self.sandbox
    }

    /// The MCP servers of the user's file, by name.
    pub fn mcp_servers(&self) -> &[McpServerConfig] {
        &self.mcp_servers
    }

    /// The user's `store` (a journal's file or `postgres://…` URL), if set, and which file set
    /// it. Never a workspace's: that is refused when loading.
    pub fn store(&self) -> Option<&Sourced<StoreUrl>> {
        self.store.as_ref()
    }

    /// The user's `[telemetry]` table, if any.
    pub fn telemetry(&self) -> Option<&TelemetryTable> {
        self.telemetry.as_ref()
    }

    /// `[oracle]` of the files (see `oracle_of`: a workspace's file only adds checks).
    pub fn oracle(&self) -> &pev_protocol::oracle::OracleSettings {
        &self.oracle
    }

    /// The hooks of the user's and the workspace's files, the user's first.
    pub fn hooks(&self) -> &HooksConfig {
        &self.hooks
    }

    /// The key variables pev reads (the standard ones and any `api_key_env`) and whether each
    /// is set.
    pub fn key_vars(&self) -> Vec<KeyVar> {
        self.keys
            .iter()
            .map(|(name, value)| KeyVar {
                name: name.clone(),
                set: value.is_some(),
                roles: Role::ALL
                    .into_iter()
                    .filter(|r| self.role(*r).key_var.as_ref().is_some_and(|k| &k.value == name))
                    .collect(),
            })
            .collect()
    }

    /// The model client of `role`, built from the resolved provider, endpoint and key, wrapped
    /// in the retry policy. No request is sent. Each call builds a new client (a script's turns
    /// start over).
    pub fn client_for(&self, role: Role) -> Result<Arc<dyn ModelClient>, ProviderError> {
        self.client_with_notice(role, None)
    }

    /// [`Config::client_for`], reporting a call that waits long and each retry to `notice`.
    pub fn client_with_notice(
        &self,
        role: Role,
        notice: Option<crate::notice::NoticeSink>,
    ) -> Result<Arc<dyn ModelClient>, ProviderError> {
        let rc = self.role(role);
        let base_url = rc.base_url.as_ref().map(|u| u.value.clone()).unwrap_or_default();
        let client: Arc<dyn ModelClient> = match &rc.provider.value {
            Provider::Anthropic => {
                let api_key = self.key(rc).ok_or_else(|| missing_key(rc, ""))?;
                Arc::new(AnthropicClient::new(AnthropicConfig {
                    api_key,
                    base_url,
                    version: AnthropicConfig::DEFAULT_VERSION.to_owned(),
                    timeouts: rc.timeouts,
                })?)
            }
            Provider::OpenAi => {
                if rc.model.source == Source::Default {
                    // The built-in models are Anthropic's: sending `claude-…` to an
                    // OpenAI-compatible server fails later with a less helpful error.
                    return Err(ProviderError::Config(format!(
                        "the {} role uses openai, but its model is the built-in Anthropic \
                         default `{}`: set {}_MODEL (or `model` under [roles.{}] in pev.toml) to a \
                         model your server serves",
                        rc.role.name(),
                        rc.model.value,
                        rc.role.env_prefix(),
                        rc.role.name()
                    )));
                }
                let api_key = self.key(rc);
                let hosted =
                    base_url.trim().trim_end_matches('/') == crate::openai::DEFAULT_BASE_URL;
                if api_key.is_none() && hosted {
                    return Err(missing_key(
                        rc,
                        " (a local server needs none: set its base_url or OPENAI_BASE_URL)",
                    ));
                }
                Arc::new(OpenAiClient::new(OpenAiConfig {
                    api_key,
                    base_url,
                    timeouts: rc.timeouts,
                })?)
            }
            Provider::Script(path) => Arc::new(ScriptedClient::load(path)?),
        };
        let retrying = Retrying::new(client, self.retry);
        Ok(Arc::new(match notice {
            Some(notice) => retrying.with_notice(notice),
            None => retrying,
        }))
    }

    fn key(&self, rc: &RoleConfig) -> Option<String> {
        let var = rc.key_var.as_ref()?;
        let secret = self.keys.get(&var.value)?.as_ref()?;
        Some(secret.0.clone())
    }
}

fn missing_key(rc: &RoleConfig, hint: &str) -> ProviderError {
    let var = rc.key_var.as_ref().map_or("the key variable", |k| k.value.as_str());
    ProviderError::Config(format!(
        "the {} role uses {} ({}), but {var} is not set{hint}",
        rc.role, rc.provider.value, rc.model.value
    ))
}

/// A price override as `pev.toml` writes it: cache prices left out cost as plain input.
fn price_of(entry: &file::PriceEntry) -> Price {
    let mut price = Price::flat(entry.input_per_mtok, entry.output_per_mtok);
    if let Some(read) = entry.cache_read_per_mtok {
        price.cache_read_per_mtok = read;
    }
    if let Some(write) = entry.cache_write_per_mtok {
        price.cache_write_per_mtok = write;
    }
    price
}

/// The set of key variables to report: the standard two plus those the roles use.
fn key_var_names(roles: &[RoleConfig; 3]) -> BTreeSet<String> {
    let mut names: BTreeSet<String> =
        [crate::anthropic::API_KEY_VAR, "OPENAI_API_KEY"].into_iter().map(str::to_owned).collect();
    names.extend(roles.iter().filter_map(|r| r.key_var.as_ref().map(|k| k.value.clone())));
    names
}

#[cfg(test)]
mod tests;
