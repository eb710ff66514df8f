//! The scripted model (`script:FILE`): a JSON file of the turns the "model" will answer, in
//! order, so that a whole agent run can be played offline for demos, tests and evals.
//!
//! A script is `{"name"?: "...", "turns": [turn, ...]}`; a turn is
//! `{"content": [blocks], "stop_reason"?, "usage"?, "expect"?, "error"?}`. Each request takes the
//! next turn. `expect` checks the request (model, system prompt, offered tools, last user
//! message) so that a script fails loudly when the agent drifts from what it was written for,
//! instead of answering a question nobody asked. `error` makes the turn fail with a typed
//! [`ProviderError`], so retries and error handling can be tested offline; in a streamed call an
//! error turn's content is emitted first, which plays a stream cut mid-way.
//!
//! Usage defaults to zero (not an estimate): a script states the tokens it wants accounted, and
//! a run's cost figures then show exactly what the script said.

use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::{
    BoxFuture, ChatRequest, ChatResponse, ContentBlock, ModelClient, ProviderError, Role,
    StopReason, StreamEvent, StreamSink, TokenUsage,
};

/// How much of a prompt an expectation failure quotes.
const EXCERPT_CHARS: usize = 200;

/// One answer of the scripted model.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptTurn {
    /// Text and tool_use blocks, as a model would answer.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// Defaults to `tool_use` when the content has a tool call, else `end_turn`.
    #[serde(default, deserialize_with = "stop_reason")]
    pub stop_reason: Option<StopReason>,
    /// Defaults to zero.
    #[serde(default, deserialize_with = "usage")]
    pub usage: TokenUsage,
    /// What the request must look like for this turn to answer it.
    #[serde(default)]
    pub expect: Option<Expect>,
    /// Fail this request with a typed error instead of answering.
    #[serde(default)]
    pub error: Option<ScriptFailure>,
}

impl ScriptTurn {
    /// A turn answering `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self { content: vec![ContentBlock::text(text)], ..Self::default() }
    }

    /// A turn answering these blocks.
    pub fn blocks(content: Vec<ContentBlock>) -> Self {
        Self { content, ..Self::default() }
    }

    /// A turn failing with `kind` (and the server's `retry_after`, for rate limits and overload).
    pub fn failure(kind: FailureKind, retry_after: Option<Duration>) -> Self {
        let error = ScriptFailure { kind, message: None, status: None, retry_after };
        Self { error: Some(error), ..Self::default() }
    }

    pub fn with_usage(mut self, usage: TokenUsage) -> Self {
        self.usage = usage;
        self
    }

    pub fn with_expect(mut self, expect: Expect) -> Self {
        self.expect = Some(expect);
        self
    }
}

/// Checks on the request a turn answers. Every field given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The last user message (its text and tool results) contains this.
    #[serde(default)]
    pub last_user_contains: Option<String>,
    /// The request offers at least these tools.
    #[serde(default)]
    pub tools_include: Vec<String>,
    /// The system prompt contains this.
    #[serde(default)]
    pub system_contains: Option<String>,
    /// The request names exactly this model.
    #[serde(default)]
    pub model: Option<String>,
}

/// A scripted failure.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptFailure {
    pub kind: FailureKind,
    /// The error's message; defaults to "scripted <kind>".
    #[serde(default)]
    pub message: Option<String>,
    /// The HTTP status of `server`, `authentication` and `bad_request` (500, 401, 400 if absent).
    #[serde(default)]
    pub status: Option<u16>,
    /// What the "server" asks to wait, for `rate_limited` and `overloaded` (`retry_after_s`).
    #[serde(default, rename = "retry_after_s", deserialize_with = "seconds")]
    pub retry_after: Option<Duration>,
}

/// The kinds of [`ProviderError`] a script can raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    RateLimited,
    Overloaded,
    Server,
    Timeout,
    Authentication,
    BadRequest,
    ContextTooLong,
    Malformed,
    Transport,
}

impl ScriptFailure {
    fn to_error(&self, provider: &str) -> ProviderError {
        let provider = provider.to_owned();
        let message = self.message.clone().unwrap_or_else(|| format!("scripted {:?}", self.kind));
        let retry_after = self.retry_after;
        match self.kind {
            FailureKind::RateLimited => {
                ProviderError::RateLimited { provider, retry_after, message }
            }
            FailureKind::Overloaded => ProviderError::Overloaded { provider, retry_after, message },
            FailureKind::Server => {
                ProviderError::Server { provider, status: self.status.unwrap_or(500), message }
            }
            FailureKind::Timeout => {
                ProviderError::Timeout { provider, after: Duration::ZERO, what: "scripted timeout" }
            }
            FailureKind::Authentication => ProviderError::Authentication {
                provider,
                status: self.status.unwrap_or(401),
                message,
            },
            FailureKind::BadRequest => {
                ProviderError::BadRequest { provider, status: self.status.unwrap_or(400), message }
            }
            FailureKind::ContextTooLong => ProviderError::ContextTooLong { provider, message },
            FailureKind::Malformed => ProviderError::Malformed { provider, message },
            FailureKind::Transport => ProviderError::Transport { provider, message },
        }
    }
}

/// The file's shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    #[serde(default)]
    name: Option<String>,
    turns: Vec<ScriptTurn>,
}

/// `usage` with every count optional; Anthropic's names for the cache counts are accepted too.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageSpec {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default, alias = "cache_read_input_tokens")]
    cache_read_tokens: u64,
    #[serde(default, alias = "cache_creation_input_tokens")]
    cache_write_tokens: u64,
}

fn usage<'de, D: Deserializer<'de>>(d: D) -> Result<TokenUsage, D::Error> {
    let u = UsageSpec::deserialize(d)?;
    Ok(TokenUsage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_tokens,
        cache_write_tokens: u.cache_write_tokens,
    })
}

/// Any stop reason; the known ones map to their variants, the rest are kept verbatim.
fn stop_reason<'de, D: Deserializer<'de>>(d: D) -> Result<Option<StopReason>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map(|s| match s.as_str() {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        _ => StopReason::Other(s),
    }))
}

fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    match Option::<f64>::deserialize(d)? {
        None => Ok(None),
        Some(secs) => Duration::try_from_secs_f64(secs).map(Some).map_err(|_| {
            serde::de::Error::custom(format!(
                "retry_after_s must be a non-negative number of seconds, not {secs}"
            ))
        }),
    }
}

/// A model that answers from a script.
#[derive(Debug)]
pub struct ScriptedClient {
    /// The script's name in errors: the file's path, or the name given to `from_turns`.
    name: String,
    /// `script:<name>`.
    provider: String,
    /// The `name` the file gives itself, if any.
    title: Option<String>,
    turns: Vec<ScriptTurn>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The index of the next turn.
    next: usize,
    /// Every request received, in order.
    requests: Vec<ChatRequest>,
}

impl ScriptedClient {
    /// Loads a script file. A missing or unreadable file, bad JSON or a wrong shape is a
    /// [`ProviderError::Config`] naming the path, the turn and serde's line and column.
    pub fn load(path: &Path) -> Result<Self, ProviderError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ProviderError::Config(format!("cannot read the script {shown}: {e}")))?;
        Self::parse(&shown, &text)
    }

    /// Parses a script's text; `name` stands for it in errors.
    pub fn parse(name: &str, text: &str) -> Result<Self, ProviderError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| ProviderError::Config(format!("script {name} is not JSON: {e}")))?;
        let file: ScriptFile = serde_json::from_str(text).map_err(|e| {
            let at = locate(&value).map(|at| format!("{at}: ")).unwrap_or_default();
            ProviderError::Config(format!("script {name}: {at}{e}"))
        })?;
        for (i, turn) in file.turns.iter().enumerate() {
            for (j, block) in turn.content.iter().enumerate() {
                if matches!(block, ContentBlock::ToolResult { .. }) {
                    return Err(ProviderError::Config(format!(
                        "script {name}: turns[{i}].content[{j}] is a tool_result; a model's turn \
                         holds text and tool_use blocks"
                    )));
                }
            }
        }
        let mut client = Self::from_turns(name, file.turns);
        client.title = file.name;
        Ok(client)
    }

    /// A script made in code.
    pub fn from_turns(name: &str, turns: Vec<ScriptTurn>) -> Self {
        Self {
            name: name.to_owned(),
            provider: format!("script:{name}"),
            title: None,
            turns,
            state: Mutex::new(State::default()),
        }
    }

    /// The name the script file gives itself (`"name"`), if any.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// Whether the next turn checks what it is asked (`expect`): such a script is written for
    /// a run's requests, and a request of another kind (a `pev doctor --ping`) fails it.
    pub fn next_turn_expects(&self) -> bool {
        let next = self.lock().next;
        self.turns.get(next).is_some_and(|t| t.expect.is_some())
    }

    /// How many turns are left to answer.
    pub fn remaining(&self) -> usize {
        self.turns.len().saturating_sub(self.lock().next)
    }

    /// The requests received so far, in order (for tests that check what an agent sent).
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.lock().requests.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves the cursor consistent (it is one
        // integer and a list), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn script_error(&self, message: String) -> ProviderError {
        ProviderError::Script { script: self.name.clone(), message }
    }

    /// Takes the next turn for `request` and checks its expectation. A request a real service
    /// would refuse ([`crate::rules`]) is refused the same way, a 400 that takes no turn.
    fn take(&self, request: &ChatRequest) -> Result<(usize, &ScriptTurn), ProviderError> {
        let index = {
            let mut state = self.lock();
            state.requests.push(request.clone());
            if let Err((service, refusal)) = crate::rules::check_request(request) {
                return Err(ProviderError::BadRequest {
                    provider: self.provider.clone(),
                    status: refusal.status,
                    message: format!(
                        "the {service} API would refuse this request: {}",
                        refusal.message
                    ),
                });
            }
            let index = state.next;
            state.next = index.saturating_add(1);
            index
        };
        let turn = self.turns.get(index).ok_or_else(|| {
            self.script_error(format!(
                "no turn left: the script has {} turns and this is request {}",
                self.turns.len(),
                index.saturating_add(1)
            ))
        })?;
        if let Some(expect) = &turn.expect {
            check(expect, request).map_err(|problem| {
                self.script_error(format!("turn {}: {problem}", index.saturating_add(1)))
            })?;
        }
        Ok((index, turn))
    }

    fn response(index: usize, turn: &ScriptTurn, request: &ChatRequest) -> ChatResponse {
        let has_tool_use = turn.content.iter().any(|b| matches!(b, ContentBlock::ToolUse { .. }));
        let default_stop = if has_tool_use { StopReason::ToolUse } else { StopReason::EndTurn };
        ChatResponse {
            id: format!("script-{}", index.saturating_add(1)),
            model: request.model.clone(),
            content: turn.content.clone(),
            stop_reason: turn.stop_reason.clone().unwrap_or(default_stop),
            // A real model cannot write more than it was allowed: a scripted count above the
            // request's max_tokens is cut to it, so budgets behave as they would live.
            usage: TokenUsage {
                output_tokens: turn.usage.output_tokens.min(u64::from(request.max_tokens)),
                ..turn.usage
            },
        }
    }

    fn answer(
        &self,
        request: &ChatRequest,
        sink: Option<StreamSink<'_>>,
    ) -> Result<ChatResponse, ProviderError> {
        let (index, turn) = self.take(request)?;
        if let Some(sink) = sink {
            emit(&turn.content, sink);
        }
        match &turn.error {
            Some(failure) => Err(failure.to_error(&self.provider)),
            None => Ok(Self::response(index, turn, request)),
        }
    }
}

impl ModelClient for ScriptedClient {
    fn provider(&self) -> &str {
        &self.provider
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move { self.answer(request, None) })
    }

    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move { self.answer(request, Some(sink)) })
    }
}

/// Streams blocks as a provider would: text in two pieces, a tool call as its start and one
/// fragment holding the whole input.
fn emit(content: &[ContentBlock], sink: StreamSink<'_>) {
    for (index, block) in content.iter().enumerate() {
        match block {
            ContentBlock::Text { text } => {
                let (a, b) = text.split_at(floor_boundary(text, text.len() / 2));
                for piece in [a, b] {
                    if !piece.is_empty() {
                        sink(StreamEvent::TextDelta { index, text: piece.to_owned() });
                    }
                }
            }
            ContentBlock::ToolUse { id, name, input } => {
                sink(StreamEvent::ToolCallStart { index, id: id.clone(), name: name.clone() });
                sink(StreamEvent::ToolCallDelta { index, partial_json: input.to_string() });
            }
            ContentBlock::ToolResult { .. } => {}
        }
    }
}

/// The largest char boundary of `s` at or below `at`.
fn floor_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at = at.saturating_sub(1);
    }
    at
}

/// The start of `s`, quoted, with its length when cut.
fn excerpt(s: &str) -> String {
    let chars = s.chars().count();
    if chars <= EXCERPT_CHARS {
        return format!("{s:?}");
    }
    let cut: String = s.chars().take(EXCERPT_CHARS).collect();
    format!("{cut:?}… ({chars} characters)")
}

/// Which expectation of `expect` the request fails, described; `Ok` when all hold.
fn check(expect: &Expect, request: &ChatRequest) -> Result<(), String> {
    if let Some(model) = &expect.model
        && &request.model != model
    {
        return Err(format!("expected model {model:?}, the request asks for {:?}", request.model));
    }
    if let Some(want) = &expect.system_contains {
        match &request.system {
            None => {
                return Err(format!(
                    "expected the system prompt to contain {want:?}; the request has none"
                ));
            }
            Some(system) if !system.contains(want.as_str()) => {
                return Err(format!(
                    "expected the system prompt to contain {want:?}; it is {}",
                    excerpt(system)
                ));
            }
            Some(_) => {}
        }
    }
    let missing: Vec<&str> = expect
        .tools_include
        .iter()
        .filter(|name| !request.tools.iter().any(|t| &t.name == *name))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        return Err(format!(
            "expected the tools to include {missing:?}; the request offers {offered:?}"
        ));
    }
    if let Some(want) = &expect.last_user_contains {
        let Some(last) = request.messages.iter().rev().find(|m| m.role == Role::User) else {
            return Err(format!(
                "expected the last user message to contain {want:?}; the request has no user message"
            ));
        };
        let text = message_text(&last.content);
        if !text.contains(want.as_str()) {
            return Err(format!(
                "expected the last user message to contain {want:?}; it is {}",
                excerpt(&text)
            ));
        }
    }
    Ok(())
}

/// A message's text and tool results, joined by newlines.
fn message_text(content: &[ContentBlock]) -> String {
    let mut parts = Vec::new();
    for block in content {
        match block {
            ContentBlock::Text { text } => parts.push(text.as_str()),
            ContentBlock::ToolResult { content, .. } => parts.push(content.as_str()),
            ContentBlock::ToolUse { .. } => {}
        }
    }
    parts.join("\n")
}

/// Which turn (and block) of a script that failed to deserialize is wrong, when a turn is.
fn locate(value: &Value) -> Option<String> {
    let turns = value.get("turns")?.as_array()?;
    for (i, turn) in turns.iter().enumerate() {
        if ScriptTurn::deserialize(turn).is_ok() {
            continue;
        }
        if let Some(blocks) = turn.get("content").and_then(Value::as_array) {
            for (j, block) in blocks.iter().enumerate() {
                if ContentBlock::deserialize(block).is_err() {
                    return Some(format!("turns[{i}].content[{j}]"));
                }
            }
        }
        return Some(format!("turns[{i}]"));
    }
    None
}

#[cfg(test)]
#[path = "script_tests.rs"]
mod tests;
