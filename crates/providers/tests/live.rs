//! The opt-in live check: small requests (whole, then streamed) to the real APIs, one plain
//! answer and one call of a tool from pev's own registry (the specs the agent sends, derived from
//! the tools' argument types), so the live call exercises the real tool schemas.
//!
//! ```text
//! PEV_LIVE=1 ANTHROPIC_API_KEY=… OPENAI_API_KEY=… \
//!     cargo test -p pev-providers --test live -- --ignored
//! PEV_LIVE=1 ANTHROPIC_API_KEY=… cargo test -p pev-providers --test live -- --ignored anthropic
//! ```
//!
//! Every test here is `#[ignore]`d with the reason, so a plain `cargo test` lists them as ignored
//! (never as passed) and sends nothing: `cargo test` must pass offline and without keys, and live
//! models are evals, not tests. Run with `--ignored`, a test fails, rather than passing having
//! checked nothing, when `PEV_LIVE=1` or its provider's settings are missing:
//! - Anthropic needs `ANTHROPIC_API_KEY` (`ANTHROPIC_BASE_URL` honoured), with
//!   `PEV_LIVE_ANTHROPIC_MODEL` (default `claude-haiku-4-5`);
//! - OpenAI-compatible needs `OPENAI_API_KEY` or `OPENAI_BASE_URL`, with
//!   `PEV_LIVE_OPENAI_MODEL` (default `gpt-4o-mini`).

use std::sync::Mutex;
use std::time::Duration;

use pev_providers::anthropic::AnthropicClient;
use pev_providers::http::Timeouts;
use pev_providers::openai::OpenAiClient;
use pev_providers::{
    ChatRequest, ChatResponse, Message, ModelClient, StopReason, StreamEvent, ToolChoice, ToolSpec,
};

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Fails unless the live check was asked for and `provider` is configured.
fn require_live(provider: &str, configured: bool, needs: &str) {
    assert!(
        std::env::var("PEV_LIVE").as_deref() == Ok("1"),
        "the live checks call the real APIs: set PEV_LIVE=1 (and {needs}) to run them"
    );
    assert!(configured, "PEV_LIVE=1 but {provider} is not configured: set {needs}");
}

fn require_anthropic() {
    require_live("Anthropic", var("ANTHROPIC_API_KEY").is_some(), "ANTHROPIC_API_KEY");
}

fn require_openai() {
    let configured = var("OPENAI_API_KEY").is_some() || var("OPENAI_BASE_URL").is_some();
    require_live("the OpenAI-compatible API", configured, "OPENAI_API_KEY or OPENAI_BASE_URL");
}

fn timeouts() -> Timeouts {
    Timeouts { request: Duration::from_secs(120), idle: Duration::from_secs(60) }
}

fn request(model: &str) -> ChatRequest {
    let mut request = ChatRequest::new(
        model,
        vec![Message::user("Reply with the single word: pong. No punctuation, nothing else.")],
    );
    request.max_tokens = 16;
    request.temperature = Some(0.0);
    request
}

/// One whole call and one streamed call, each with a sane answer: some text, a normal stop, and
/// tokens counted both ways; the streamed text is the final text.
async fn check(client: &dyn ModelClient, model: &str) {
    let provider = client.provider().to_owned();
    let response = client
        .chat(&request(model))
        .await
        .unwrap_or_else(|e| panic!("{provider} {model}: the call failed: {e}"));
    let text = response.text();
    assert!(!text.trim().is_empty(), "{provider} {model}: no text in {response:?}");
    assert!(text.to_ascii_lowercase().contains("pong"), "{provider} {model}: answered {text:?}");
    assert!(
        matches!(response.stop_reason, StopReason::EndTurn | StopReason::MaxTokens),
        "{provider} {model}: stop reason {:?}",
        response.stop_reason
    );
    assert!(response.usage.input_tokens + response.usage.cache_read_tokens > 0, "{response:?}");
    assert!(response.usage.output_tokens > 0, "{response:?}");
    assert!(!response.model.is_empty(), "{response:?}");

    let streamed = Mutex::new(String::new());
    let sink = |event: StreamEvent| {
        if let StreamEvent::TextDelta { text, .. } = event {
            streamed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push_str(&text);
        }
    };
    let response = client
        .chat_stream(&request(model), &sink)
        .await
        .unwrap_or_else(|e| panic!("{provider} {model}: the streamed call failed: {e}"));
    let streamed = streamed.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    assert!(!streamed.trim().is_empty(), "{provider} {model}: nothing streamed");
    assert_eq!(streamed, response.text(), "{provider} {model}: the deltas are not the text");
    assert!(response.usage.output_tokens > 0, "{response:?}");
}

/// pev's built-in tools as the agent offers them: the registry's definitions under their wire
/// names, schemas derived from each tool's argument type.
fn registry_tools() -> Vec<ToolSpec> {
    pev_tools::Registry::builtin().definitions().iter().map(ToolSpec::from).collect()
}

fn tool_request(model: &str) -> ChatRequest {
    let mut request = ChatRequest::new(
        model,
        vec![Message::user(
            "Read the file README.md of the workspace with the file_read tool. Call the tool; do \
             not answer in text.",
        )],
    );
    request.tools = registry_tools();
    request.tool_choice = ToolChoice::Tool("file_read".into());
    request.max_tokens = 256;
    request.temperature = Some(0.0);
    request
}

/// The one tool call of `response`: `file_read` with `README.md` as its path, arguments that the
/// registry's own tool accepts.
fn assert_reads_readme(provider: &str, model: &str, response: &ChatResponse) {
    let calls: Vec<_> = response.tool_calls().collect();
    assert_eq!(calls.len(), 1, "{provider} {model}: one tool call expected: {response:?}");
    let (_, name, input) = calls[0];
    assert_eq!(name, "file_read", "{provider} {model}: {response:?}");
    assert_eq!(input["path"], "README.md", "{provider} {model}: arguments {input}");
    assert_eq!(response.stop_reason, StopReason::ToolUse, "{provider} {model}: {response:?}");
}

/// A forced call of a registry tool, whole and streamed (the streamed arguments are assembled
/// from their fragments).
async fn check_tool_call(client: &dyn ModelClient, model: &str) {
    let provider = client.provider().to_owned();
    let tools = registry_tools();
    assert!(tools.len() >= 6 && tools.iter().any(|t| t.name == "file_read"), "{tools:?}");
    assert!(tools.iter().all(|t| pev_tools::is_wire_name(&t.name)), "{tools:?}");
    let response = client
        .chat(&tool_request(model))
        .await
        .unwrap_or_else(|e| panic!("{provider} {model}: the call with pev's tools failed: {e}"));
    assert_reads_readme(&provider, model, &response);
    let sink = |_: StreamEvent| {};
    let response = client
        .chat_stream(&tool_request(model), &sink)
        .await
        .unwrap_or_else(|e| panic!("{provider} {model}: the streamed call with tools failed: {e}"));
    assert_reads_readme(&provider, model, &response);
}

fn anthropic() -> (AnthropicClient, String) {
    let client = AnthropicClient::from_vars(&var, timeouts())
        .unwrap_or_else(|e| panic!("cannot build the Anthropic client: {e}"));
    let model = var("PEV_LIVE_ANTHROPIC_MODEL").unwrap_or_else(|| "claude-haiku-4-5".to_owned());
    (client, model)
}

fn openai() -> (OpenAiClient, String) {
    let client = OpenAiClient::from_vars(&var, timeouts())
        .unwrap_or_else(|e| panic!("cannot build the OpenAI client: {e}"));
    let model = var("PEV_LIVE_OPENAI_MODEL").unwrap_or_else(|| "gpt-4o-mini".to_owned());
    (client, model)
}

#[tokio::test]
#[ignore = "live: needs PEV_LIVE=1 and an API key; run with cargo test -p pev-providers --test live -- --ignored"]
async fn anthropic_answers() {
    require_anthropic();
    let (client, model) = anthropic();
    check(&client, &model).await;
}

#[tokio::test]
#[ignore = "live: needs PEV_LIVE=1 and an API key; run with cargo test -p pev-providers --test live -- --ignored"]
async fn anthropic_calls_a_pev_tool() {
    require_anthropic();
    let (client, model) = anthropic();
    check_tool_call(&client, &model).await;
}

#[tokio::test]
#[ignore = "live: needs PEV_LIVE=1 and an API key; run with cargo test -p pev-providers --test live -- --ignored"]
async fn openai_compatible_answers() {
    require_openai();
    let (client, model) = openai();
    check(&client, &model).await;
}

#[tokio::test]
#[ignore = "live: needs PEV_LIVE=1 and an API key; run with cargo test -p pev-providers --test live -- --ignored"]
async fn openai_compatible_calls_a_pev_tool() {
    require_openai();
    let (client, model) = openai();
    check_tool_call(&client, &model).await;
}
