//! The clients `Config::client_for` builds, checked where it counts: at the server. Each role's
//! client is pointed (through `pev.toml` or a `*_BASE_URL` variable) at the mock server, sends one
//! turn, and the request shows which provider's wire format it speaks, which base URL it went to,
//! which key it carries and which model it asks for. The environment is injected, never set.

use std::collections::HashMap;

use pev_providers::config::{Config, Role};
use pev_providers::{ChatRequest, Message, ProviderError};
use tempfile::TempDir;

use super::mock::{MockServer, Recorded, Reply};

/// A workspace with an optional `pev.toml`, and an empty user config dir.
struct Setup {
    root: TempDir,
}

impl Setup {
    fn new(workspace_toml: Option<&str>) -> Self {
        let root = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(root.path().join("ws")).expect("mkdir ws");
        std::fs::create_dir_all(root.path().join("xdg/pev")).expect("mkdir xdg");
        if let Some(text) = workspace_toml {
            std::fs::write(root.path().join("ws/pev.toml"), text).expect("write pev.toml");
        }
        Self { root }
    }

    fn workspace(&self) -> std::path::PathBuf {
        self.root.path().join("ws")
    }

    fn config(&self, vars: &[(&str, &str)]) -> Config {
        let mut map: HashMap<String, String> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        map.insert("XDG_CONFIG_HOME".into(), self.root.path().join("xdg").display().to_string());
        Config::load(&self.workspace(), &move |k| map.get(k).cloned())
            .unwrap_or_else(|e| panic!("config does not load: {e}"))
    }
}

fn fixture(provider: &str, name: &str) -> String {
    let path = format!("{}/tests/fixtures/{provider}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Sends one turn through `role`'s client to `server`; returns the answer and what arrived.
async fn one_turn(config: &Config, role: Role, server: &MockServer) -> (String, Recorded) {
    let client = config.client_for(role).unwrap_or_else(|e| panic!("{role}: {e}"));
    let request =
        ChatRequest::new(config.role(role).model.value.clone(), vec![Message::user("hi")]);
    let text = client.chat(&request).await.unwrap_or_else(|e| panic!("{role}: {e}")).text();
    let sent = server.requests();
    assert_eq!(sent.len(), 1, "{role}: one request, no retry");
    (text, sent[0].clone())
}

#[tokio::test]
async fn an_anthropic_role_speaks_messages_to_its_base_url_with_its_key() {
    let server =
        MockServer::start(vec![Reply::json(200, &fixture("anthropic", "text.json"))]).await;
    let setup = Setup::new(None);
    let config = setup.config(&[
        ("ANTHROPIC_API_KEY", "sk-ant-config-test-1"),
        ("ANTHROPIC_BASE_URL", server.base_url.as_str()),
    ]);
    let client = config.client_for(Role::Planner).expect("builds");
    assert_eq!(client.provider(), "anthropic");
    let (text, sent) = one_turn(&config, Role::Planner, &server).await;
    assert_eq!(text, "The build passes: 42 tests, no failures.");
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/v1/messages"));
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-config-test-1"));
    assert_eq!(sent.header("authorization"), None);
    assert!(sent.header("anthropic-version").is_some());
    assert_eq!(sent.json()["model"], "claude-opus-4-6");
}

#[tokio::test]
async fn api_key_env_is_the_key_the_client_sends() {
    let server =
        MockServer::start(vec![Reply::json(200, &fixture("anthropic", "text.json"))]).await;
    let toml = format!(
        "[providers.anthropic]\napi_key_env = \"MY_KEY_VAR\"\nbase_url = \"{}\"\n",
        server.base_url
    );
    let setup = Setup::new(Some(&toml));
    let config = setup.config(&[("ANTHROPIC_API_KEY", "sk-standard"), ("MY_KEY_VAR", "sk-mine-2")]);
    let (_, sent) = one_turn(&config, Role::Executor, &server).await;
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("sk-mine-2"));
    assert_eq!(sent.json()["model"], config.role(Role::Executor).model.value.as_str());
}

#[tokio::test]
async fn an_openai_role_speaks_chat_completions_to_its_base_url() {
    // A local server without a key: no Authorization header at all.
    let server = MockServer::start(vec![Reply::json(200, &fixture("openai", "text.json"))]).await;
    let base = format!("{}/v1", server.base_url);
    let setup = Setup::new(None);
    let config = setup.config(&[
        ("PEV_PROVIDER", "openai"),
        ("PEV_VERIFIER_MODEL", "qwen2.5:7b"),
        ("OPENAI_BASE_URL", base.as_str()),
    ]);
    let client = config.client_for(Role::Verifier).expect("builds");
    assert_eq!(client.provider(), "openai");
    let (text, sent) = one_turn(&config, Role::Verifier, &server).await;
    assert_eq!(text, "The plan has three steps.");
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/v1/chat/completions"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.header("x-api-key"), None);
    assert_eq!(sent.json()["model"], config.role(Role::Verifier).model.value.as_str());

    // With a key, it is the bearer token.
    let server = MockServer::start(vec![Reply::json(200, &fixture("openai", "text.json"))]).await;
    let base = format!("{}/v1", server.base_url);
    let config = setup.config(&[
        ("PEV_PROVIDER", "openai"),
        ("PEV_VERIFIER_MODEL", "gpt-5-mini"),
        ("OPENAI_BASE_URL", base.as_str()),
        ("OPENAI_API_KEY", "sk-openai-config-test-3"),
    ]);
    let (_, sent) = one_turn(&config, Role::Verifier, &server).await;
    assert_eq!(sent.header("authorization"), Some("Bearer sk-openai-config-test-3"));
}

#[tokio::test]
async fn a_script_role_plays_its_file_and_names_it() {
    let setup = Setup::new(Some("[roles.planner]\nprovider = \"script:plans/planner.json\"\n"));
    std::fs::create_dir_all(setup.workspace().join("plans")).expect("mkdir");
    let script = r#"{"turns": [{"content": [{"type": "text", "text": "scripted hello"}]}]}"#;
    std::fs::write(setup.workspace().join("plans/planner.json"), script).expect("write");
    let config = setup.config(&[]);
    let client = config.client_for(Role::Planner).expect("builds without a key");
    assert!(client.provider().starts_with("script:"), "{}", client.provider());
    assert!(client.provider().ends_with("planner.json"), "{}", client.provider());
    let request = ChatRequest::new("any", vec![Message::user("hi")]);
    assert_eq!(client.chat(&request).await.expect("plays").text(), "scripted hello");
    // The other roles are still Anthropic's, and need its key.
    match config.client_for(Role::Executor) {
        Err(ProviderError::Config(message)) => {
            assert!(message.contains("ANTHROPIC_API_KEY"), "{message}");
        }
        Err(other) => panic!("expected a Config error, got {other}"),
        Ok(client) => panic!("built a {} client without a key", client.provider()),
    }
}
