//! What one model turn asks of the harness, read the same way by the executor and by loop mode.
//!
//! Real models answer in more shapes than "some tool calls" or "a final summary": prose before
//! the calls, several calls at once, an answer cut off at the token limit (its last call's
//! arguments incomplete), a refusal, or nothing at all. Each shape gets one reading here, so that
//! no call from a cut-off answer is ever made and every `tool_use` still gets its `tool_result`
//! (the APIs refuse a conversation where one does not).

use pev_providers::{ChatResponse, ContentBlock, StopReason};
use serde_json::Value;

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub id: String,
    /// The wire name the model called.
    pub name: String,
    pub input: Value,
}

/// What the turn asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Turn {
    /// Make these calls, in order (any prose before them is commentary).
    Calls(Vec<Call>),
    /// The model ended its turn with these words.
    Final(String),
    /// The model ended its turn without a word or a call.
    Empty,
    /// The answer was cut off at the token limit: its calls (perhaps none) are not made.
    CutOff(Vec<Call>),
    /// The model declined; the text says why.
    Refused(String),
}

/// Reads a response.
pub(crate) fn read(response: &ChatResponse) -> Turn {
    let text = response.text().trim().to_owned();
    let calls: Vec<Call> = response
        .tool_calls()
        .map(|(id, name, input)| Call {
            id: id.to_owned(),
            name: name.to_owned(),
            input: input.clone(),
        })
        .collect();
    match response.stop_reason {
        StopReason::Refusal => Turn::Refused(text),
        StopReason::MaxTokens => Turn::CutOff(calls),
        _ if !calls.is_empty() => Turn::Calls(calls),
        _ if text.is_empty() => Turn::Empty,
        _ => Turn::Final(text),
    }
}

/// What the model is told after an answer cut off at `max_tokens`: each of its calls answered
/// as not made (so every `tool_use` has its result), and what to do instead.
pub(crate) fn cut_off_reply(calls: &[Call], max_tokens: u32) -> Vec<ContentBlock> {
    let why = format!(
        "Your answer was cut off at the token limit ({max_tokens} tokens), so this call's \
         arguments may be incomplete; it was not made."
    );
    let mut reply: Vec<ContentBlock> = calls
        .iter()
        .map(|c| ContentBlock::ToolResult {
            tool_use_id: c.id.clone(),
            content: why.clone(),
            is_error: true,
        })
        .collect();
    reply.push(ContentBlock::text(format!(
        "Your last answer was cut off at the token limit ({max_tokens} tokens). Carry on from \
         where it stopped, more briefly: make big changes in several smaller calls (patches \
         rather than whole files)."
    )));
    reply
}

/// What the model is told after an empty answer, once.
pub(crate) const EMPTY_ANSWER: &str = "Your answer was empty. Carry on with the tools, or, if \
     the work is finished, end your turn with a short summary of what you did.";

/// What an interruption says of a refusal.
pub(crate) fn refusal(role: &str, text: &str) -> String {
    if text.is_empty() {
        format!("the {role} model refused to answer")
    } else {
        format!("the {role} model refused to answer: {}", cap_text(text, 500))
    }
}

/// How much of one tool result the model is shown. Bigger outputs (a whole file, a long log)
/// would crowd the context and be paid again on every later turn.
pub(crate) const TOOL_OUTPUT_CAP: usize = 16 * 1024;

/// `text` cut to at most `limit` bytes on a char boundary, with a note saying how much was cut.
pub(crate) fn cap_text(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut = cut.saturating_sub(1);
    }
    let head = text.get(..cut).unwrap_or_default();
    let dropped = text.len().saturating_sub(cut);
    format!("{head}\n… truncated {dropped} bytes")
}

#[cfg(test)]
#[path = "turn_tests.rs"]
mod tests;
