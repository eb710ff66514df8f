//! The opt-in live check: one small request (whole, then streamed) to each provider that has a
//! key, against the real APIs.
//!
//! ```text
//! PEV_LIVE=1 ANTHROPIC_API_KEY=… OPENAI_API_KEY=… cargo test -p pev-providers --test live
//! ```
//!
//! Without `PEV_LIVE=1` every test here returns at once, having sent nothing and printed nothing.
//! This is the one deliberate skip of the test suite, and each test's name says so
//! (`…_skipped_unless_pev_live`): `cargo test` must pass offline and without keys, and live
//! models are evals, not tests. With `PEV_LIVE=1`:
//! - Anthropic is checked when `ANTHROPIC_API_KEY` is set (`ANTHROPIC_BASE_URL` honoured), with
//!   `PEV_LIVE_ANTHROPIC_MODEL` (default `claude-haiku-4-5`);
//! - OpenAI-compatible when `OPENAI_API_KEY` or `OPENAI_BASE_URL` is set, with
//!   `PEV_LIVE_OPENAI_MODEL` (default `gpt-4o-mini`);
//! - and at least one of them must be set, so a live run cannot pass by checking nothing.

use std::sync::Mutex;
use std::time::Duration;

use pev_providers::anthropic::AnthropicClient;
use pev_providers::http::Timeouts;
use pev_providers::openai::OpenAiClient;
use pev_providers::{ChatRequest, Message, ModelClient, StopReason, StreamEvent};

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Whether the live check was asked for.
fn live() -> bool {
    std::env::var("PEV_LIVE").as_deref() == Ok("1")
}

fn anthropic_configured() -> bool {
    var("ANTHROPIC_API_KEY").is_some()
}

fn openai_configured() -> bool {
    var("OPENAI_API_KEY").is_some() || var("OPENAI_BASE_URL").is_some()
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

#[tokio::test]
async fn some_provider_is_configured_skipped_unless_pev_live() {
    if !live() {
        return;
    }
    assert!(
        anthropic_configured() || openai_configured(),
        "PEV_LIVE=1 but neither ANTHROPIC_API_KEY nor OPENAI_API_KEY / OPENAI_BASE_URL is set"
    );
}

#[tokio::test]
async fn anthropic_answers_skipped_unless_pev_live() {
    if !live() || !anthropic_configured() {
        return;
    }
    let client = AnthropicClient::from_vars(&var, timeouts())
        .unwrap_or_else(|e| panic!("cannot build the Anthropic client: {e}"));
    let model = var("PEV_LIVE_ANTHROPIC_MODEL").unwrap_or_else(|| "claude-haiku-4-5".to_owned());
    check(&client, &model).await;
}

#[tokio::test]
async fn openai_compatible_answers_skipped_unless_pev_live() {
    if !live() || !openai_configured() {
        return;
    }
    let client = OpenAiClient::from_vars(&var, timeouts())
        .unwrap_or_else(|e| panic!("cannot build the OpenAI client: {e}"));
    let model = var("PEV_LIVE_OPENAI_MODEL").unwrap_or_else(|| "gpt-4o-mini".to_owned());
    check(&client, &model).await;
}
