//! Unit tests for `pev.toml` loading: precedence and sources, strict parsing with file:line:col,
//! script paths, price overrides, and clients that refuse to build without their key.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::TempDir;

use super::{Config, ConfigError, Provider, Role, Source};
use crate::error::ProviderError;

/// A workspace and a user config dir, each with an optional pev.toml.
struct Setup {
    _root: TempDir,
    workspace: PathBuf,
    xdg: PathBuf,
}

impl Setup {
    fn new(workspace_toml: Option<&str>, user_toml: Option<&str>) -> Self {
        let root = tempfile::tempdir().expect("temp dir");
        let workspace = root.path().join("ws");
        let xdg = root.path().join("xdg");
        std::fs::create_dir_all(&workspace).expect("mkdir ws");
        std::fs::create_dir_all(xdg.join("pev")).expect("mkdir xdg");
        if let Some(text) = workspace_toml {
            std::fs::write(workspace.join("pev.toml"), text).expect("write ws toml");
        }
        if let Some(text) = user_toml {
            std::fs::write(xdg.join("pev/pev.toml"), text).expect("write user toml");
        }
        Self { _root: root, workspace, xdg }
    }

    fn ws_file(&self) -> PathBuf {
        self.workspace.join("pev.toml")
    }

    fn user_file(&self) -> PathBuf {
        self.xdg.join("pev/pev.toml")
    }

    fn load(&self, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut map: HashMap<String, String> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        map.entry("XDG_CONFIG_HOME".to_owned()).or_insert_with(|| self.xdg.display().to_string());
        Config::load(&self.workspace, &move |k| map.get(k).cloned())
    }

    fn ok(&self, vars: &[(&str, &str)]) -> Config {
        self.load(vars).unwrap_or_else(|e| panic!("config does not load: {e}"))
    }
}

fn parse_error(result: Result<Config, ConfigError>) -> (PathBuf, usize, usize, String) {
    match result {
        Err(ConfigError::Parse { path, line, column, message }) => (path, line, column, message),
        Err(other) => panic!("expected a parse error, got {other}"),
        Ok(_) => panic!("expected a parse error, the config loaded"),
    }
}

fn config_error(result: Result<std::sync::Arc<dyn crate::ModelClient>, ProviderError>) -> String {
    match result {
        Err(ProviderError::Config(message)) => message,
        Err(other) => panic!("expected a Config error, got {other}"),
        Ok(_) => panic!("expected a Config error, the client was built"),
    }
}

/// The provider name of a client that must have been built. (Which base URL and key it uses is
/// checked at a server, in `tests/suite/config_clients.rs`.)
fn provider_of(result: Result<std::sync::Arc<dyn crate::ModelClient>, ProviderError>) -> String {
    match result {
        Ok(client) => client.provider().to_owned(),
        Err(e) => panic!("the client does not build: {e}"),
    }
}

#[test]
fn defaults_are_strong_balanced_cheap_on_anthropic() {
    let setup = Setup::new(None, None);
    let config = setup.ok(&[]);
    let models: Vec<&str> = config.roles().iter().map(|r| r.model.value.as_str()).collect();
    assert_eq!(models, ["claude-opus-4-6", "claude-sonnet-4-5", "claude-haiku-4-5"]);
    for rc in config.roles() {
        assert_eq!(rc.provider.value, Provider::Anthropic);
        assert_eq!(rc.provider.source, Source::Default);
        assert_eq!(rc.model.source, Source::Default);
        let url = rc.base_url.as_ref().expect("anthropic has a URL");
        assert_eq!(url.value, "https://api.anthropic.com");
        assert_eq!(rc.key_var.as_ref().map(|k| k.value.as_str()), Some("ANTHROPIC_API_KEY"));
        assert_eq!(rc.max_tokens, None);
    }
    let files: Vec<(&str, bool)> = config.files().iter().map(|f| (f.scope, f.found)).collect();
    assert_eq!(files, [("workspace", false), ("user", false)]);
}

#[test]
fn env_beats_workspace_beats_user_beats_defaults_per_key() {
    let user = r#"
[roles.planner]
model = "user-planner"
max_tokens = 1000
[roles.executor]
model = "user-executor"
"#;
    let workspace = r#"
[roles.planner]
model = "ws-planner"
"#;
    let setup = Setup::new(Some(workspace), Some(user));
    let config = setup.ok(&[]);
    let planner = config.role(Role::Planner);
    assert_eq!(planner.model.value, "ws-planner");
    assert_eq!(planner.model.source, Source::Workspace(setup.ws_file()));
    // Another key of the same role still comes from the user's file.
    let max = planner.max_tokens.as_ref().expect("max_tokens");
    assert_eq!((max.value, &max.source), (1000, &Source::User(setup.user_file())));
    let executor = config.role(Role::Executor);
    assert_eq!(executor.model.value, "user-executor");
    assert_eq!(executor.model.source, Source::User(setup.user_file()));
    assert_eq!(config.role(Role::Verifier).model.source, Source::Default);
    let files: Vec<(&str, bool)> = config.files().iter().map(|f| (f.scope, f.found)).collect();
    assert_eq!(files, [("workspace", true), ("user", true)]);

    let config = setup.ok(&[("PEV_PLANNER_MODEL", "env-planner"), ("PEV_VERIFIER_MODEL", "  ")]);
    let planner = config.role(Role::Planner);
    assert_eq!(planner.model.value, "env-planner");
    assert_eq!(planner.model.source, Source::Env("PEV_PLANNER_MODEL".to_owned()));
    // A blank variable counts as unset.
    assert_eq!(config.role(Role::Verifier).model.source, Source::Default);
}

#[test]
fn role_provider_variable_beats_pev_provider() {
    let setup = Setup::new(Some("[roles.executor]\nprovider = \"anthropic\"\n"), None);
    let config = setup.ok(&[("PEV_PROVIDER", "openai"), ("PEV_VERIFIER_PROVIDER", "anthropic")]);
    let provider = |role| config.role(role).provider.clone();
    assert_eq!(provider(Role::Planner).value, Provider::OpenAi);
    assert_eq!(provider(Role::Planner).source, Source::Env("PEV_PROVIDER".to_owned()));
    assert_eq!(provider(Role::Executor).value, Provider::OpenAi);
    assert_eq!(provider(Role::Verifier).value, Provider::Anthropic);
    assert_eq!(provider(Role::Verifier).source, Source::Env("PEV_VERIFIER_PROVIDER".to_owned()));
    let url = config.role(Role::Planner).base_url.clone().expect("url");
    assert_eq!(url.value, "https://api.openai.com/v1");
    assert_eq!(
        config.role(Role::Planner).key_var.clone().map(|k| k.value).as_deref(),
        Some("OPENAI_API_KEY")
    );
}

#[test]
fn a_bad_provider_variable_is_named() {
    let setup = Setup::new(None, None);
    match setup.load(&[("PEV_EXECUTOR_PROVIDER", "gemini")]) {
        Err(ConfigError::Env { var, message }) => {
            assert_eq!(var, "PEV_EXECUTOR_PROVIDER");
            assert!(message.contains("unknown provider `gemini`"), "{message}");
        }
        other => panic!("expected an env error, got {other:?}"),
    }
}

#[test]
fn the_example_file_resolves() {
    let text = r#"
[roles.planner]
provider = "anthropic"
model = "claude-opus-4-6"

[roles.executor]
provider = "anthropic"
model = "claude-sonnet-4-5"
max_tokens = 8192

[roles.verifier]
provider = "openai"
model = "qwen2.5:7b"
base_url = "http://localhost:11434/v1"

[providers.openai]
base_url = "https://gateway.example/v1"
api_key_env = "MY_KEY_VAR"
request_timeout_secs = 30

[prices."qwen2.5:7b"]
input_per_mtok = 0.0
output_per_mtok = 0

[retry]
max_attempts = 5
max_total_wait_secs = 9
"#;
    let setup = Setup::new(Some(text), None);
    let config = setup.ok(&[("OPENAI_BASE_URL", "http://env.example/v1")]);
    let ws = Source::Workspace(setup.ws_file());
    let verifier = config.role(Role::Verifier);
    assert_eq!(verifier.provider.value, Provider::OpenAi);
    // The role's own URL wins over the provider's, even over OPENAI_BASE_URL.
    let url = verifier.base_url.clone().expect("url");
    assert_eq!((url.value.as_str(), &url.source), ("http://localhost:11434/v1", &ws));
    let key = verifier.key_var.clone().expect("key var");
    assert_eq!((key.value.as_str(), &key.source), ("MY_KEY_VAR", &ws));
    assert_eq!(verifier.timeouts.request, Duration::from_secs(30));
    assert_eq!(config.role(Role::Executor).max_tokens.as_ref().map(|m| m.value), Some(8192));
    assert_eq!(config.retry().max_attempts, 5);
    assert_eq!(config.retry().max_total_wait, Duration::from_secs(9));
    // The limits left out keep the policy's defaults.
    assert_eq!(config.retry().max_delay, crate::retry::RetryPolicy::default().max_delay);

    let (found, source) = config.price_for(Role::Verifier).expect("priced");
    assert_eq!((found.key, found.price.output_per_mtok, source), ("qwen2.5:7b", 0.0, ws));
    let (found, source) = config.price_for(Role::Planner).expect("built-in price");
    assert_eq!(
        (found.key, found.price.input_per_mtok, source),
        ("claude-opus-4-6", 5.0, Source::Default)
    );
}

#[test]
fn provider_base_url_env_beats_the_files() {
    let text = "[providers.anthropic]\nbase_url = \"http://file.example\"\n";
    let setup = Setup::new(Some(text), None);
    let config = setup.ok(&[]);
    let url = config.role(Role::Planner).base_url.clone().expect("url");
    assert_eq!(
        (url.value.as_str(), url.source),
        ("http://file.example", Source::Workspace(setup.ws_file()))
    );
    let config = setup.ok(&[("ANTHROPIC_BASE_URL", "http://env.example")]);
    let url = config.role(Role::Planner).base_url.clone().expect("url");
    assert_eq!(
        (url.value.as_str(), url.source),
        ("http://env.example", Source::Env("ANTHROPIC_BASE_URL".to_owned()))
    );
}

#[test]
fn a_role_url_is_dropped_when_a_higher_layer_switches_provider() {
    let user =
        "[roles.verifier]\nprovider = \"openai\"\nbase_url = \"http://localhost:11434/v1\"\n";
    let workspace = "[roles.verifier]\nprovider = \"anthropic\"\n";
    let setup = Setup::new(Some(workspace), Some(user));
    let url = setup.ok(&[]).role(Role::Verifier).base_url.clone().expect("url");
    assert_eq!((url.value.as_str(), url.source), ("https://api.anthropic.com", Source::Default));
    // Without the switch the user's URL applies.
    let setup = Setup::new(None, Some(user));
    let url = setup.ok(&[]).role(Role::Verifier).base_url.clone().expect("url");
    assert_eq!(url.value, "http://localhost:11434/v1");
}

#[test]
fn an_unknown_key_is_an_error_at_its_line() {
    let text = "[roles.planner]\nprovider = \"anthropic\"\nmodle = \"x\"\n";
    let setup = Setup::new(Some(text), None);
    let (path, line, column, message) = parse_error(setup.load(&[]));
    assert_eq!(path, setup.ws_file());
    assert_eq!((line, column), (3, 1));
    assert!(message.contains("unknown field `modle`"), "{message}");
    let shown = ConfigError::Parse { path, line, column, message }.to_string();
    assert!(shown.starts_with(&format!("{}:3:1: ", setup.ws_file().display())), "{shown}");
}

#[test]
fn unknown_roles_sections_and_providers_are_errors() {
    let cases = [
        ("[roles.critic]\nmodel = \"x\"\n", 1, "unknown field `critic`"),
        ("[model]\nname = \"x\"\n", 1, "unknown field `model`"),
        ("\n[roles.planner]\nprovider = \"gemini\"\n", 3, "unknown provider `gemini`"),
        ("[roles.planner]\nprovider = \"script:\"\n", 2, "needs a file"),
        ("[prices.m]\ninput_per_mtok = -1\noutput_per_mtok = 1\n", 2, "non-negative"),
        ("[roles.planner]\nmodel = \"\"\n", 2, "must not be empty"),
        ("[roles.planner]\nmax_tokens = \"many\"\n", 2, "invalid type"),
    ];
    for (text, want_line, want) in cases {
        let setup = Setup::new(None, Some(text));
        let (path, line, _, message) = parse_error(setup.load(&[]));
        assert_eq!(path, setup.user_file(), "{text}");
        assert_eq!(line, want_line, "{text}: {message}");
        assert!(message.contains(want), "{text}: {message}");
    }
}

#[test]
fn bad_toml_is_an_error_with_line_and_column() {
    let setup = Setup::new(Some("[roles.planner]\nmodel = \"x\n"), None);
    let (path, line, column, message) = parse_error(setup.load(&[]));
    assert_eq!(path, setup.ws_file());
    assert_eq!(line, 2, "{message}");
    assert!(column >= 9, "column {column}: {message}");
    assert!(!message.is_empty());
}

#[test]
fn script_paths_are_relative_to_their_file_or_the_workspace() {
    let setup = Setup::new(
        Some("[roles.planner]\nprovider = \"script:plans/planner.json\"\n"),
        Some("[roles.executor]\nprovider = \"script:exec.json\"\n"),
    );
    let config = setup.ok(&[("PEV_VERIFIER_PROVIDER", "script:verify.json")]);
    let script = |role| match &config.role(role).provider.value {
        Provider::Script(path) => path.clone(),
        other => panic!("{role} is {other}, not a script"),
    };
    assert_eq!(script(Role::Planner), setup.workspace.join("plans/planner.json"));
    assert_eq!(script(Role::Executor), setup.xdg.join("pev/exec.json"));
    assert_eq!(script(Role::Verifier), setup.workspace.join("verify.json"));
    assert_eq!(config.role(Role::Planner).base_url, None);
    assert_eq!(config.role(Role::Planner).key_var, None);
    // The file does not exist: building the client says so, with the path.
    let message = config_error(config.client_for(Role::Planner));
    assert!(message.contains("plans/planner.json"), "{message}");
    // Once it does, the client builds without any key.
    std::fs::create_dir_all(setup.workspace.join("plans")).expect("mkdir");
    let script_text = r#"{"turns": [{"content": [{"type": "text", "text": "hi"}]}]}"#;
    std::fs::write(setup.workspace.join("plans/planner.json"), script_text).expect("write");
    let planner = setup.workspace.join("plans/planner.json");
    assert_eq!(
        provider_of(config.client_for(Role::Planner)),
        format!("script:{}", planner.display())
    );
}

#[test]
fn anthropic_without_its_key_is_a_clear_config_error() {
    let setup = Setup::new(None, None);
    let config = setup.ok(&[]);
    let message = config_error(config.client_for(Role::Planner));
    assert!(message.contains("ANTHROPIC_API_KEY"), "{message}");
    assert!(message.contains("planner"), "{message}");
    let config = setup.ok(&[("ANTHROPIC_API_KEY", "sk-test-123")]);
    assert_eq!(provider_of(config.client_for(Role::Planner)), "anthropic");
}

#[test]
fn api_key_env_names_the_variable_to_read() {
    let setup = Setup::new(Some("[providers.anthropic]\napi_key_env = \"MY_KEY_VAR\"\n"), None);
    // The standard variable is not read any more.
    let config = setup.ok(&[("ANTHROPIC_API_KEY", "sk-standard")]);
    let message = config_error(config.client_for(Role::Executor));
    assert!(message.contains("MY_KEY_VAR"), "{message}");
    let vars = config.key_vars();
    let mine = vars.iter().find(|v| v.name == "MY_KEY_VAR").expect("listed");
    assert!(!mine.set);
    assert_eq!(mine.roles, Role::ALL);
    let standard = vars.iter().find(|v| v.name == "ANTHROPIC_API_KEY").expect("listed");
    assert!(standard.set && standard.roles.is_empty());
    let config = setup.ok(&[("MY_KEY_VAR", "sk-mine")]);
    assert_eq!(provider_of(config.client_for(Role::Executor)), "anthropic");
}

#[test]
fn openai_needs_a_key_only_for_the_hosted_api() {
    let setup = Setup::new(None, None);
    let config = setup.ok(&[("PEV_PROVIDER", "openai"), ("PEV_VERIFIER_MODEL", "gpt-5-mini")]);
    let message = config_error(config.client_for(Role::Verifier));
    assert!(message.contains("OPENAI_API_KEY"), "{message}");
    let config = setup.ok(&[
        ("PEV_PROVIDER", "openai"),
        ("PEV_VERIFIER_MODEL", "qwen2.5:7b"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
    ]);
    assert_eq!(provider_of(config.client_for(Role::Verifier)), "openai");
    let verifier = config.role(Role::Verifier);
    assert_eq!(
        verifier.base_url.as_ref().map(|u| u.value.as_str()),
        Some("http://127.0.0.1:11434/v1")
    );
}

#[test]
fn keys_never_show_in_debug_output() {
    let setup = Setup::new(None, None);
    let config = setup.ok(&[("ANTHROPIC_API_KEY", "sk-very-secret-value")]);
    let shown = format!("{config:?}");
    assert!(!shown.contains("sk-very-secret-value"));
    assert!(shown.contains("<redacted>"));
}

#[test]
fn the_user_file_falls_back_to_home() {
    let root = tempfile::tempdir().expect("temp dir");
    let home = root.path().join("home");
    let workspace = root.path().join("ws");
    std::fs::create_dir_all(home.join(".config/pev")).expect("mkdir");
    std::fs::create_dir_all(&workspace).expect("mkdir");
    std::fs::write(home.join(".config/pev/pev.toml"), "[roles.planner]\nmodel = \"m\"\n")
        .expect("write");
    let home_text = home.display().to_string();
    // A relative XDG_CONFIG_HOME is ignored, as the XDG spec says.
    let vars = move |k: &str| match k {
        "HOME" => Some(home_text.clone()),
        "XDG_CONFIG_HOME" => Some("relative/dir".to_owned()),
        _ => None,
    };
    let config = Config::load(&workspace, &vars).expect("loads");
    let expected = home.join(".config/pev/pev.toml");
    assert_eq!(config.role(Role::Planner).model.source, Source::User(expected.clone()));
    assert_eq!(
        config.files().iter().map(|f| f.path.as_path()).collect::<Vec<_>>(),
        [workspace.join("pev.toml").as_path(), Path::new(&expected)]
    );
}

#[test]
fn hooks_take_a_string_or_a_list_and_add_up_user_first() {
    let user = "[hooks]\npre_tool_use = \"./user-guard.sh\"\nstop = [\"u1\", \"u2\"]\n";
    let workspace = "[hooks]\npre_tool_use = [\"./a.sh\", \"./b.sh --x\"]\npost_tool_use = \
                     \"echo '{}'\"\ntimeout_ms = 250\n";
    let setup = Setup::new(Some(workspace), Some(user));
    let config = setup.ok(&[]);
    let hooks = config.hooks();
    let pre: Vec<(&str, u128, &Source)> = hooks
        .pre_tool_use
        .iter()
        .map(|h| (h.command.as_str(), h.timeout.as_millis(), &h.source))
        .collect();
    let user_src = Source::User(setup.user_file());
    let ws_src = Source::Workspace(setup.ws_file());
    // The user's guard stays, with the default timeout; the workspace's come after, with its own.
    assert_eq!(
        pre,
        [
            ("./user-guard.sh", 5000, &user_src),
            ("./a.sh", 250, &ws_src),
            ("./b.sh --x", 250, &ws_src)
        ]
    );
    let post: Vec<&str> = hooks.post_tool_use.iter().map(|h| h.command.as_str()).collect();
    assert_eq!(post, ["echo '{}'"]);
    let stop: Vec<&str> = hooks.stop.iter().map(|h| h.command.as_str()).collect();
    assert_eq!(stop, ["u1", "u2"]);
    assert!(hooks.step_finished.is_empty());
    assert!(!hooks.is_empty());
    assert!(Setup::new(None, None).ok(&[]).hooks().is_empty());
}

#[test]
fn bad_hooks_are_errors_at_their_line() {
    let cases = [
        ("[hooks]\npre_tool_use = \"a\"\nbefore_tool = \"b\"\n", 3, "unknown field `before_tool`"),
        ("[hooks]\nstop = \"  \"\n", 2, "must not be empty"),
        ("[hooks]\nstop = [\"ok\", \"\"]\n", 2, "must not be empty"),
        ("[hooks]\nstop = 3\n", 2, "a command line or a list of command lines"),
        ("[hooks]\nstop = [3]\n", 2, "invalid type"),
        ("[hooks]\ntimeout_ms = 0\n", 2, "at least 1"),
        ("[hooks]\ntimeout_ms = \"5s\"\n", 2, "invalid type"),
    ];
    for (text, want_line, want) in cases {
        let setup = Setup::new(Some(text), None);
        let (path, line, _, message) = parse_error(setup.load(&[]));
        assert_eq!(path, setup.ws_file(), "{text}");
        assert_eq!(line, want_line, "{text}: {message}");
        assert!(message.contains(want), "{text}: {message}");
    }
}

#[test]
fn switching_to_openai_without_a_model_names_the_variable_to_set() {
    let setup = Setup::new(None, None);
    let config =
        setup.ok(&[("PEV_PROVIDER", "openai"), ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")]);
    let message = config_error(config.client_for(Role::Planner));
    assert!(message.contains("PEV_PLANNER_MODEL"), "{message}");
    assert!(message.contains("claude-opus-4-6"), "{message}");
    assert!(message.contains("[roles.planner]"), "{message}");
    // A model from a file is fine.
    let setup = Setup::new(Some("[roles.planner]\nmodel = \"llama3\"\n"), None);
    let config =
        setup.ok(&[("PEV_PROVIDER", "openai"), ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")]);
    assert_eq!(provider_of(config.client_for(Role::Planner)), "openai");
}

#[test]
fn telemetry_is_read_from_the_users_file_and_refused_in_a_workspaces() {
    let user = "[telemetry]\nendpoint = \"http://localhost:4318\"\ncapture_content = true\n\
                timeout_ms = 2000\n[telemetry.headers]\napi_key = \"k\"\n";
    let setup = Setup::new(None, Some(user));
    let config = setup.ok(&[]);
    let t = config.telemetry().expect("the user's [telemetry]");
    assert_eq!(t.endpoint.as_deref(), Some("http://localhost:4318"));
    assert_eq!(t.capture_content, Some(true));
    assert_eq!(t.timeout_ms, Some(2000));
    assert_eq!(t.headers.get("api_key").map(String::as_str), Some("k"));
    assert!(Setup::new(None, None).ok(&[]).telemetry().is_none());

    let setup = Setup::new(Some("[telemetry]\nendpoint = \"http://evil:4318\"\n"), None);
    match setup.load(&[]) {
        Err(ConfigError::Refused { path, message }) => {
            assert_eq!(path, setup.ws_file());
            assert!(message.contains("[telemetry] is read from your own pev.toml"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let setup = Setup::new(None, Some("[telemetry]\nendpont = \"x\"\n"));
    let (path, line, _, message) = parse_error(setup.load(&[]));
    assert_eq!((path, line), (setup.user_file(), 2));
    assert!(message.contains("endpont"), "{message}");
}

#[test]
fn the_store_is_read_from_the_users_file_only_and_its_password_never_shown() {
    let user = "store = \"postgres://pev:s3cret@db.internal/agents\"\n";
    let setup = Setup::new(None, Some(user));
    let config = setup.ok(&[]);
    let store = config.store().expect("the user's store");
    assert_eq!(store.value.as_str(), "postgres://pev:s3cret@db.internal/agents");
    assert_eq!(store.source, Source::User(setup.user_file()));
    assert!(!format!("{config:?}").contains("s3cret"), "{config:?}");
    // The CLI's reader looks at the user's file alone: a broken workspace file does not matter.
    std::fs::write(setup.ws_file(), "not toml [").expect("write");
    let xdg = setup.xdg.display().to_string();
    let vars = move |k: &str| (k == "XDG_CONFIG_HOME").then(|| xdg.clone());
    let found = Config::user_store(&vars).expect("reads").expect("set");
    assert_eq!(found.value.as_str(), store.value.as_str());

    let setup = Setup::new(Some("store = \"postgres://evil/db\"\n"), None);
    match setup.load(&[]) {
        Err(ConfigError::Refused { path, message }) => {
            assert_eq!(path, setup.ws_file());
            assert!(message.contains("`store` is read from your own pev.toml"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(Setup::new(None, None).ok(&[]).store().is_none());
}
