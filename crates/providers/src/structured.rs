//! Structured output: ask a model for JSON that matches a JSON Schema, find the JSON in what it
//! answers, validate it, and when it does not validate, show the model its errors and ask again,
//! a bounded number of times.
//!
//! Models wrap JSON in many ways: bare, in a Markdown fence, or inside prose ("Here is the plan:
//! {...} Let me know if..."). [`extract_json`] tries those in that order; the prose case finds
//! the first balanced `{...}` or `[...]` (aware of strings, so a `}` inside a string does not end
//! it) that parses. [`request_json`] goes further: of all the candidates in an answer it takes the
//! first that validates, so a stray `[1]` in the prose does not hide the real answer; an answer
//! given as a tool call's arguments counts too. A refusal ends the request at once
//! ([`ProviderError::Refused`]); an answer cut off at the token limit is asked again, shorter.
//!
//! This is also the one module that talks to the `jsonschema` crate, so that an upgrade of it
//! touches one file. Schemas are compiled offline: no remote `$ref` is fetched.

use serde_json::Value;

use crate::{
    ChatRequest, ContentBlock, Message, ModelClient, ProviderError, StopReason, TokenUsage,
};

/// How many validation errors are shown to the model (the first ones; more would drown them).
const MAX_ERRORS_SHOWN: usize = 10;
/// How much of one validation error message is shown (they quote the offending value).
const MAX_ERROR_CHARS: usize = 300;
/// How many bytes the search for balanced brackets may scan in all, so that pathological text
/// (thousands of unclosed `[`) costs milliseconds, not minutes.
const SCAN_BUDGET: usize = 8 << 20;

/// How [`request_json`] asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructuredOptions {
    /// Calls in all, the first included (0 counts as 1).
    pub max_tries: u32,
    /// What the JSON is, for the model and for errors ("plan", "verdict").
    pub what: String,
}

impl Default for StructuredOptions {
    fn default() -> Self {
        Self { max_tries: 3, what: "JSON answer".to_owned() }
    }
}

/// Asks `client` for JSON matching `schema`. Returns the value, the usage summed over all tries,
/// and the number of tries. Provider errors pass through as they are; an invalid `schema` is a
/// [`ProviderError::Config`]; no valid answer after `max_tries` is
/// [`ProviderError::InvalidStructuredOutput`] with the last problem.
pub async fn request_json(
    client: &dyn ModelClient,
    request: ChatRequest,
    schema: &Value,
    options: StructuredOptions,
) -> Result<(Value, TokenUsage, u32), ProviderError> {
    let StructuredOptions { max_tries, what } = options;
    let validator = jsonschema::options().build(schema).map_err(|e| {
        ProviderError::Config(format!("the JSON Schema of the {what} is not valid: {e}"))
    })?;
    let mut request = request;
    request.system = Some(with_instruction(request.system.take(), &what, schema));
    let max_tries = max_tries.max(1);
    let mut usage = TokenUsage::default();
    let mut tries = 0u32;
    loop {
        tries = tries.saturating_add(1);
        let response = client.chat(&request).await?;
        usage.add(&response.usage);
        if response.stop_reason == StopReason::Refusal {
            let message = truncate(response.text().trim(), MAX_ERROR_CHARS);
            return Err(ProviderError::Refused { what, message });
        }
        let mut problem = match find_valid_in_calls(&validator, &response.content) {
            Some(value) => return Ok((value, usage, tries)),
            None => match find_valid(&validator, &response.text()) {
                Ok(value) => return Ok((value, usage, tries)),
                Err(problem) => problem,
            },
        };
        if response.stop_reason == StopReason::MaxTokens {
            problem.push_str("\n(The answer was cut off at the token limit: be more concise.)");
        }
        if tries >= max_tries {
            return Err(ProviderError::InvalidStructuredOutput {
                what,
                attempts: tries,
                last_error: problem,
            });
        }
        request.messages.push(echo(&response.content));
        request.messages.push(Message::user(format!(
            "That answer is not a valid {what}. {problem}\n\nAnswer again with only the corrected \
             JSON, matching the schema."
        )));
    }
}

/// The system prompt with the instruction to answer in JSON appended.
fn with_instruction(system: Option<String>, what: &str, schema: &Value) -> String {
    let schema_text = serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
    let instruction = format!(
        "Answer with the {what} as a single JSON value that matches this JSON Schema, and nothing \
         else:\n\n{schema_text}"
    );
    match system {
        Some(system) if !system.trim().is_empty() => format!("{system}\n\n{instruction}"),
        _ => instruction,
    }
}

/// The model's answer as it goes back into the conversation: its text only (a tool call without
/// its result would be refused by the API), never empty (which the API refuses too).
fn echo(content: &[ContentBlock]) -> Message {
    let texts: Vec<ContentBlock> = content
        .iter()
        .filter(|b| matches!(b, ContentBlock::Text { text } if !text.trim().is_empty()))
        .cloned()
        .collect();
    if texts.is_empty() {
        Message::assistant(vec![ContentBlock::text("(no text)")])
    } else {
        Message::assistant(texts)
    }
}

/// An answer given as a tool call (some models put the JSON asked for in a call's arguments,
/// whole or under one key such as `{"plan": {…}}`): the first such value that validates.
fn find_valid_in_calls(
    validator: &jsonschema::Validator,
    content: &[ContentBlock],
) -> Option<Value> {
    content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolUse { input, .. } => Some(input),
            _ => None,
        })
        .flat_map(|input| {
            let wrapped =
                input.as_object().filter(|o| o.len() == 1).and_then(|o| o.values().next());
            std::iter::once(input).chain(wrapped)
        })
        .find(|value| validator.is_valid(value))
        .cloned()
}

/// The first JSON value in `text` that `validator` accepts; else what is wrong with the first
/// value found, or why none was found.
fn find_valid(validator: &jsonschema::Validator, text: &str) -> Result<Value, String> {
    let mut candidates = Candidates::new(text);
    let mut first_problem = None;
    for value in candidates.by_ref() {
        let problem = validation_problem(validator, &value);
        match problem {
            None => return Ok(value),
            Some(problem) => {
                first_problem.get_or_insert(problem);
            }
        }
    }
    Err(first_problem.unwrap_or_else(|| candidates.failure()))
}

/// The validation errors of `value` as a list for the model, or `None` when it is valid.
fn validation_problem(validator: &jsonschema::Validator, value: &Value) -> Option<String> {
    let mut lines = Vec::new();
    let mut total = 0usize;
    for error in validator.iter_errors(value) {
        total = total.saturating_add(1);
        if lines.len() < MAX_ERRORS_SHOWN {
            let path = error.instance_path().as_str();
            let at = if path.is_empty() { "(the root)" } else { path };
            lines.push(format!("- at {at}: {}", truncate(&error.to_string(), MAX_ERROR_CHARS)));
        }
    }
    if total == 0 {
        return None;
    }
    if total > lines.len() {
        lines.push(format!("- … and {} more", total.saturating_sub(lines.len())));
    }
    Some(format!("The JSON does not match the schema:\n{}", lines.join("\n")))
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", s.get(..cut).unwrap_or(s)),
        None => s.to_owned(),
    }
}

/// The JSON value in a model's answer: the whole text if it is JSON, else the first ```json (or
/// unlabelled) fenced block that parses, else the first balanced `{...}` or `[...]` in the text
/// that parses. The error says why nothing was found (including a fenced block's parse error).
pub fn extract_json(text: &str) -> Result<Value, String> {
    let mut candidates = Candidates::new(text);
    match candidates.next() {
        Some(value) => Ok(value),
        None => Err(candidates.failure()),
    }
}

/// Where the search for candidates is.
#[derive(Debug, Clone, Copy)]
enum Phase {
    Whole,
    /// Looking for a fence from this byte offset.
    Fences(usize),
    /// Looking for an opening bracket from this byte offset.
    Spans(usize),
    Done,
}

/// The JSON values of a text, in order of preference, found lazily.
struct Candidates<'t> {
    text: &'t str,
    phase: Phase,
    /// Bytes the bracket search may still scan.
    budget: usize,
    /// Why fenced blocks did not parse, for the error when nothing does.
    notes: Vec<String>,
}

impl<'t> Candidates<'t> {
    fn new(text: &'t str) -> Self {
        Self { text, phase: Phase::Whole, budget: SCAN_BUDGET, notes: Vec::new() }
    }

    /// Why no candidate was found.
    fn failure(&self) -> String {
        if self.text.trim().is_empty() {
            return "The answer is empty; it should be JSON.".to_owned();
        }
        let mut message = "No JSON object or array was found in the answer.".to_owned();
        for note in &self.notes {
            message.push(' ');
            message.push_str(note);
        }
        message
    }

    /// The next fenced block from `from`: its label, its content, and where the search goes on.
    fn next_fence(&self, from: usize) -> Option<(&'t str, &'t str, usize)> {
        let rest = self.text.get(from..)?;
        let open = from.checked_add(rest.find("```")?)?.checked_add(3)?;
        let after_open = self.text.get(open..)?;
        let label_end = after_open.find('\n').unwrap_or(after_open.len());
        let label = after_open.get(..label_end)?.trim();
        let body_start = open.checked_add(label_end)?;
        let body_rest = self.text.get(body_start..)?;
        match body_rest.find("```") {
            Some(close) => {
                let body = body_rest.get(..close)?;
                Some((label, body, body_start.checked_add(close)?.checked_add(3)?))
            }
            // An unclosed fence (an answer cut short) holds the rest of the text.
            None => Some((label, body_rest, self.text.len())),
        }
    }

    fn fence_candidate(&mut self, from: usize) -> Option<Value> {
        let mut from = from;
        while let Some((label, body, next)) = self.next_fence(from) {
            from = next;
            let wanted = label.is_empty() || label.eq_ignore_ascii_case("json");
            if !wanted || body.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(body.trim()) {
                Ok(value) => {
                    self.phase = Phase::Fences(from);
                    return Some(value);
                }
                Err(e) => {
                    let name = if label.is_empty() { "A fenced" } else { "A ```json" };
                    self.notes.push(format!("{name} block is not valid JSON: {e}."));
                }
            }
        }
        self.phase = Phase::Spans(0);
        None
    }

    fn span_candidate(&mut self, from: usize) -> Option<Value> {
        let bytes = self.text.as_bytes();
        let mut start = from;
        while let Some(offset) = bytes.get(start..)?.iter().position(|&b| b == b'{' || b == b'[') {
            start = start.checked_add(offset)?;
            if let Some(end) = balanced_end(bytes, start, &mut self.budget)
                && let Some(slice) = self.text.get(start..end)
                && let Ok(value) = serde_json::from_str(slice)
            {
                self.phase = Phase::Spans(end);
                return Some(value);
            }
            if self.budget == 0 {
                return None;
            }
            start = start.checked_add(1)?;
        }
        None
    }
}

impl Iterator for Candidates<'_> {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        loop {
            match self.phase {
                Phase::Whole => {
                    self.phase = Phase::Fences(0);
                    if let Ok(value) = serde_json::from_str(self.text.trim()) {
                        return Some(value);
                    }
                }
                Phase::Fences(from) => {
                    if let Some(value) = self.fence_candidate(from) {
                        return Some(value);
                    }
                }
                Phase::Spans(from) => {
                    let found = self.span_candidate(from);
                    if found.is_none() {
                        self.phase = Phase::Done;
                    }
                    return found;
                }
                Phase::Done => return None,
            }
        }
    }
}

/// The end (exclusive) of the bracketed span opening at `start`, skipping brackets inside
/// strings; `None` when it does not close, closes with the wrong bracket, or the budget runs out.
/// Works on bytes: every delimiter is ASCII, so the offsets are char boundaries.
fn balanced_end(bytes: &[u8], start: usize, budget: &mut usize) -> Option<usize> {
    let mut stack = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate().skip(start) {
        *budget = budget.checked_sub(1)?;
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' => stack.push(b'}'),
            b'[' => stack.push(b']'),
            b'}' | b']' => {
                if stack.pop() != Some(b) {
                    return None;
                }
                if stack.is_empty() {
                    return i.checked_add(1);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
#[path = "structured_tests.rs"]
mod tests;
