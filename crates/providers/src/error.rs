//! What can go wrong talking to a model, typed so that callers decide by kind: retry a rate
//! limit after `retry_after`, shorten the context when it is too long, fix the key when it is
//! refused, and never retry a bad request.

use std::time::Duration;

/// A model call's failure.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// 429: too many requests. `retry_after` is what the server asked for, when it said.
    #[error("rate limited by {provider}{}: {message}", after(*retry_after))]
    RateLimited { provider: String, retry_after: Option<Duration>, message: String },
    /// The provider is overloaded (Anthropic's 529, an `overloaded_error` event, a 503).
    #[error("{provider} is overloaded{}: {message}", after(*retry_after))]
    Overloaded { provider: String, retry_after: Option<Duration>, message: String },
    /// Any other 5xx.
    #[error("{provider} server error {status}: {message}")]
    Server { provider: String, status: u16, message: String },
    /// No response (or no stream data) within the time allowed.
    #[error("{provider} did not answer within {}s ({what})", .after.as_secs_f64())]
    Timeout { provider: String, after: Duration, what: &'static str },
    /// 401/403: the key is missing, wrong or not allowed.
    #[error("{provider} refused the credentials (HTTP {status}): {message}")]
    Authentication { provider: String, status: u16, message: String },
    /// A 4xx the request itself caused; retrying the same request cannot help.
    #[error("{provider} rejected the request (HTTP {status}): {message}")]
    BadRequest { provider: String, status: u16, message: String },
    /// The prompt is longer than the model's context window.
    #[error("the prompt is too long for {provider}: {message}")]
    ContextTooLong { provider: String, message: String },
    /// The response is not what the API documents (bad JSON, a missing field, a cut stream).
    #[error("malformed response from {provider}: {message}")]
    Malformed { provider: String, message: String },
    /// The connection failed (refused, reset, DNS).
    #[error("cannot reach {provider}: {message}")]
    Transport { provider: String, message: String },
    /// The provider is not set up (no key, a bad base URL, an unreadable script).
    #[error("{0}")]
    Config(String),
    /// A scripted model has no turn left, or the request did not match the script's expectation.
    #[error("script {script}: {message}")]
    Script { script: String, message: String },
    /// The run's budget cannot pay for this call's worst case; it was not sent.
    #[error("budget exhausted: {0}")]
    BudgetExhausted(String),
    /// The model declined to give the answer asked for (a refusal stop reason).
    #[error("the model refused to write the {what}{}", said(message))]
    Refused { what: String, message: String },
    /// Structured output did not validate after every try.
    #[error("no valid {what} after {attempts} tries; last problem: {last_error}")]
    InvalidStructuredOutput { what: String, attempts: u32, last_error: String },
}

fn said(message: &str) -> String {
    if message.is_empty() { String::new() } else { format!(": {message}") }
}

fn after(retry_after: Option<Duration>) -> String {
    retry_after.map_or_else(String::new, |d| format!(" (retry after {}s)", d.as_secs_f64()))
}

impl ProviderError {
    /// Whether trying the same request again later can succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. }
                | Self::Overloaded { .. }
                | Self::Server { .. }
                | Self::Timeout { .. }
                | Self::Transport { .. }
        )
    }

    /// The wait the server asked for, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } | Self::Overloaded { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }
}
