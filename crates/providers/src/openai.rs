//! The OpenAI-compatible Chat Completions client: the hosted OpenAI API and the servers that
//! speak its dialect (Ollama, vLLM, llama.cpp's `llama-server`). One `POST
//! {base_url}/chat/completions`, whole or streamed as server-sent events.
//!
//! This file holds the client (configuration, the HTTP exchange, error mapping); the request and
//! response bodies are in `openai_wire.rs`, the reassembly of a streamed response in
//! `openai_stream.rs`.
//!
//! Choices worth knowing:
//! - The key is optional: local servers need none, so `Authorization` is only sent when a key is
//!   set. [`OpenAiClient::from_vars`] still requires `OPENAI_API_KEY` for the hosted endpoint.
//! - Usage: OpenAI counts cached prompt tokens inside `prompt_tokens`. We report
//!   `input_tokens = prompt_tokens - cached_tokens` and the cached part as `cache_read_tokens`,
//!   as Anthropic does, so that pricing the two separately does not count cached tokens twice.
//! - Error bodies differ between servers: `{"error": {"message": ..}}` (OpenAI, llama.cpp),
//!   `{"error": "text"}` (some compatible servers), `{"message": ..}` (vLLM); anything else is
//!   quoted as an excerpt of the raw body.

use std::fmt;
use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;

use crate::error::ProviderError;
use crate::http::{self, Timeouts};
use crate::types::{ChatRequest, ChatResponse};
use crate::{BoxFuture, ModelClient, StreamSink};

#[path = "openai_stream.rs"]
mod stream;
#[path = "openai_wire.rs"]
mod wire;

/// The JSON body this client would send for `request` (not streamed), for checking it against
/// the API's rules ([`crate::rules`]) without a server.
pub(crate) fn request_json(request: &ChatRequest) -> Result<String, ProviderError> {
    wire::request_body(request, false)
}

/// The hosted API's base URL (it already ends in `/v1`).
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The provider's name in errors.
const PROVIDER: &str = "openai";

/// How long a raw error body may be when quoted in an error.
const EXCERPT_CHARS: usize = 300;

/// How to reach an OpenAI-compatible server.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Sent as `Authorization: Bearer …` when set; local servers need none.
    pub api_key: Option<String>,
    /// Up to and including the version segment, e.g. `http://localhost:11434/v1`.
    pub base_url: String,
    pub timeouts: Timeouts,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self { api_key: None, base_url: DEFAULT_BASE_URL.to_owned(), timeouts: Timeouts::default() }
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("api_key", &redacted(self.api_key.as_deref()))
            .field("base_url", &self.base_url)
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

fn redacted(key: Option<&str>) -> &'static str {
    if key.is_some() { "<redacted>" } else { "<none>" }
}

/// A client of one OpenAI-compatible endpoint.
pub struct OpenAiClient {
    http: reqwest::Client,
    endpoint: String,
    /// Kept to scrub it from error messages a server might echo back.
    api_key: Option<String>,
    authorization: Option<HeaderValue>,
    timeouts: Timeouts,
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("endpoint", &self.endpoint)
            .field("api_key", &redacted(self.api_key.as_deref()))
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

impl OpenAiClient {
    /// A client for `config`. An empty key counts as no key.
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        let base = config.base_url.trim().trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ProviderError::Config(format!(
                "openai: the base URL {base:?} must start with http:// or https://"
            )));
        }
        let api_key = config.api_key.filter(|k| !k.trim().is_empty());
        let authorization = match &api_key {
            None => None,
            Some(key) => {
                let mut value =
                    HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| {
                        ProviderError::Config(
                            "openai: the API key holds characters an HTTP header cannot carry"
                                .to_owned(),
                        )
                    })?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        Ok(Self {
            http: http::client(PROVIDER)?,
            endpoint: format!("{base}/chat/completions"),
            api_key,
            authorization,
            timeouts: config.timeouts,
        })
    }

    /// A client configured from `OPENAI_API_KEY` and `OPENAI_BASE_URL` as `get` reads them.
    /// The key is required for the hosted endpoint only: local servers (Ollama, vLLM,
    /// llama.cpp) are reached by setting the base URL.
    pub fn from_vars(
        get: &dyn Fn(&str) -> Option<String>,
        timeouts: Timeouts,
    ) -> Result<Self, ProviderError> {
        let api_key = get("OPENAI_API_KEY").filter(|k| !k.trim().is_empty());
        let base_url = get("OPENAI_BASE_URL")
            .map(|u| u.trim().to_owned())
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        if api_key.is_none() && base_url.trim_end_matches('/') == DEFAULT_BASE_URL {
            return Err(ProviderError::Config(format!(
                "openai: OPENAI_API_KEY is not set; it is required for {DEFAULT_BASE_URL} \
                 (set OPENAI_BASE_URL to use a local server without a key)"
            )));
        }
        Self::new(OpenAiConfig { api_key, base_url, timeouts })
    }

    /// A client configured from the process environment; see [`OpenAiClient::from_vars`].
    pub fn from_env(timeouts: Timeouts) -> Result<Self, ProviderError> {
        Self::from_vars(&|k| std::env::var(k).ok(), timeouts)
    }

    /// Sends `body` and returns the response once its status says success; any other status
    /// becomes its typed error.
    async fn post(
        &self,
        body: String,
        streaming: bool,
    ) -> Result<reqwest::Response, ProviderError> {
        let mut builder = self
            .http
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, if streaming { "text/event-stream" } else { "application/json" })
            .body(body);
        if let Some(auth) = &self.authorization {
            builder = builder.header(AUTHORIZATION, auth.clone());
        }
        let after = self.timeouts.request;
        let response = match tokio::time::timeout(after, builder.send()).await {
            Err(_) => {
                return Err(ProviderError::Timeout {
                    provider: PROVIDER.to_owned(),
                    after,
                    what: "request",
                });
            }
            Ok(Err(e)) => return Err(http::send_error(PROVIDER, &e, after)),
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        let text = http::read_body(PROVIDER, response, after).await?;
        Err(self.body_error(status, &headers, &text))
    }

    /// The error for a non-success `status` with body `text`.
    fn body_error(&self, status: u16, headers: &HeaderMap, text: &str) -> ProviderError {
        let parsed: Option<Value> = serde_json::from_str(text).ok();
        let error = parsed.as_ref().and_then(|v| v.get("error")).filter(|e| !e.is_null());
        // vLLM puts the message at the top level; FastAPI-based servers in `detail`.
        let top_level = parsed
            .as_ref()
            .and_then(|v| v.get("message").or_else(|| v.get("detail")))
            .and_then(Value::as_str);
        let (message, hint) = match (error, top_level) {
            (Some(error), _) => error_parts(error),
            (None, Some(message)) => (message.to_owned(), String::new()),
            (None, None) => (excerpt(text, status), String::new()),
        };
        self.typed_error(status, headers, message, &hint)
    }

    /// The error an `error` object inside a 200 body or a stream chunk stands for: a message
    /// about the context size makes it ContextTooLong; otherwise its `code` when that is an HTTP
    /// status, else its `type`, decides the kind.
    fn api_error(&self, error: &Value) -> ProviderError {
        let (message, hint) = error_parts(error);
        let status =
            if says_context_too_long(&message, &hint) { 400 } else { implied_status(error) };
        self.typed_error(status, &HeaderMap::new(), message, &hint)
    }

    fn typed_error(
        &self,
        status: u16,
        headers: &HeaderMap,
        message: String,
        hint: &str,
    ) -> ProviderError {
        let message = self.scrub(message);
        let err = http::status_error(PROVIDER, status, headers, message);
        match err {
            // Servers word "too long" their own way; the code and type say it too.
            ProviderError::BadRequest { provider, message, status: 400 | 413 | 422 }
                if says_context_too_long(&message, hint) =>
            {
                ProviderError::ContextTooLong { provider, message }
            }
            ProviderError::RateLimited { provider, retry_after: None, message } => {
                ProviderError::RateLimited {
                    provider,
                    retry_after: retry_after_ms(headers),
                    message,
                }
            }
            ProviderError::Overloaded { provider, retry_after: None, message } => {
                ProviderError::Overloaded {
                    provider,
                    retry_after: retry_after_ms(headers),
                    message,
                }
            }
            other => other,
        }
    }

    /// `message` without the key, should a server echo it back.
    fn scrub(&self, message: String) -> String {
        match &self.api_key {
            Some(key) if key.trim().len() >= 8 && message.contains(key.trim()) => {
                message.replace(key.trim(), "<redacted>")
            }
            _ => message,
        }
    }

    async fn chat_inner(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let body = wire::request_body(request, false)?;
        let after = self.timeouts.request;
        let exchange = async {
            let response = self.post(body, false).await?;
            response.text().await.map_err(|e| http::send_error(PROVIDER, &e, after))
        };
        let text = match tokio::time::timeout(after, exchange).await {
            Ok(result) => result?,
            Err(_) => {
                return Err(ProviderError::Timeout {
                    provider: PROVIDER.to_owned(),
                    after,
                    what: "request",
                });
            }
        };
        wire::parse_response(&text, &request.model, &|e| self.api_error(e))
    }

    async fn chat_stream_inner(
        &self,
        request: &ChatRequest,
        sink: StreamSink<'_>,
    ) -> Result<ChatResponse, ProviderError> {
        let body = wire::request_body(request, true)?;
        let response = self.post(body, true).await?;
        let mut state = stream::StreamState::default();
        let clean = http::read_sse(PROVIDER, response, self.timeouts.idle, |event| {
            state.on_data(&event.data, sink, &|e| self.api_error(e))
        })
        .await?;
        state.finish(clean, &request.model)
    }
}

impl ModelClient for OpenAiClient {
    fn provider(&self) -> &str {
        PROVIDER
    }

    fn server(&self) -> Option<String> {
        crate::server_of(&self.endpoint)
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(self.chat_inner(request))
    }

    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(self.chat_stream_inner(request, sink))
    }
}

/// The message of an `error` value (a string, or an object with `message`) and a hint made of
/// its `code` and `type`, for classifying it.
fn error_parts(error: &Value) -> (String, String) {
    match error {
        Value::String(s) => (s.clone(), String::new()),
        Value::Object(map) => {
            let message = match map.get("message") {
                Some(Value::String(s)) => s.clone(),
                _ => error.to_string(),
            };
            let mut hint = String::new();
            for field in ["code", "type"] {
                match map.get(field) {
                    Some(Value::String(s)) => hint.push_str(s),
                    Some(Value::Number(n)) => hint.push_str(&n.to_string()),
                    _ => {}
                }
                hint.push(' ');
            }
            (message, hint)
        }
        other => (other.to_string(), String::new()),
    }
}

/// The HTTP status an `error` object without one stands for.
fn implied_status(error: &Value) -> u16 {
    let code = match error.get("code") {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    };
    if let Some(code) = code.and_then(|c| u16::try_from(c).ok()).filter(|c| (400..600).contains(c))
    {
        return code;
    }
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    let code = error.get("code").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    let said = |s: &str| kind.contains(s) || code.contains(s);
    if said("rate_limit") || said("insufficient_quota") {
        429
    } else if said("overloaded") || said("unavailable") {
        503
    } else if said("authentication") || said("invalid_api_key") || said("permission") {
        401
    } else if said("invalid_request") || said("context") || said("not_found") {
        400
    } else {
        // An error in the middle of a stream is the server's, unless it says otherwise.
        500
    }
}

fn says_context_too_long(message: &str, hint: &str) -> bool {
    let text = format!("{message} {hint}").to_ascii_lowercase();
    ["context size", "context window", "context_length_exceeded", "exceed_context_size"]
        .iter()
        .any(|needle| text.contains(needle))
}

/// `retry-after-ms`, which OpenAI sends alongside (or instead of) `retry-after`.
fn retry_after_ms(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("retry-after-ms")?.to_str().ok()?.trim();
    let ms: f64 = value.parse().ok()?;
    (ms.is_finite() && ms >= 0.0).then(|| Duration::from_secs_f64((ms / 1000.0).min(3600.0)))
}

/// The start of a body that is not a known error shape, for the message.
fn excerpt(text: &str, status: u16) -> String {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return format!("HTTP {status} with an empty body");
    }
    let mut out: String = trimmed.chars().take(EXCERPT_CHARS).collect();
    if out.len() < trimmed.len() {
        out.push('…');
    }
    out
}
