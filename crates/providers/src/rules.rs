//! What the real APIs refuse. Each provider validates a request body before it does anything
//! with it and answers a bad one with a 400 in its own error shape; these functions apply the
//! same rules to a body pev is about to send (or a test's mock server has received), so a request
//! the real service would refuse fails offline, the day the code that builds it is written.
//!
//! The rules are the ones the services are known to enforce, with their messages as the
//! services word them (collected from the error bodies users report): tool-name patterns,
//! `tool_use`/`tool_result` pairing, empty and whitespace-only text, trailing whitespace at the
//! end of an assistant prefill, the cap on cache breakpoints, required fields, schema roots, and
//! for OpenAI's reasoning models the parameters they no longer take. They are deliberately no
//! looser than the services; where a service has relaxed a rule pev's requests keep to the old
//! one anyway (roles alternate, the conversation opens with the user).
//!
//! Used by the scripted model (every offline run is checked) and by the test suites' mock
//! servers, which answer a refusal with [`Refusal::anthropic_body`] or
//! [`Refusal::openai_body`].

use serde_json::{Value, json};

use crate::{ChatRequest, ProviderError};

mod anthropic;
mod openai;

pub use anthropic::{MAX_CACHE_BREAKPOINTS as ANTHROPIC_MAX_CACHE_BREAKPOINTS, check as anthropic};
pub use openai::{check as openai, is_reasoning_model};

/// A request the service would refuse, as it would say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status (always 400 for these rules).
    pub status: u16,
    /// The error type (`invalid_request_error` on both services).
    pub kind: &'static str,
    /// The service's message.
    pub message: String,
    /// OpenAI's `param`: which field is wrong.
    pub param: Option<String>,
    /// OpenAI's `code` (`invalid_value`, `unsupported_parameter`…).
    pub code: Option<&'static str>,
}

impl Refusal {
    fn invalid(message: impl Into<String>) -> Self {
        Self {
            status: 400,
            kind: "invalid_request_error",
            message: message.into(),
            param: None,
            code: None,
        }
    }

    fn param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    fn code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    /// The body Anthropic answers with: `{"type":"error","error":{"type","message"}}`.
    pub fn anthropic_body(&self) -> String {
        json!({"type": "error", "error": {"type": self.kind, "message": self.message}}).to_string()
    }

    /// The body OpenAI answers with: `{"error":{"message","type","param","code"}}`.
    pub fn openai_body(&self) -> String {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
        .to_string()
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.kind, self.message)
    }
}

/// Checks `request` as both services would receive it: the bodies pev's Anthropic and OpenAI
/// clients build for it, each against its API's rules. The error names the service.
pub fn check_request(request: &ChatRequest) -> Result<(), (&'static str, Refusal)> {
    let checked = |service: &'static str, body: Result<String, ProviderError>, rules: Rules| {
        let body = body.map_err(|e| (service, Refusal::invalid(e.to_string())))?;
        let body: Value = serde_json::from_str(&body)
            .map_err(|e| (service, Refusal::invalid(format!("the body is not JSON: {e}"))))?;
        rules(&body).map_err(|refusal| (service, refusal))
    };
    checked("Anthropic", crate::anthropic::request_json(request), anthropic)?;
    checked("OpenAI", crate::openai::request_json(request), openai)
}

type Rules = fn(&Value) -> Result<(), Refusal>;

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,max}$`.
fn is_name(name: &str, max: usize) -> bool {
    (1..=max).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The JSON type's name, as the services' validators say it.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
#[path = "rules/tests.rs"]
mod tests;
