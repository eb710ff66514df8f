//! Assembles an Anthropic Messages SSE stream into a [`ChatResponse`], reporting text and
//! tool-call fragments to the caller's sink as they arrive.
//!
//! The events, in order: `message_start` (id, model, input usage), then per content block
//! `content_block_start`, `content_block_delta`s (`text_delta`, or `input_json_delta` whose
//! `partial_json` fragments join into the tool's input) and `content_block_stop`; then
//! `message_delta` (stop reason, output usage) and `message_stop`. `ping` may come anywhere, an
//! `error` event ends the call, and event or delta types this code does not know are skipped so
//! that new API features do not break old clients.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::wire::{self, WireError, WireUsage, malformed};
use crate::StreamSink;
use crate::error::ProviderError;
use crate::sse::SseEvent;
use crate::types::{ChatResponse, ContentBlock, StopReason, StreamEvent, TokenUsage};

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: StartBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    id: String,
    model: String,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// A content block being received.
enum Partial {
    Text(String),
    Tool {
        id: String,
        name: String,
        /// The `partial_json` fragments so far.
        json: String,
        /// The input `content_block_start` carried (`{}` in practice).
        start_input: Value,
        /// Set at `content_block_stop`.
        input: Option<Value>,
    },
    /// A block type pev does not ask for (thinking, server tools): its deltas are dropped.
    Skipped,
}

/// The state of one streamed response.
pub(super) struct StreamAssembler<'a> {
    sink: StreamSink<'a>,
    started: bool,
    id: String,
    model: String,
    usage: TokenUsage,
    blocks: BTreeMap<usize, Partial>,
    stop_reason: Option<String>,
    done: bool,
}

impl<'a> StreamAssembler<'a> {
    pub(super) fn new(sink: StreamSink<'a>) -> Self {
        Self {
            sink,
            started: false,
            id: String::new(),
            model: String::new(),
            usage: TokenUsage::default(),
            blocks: BTreeMap::new(),
            stop_reason: None,
            done: false,
        }
    }

    /// Whether `message_stop` arrived: the response is complete whatever the connection does
    /// next.
    pub(super) fn is_done(&self) -> bool {
        self.done
    }

    /// Takes one SSE event.
    pub(super) fn on_event(&mut self, event: &SseEvent) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        let parsed: WireEvent = serde_json::from_str(&event.data).map_err(|e| {
            malformed(format!("bad {:?} event: {e} in {}", event.event, wire::excerpt(&event.data)))
        })?;
        match parsed {
            WireEvent::MessageStart { message } => {
                self.started = true;
                self.id = message.id;
                self.model = message.model;
                if let Some(usage) = message.usage {
                    usage.update(&mut self.usage);
                }
            }
            WireEvent::ContentBlockStart { index, content_block } => {
                self.start_block(index, content_block)?;
            }
            WireEvent::ContentBlockDelta { index, delta } => self.delta(index, delta)?,
            WireEvent::ContentBlockStop { index } => self.stop_block(index)?,
            WireEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(usage) = usage {
                    usage.update(&mut self.usage);
                }
            }
            WireEvent::MessageStop => self.done = true,
            WireEvent::Ping | WireEvent::Unknown => {}
            WireEvent::Error { error } => return Err(wire::event_error(error)),
        }
        Ok(())
    }

    fn start_block(&mut self, index: usize, block: StartBlock) -> Result<(), ProviderError> {
        if self.blocks.contains_key(&index) {
            return Err(malformed(format!("content block {index} started twice")));
        }
        let partial = match block {
            StartBlock::Text { text } => {
                if !text.is_empty() {
                    (self.sink)(StreamEvent::TextDelta { index, text: text.clone() });
                }
                Partial::Text(text)
            }
            StartBlock::ToolUse { id, name, input } => {
                (self.sink)(StreamEvent::ToolCallStart {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                });
                Partial::Tool { id, name, json: String::new(), start_input: input, input: None }
            }
            StartBlock::Other => Partial::Skipped,
        };
        self.blocks.insert(index, partial);
        Ok(())
    }

    fn delta(&mut self, index: usize, delta: Delta) -> Result<(), ProviderError> {
        let Some(block) = self.blocks.get_mut(&index) else {
            return Err(malformed(format!("a delta for content block {index} before its start")));
        };
        match (block, delta) {
            (Partial::Text(text), Delta::Text { text: more }) => {
                text.push_str(&more);
                (self.sink)(StreamEvent::TextDelta { index, text: more });
            }
            (Partial::Tool { json, input: None, .. }, Delta::InputJson { partial_json }) => {
                if !partial_json.is_empty() {
                    json.push_str(&partial_json);
                    (self.sink)(StreamEvent::ToolCallDelta { index, partial_json });
                }
            }
            (Partial::Tool { input: Some(_), .. }, Delta::InputJson { .. }) => {
                return Err(malformed(format!("a delta for content block {index} after its stop")));
            }
            (Partial::Text(_), Delta::InputJson { .. })
            | (Partial::Tool { .. }, Delta::Text { .. }) => {
                return Err(malformed(format!(
                    "content block {index} got a delta of another block type"
                )));
            }
            // Deltas of skipped blocks, and delta types pev does not use (thinking, citations,
            // signatures).
            (_, Delta::Other) | (Partial::Skipped, _) => {}
        }
        Ok(())
    }

    fn stop_block(&mut self, index: usize) -> Result<(), ProviderError> {
        match self.blocks.get_mut(&index) {
            None => Err(malformed(format!("content block {index} stopped before its start"))),
            Some(Partial::Tool { id, name, json, start_input, input }) => {
                *input = Some(tool_input(id, name, json, start_input)?);
                Ok(())
            }
            Some(_) => Ok(()),
        }
    }

    /// The whole response, once the stream has ended.
    pub(super) fn finish(self) -> Result<ChatResponse, ProviderError> {
        if !self.done {
            return Err(malformed("the stream ended before message_stop".to_owned()));
        }
        if !self.started {
            return Err(malformed("the stream had no message_start".to_owned()));
        }
        let Some(stop) = self.stop_reason else {
            return Err(malformed("the stream ended without a stop_reason".to_owned()));
        };
        let mut content = Vec::with_capacity(self.blocks.len());
        for (_, block) in self.blocks {
            match block {
                Partial::Text(text) => content.push(ContentBlock::Text { text }),
                Partial::Tool { id, name, json, start_input, input } => {
                    // A block the server never stopped is taken as it stands.
                    let input = match input {
                        Some(input) => input,
                        None => tool_input(&id, &name, &json, &start_input)?,
                    };
                    content.push(ContentBlock::ToolUse { id, name, input });
                }
                Partial::Skipped => {}
            }
        }
        let stop_reason: StopReason = wire::stop_reason(stop);
        Ok(ChatResponse { id: self.id, model: self.model, content, stop_reason, usage: self.usage })
    }
}

/// The input of a streamed tool call: its joined fragments parsed; no fragments at all means the
/// input `content_block_start` carried, or `{}` (a tool without parameters).
fn tool_input(
    id: &str,
    name: &str,
    json: &str,
    start_input: &Value,
) -> Result<Value, ProviderError> {
    if json.trim().is_empty() {
        return Ok(match start_input {
            Value::Object(_) => start_input.clone(),
            _ => Value::Object(serde_json::Map::new()),
        });
    }
    serde_json::from_str(json).map_err(|e| {
        malformed(format!(
            "the input of tool call {name} ({id}) is not valid JSON: {e} in {}",
            wire::excerpt(json)
        ))
    })
}
