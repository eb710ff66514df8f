//! What the HTTP clients share: the reqwest client (ring-backed TLS, timeouts), the mapping of
//! an HTTP status and body to a [`ProviderError`], `retry-after` parsing, and reading a streamed
//! body with an idle timeout.

use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::error::ProviderError;
use crate::sse::{SseEvent, SseParser};

/// Timeouts of one provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// The whole request of a non-streaming call, and the wait for the first byte of a stream.
    pub request: Duration,
    /// The longest silence allowed between two chunks of a stream.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        // Five minutes holds the longest answer pev asks for (an 8k-token plan from a large
        // model, not streamed); a minute of silence inside a stream means it is stuck. A call
        // that waits long is reported as it waits (`notice`), and `--timeout` bounds the run.
        Self { request: Duration::from_secs(300), idle: Duration::from_secs(60) }
    }
}

/// A client for model APIs: pev's TLS setup, no redirects. One client is built per process and
/// shared (a clone is a handle to the same pool): building one loads the system's CA store, which
/// three roles would otherwise do three times. Timeouts are applied per request, not per client.
pub fn client(provider: &str) -> Result<reqwest::Client, ProviderError> {
    static SHARED: std::sync::OnceLock<Result<reqwest::Client, String>> =
        std::sync::OnceLock::new();
    SHARED
        .get_or_init(pev_tools::build_client)
        .clone()
        .map_err(|e| ProviderError::Config(format!("{provider}: {e}")))
}

/// `retry-after` as seconds (the form model APIs use); an HTTP date is not honoured.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("retry-after")?.to_str().ok()?.trim();
    let secs: f64 = value.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(3600.0)))
}

/// The error for a non-success status. `message` is the provider's own error text when its body
/// had one.
pub fn status_error(
    provider: &str,
    status: u16,
    headers: &HeaderMap,
    message: String,
) -> ProviderError {
    let provider = provider.to_owned();
    let lower = message.to_ascii_lowercase();
    match status {
        429 => ProviderError::RateLimited { provider, retry_after: retry_after(headers), message },
        529 | 503 => {
            ProviderError::Overloaded { provider, retry_after: retry_after(headers), message }
        }
        401 | 403 => ProviderError::Authentication { provider, status, message },
        400 | 413
            if lower.contains("too long")
                || lower.contains("context length")
                || lower.contains("context_length")
                || lower.contains("maximum context")
                || status == 413 =>
        {
            ProviderError::ContextTooLong { provider, message }
        }
        500..=599 => ProviderError::Server { provider, status, message },
        _ => ProviderError::BadRequest { provider, status, message },
    }
}

/// The transport error of a send, typed: a timeout is [`ProviderError::Timeout`].
pub fn send_error(provider: &str, err: &reqwest::Error, after: Duration) -> ProviderError {
    if err.is_timeout() {
        ProviderError::Timeout { provider: provider.to_owned(), after, what: "request" }
    } else {
        ProviderError::Transport {
            provider: provider.to_owned(),
            message: pev_tools::error_chain(err),
        }
    }
}

/// Reads a whole (non-streamed) body within `timeout`.
pub async fn read_body(
    provider: &str,
    response: reqwest::Response,
    timeout: Duration,
) -> Result<String, ProviderError> {
    match tokio::time::timeout(timeout, response.text()).await {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(e)) => Err(send_error(provider, &e, timeout)),
        Err(_) => Err(ProviderError::Timeout {
            provider: provider.to_owned(),
            after: timeout,
            what: "response body",
        }),
    }
}

/// Reads an SSE body, calling `on_event` for each event, with `idle` as the longest silence.
/// Returns `Ok(true)` when the body ended cleanly, `Ok(false)` when it ended mid-event.
pub async fn read_sse(
    provider: &str,
    response: reqwest::Response,
    idle: Duration,
    mut on_event: impl FnMut(SseEvent) -> Result<(), ProviderError>,
) -> Result<bool, ProviderError> {
    let mut parser = SseParser::new();
    let mut response = response;
    loop {
        let next = match tokio::time::timeout(idle, response.chunk()).await {
            Ok(next) => next,
            Err(_) => {
                return Err(ProviderError::Timeout {
                    provider: provider.to_owned(),
                    after: idle,
                    what: "stream idle",
                });
            }
        };
        match next.transpose() {
            None => return Ok(!parser.has_partial()),
            Some(Err(e)) => {
                return Err(ProviderError::Malformed {
                    provider: provider.to_owned(),
                    message: format!("the stream broke: {}", pev_tools::error_chain(&e)),
                });
            }
            Some(Ok(chunk)) => {
                for event in parser.feed(&chunk) {
                    on_event(event)?;
                }
            }
        }
    }
}
