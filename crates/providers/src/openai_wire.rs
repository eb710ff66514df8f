//! Chat Completions bodies: our [`ChatRequest`] as the JSON the endpoint takes, and a whole
//! (non-streamed) response back as a [`ChatResponse`]. Also the pieces the stream reassembly
//! shares: the finish-reason and usage mappings and the parsing of tool-call arguments.
//!
//! Mapping of the conversation: the system prompt is the first message (`role: system`); an
//! assistant message carries its text as `content` (null when it only calls tools) and its calls
//! as `tool_calls` with the input as a JSON *string*; each of our `ToolResult` blocks becomes
//! its own `role: tool` message with the call's `tool_call_id`, in order. A user message's tool
//! results come before its text, because the API wants the tool messages right after the
//! assistant message that made the calls. The API has no error flag on a tool result, so a
//! failed one is sent with an `ERROR: ` prefix.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::PROVIDER;
use crate::error::ProviderError;
use crate::types::{
    ChatRequest, ChatResponse, ContentBlock, Role, StopReason, TokenUsage, ToolChoice,
};

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    /// `max_tokens` for every model but OpenAI's reasoning families: it is what the compatible
    /// servers accept.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    /// For the reasoning families (o1, o3, o4-mini, gpt-5…), which refuse `max_tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "no_stop")]
    stop: &'a [String],
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

fn no_stop(stop: &&[String]) -> bool {
    stop.is_empty()
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: String,
    },
    Assistant {
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireCalledFunction<'a>,
}

#[derive(Serialize)]
struct WireCalledFunction<'a> {
    name: &'a str,
    /// The input as a JSON string, as the API wants it.
    arguments: String,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// The JSON body for `request`. Serialized straight from typed structs (not through a `Value`)
/// so that a temperature of `0.2f32` goes out as `0.2`.
pub(super) fn request_body(request: &ChatRequest, stream: bool) -> Result<String, ProviderError> {
    let reasoning = crate::rules::is_reasoning_model(&request.model);
    let mut messages = Vec::with_capacity(request.messages.len().saturating_add(1));
    if let Some(system) = &request.system {
        messages.push(WireMessage::System { content: system });
    }
    for message in &request.messages {
        push_message(&mut messages, message.role, &message.content);
    }
    let tools: Vec<WireTool<'_>> = request
        .tools
        .iter()
        .map(|t| WireTool {
            kind: "function",
            function: WireFunction {
                name: &t.name,
                description: &t.description,
                parameters: &t.input_schema,
            },
        })
        .collect();
    // The API refuses a tool_choice without tools.
    let tool_choice = (!tools.is_empty()).then(|| tool_choice(&request.tool_choice));
    let body = WireRequest {
        model: &request.model,
        messages,
        tools,
        tool_choice,
        max_tokens: (!reasoning).then_some(request.max_tokens),
        max_completion_tokens: reasoning.then_some(request.max_tokens),
        // The reasoning families take only the default temperature.
        temperature: request.temperature.filter(|_| !reasoning),
        stop: &request.stop_sequences,
        stream,
        stream_options: stream.then_some(StreamOptions { include_usage: true }),
    };
    serde_json::to_string(&body)
        .map_err(|e| ProviderError::Config(format!("openai: cannot encode the request: {e}")))
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => Value::from("auto"),
        ToolChoice::Any => Value::from("required"),
        ToolChoice::None => Value::from("none"),
        ToolChoice::Tool(name) => {
            serde_json::json!({"type": "function", "function": {"name": name}})
        }
    }
}

fn push_message<'a>(out: &mut Vec<WireMessage<'a>>, role: Role, blocks: &'a [ContentBlock]) {
    let mut text: Vec<&str> = Vec::new();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text { text: t } => text.push(t),
            ContentBlock::ToolUse { id, name, input } => calls.push(WireToolCall {
                id,
                kind: "function",
                function: WireCalledFunction { name, arguments: input.to_string() },
            }),
            ContentBlock::ToolResult { tool_use_id, content, is_error } => {
                let content = if *is_error {
                    Cow::Owned(format!("ERROR: {content}"))
                } else {
                    Cow::Borrowed(content.as_str())
                };
                results.push(WireMessage::Tool { tool_call_id: tool_use_id, content });
            }
        }
    }
    let text = (!text.is_empty()).then(|| text.join("\n"));
    match role {
        Role::Assistant => {
            if text.is_some() || !calls.is_empty() {
                out.push(WireMessage::Assistant { content: text, tool_calls: calls });
            }
            out.extend(results);
        }
        Role::User => {
            // A user cannot call tools; the API has no place for such a block, so it is left
            // out rather than sent as something it is not.
            out.extend(results);
            if let Some(content) = text {
                out.push(WireMessage::User { content });
            }
        }
    }
}

/// A whole response, or an `error` object some servers send with a 200.
#[derive(Deserialize)]
struct WireResponse {
    id: Option<String>,
    model: Option<String>,
    choices: Option<Vec<WireChoice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: Option<WireResponseMessage>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireResponseMessage {
    content: Option<String>,
    refusal: Option<String>,
    tool_calls: Option<Vec<WireResponseCall>>,
}

#[derive(Deserialize)]
struct WireResponseCall {
    id: Option<String>,
    function: WireResponseFunction,
}

#[derive(Deserialize)]
struct WireResponseFunction {
    name: String,
    /// A JSON string per the API; an object from a few servers.
    arguments: Option<Value>,
}

/// `usage` of a response or of the last stream chunk.
#[derive(Debug, Default, Deserialize)]
pub(super) struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<WirePromptDetails>,
}

#[derive(Debug, Deserialize)]
struct WirePromptDetails {
    cached_tokens: Option<u64>,
}

impl WireUsage {
    /// Our usage: cached prompt tokens are counted once, as cache reads (see the module docs
    /// of `openai.rs`).
    pub(super) fn to_usage(&self) -> TokenUsage {
        let prompt = self.prompt_tokens.unwrap_or(0);
        let cached = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0)
            .min(prompt);
        TokenUsage {
            input_tokens: prompt.saturating_sub(cached),
            output_tokens: self.completion_tokens.unwrap_or(0),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        }
    }
}

/// Parses a whole response. `api_error` types an `error` object found in it.
pub(super) fn parse_response(
    text: &str,
    requested_model: &str,
    api_error: &dyn Fn(&Value) -> ProviderError,
) -> Result<ChatResponse, ProviderError> {
    let response: WireResponse = serde_json::from_str(text)
        .map_err(|e| malformed(format!("the response is not a chat completion ({e})")))?;
    if let Some(error) = response.error.as_ref().filter(|e| !e.is_null()) {
        return Err(api_error(error));
    }
    let choice = response
        .choices
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| malformed("the response has no choices".to_owned()))?;
    let message = choice.message.ok_or_else(|| malformed("the choice has no message".into()))?;
    let mut content = Vec::new();
    let text = message.content.filter(|t| !t.is_empty());
    let refusal = message.refusal.filter(|t| !t.is_empty());
    let refused = refusal.is_some();
    // A refusal is the model's answer too; dropping it would leave an empty reply.
    if let Some(text) = text.or(refusal) {
        content.push(ContentBlock::Text { text });
    }
    for (i, call) in message.tool_calls.unwrap_or_default().into_iter().enumerate() {
        let input = match call.function.arguments {
            None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
            Some(Value::String(s)) => parse_arguments(&call.function.name, &s)?,
            Some(object @ Value::Object(_)) => object,
            Some(other) => {
                return Err(malformed(format!(
                    "the arguments of tool call {:?} are {other}, not a JSON object",
                    call.function.name
                )));
            }
        };
        let id = call.id.filter(|id| !id.is_empty()).unwrap_or_else(|| synthetic_id(i));
        content.push(ContentBlock::ToolUse { id, name: call.function.name, input });
    }
    let has_calls = content.iter().any(|b| matches!(b, ContentBlock::ToolUse { .. }));
    Ok(ChatResponse {
        id: response.id.unwrap_or_default(),
        model: response
            .model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| requested_model.to_owned()),
        content,
        stop_reason: if refused {
            StopReason::Refusal
        } else {
            stop_reason(choice.finish_reason.as_deref(), has_calls)
        },
        usage: response.usage.map(|u| u.to_usage()).unwrap_or_default(),
    })
}

/// The arguments of the call to `tool`, a JSON string; empty means no arguments.
pub(super) fn parse_arguments(tool: &str, arguments: &str) -> Result<Value, ProviderError> {
    if arguments.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(arguments).map_err(|e| {
        malformed(format!("the arguments of tool call {tool:?} are not valid JSON ({e})"))
    })
}

/// An id for a call the server sent without one (some local servers do).
pub(super) fn synthetic_id(index: usize) -> String {
    format!("call_{index}")
}

/// `finish_reason` as our stop reason. Some local servers say `stop` after tool calls; the calls
/// are what the caller must act on, so that is reported as tool use.
pub(super) fn stop_reason(finish_reason: Option<&str>, has_tool_calls: bool) -> StopReason {
    match finish_reason {
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("stop" | "eos") if has_tool_calls => StopReason::ToolUse,
        Some("stop" | "eos") => StopReason::EndTurn,
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::Refusal,
        Some(other) if !other.is_empty() => StopReason::Other(other.to_owned()),
        _ => StopReason::Other("unspecified".to_owned()),
    }
}

pub(super) fn malformed(message: String) -> ProviderError {
    ProviderError::Malformed { provider: PROVIDER.to_owned(), message }
}
