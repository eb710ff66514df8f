//! pev's model clients. One trait, [`ModelClient`], for a chat turn (system prompt, messages of
//! text, tool calls and tool results, tool definitions, limits), whole or streamed; clients for
//! Anthropic's Messages API, OpenAI-compatible Chat Completions (hosted, Ollama, vLLM,
//! llama.cpp) and scripted models (`script:FILE`, for offline runs); retries with backoff;
//! structured output validated against a JSON Schema; and the role table and price list that turn
//! usage into dollars.
//!
//! Errors are typed ([`ProviderError`]) so that callers decide by kind. Nothing here reads a key
//! it was not told to read, and no key ever appears in an error or a log.

use std::future::Future;
use std::pin::Pin;

pub mod anthropic;
pub mod config;
pub mod cost;
pub mod error;
pub mod http;
pub mod layer;
pub mod notice;
pub mod openai;
pub mod retry;
pub mod rules;
pub mod script;
pub mod sse;
pub mod structured;
pub mod types;

pub use error::ProviderError;
pub use types::{
    ChatRequest, ChatResponse, ContentBlock, Message, Role, StopReason, StreamEvent, TokenUsage,
    ToolChoice, ToolSpec,
};

/// `host` or `host:port` of an http(s) URL (the port only when it is not the scheme's default).
pub fn server_of(url: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).ok()?;
    let host = url.host_str()?;
    Some(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

/// A boxed future that can cross threads.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where a streaming call reports its progress.
pub type StreamSink<'a> = &'a (dyn Fn(StreamEvent) + Send + Sync);

/// A model behind some API.
pub trait ModelClient: Send + Sync {
    /// The provider's name, for messages (`anthropic`, `openai`, `script:plan.json`).
    fn provider(&self) -> &str;

    /// The host (and port) of the API this client talks to, for traces (`api.anthropic.com`,
    /// `localhost:8080`); `None` when it talks to none (a scripted model).
    fn server(&self) -> Option<String> {
        None
    }

    /// One whole turn.
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>>;

    /// One turn, streamed: `sink` sees text and tool-call fragments as they arrive; the result is
    /// the whole response, as [`ModelClient::chat`] would return it.
    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>>;
}
