//! Anthropic Messages API wire format: the request body built from a [`ChatRequest`], the whole
//! response parsed into a [`ChatResponse`], and the error body (`{"type": "error", "error":
//! {"type", "message"}}`) turned into a typed [`ProviderError`].
//!
//! The request types borrow from the [`ChatRequest`], so building a body copies nothing but the
//! JSON text itself.

use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::PROVIDER;
use crate::error::ProviderError;
use crate::http;
use crate::types::{
    ChatRequest, ChatResponse, ContentBlock, Role, StopReason, TokenUsage, ToolChoice,
};

/// The most of a bad body quoted in an error: enough to recognise an HTML error page or a
/// truncated JSON, not enough to flood a log.
const EXCERPT_CHARS: usize = 200;

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<WireSystem<'a>>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

/// `{"type": "ephemeral"}`: the prefix up to and including the marked block is cached.
#[derive(Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Serialize)]
struct WireSystem<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: Role,
    content: Vec<Marked<'a>>,
}

/// A content block and, on a cache breakpoint, its mark.
#[derive(Serialize)]
struct Marked<'a> {
    #[serde(flatten)]
    block: WireBlock<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text { text: &'a str },
    ToolUse { id: &'a str, name: &'a str, input: &'a Value },
    ToolResult { tool_use_id: &'a str, content: &'a str, is_error: bool },
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireToolChoice<'a> {
    Auto,
    Any,
    None,
    Tool { name: &'a str },
}

/// The JSON body of a Messages call.
pub(super) fn request_body(request: &ChatRequest, stream: bool) -> Result<String, ProviderError> {
    let system = match request.system.as_deref() {
        // The API rejects blank text blocks, and a blank system prompt says nothing anyway.
        Some(text) if !text.trim().is_empty() => vec![WireSystem {
            kind: "text",
            text,
            cache_control: request.cache.then_some(EPHEMERAL),
        }],
        _ => Vec::new(),
    };
    let last_tool = request.tools.len().checked_sub(1);
    let tools = request
        .tools
        .iter()
        .enumerate()
        .map(|(i, tool)| WireTool {
            name: &tool.name,
            description: &tool.description,
            input_schema: &tool.input_schema,
            // One breakpoint after the last tool caches every definition before it too.
            cache_control: (request.cache && Some(i) == last_tool).then_some(EPHEMERAL),
        })
        .collect::<Vec<_>>();
    // The API refuses a tool_choice without tools.
    let tool_choice = (!tools.is_empty()).then(|| match &request.tool_choice {
        ToolChoice::Auto => WireToolChoice::Auto,
        ToolChoice::Any => WireToolChoice::Any,
        ToolChoice::None => WireToolChoice::None,
        ToolChoice::Tool(name) => WireToolChoice::Tool { name },
    });
    let body = WireRequest {
        model: &request.model,
        max_tokens: request.max_tokens,
        system,
        messages: messages(request),
        tools,
        tool_choice,
        temperature: request.temperature,
        stop_sequences: &request.stop_sequences,
        stream,
    };
    // Only string keys and JSON values go in, so encoding cannot fail; say so if it ever does.
    serde_json::to_string(&body).map_err(|e| ProviderError::BadRequest {
        provider: PROVIDER.to_owned(),
        status: 0,
        message: format!("cannot encode the request: {e}"),
    })
}

/// The conversation in the API's shape: tool results always travel in a user message, and
/// consecutive messages of one role are merged, because the API wants roles to alternate.
/// Blank text is left out and a closing assistant message loses its trailing whitespace (the
/// API refuses both); with caching on, the conversation carries its breakpoints.
fn messages(request: &ChatRequest) -> Vec<WireMessage<'_>> {
    let mut out: Vec<WireMessage<'_>> = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        for block in &message.content {
            let (role, wire) = match block {
                // The API rejects blank text blocks; a blank one carries nothing.
                ContentBlock::Text { text } if text.trim().is_empty() => continue,
                ContentBlock::Text { text } => (message.role, WireBlock::Text { text }),
                ContentBlock::ToolUse { id, name, input } => {
                    (message.role, WireBlock::ToolUse { id, name, input })
                }
                ContentBlock::ToolResult { tool_use_id, content, is_error } => (
                    Role::User,
                    WireBlock::ToolResult { tool_use_id, content, is_error: *is_error },
                ),
            };
            let wire = Marked { block: wire, cache_control: None };
            match out.last_mut() {
                Some(last) if last.role == role => last.content.push(wire),
                _ => out.push(WireMessage { role, content: vec![wire] }),
            }
        }
    }
    // Within a user message the API wants the tool results before any text; merging can put
    // them after, so move them up (stable: the results and the texts keep their own order).
    for message in &mut out {
        if message.role == Role::User {
            message.content.sort_by_key(|b| !matches!(b.block, WireBlock::ToolResult { .. }));
        }
    }
    trim_prefill(&mut out);
    if request.cache {
        mark_conversation(&mut out);
    }
    out
}

/// A conversation may end with the assistant's own words (a prefill the model continues), but
/// the API refuses one that ends in whitespace.
fn trim_prefill(out: &mut [WireMessage<'_>]) {
    let Some(last) = out.last_mut().filter(|m| m.role == Role::Assistant) else { return };
    if let Some(Marked { block: WireBlock::Text { text }, .. }) = last.content.last_mut() {
        *text = text.trim_end();
    }
}

/// Cache breakpoints on the conversation: the last block of the last message, so the next call
/// (the same prefix and more) reads all of this one from the cache; and the last block of the
/// last user message before it, where the previous call put its breakpoint, because the API
/// looks back only 20 blocks from a breakpoint for an earlier cached prefix and a turn with many
/// tool calls adds more than that. With the system prompt's and the tools' marks that is
/// four, the API's limit ([`crate::rules::ANTHROPIC_MAX_CACHE_BREAKPOINTS`]).
fn mark_conversation(out: &mut [WireMessage<'_>]) {
    let Some((last, earlier)) = out.split_last_mut() else { return };
    if let Some(block) = last.content.last_mut() {
        block.cache_control = Some(EPHEMERAL);
    }
    let previous = earlier.iter_mut().rev().find(|m| m.role == Role::User);
    if let Some(block) = previous.and_then(|m| m.content.last_mut()) {
        block.cache_control = Some(EPHEMERAL);
    }
}

#[derive(Deserialize)]
struct WireResponse {
    id: String,
    model: String,
    content: Vec<WireContent>,
    stop_reason: Option<String>,
    usage: WireUsage,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireContent {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// Block types pev does not ask for (thinking, server tools): skipped.
    #[serde(other)]
    Other,
}

/// Token counts as the API reports them; any may be absent (or null) in a stream's events.
#[derive(Debug, Default, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Overwrites the counts this report carries (the API's counts are running totals).
    pub(super) fn update(&self, usage: &mut TokenUsage) {
        let pairs = [
            (self.input_tokens, &mut usage.input_tokens),
            (self.output_tokens, &mut usage.output_tokens),
            (self.cache_read_input_tokens, &mut usage.cache_read_tokens),
            (self.cache_creation_input_tokens, &mut usage.cache_write_tokens),
        ];
        for (value, slot) in pairs {
            if let Some(v) = value {
                *slot = v;
            }
        }
    }
}

/// The `error` object of an error body or an SSE `error` event.
#[derive(Debug, Default, Deserialize)]
pub(super) struct WireError {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Deserialize)]
struct WireErrorBody {
    error: WireError,
}

/// A whole (non-streamed) response.
pub(super) fn parse_response(body: &str) -> Result<ChatResponse, ProviderError> {
    let wire: WireResponse =
        serde_json::from_str(body).map_err(|e| malformed(format!("{e} in {}", excerpt(body))))?;
    let Some(stop) = wire.stop_reason else {
        return Err(malformed(format!("no stop_reason in {}", excerpt(body))));
    };
    let content = wire
        .content
        .into_iter()
        .filter_map(|block| match block {
            WireContent::Text { text } => Some(ContentBlock::Text { text }),
            WireContent::ToolUse { id, name, input } => {
                Some(ContentBlock::ToolUse { id, name, input })
            }
            WireContent::Other => None,
        })
        .collect();
    let mut usage = TokenUsage::default();
    wire.usage.update(&mut usage);
    Ok(ChatResponse {
        id: wire.id,
        model: wire.model,
        content,
        stop_reason: stop_reason(stop),
        usage,
    })
}

pub(super) fn stop_reason(reason: String) -> StopReason {
    match reason.as_str() {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        _ => StopReason::Other(reason),
    }
}

/// The error for a non-success HTTP status, with the provider's own message when the body has
/// one (an error body that is not JSON, such as a proxy's HTML page, is quoted instead).
pub(super) fn status_error(status: u16, headers: &HeaderMap, body: &str) -> ProviderError {
    let error = serde_json::from_str::<WireErrorBody>(body).map(|b| b.error).unwrap_or_default();
    let message = if error.message.is_empty() { excerpt(body) } else { error.message };
    if error.kind == "overloaded_error" {
        // Whatever the status, the provider said it is overloaded: that is worth a retry.
        return ProviderError::Overloaded {
            provider: PROVIDER.to_owned(),
            retry_after: http::retry_after(headers),
            message,
        };
    }
    http::status_error(PROVIDER, status, headers, message)
}

/// The error an SSE `error` event reports: its type stands for the status the same error has
/// outside a stream.
pub(super) fn event_error(error: WireError) -> ProviderError {
    let status = match error.kind.as_str() {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        _ => 500,
    };
    let message = if error.message.is_empty() {
        format!("error event {:?}", error.kind)
    } else {
        error.message
    };
    http::status_error(PROVIDER, status, &HeaderMap::new(), message)
}

pub(super) fn malformed(message: String) -> ProviderError {
    ProviderError::Malformed { provider: PROVIDER.to_owned(), message }
}

/// The start of `text`, quoted, cut on a character boundary.
pub(super) fn excerpt(text: &str) -> String {
    if text.trim().is_empty() {
        return "an empty body".to_owned();
    }
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{:?}…", text.get(..cut).unwrap_or_default()),
        None => format!("{text:?}"),
    }
}
