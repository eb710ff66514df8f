//! What a chat turn is made of, independent of any provider: the request (system prompt,
//! messages of text, tool calls and tool results, tool definitions, tool choice, limits) and the
//! response (content blocks, stop reason, token usage).
//!
//! Each client maps these to its provider's wire format and back; nothing above the clients sees
//! a provider's JSON.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    /// The model asks for a tool call. `id` pairs it with its result.
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// The result of the tool call `tool_use_id`, sent back by the harness.
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

impl Message {
    pub fn user(text: impl Into<String>) -> Self {
        Self { role: Role::User, content: vec![ContentBlock::text(text)] }
    }

    pub fn assistant(content: Vec<ContentBlock>) -> Self {
        Self { role: Role::Assistant, content }
    }
}

/// A tool the model may call: its name, what it is for, and the JSON Schema of its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The wire name (`file_read`, `^[a-zA-Z0-9_-]{1,64}$`), never a dotted plan name: the
    /// name the model calls, which `pev_tools::ToolNames` maps back to the plan name.
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// A registry tool as a model is offered it: under its wire name.
impl From<&pev_tools::ToolDefinition> for ToolSpec {
    fn from(def: &pev_tools::ToolDefinition) -> Self {
        Self {
            name: def.wire.as_str().to_owned(),
            description: def.description.to_owned(),
            input_schema: def.parameters.clone(),
        }
    }
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "name", rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must call some tool.
    Any,
    /// The model must not call a tool.
    None,
    /// The model must call this tool.
    Tool(String),
}

/// One chat turn to send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    #[serde(default)]
    pub tool_choice: ToolChoice,
    pub max_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// Mark the system prompt and the tool definitions as cacheable (providers that support
    /// prompt caching; ignored by the others).
    #[serde(default)]
    pub cache: bool,
}

impl ChatRequest {
    /// A request with defaults: no tools, `auto` tool choice, 4096 max tokens, caching on.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            system: None,
            messages,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            max_tokens: 4096,
            temperature: None,
            stop_sequences: Vec::new(),
            cache: true,
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    /// The model declined to answer (Anthropic's `refusal`, OpenAI's `refusal` message or
    /// `content_filter`): what text there is says why, and nothing in it is to be acted on.
    Refusal,
    /// Anything else the provider said, kept verbatim.
    Other(String),
}

/// Tokens a call consumed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl TokenUsage {
    /// The sum of two usages.
    pub fn add(&mut self, other: &TokenUsage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(other.cache_write_tokens);
    }
}

/// A whole response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The provider's id of the response, when it gives one.
    #[serde(default)]
    pub id: String,
    /// The model that answered (as the provider names it).
    pub model: String,
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    pub usage: TokenUsage,
}

impl ChatResponse {
    /// The text blocks, joined.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }
}

/// What a streaming call reports as it goes. The final [`ChatResponse`] is the call's result.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More text of the block at `index`.
    TextDelta { index: usize, text: String },
    /// A tool call begins at `index`.
    ToolCallStart { index: usize, id: String, name: String },
    /// More of the JSON arguments of the tool call at `index` (fragments, not valid alone).
    ToolCallDelta { index: usize, partial_json: String },
}
