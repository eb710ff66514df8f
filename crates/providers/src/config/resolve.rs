//! Merging the layers (defaults, the user's file, the workspace's file, the environment) into a
//! [`Config`], key by key, recording where each value came from. The precedence is documented
//! on the parent module.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::file::{self, FileConfig, ProviderSpec, ProviderTable, RoleTable};
use super::{
    Config, ConfigError, ConfigFile, FILE_NAME, HookCommand, HooksConfig, McpServerConfig,
    Provider, Role, RoleConfig, Secret, Source, Sourced, key_var_names, price_of,
};
use crate::cost::PriceTable;
use crate::http::Timeouts;
use crate::retry::RetryPolicy;

/// One file's contents, with where it is.
struct Layer {
    source: Source,
    /// Relative `script:` paths are resolved against this directory.
    dir: PathBuf,
    config: FileConfig,
}

impl Layer {
    fn role(&self, role: Role) -> Option<&RoleTable> {
        let roles = &self.config.roles;
        match role {
            Role::Planner => roles.planner.as_ref(),
            Role::Executor => roles.executor.as_ref(),
            Role::Verifier => roles.verifier.as_ref(),
        }
    }

    fn provider(&self, provider: &Provider) -> Option<&ProviderTable> {
        let providers = &self.config.providers;
        match provider {
            Provider::Anthropic => providers.anthropic.as_ref(),
            Provider::OpenAi => providers.openai.as_ref(),
            Provider::Script(_) => None,
        }
    }
}

/// The environment, with empty and blank variables counted as unset.
struct Env<'a>(&'a dyn Fn(&str) -> Option<String>);

impl Env<'_> {
    fn get(&self, name: &str) -> Option<String> {
        (self.0)(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }

    /// The first of `names` that is set, with its name.
    fn first(&self, names: &[String]) -> Option<(String, String)> {
        names.iter().find_map(|name| self.get(name).map(|value| (name.clone(), value)))
    }
}

/// The `store` of the user's own pev.toml alone (no workspace file is read): where commands
/// that only read the journal (`pev runs`, `pev show`) find it.
pub(super) fn user_store(
    vars: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Sourced<file::StoreUrl>>, ConfigError> {
    let env = Env(vars);
    let Some(path) = user_file(&env) else { return Ok(None) };
    let Some(config) = file::read(&path)? else { return Ok(None) };
    Ok(config.store.map(|value| Sourced { value, source: Source::User(path) }))
}

pub(super) fn load(
    workspace: &Path,
    vars: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let env = Env(vars);
    let workspace_file = workspace.join(FILE_NAME);
    let user_file = user_file(&env).filter(|path| *path != workspace_file);

    let mut files = Vec::new();
    // Lowest first, so that later layers overwrite earlier ones.
    let mut layers = Vec::new();
    for (path, scope) in [(user_file, "user"), (Some(workspace_file), "workspace")] {
        let Some(path) = path else { continue };
        let found = file::read(&path)?;
        files.push(ConfigFile { path: path.clone(), scope, found: found.is_some() });
        if let Some(config) = found {
            let dir = path.parent().map_or_else(|| workspace.to_path_buf(), Path::to_path_buf);
            let source = if scope == "user" { Source::User(path) } else { Source::Workspace(path) };
            layers.push(Layer { source, dir, config });
        }
    }
    // Shown workspace first: the one that matters more.
    files.reverse();

    let roles = [
        resolve_role(Role::Planner, &layers, &env, workspace)?,
        resolve_role(Role::Executor, &layers, &env, workspace)?,
        resolve_role(Role::Verifier, &layers, &env, workspace)?,
    ];

    let mut prices = PriceTable::built_in();
    let mut price_sources = BTreeMap::new();
    let mut retry = RetryPolicy::default();
    let mut hooks = HooksConfig::default();
    // A workspace's pev.toml comes with the code, and a command of an earlier run may have
    // written it: it can make the sandbox stricter than the user's file (or than the default,
    // `auto`), never looser.
    let user = layers
        .iter()
        .filter(|l| !matches!(l.source, Source::Workspace(_)))
        .filter_map(|l| l.config.sandbox)
        .next_back();
    let workspace_mode = layers
        .iter()
        .filter(|l| matches!(l.source, Source::Workspace(_)))
        .filter_map(|l| l.config.sandbox)
        .next_back();
    let sandbox = match (user, workspace_mode) {
        (user, Some(ws)) => Some(ws.max(user.unwrap_or(pev_protocol::policy::SandboxMode::Auto))),
        (user, None) => user,
    };
    for layer in &layers {
        add_hooks(&mut hooks, layer);
        for (model, entry) in &layer.config.prices {
            prices.set(model.clone(), price_of(entry));
            price_sources.insert(model.clone(), layer.source.clone());
        }
        let table = &layer.config.retry;
        if let Some(n) = table.max_attempts {
            retry.max_attempts = n;
        }
        if let Some(ms) = table.base_delay_ms {
            retry.base_delay = Duration::from_millis(u64::from(ms));
        }
        if let Some(secs) = table.max_delay_secs {
            retry.max_delay = Duration::from_secs(u64::from(secs));
        }
        if let Some(secs) = table.max_total_wait_secs {
            retry.max_total_wait = Duration::from_secs(u64::from(secs));
        }
    }

    let keys = key_var_names(&roles)
        .into_iter()
        .map(|name| {
            let value = env.get(&name).map(Secret);
            (name, value)
        })
        .collect();

    let mut mcp_servers = Vec::new();
    for layer in &layers {
        if layer.config.mcp_servers.is_empty() {
            continue;
        }
        // A server is a program pev starts, unconfined, with the user's rights: a workspace's
        // pev.toml comes with the code and may not start one.
        if let Source::Workspace(path) = &layer.source {
            return Err(ConfigError::Refused {
                path: path.clone(),
                message:
                    "[mcp_servers] is read from your own pev.toml only (~/.config/pev/pev.toml): \
                          a workspace's file comes with the code and may not start programs"
                        .to_owned(),
            });
        }
        for (name, table) in &layer.config.mcp_servers {
            if name.is_empty()
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                let path = match &layer.source {
                    Source::User(p) | Source::Workspace(p) => p.clone(),
                    _ => PathBuf::new(),
                };
                return Err(ConfigError::Refused {
                    path,
                    message: format!(
                        "[mcp_servers.{name}]: a server's name is letters, digits, `-` and `_`"
                    ),
                });
            }
            mcp_servers.retain(|s: &McpServerConfig| s.name != *name);
            mcp_servers.push(McpServerConfig {
                name: name.clone(),
                command: table.command.clone(),
                args: table.args.clone(),
                env: table.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                timeout: Duration::from_millis(table.timeout_ms.unwrap_or(60_000)),
                source: layer.source.clone(),
            });
        }
    }

    let mut telemetry = None;
    for layer in &layers {
        let Some(table) = &layer.config.telemetry else { continue };
        // Traces carry what a run did (and, opted in, its content): a workspace's file comes
        // with the code and may not send them somewhere.
        if let Source::Workspace(path) = &layer.source {
            return Err(ConfigError::Refused {
                path: path.clone(),
                message: "[telemetry] is read from your own pev.toml only \
                          (~/.config/pev/pev.toml) or the OTEL_* variables: a workspace's file \
                          comes with the code and may not send your runs' traces elsewhere"
                    .to_owned(),
            });
        }
        telemetry = Some(table.clone());
    }

    let oracle = oracle_of(&layers)?;

    let mut store = None;
    for layer in &layers {
        let Some(value) = &layer.config.store else { continue };
        // A workspace's file comes with the code: it may not send the record of runs
        // (conversations, file contents) to a database of its choosing.
        if let Source::Workspace(path) = &layer.source {
            return Err(ConfigError::Refused {
                path: path.clone(),
                message: "`store` is read from your own pev.toml only (~/.config/pev/pev.toml), \
                          --store or PEV_STORE: a workspace's file comes with the code and may \
                          not send your runs' journal elsewhere"
                    .to_owned(),
            });
        }
        store = Some(Sourced { value: value.clone(), source: layer.source.clone() });
    }

    Ok(Config {
        roles,
        files,
        prices,
        price_sources,
        retry,
        hooks,
        keys,
        sandbox,
        mcp_servers,
        telemetry,
        store,
        oracle,
    })
}

/// `[oracle]` of the files, merged: protected globs and hidden checks add up (a hidden check's
/// relative `dir` is read from its file's directory); `allow` and `conventions = false`, which
/// loosen what a run is held to, come from the user's own file only: a workspace's file comes
/// with the code, and an earlier run may have written it.
fn oracle_of(layers: &[Layer]) -> Result<pev_protocol::oracle::OracleSettings, ConfigError> {
    let mut out = pev_protocol::oracle::OracleSettings::default();
    for layer in layers {
        let Some(table) = &layer.config.oracle else { continue };
        if let Source::Workspace(path) = &layer.source
            && (!table.allow.is_empty() || !table.conventions)
        {
            return Err(ConfigError::Refused {
                path: path.clone(),
                message: "[oracle] `allow` and `conventions = false` are read from your own \
                          pev.toml only (~/.config/pev/pev.toml) or --allow-oracle: a workspace's \
                          file comes with the code, and may only add checks (`protect`, `hidden`)"
                    .to_owned(),
            });
        }
        out.conventions &= table.conventions;
        out.protect.extend(table.protect.iter().cloned());
        out.allow.extend(table.allow.iter().cloned());
        for check in &table.hidden {
            let mut check = check.clone();
            if let Some(dir) = &check.dir {
                let path = std::path::Path::new(dir);
                if path.is_relative() {
                    check.dir = Some(layer.dir.join(path).display().to_string());
                }
            }
            out.hidden.push(check);
        }
    }
    Ok(out)
}

/// Appends `layer`'s hooks (see [`HooksConfig`] for why they add up rather than override).
fn add_hooks(hooks: &mut HooksConfig, layer: &Layer) {
    let table = &layer.config.hooks;
    let timeout = table.timeout_ms.map_or(HooksConfig::DEFAULT_TIMEOUT, Duration::from_millis);
    let commands = |list: &[String]| {
        list.iter()
            .map(|command| HookCommand {
                command: command.clone(),
                timeout,
                source: layer.source.clone(),
            })
            .collect::<Vec<_>>()
    };
    hooks.pre_tool_use.extend(commands(&table.pre_tool_use));
    hooks.post_tool_use.extend(commands(&table.post_tool_use));
    hooks.step_finished.extend(commands(&table.step_finished));
    hooks.stop.extend(commands(&table.stop));
}

/// `$XDG_CONFIG_HOME/pev/pev.toml` (an absolute XDG_CONFIG_HOME only, as the XDG spec says),
/// else `$HOME/.config/pev/pev.toml`.
fn user_file(env: &Env<'_>) -> Option<PathBuf> {
    let xdg = env.get("XDG_CONFIG_HOME").map(PathBuf::from).filter(|p| p.is_absolute());
    let dir = xdg.or_else(|| env.get("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(dir.join("pev").join(FILE_NAME))
}

fn provider_of(spec: &ProviderSpec, dir: &Path) -> Provider {
    match spec {
        ProviderSpec::Anthropic => Provider::Anthropic,
        ProviderSpec::OpenAi => Provider::OpenAi,
        ProviderSpec::Script(path) => Provider::Script(dir.join(path)),
    }
}

fn resolve_role(
    role: Role,
    layers: &[Layer],
    env: &Env<'_>,
    workspace: &Path,
) -> Result<RoleConfig, ConfigError> {
    let mut provider = Sourced::new(Provider::Anthropic, Source::Default);
    let mut model = Sourced::new(role.default_model().to_owned(), Source::Default);
    let mut role_url: Option<Sourced<String>> = None;
    let mut max_tokens = None;
    for layer in layers {
        let Some(table) = layer.role(role) else { continue };
        if let Some(spec) = &table.provider {
            provider = Sourced::new(provider_of(spec, &layer.dir), layer.source.clone());
        }
        if let Some(name) = &table.model {
            model = Sourced::new(name.clone(), layer.source.clone());
        }
        if let Some(url) = &table.base_url {
            role_url = Some(Sourced::new(url.clone(), layer.source.clone()));
        }
        if let Some(n) = table.max_tokens {
            max_tokens = Some(Sourced::new(n, layer.source.clone()));
        }
    }

    let prefix = role.env_prefix();
    if let Some((var, value)) =
        env.first(&[format!("{prefix}_PROVIDER"), "PEV_PROVIDER".to_owned()])
    {
        let spec = ProviderSpec::parse(&value)
            .map_err(|message| ConfigError::Env { var: var.clone(), message })?;
        provider = Sourced::new(provider_of(&spec, workspace), Source::Env(var));
    }
    if let Some((var, value)) = env.first(&[format!("{prefix}_MODEL")]) {
        model = Sourced::new(value, Source::Env(var));
    }

    // The provider's own settings: workspace over user, and its *_BASE_URL variable over both.
    let mut provider_url = None;
    let mut key_var =
        provider.value.default_key_var().map(|v| Sourced::new(v.to_owned(), Source::Default));
    let mut timeouts = Timeouts::default();
    for layer in layers {
        let Some(table) = layer.provider(&provider.value) else { continue };
        if let Some(url) = &table.base_url {
            provider_url = Some(Sourced::new(url.clone(), layer.source.clone()));
        }
        if let Some(var) = &table.api_key_env {
            key_var = Some(Sourced::new(var.clone(), layer.source.clone()));
        }
        if let Some(secs) = table.request_timeout_secs {
            timeouts.request = Duration::from_secs(u64::from(secs));
        }
        if let Some(secs) = table.idle_timeout_secs {
            timeouts.idle = Duration::from_secs(u64::from(secs));
        }
    }
    let url_var = match provider.value {
        Provider::Anthropic => Some(crate::anthropic::BASE_URL_VAR),
        Provider::OpenAi => Some("OPENAI_BASE_URL"),
        Provider::Script(_) => None,
    };
    if let Some((var, value)) = url_var.and_then(|v| env.first(&[v.to_owned()])) {
        provider_url = Some(Sourced::new(value, Source::Env(var)));
    }

    let base_url = provider.value.default_base_url().map(|default| {
        // A role's URL from below the layer that chose its provider was meant for another one.
        role_url
            .filter(|url| url.source.rank() >= provider.source.rank())
            .or(provider_url)
            .unwrap_or_else(|| Sourced::new(default.to_owned(), Source::Default))
    });

    Ok(RoleConfig { role, provider, model, base_url, key_var, max_tokens, timeouts })
}
