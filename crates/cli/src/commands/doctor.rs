//! `pev doctor`: what pev would use to reach its models. The `pev.toml` files found, the key
//! variables (set or unset, never their values), the providers in use, and the resolved role
//! table (provider, model, base URL, price, and where each value came from), then whether each
//! role's client can be built. `--ping` also sends each role a short request shaped like the ones
//! a run sends it: the executor is offered every tool it may be given (the workspace tools under
//! their wire names and loop mode's plan tools) and makes one tool round trip (a call, its
//! result, an answer), so a name, a schema or a pairing the provider refuses shows up here, with
//! the provider's own message, before a run pays for a plan. Last, the sandbox this machine can
//! enforce and the journal key (its file and id, or why there is none; never created here).
//!
//! Exit codes: 0 when every role can build its client (and answers, with `--ping`), 1 when one
//! cannot (the reason is printed per role) or the journal key file cannot be used, 2 when a
//! `pev.toml` cannot be read or parsed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pev_providers::config::{Config, Provider, Role, RoleConfig, Source, Sourced};
use pev_providers::{
    ChatRequest, ContentBlock, Message, ModelClient, ProviderError, ToolChoice, ToolSpec,
};
use serde_json::{Value, json};

use crate::shared::exit::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, Fail};
use crate::shared::workspace::workspace_dir;
use crate::view::style::clean;

/// The longest a `--ping` may take per role (retries included).
const PING_TIMEOUT: Duration = Duration::from_secs(60);

/// `pev doctor`.
#[derive(Debug, Clone)]
pub struct DoctorRequest {
    pub workspace: Option<PathBuf>,
    pub json: bool,
    pub ping: bool,
}

/// What was found out about one role.
struct RoleCheck {
    /// Why the client cannot be built, if it cannot.
    client_error: Option<String>,
    /// With `--ping`: what the role answered, or the failure.
    ping: Option<Result<Pong, String>>,
    /// With `--ping`: why the role was not pinged (a script written for a run's requests).
    not_pinged: Option<String>,
}

/// A role's answer to `--ping`.
struct Pong {
    /// The model that answered, as the provider names it.
    model: String,
    ms: u64,
    /// The tools the request offered (the executor's: all it may be given).
    tools: usize,
    /// For a role offered tools: whether the model called the one it was told to and then
    /// answered its result.
    round_trip: Option<bool>,
}

impl RoleCheck {
    fn ok(&self) -> bool {
        self.client_error.is_none() && !matches!(self.ping, Some(Err(_)))
    }
}

pub fn run(req: &DoctorRequest, out: &mut dyn Write) -> Result<u8, Fail> {
    let workspace = workspace_dir(req.workspace.as_deref())?;
    let config = Config::from_env(&workspace).map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?;
    let runtime = if req.ping {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Fail(EXIT_FAILED, format!("cannot start the runtime: {e}")))?;
        Some(rt)
    } else {
        None
    };
    let checks: Vec<RoleCheck> =
        config.roles().iter().map(|rc| check(&config, rc, runtime.as_ref())).collect();
    // The sandbox this machine can enforce, probed in child processes; the policy is not
    // known here, so the mode is pev.toml's.
    let settings = crate::shared::sandbox_setup::SandboxPolicy::default().resolve(config.sandbox());
    let sandbox = crate::shared::sandbox_setup::build(settings, None, &[]);
    let sandbox_ok = sandbox.settings().mode != pev_sandbox::Mode::Require
        || !sandbox.enforced().is_weaker_than_full();
    // The journal key, looked at but never created here: a run creates it.
    let key = pev_store::load_key(pev_store::CreateKey::No);
    let ok = checks.iter().all(RoleCheck::ok) && sandbox_ok && key.is_ok();
    let written = if req.json {
        let mut report = json_report(&workspace, &config, &checks, ok);
        if let Some(map) = report.as_object_mut() {
            map.insert(
                "sandbox".into(),
                json!({
                    "probe": sandbox.probe(),
                    "enforced": sandbox.enforced(),
                    "cgroup_v2": match pev_sandbox::cgroup_v2() {
                        Ok(dir) => json!({"delegated": dir}),
                        Err(why) => json!({"unavailable": why}),
                    },
                }),
            );
            map.insert("journal_key".into(), key_json(&key));
        }
        serde_json::to_string_pretty(&report)
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(out, "{text}"))
    } else {
        write_text(out, &workspace, &config, &checks)
            .and_then(|()| write_sandbox(out, &sandbox))
            .and_then(|()| write_key(out, &key))
    };
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(Fail(EXIT_FAILED, format!("cannot write the report: {e}"))),
    }
    Ok(if ok { EXIT_OK } else { EXIT_FAILED })
}

fn check(config: &Config, rc: &RoleConfig, runtime: Option<&tokio::runtime::Runtime>) -> RoleCheck {
    let client = match config.client_for(rc.role) {
        Ok(client) => client,
        Err(e) => {
            return RoleCheck { client_error: Some(e.to_string()), ping: None, not_pinged: None };
        }
    };
    // A script whose first turn checks the request (`expect`) answers a run, not a ping: it is
    // not pinged (it loaded, which is what can be checked), and the status says so.
    if let (Some(_), Provider::Script(path)) = (runtime, &rc.provider.value)
        && pev_providers::script::ScriptedClient::load(path).is_ok_and(|s| s.next_turn_expects())
    {
        let why = "scripted, and its first turn expects a run's request: loaded, not pinged";
        return RoleCheck { client_error: None, ping: None, not_pinged: Some(why.to_owned()) };
    }
    let tools = if rc.role == Role::Executor { executor_tools() } else { Vec::new() };
    let ping = runtime.map(|rt| {
        let started = Instant::now();
        let answer = rt.block_on(async {
            // The timer is made inside the runtime: it needs its clock.
            tokio::time::timeout(PING_TIMEOUT, ping(&*client, &rc.model.value, tools)).await
        });
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match answer {
            Ok(Ok(mut pong)) => {
                pong.ms = ms;
                Ok(pong)
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {}s", PING_TIMEOUT.as_secs())),
        }
    });
    RoleCheck { client_error: None, ping, not_pinged: None }
}

/// Every tool an executor may be offered: the built-in workspace tools under their wire names
/// and loop mode's plan tools.
fn executor_tools() -> Vec<ToolSpec> {
    let registry = pev_tools::Registry::builtin();
    let workspace: Vec<ToolSpec> = registry.definitions().iter().map(ToolSpec::from).collect();
    pev_engine::agent::loop_mode::offered_tools(&workspace)
}

/// The tool the executor's ping asks the model to call: a read-only one every run offers.
const PING_TOOL: &str = "file.list";

/// One ping: a short request (with `tools`, the executor's); when the model calls the tool it
/// was told to, its result and one more answer, so the provider sees a whole tool round trip.
async fn ping(
    client: &dyn ModelClient,
    model: &str,
    tools: Vec<ToolSpec>,
) -> Result<Pong, ProviderError> {
    let offered = tools.len();
    let wire =
        pev_tools::Registry::builtin().names().wire(PING_TOOL).map(|w| w.as_str().to_owned());
    let mut request = ChatRequest::new(model, vec![Message::user(ping_prompt(wire.as_deref()))]);
    request.cache = false;
    request.max_tokens = if tools.is_empty() { 1 } else { 256 };
    if let Some(wire) = wire.as_ref().filter(|_| !tools.is_empty()) {
        request.tool_choice = ToolChoice::Tool(wire.clone());
    }
    request.tools = tools;
    let first = client.chat(&request).await?;
    let mut pong = Pong { model: first.model.clone(), ms: 0, tools: offered, round_trip: None };
    if offered == 0 {
        return Ok(pong);
    }
    let calls: Vec<String> = first.tool_calls().map(|(id, _, _)| id.to_owned()).collect();
    if calls.is_empty() {
        pong.round_trip = Some(false);
        return Ok(pong);
    }
    let results = calls
        .into_iter()
        .map(|id| ContentBlock::ToolResult {
            tool_use_id: id,
            content: "pev doctor: not run (a connection check); answer with one word".into(),
            is_error: false,
        })
        .collect();
    request.messages.push(Message::assistant(first.content));
    request.messages.push(Message { role: pev_providers::Role::User, content: results });
    request.tool_choice = ToolChoice::Auto;
    request.max_tokens = 16;
    client.chat(&request).await?;
    pong.round_trip = Some(true);
    Ok(pong)
}

fn ping_prompt(tool: Option<&str>) -> String {
    match tool {
        Some(tool) => format!("pev doctor is checking the connection: call the {tool} tool once."),
        None => "ping".to_owned(),
    }
}

/// How a source is shown.
fn source(source: &Source) -> String {
    clean(&source.to_string()).into_owned()
}

fn opt_source<T>(value: Option<&Sourced<T>>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| source(&v.source))
}

/// The price of a role's model (USD per MTok: input / output / cache read / cache write) and
/// where it came from.
fn price(config: &Config, role: Role) -> (String, String) {
    match config.price_for(role) {
        Some((found, from)) => {
            let p = found.price;
            let figures = format!(
                "{} / {} / {} / {}",
                p.input_per_mtok, p.output_per_mtok, p.cache_read_per_mtok, p.cache_write_per_mtok
            );
            let from = match from {
                Source::Default => format!("built-in ({})", found.key),
                other => format!("{} ({})", source(&other), found.key),
            };
            (figures, clean(&from).into_owned())
        }
        None => ("unknown (counted as $0)".to_owned(), "-".to_owned()),
    }
}

/// The providers the roles use: each (provider, base URL) once, with its roles.
fn providers(config: &Config) -> Vec<(String, Option<String>, Vec<Role>)> {
    let mut list: Vec<(String, Option<String>, Vec<Role>)> = Vec::new();
    for rc in config.roles() {
        let name = rc.provider.value.to_string();
        let url = rc.base_url.as_ref().map(|u| u.value.clone());
        match list.iter_mut().find(|(n, u, _)| *n == name && *u == url) {
            Some(entry) => entry.2.push(rc.role),
            None => list.push((name, url, vec![rc.role])),
        }
    }
    list
}

fn role_names(roles: &[Role]) -> String {
    if roles.is_empty() {
        return "-".to_owned();
    }
    roles.iter().map(|r| r.name()).collect::<Vec<_>>().join(", ")
}

/// Rows as columns padded to their widest cell (by characters).
fn table(out: &mut dyn Write, indent: &str, rows: &[Vec<String>]) -> std::io::Result<()> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let mut line = String::from(indent);
        for (c, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < row.len() {
                let width = widths.get(c).copied().unwrap_or(0);
                let pad = width.saturating_sub(cell.chars().count()) + 2;
                line.push_str(&" ".repeat(pad));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

fn write_text(
    out: &mut dyn Write,
    workspace: &Path,
    config: &Config,
    checks: &[RoleCheck],
) -> std::io::Result<()> {
    writeln!(out, "pev doctor: workspace {}", clean(&workspace.display().to_string()))?;

    writeln!(out, "\nConfig files:")?;
    let rows: Vec<Vec<String>> = config
        .files()
        .iter()
        .map(|f| {
            let found = if f.found { "found" } else { "not found" };
            vec![
                f.scope.to_owned(),
                clean(&f.path.display().to_string()).into_owned(),
                found.into(),
            ]
        })
        .collect();
    if rows.is_empty() {
        writeln!(out, "  none looked for (no workspace file name, no HOME or XDG_CONFIG_HOME)")?;
    }
    table(out, "  ", &rows)?;

    writeln!(out, "\nKey variables (values are never shown):")?;
    let rows: Vec<Vec<String>> = config
        .key_vars()
        .iter()
        .map(|k| {
            let set = if k.set { "set" } else { "unset" };
            vec![
                clean(&k.name).into_owned(),
                set.to_owned(),
                format!("used by: {}", role_names(&k.roles)),
            ]
        })
        .collect();
    table(out, "  ", &rows)?;

    writeln!(out, "\nProviders in use:")?;
    let rows: Vec<Vec<String>> = providers(config)
        .into_iter()
        .map(|(name, url, roles)| {
            let url = url.as_deref().map_or_else(|| "-".to_owned(), |u| clean(u).into_owned());
            vec![clean(&name).into_owned(), url, role_names(&roles)]
        })
        .collect();
    table(out, "  ", &rows)?;

    writeln!(
        out,
        "\nRoles (price in USD per million tokens: input / output / cache read / cache write):"
    )?;
    let mut rows =
        vec![["role", "provider", "model", "base URL", "price"].map(String::from).to_vec()];
    for rc in config.roles() {
        let url = rc.base_url.as_ref().map_or("-", |u| u.value.as_str());
        rows.push(vec![
            rc.role.name().to_owned(),
            clean(&rc.provider.value.to_string()).into_owned(),
            clean(&rc.model.value).into_owned(),
            clean(url).into_owned(),
            price(config, rc.role).0,
        ]);
    }
    table(out, "  ", &rows)?;

    writeln!(out, "\nSources:")?;
    for rc in config.roles() {
        writeln!(out, "  {}:", rc.role)?;
        let mut rows = vec![
            vec!["provider".to_owned(), source(&rc.provider.source)],
            vec!["model".to_owned(), source(&rc.model.source)],
            vec!["base URL".to_owned(), opt_source(rc.base_url.as_ref())],
        ];
        if let Some(var) = &rc.key_var {
            rows.push(vec![
                "key variable".to_owned(),
                format!("{} ({})", clean(&var.value), source(&var.source)),
            ]);
        }
        if let Some(max) = &rc.max_tokens {
            rows.push(vec![
                "max_tokens".to_owned(),
                format!("{} ({})", max.value, source(&max.source)),
            ]);
        }
        rows.push(vec!["price".to_owned(), price(config, rc.role).1]);
        table(out, "    ", &rows)?;
    }

    writeln!(out, "\nStatus:")?;
    let mut rows = Vec::new();
    for (rc, check) in config.roles().iter().zip(checks) {
        let status = match (&check.client_error, &check.ping) {
            (Some(error), _) => format!("error: {}", clean(error)),
            (None, None) if check.not_pinged.is_some() => {
                format!("ok: {}", check.not_pinged.as_deref().unwrap_or_default())
            }
            (None, None) => {
                "ok: the client can be built (no request sent; --ping sends one)".to_owned()
            }
            (None, Some(Ok(pong))) => {
                let mut status = format!(
                    "ok: answered as {} in {}",
                    clean(&pong.model),
                    crate::view::style::duration(pong.ms)
                );
                match pong.round_trip {
                    Some(true) => {
                        status.push_str(&format!(
                            "; {} tools offered, tool round trip ok",
                            pong.tools
                        ));
                    }
                    Some(false) => status.push_str(&format!(
                        "; {} tools offered and accepted, but the model called none",
                        pong.tools
                    )),
                    None => {}
                }
                status
            }
            (None, Some(Err(error))) => format!("error: ping failed: {}", clean(error)),
        };
        rows.push(vec![rc.role.name().to_owned(), status]);
    }
    table(out, "  ", &rows)
}

/// The sandbox section: what the probe found and what a run here gets.
/// Where the journal key is and its id, or why there is none (what MACs the journal, so that
/// `pev show` can tell a run pev wrote from one rewritten behind its back).
fn write_key(
    out: &mut dyn Write,
    key: &Result<pev_store::Keying, pev_store::StoreError>,
) -> std::io::Result<()> {
    writeln!(
        out,
        "\nJournal key (MACs the journal; {} names another file):",
        pev_store::KEY_FILE_ENV
    )?;
    match key {
        Ok(pev_store::Keying::Keyed(k)) => {
            writeln!(out, "  {} (id {})", clean(&k.file().display().to_string()), k.id())
        }
        Ok(pev_store::Keying::Unkeyed { why }) => writeln!(out, "  none: {}", clean(why)),
        Err(e) => writeln!(out, "  ! {}", clean(&e.to_string())),
    }
}

fn key_json(key: &Result<pev_store::Keying, pev_store::StoreError>) -> Value {
    match key {
        Ok(pev_store::Keying::Keyed(k)) => {
            json!({"file": k.file().display().to_string(), "id": k.id()})
        }
        Ok(pev_store::Keying::Unkeyed { why }) => json!({"none": why}),
        Err(e) => json!({"error": e.to_string()}),
    }
}

fn write_sandbox(out: &mut dyn Write, sandbox: &pev_sandbox::Sandbox) -> std::io::Result<()> {
    let probe = sandbox.probe();
    let enforced = sandbox.enforced();
    writeln!(out, "\nSandbox (probed in child processes):")?;
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_owned();
    let landlock =
        probe.landlock_abi.map_or_else(|| "not available".to_owned(), |abi| format!("ABI {abi}"));
    let bubblewrap = probe.bubblewrap.as_ref().map_or_else(
        || "not available".to_owned(),
        |b| format!("{} ({})", b.version, b.path.display()),
    );
    let rows = vec![
        vec!["landlock".to_owned(), landlock],
        vec!["seccomp".to_owned(), yes_no(probe.seccomp)],
        vec!["bubblewrap".to_owned(), bubblewrap],
        vec!["user namespaces".to_owned(), yes_no(probe.user_namespaces)],
        vec![
            "pev's namespaces".to_owned(),
            if probe.namespaces {
                "yes (used where bubblewrap is absent)".to_owned()
            } else {
                "no".to_owned()
            },
        ],
        vec![
            "cgroup v2".to_owned(),
            match pev_sandbox::cgroup_v2() {
                Ok(dir) => format!("delegated ({}); not used by runs yet", dir.display()),
                Err(why) => format!("not available: {why}"),
            },
        ],
        vec!["running as root".to_owned(), yes_no(probe.root)],
        vec![format!("mode ({})", enforced.mode.as_str()), clean(&enforced.summary()).into_owned()],
    ];
    table(out, "  ", &rows)?;
    for gap in enforced.gaps.iter().chain(&probe.notes) {
        writeln!(out, "  ! {}", clean(gap))?;
    }
    Ok(())
}

fn json_report(workspace: &Path, config: &Config, checks: &[RoleCheck], ok: bool) -> Value {
    let sourced = |v: Option<&Sourced<String>>| {
        v.map_or(Value::Null, |v| json!({"value": v.value, "source": v.source.to_string()}))
    };
    let roles: Vec<Value> = config
        .roles()
        .iter()
        .zip(checks)
        .map(|(rc, check)| {
            let priced = config.price_for(rc.role).map(|(found, from)| {
                let from = match from {
                    Source::Default => "built-in".to_owned(),
                    other => other.to_string(),
                };
                json!({"model": found.key, "per_mtok": found.price, "source": from})
            });
            let script = match &rc.provider.value {
                Provider::Script(path) => Value::String(path.display().to_string()),
                _ => Value::Null,
            };
            let ping = match &check.ping {
                None if check.not_pinged.is_some() => {
                    json!({"ok": true, "skipped": check.not_pinged})
                }
                None => Value::Null,
                Some(Ok(pong)) => json!({
                    "ok": true,
                    "model": pong.model,
                    "ms": pong.ms,
                    "tools": pong.tools,
                    "round_trip": pong.round_trip,
                }),
                Some(Err(error)) => json!({"ok": false, "error": error}),
            };
            json!({
                "role": rc.role.name(),
                "provider": {"value": rc.provider.value.kind(), "source": rc.provider.source.to_string()},
                "script": script,
                "model": {"value": rc.model.value, "source": rc.model.source.to_string()},
                "base_url": sourced(rc.base_url.as_ref()),
                "key_var": sourced(rc.key_var.as_ref()),
                "max_tokens": rc.max_tokens.as_ref().map_or(Value::Null, |m| json!({"value": m.value, "source": m.source.to_string()})),
                "price": priced.unwrap_or(Value::Null),
                "ok": check.ok(),
                "error": check.client_error,
                "ping": ping,
            })
        })
        .collect();
    let files: Vec<Value> = config
        .files()
        .iter()
        .map(|f| json!({"scope": f.scope, "path": f.path.display().to_string(), "found": f.found}))
        .collect();
    let keys: Vec<Value> = config
        .key_vars()
        .iter()
        .map(|k| {
            let roles: Vec<&str> = k.roles.iter().map(|r| r.name()).collect();
            json!({"name": k.name, "set": k.set, "roles": roles})
        })
        .collect();
    let providers: Vec<Value> = providers(config)
        .into_iter()
        .map(|(name, url, roles)| {
            let roles: Vec<&str> = roles.iter().map(|r| r.name()).collect();
            json!({"provider": name, "base_url": url, "roles": roles})
        })
        .collect();
    json!({
        "workspace": workspace.display().to_string(),
        "ok": ok,
        "files": files,
        "key_vars": keys,
        "providers": providers,
        "roles": roles,
    })
}
