//! Reassembly of a streamed Chat Completion. The server sends `data: {chunk}` events and a final
//! `data: [DONE]`; each chunk's `choices[0].delta` holds more text and/or tool-call pieces
//! (`tool_calls[{index, id?, function: {name?, arguments?}}]`), the `finish_reason` comes in a
//! later chunk, and with `stream_options.include_usage` a last chunk with no choices carries the
//! usage.
//!
//! Tool calls are accumulated per `index`; the argument fragments are kept as raw text (they can
//! split a string or a `\u` escape anywhere) and parsed once, at the end. Ollama numbers every
//! call of a parallel batch `0` and tells them apart by id, so a new id with a name at a known
//! index opens a new call.
//!
//! Block indices in [`StreamEvent`]s are the positions of the blocks in the final response, in
//! order of first appearance (text, when it comes first, is block 0).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use super::wire::{WireUsage, malformed, parse_arguments, stop_reason, synthetic_id};
use crate::StreamSink;
use crate::error::ProviderError;
use crate::types::{ChatResponse, ContentBlock, StopReason, StreamEvent, TokenUsage};

#[derive(Deserialize)]
struct WireChunk {
    id: Option<String>,
    model: Option<String>,
    choices: Option<Vec<WireChunkChoice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChunkChoice {
    index: Option<u64>,
    delta: Option<WireDelta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireDelta {
    content: Option<String>,
    refusal: Option<String>,
    tool_calls: Option<Vec<WireCallDelta>>,
}

#[derive(Deserialize)]
struct WireCallDelta {
    index: Option<u64>,
    id: Option<String>,
    function: Option<WireFunctionDelta>,
}

#[derive(Deserialize)]
struct WireFunctionDelta {
    name: Option<String>,
    /// A fragment of the JSON string; a few servers send the whole object instead.
    arguments: Option<Value>,
}

enum Block {
    Text(String),
    Call(Call),
}

#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
    /// `ToolCallStart` was sent (it waits for the name).
    started: bool,
    /// Bytes of `arguments` already sent as `ToolCallDelta`s.
    emitted: usize,
}

/// What the stream has said so far.
#[derive(Default)]
pub(super) struct StreamState {
    id: String,
    model: String,
    blocks: Vec<Block>,
    text_block: Option<usize>,
    /// The wire `index` of a tool call to its block.
    by_index: HashMap<u64, usize>,
    last_call: Option<usize>,
    finish_reason: Option<String>,
    /// The model sent a `refusal`: the turn is one, whatever the finish reason says.
    refused: bool,
    usage: Option<TokenUsage>,
    done: bool,
}

impl StreamState {
    /// Takes one SSE event's data. `api_error` types an `error` object found in a chunk.
    pub(super) fn on_data(
        &mut self,
        data: &str,
        sink: StreamSink<'_>,
        api_error: &dyn Fn(&Value) -> ProviderError,
    ) -> Result<(), ProviderError> {
        let data = data.trim();
        if self.done || data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: WireChunk = serde_json::from_str(data).map_err(|e| {
            malformed(format!("a stream chunk is not a completion chunk ({e}): {}", excerpt(data)))
        })?;
        if let Some(error) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            return Err(api_error(error));
        }
        if self.id.is_empty() {
            self.id = chunk.id.unwrap_or_default();
        }
        if self.model.is_empty() {
            self.model = chunk.model.unwrap_or_default();
        }
        if let Some(usage) = chunk.usage {
            // Servers that report usage on every chunk report running totals: the last wins.
            self.usage = Some(usage.to_usage());
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                let text = delta.content.filter(|t| !t.is_empty());
                let refusal = delta.refusal.filter(|t| !t.is_empty());
                self.refused |= refusal.is_some();
                if let Some(text) = text.or(refusal) {
                    self.text(text, sink);
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    self.call(call, sink);
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
        }
        Ok(())
    }

    fn text(&mut self, text: String, sink: StreamSink<'_>) {
        let index = match self.text_block {
            Some(i) => i,
            None => {
                self.blocks.push(Block::Text(String::new()));
                let i = self.blocks.len().saturating_sub(1);
                self.text_block = Some(i);
                i
            }
        };
        if let Some(Block::Text(all)) = self.blocks.get_mut(index) {
            all.push_str(&text);
        }
        sink(StreamEvent::TextDelta { index, text });
    }

    fn call(&mut self, delta: WireCallDelta, sink: StreamSink<'_>) {
        let (name, fragment) = match delta.function {
            Some(f) => (f.name.filter(|n| !n.is_empty()), f.arguments),
            None => (None, None),
        };
        let id = delta.id.filter(|id| !id.is_empty());
        let current = match delta.index {
            Some(i) => self.by_index.get(&i).copied(),
            None => self.last_call,
        };
        let existing = current.filter(|&b| match self.blocks.get(b) {
            Some(Block::Call(call)) => match (&id, &name) {
                (Some(id), Some(_)) => call.id.is_empty() || call.id == *id,
                _ => true,
            },
            _ => false,
        });
        let block = match existing {
            Some(b) => b,
            None => {
                self.blocks.push(Block::Call(Call::default()));
                let b = self.blocks.len().saturating_sub(1);
                if let Some(i) = delta.index {
                    self.by_index.insert(i, b);
                }
                b
            }
        };
        self.last_call = Some(block);
        let Some(Block::Call(call)) = self.blocks.get_mut(block) else { return };
        if let (true, Some(id)) = (call.id.is_empty(), id) {
            call.id = id;
        }
        if let (true, Some(name)) = (call.name.is_empty(), name) {
            call.name = name;
        }
        match fragment {
            Some(Value::String(s)) => call.arguments.push_str(&s),
            None | Some(Value::Null) => {}
            Some(other) => call.arguments.push_str(&other.to_string()),
        }
        if !call.started && !call.name.is_empty() {
            call.started = true;
            if call.id.is_empty() {
                call.id = synthetic_id(block);
            }
            sink(StreamEvent::ToolCallStart {
                index: block,
                id: call.id.clone(),
                name: call.name.clone(),
            });
        }
        if call.started && call.emitted < call.arguments.len() {
            let partial = call.arguments.get(call.emitted..).unwrap_or_default().to_owned();
            call.emitted = call.arguments.len();
            sink(StreamEvent::ToolCallDelta { index: block, partial_json: partial });
        }
    }

    /// The whole response once the body has ended (`clean`: not in the middle of an event).
    /// A stream that ended before `[DONE]` and before a `finish_reason` was cut.
    pub(super) fn finish(
        self,
        clean: bool,
        requested_model: &str,
    ) -> Result<ChatResponse, ProviderError> {
        if !self.done {
            if !clean {
                return Err(malformed("the stream ended in the middle of an event".to_owned()));
            }
            if self.finish_reason.is_none() {
                return Err(malformed(
                    "the stream ended without a finish_reason or [DONE]: it was cut".to_owned(),
                ));
            }
        }
        let mut content = Vec::with_capacity(self.blocks.len());
        for block in self.blocks {
            match block {
                Block::Text(text) => content.push(ContentBlock::Text { text }),
                Block::Call(call) => {
                    if call.name.is_empty() {
                        return Err(malformed(format!(
                            "the streamed tool call {:?} never said its name",
                            call.id
                        )));
                    }
                    let input = parse_arguments(&call.name, &call.arguments)?;
                    content.push(ContentBlock::ToolUse { id: call.id, name: call.name, input });
                }
            }
        }
        let has_calls = content.iter().any(|b| matches!(b, ContentBlock::ToolUse { .. }));
        Ok(ChatResponse {
            id: self.id,
            model: if self.model.is_empty() { requested_model.to_owned() } else { self.model },
            content,
            stop_reason: if self.refused {
                StopReason::Refusal
            } else {
                stop_reason(self.finish_reason.as_deref(), has_calls)
            },
            usage: self.usage.unwrap_or_default(),
        })
    }
}

/// The start of a chunk, for an error message.
fn excerpt(data: &str) -> String {
    let mut out: String = data.chars().take(200).collect();
    if out.len() < data.len() {
        out.push('…');
    }
    out
}
