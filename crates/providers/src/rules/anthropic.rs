//! The Messages API's rules (`POST /v1/messages`).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{Refusal, is_name, type_name};

/// The most `cache_control` breakpoints one request may carry.
pub const MAX_CACHE_BREAKPOINTS: usize = 4;

/// The pattern tool names must match (the API allows up to 128 characters).
const TOOL_NAME_MAX: usize = 128;

/// Checks a Messages request body as the API would.
pub fn check(body: &Value) -> Result<(), Refusal> {
    let Some(body) = body.as_object() else {
        return Err(Refusal::invalid("body: Input should be a valid dictionary"));
    };
    required_fields(body)?;
    system(body.get("system"))?;
    let tools = tools(body.get("tools"))?;
    tool_choice(body.get("tool_choice"), &tools)?;
    messages(body.get("messages"))?;
    cache_breakpoints(body)
}

fn required_fields(body: &Map<String, Value>) -> Result<(), Refusal> {
    match body.get("model") {
        None => return Err(Refusal::invalid("model: Field required")),
        Some(Value::String(m)) if !m.is_empty() => {}
        Some(_) => return Err(Refusal::invalid("model: Input should be a valid string")),
    }
    match body.get("max_tokens") {
        None => return Err(Refusal::invalid("max_tokens: Field required")),
        Some(v) => match v.as_u64() {
            Some(0) => {
                return Err(Refusal::invalid(
                    "max_tokens: Input should be greater than or equal to 1",
                ));
            }
            Some(_) => {}
            None => return Err(Refusal::invalid("max_tokens: Input should be a valid integer")),
        },
    }
    if let Some(t) = body.get("temperature") {
        match t.as_f64() {
            Some(t) if (0.0..=1.0).contains(&t) => {}
            Some(t) if t > 1.0 => {
                return Err(Refusal::invalid(
                    "temperature: Input should be less than or equal to 1",
                ));
            }
            _ => {
                return Err(Refusal::invalid(
                    "temperature: Input should be greater than or equal to 0",
                ));
            }
        }
    }
    if let Some(s) = body.get("stream").filter(|s| !s.is_boolean()) {
        return Err(Refusal::invalid(format!(
            "stream: Input should be a valid boolean, got {}",
            type_name(s)
        )));
    }
    Ok(())
}

fn system(system: Option<&Value>) -> Result<(), Refusal> {
    match system {
        None | Some(Value::String(_)) => Ok(()),
        Some(Value::Array(blocks)) => {
            for (i, block) in blocks.iter().enumerate() {
                if block["type"] != "text" {
                    return Err(Refusal::invalid(format!(
                        "system.{i}.type: Input should be 'text'"
                    )));
                }
                text_block(block, "system")?;
            }
            Ok(())
        }
        Some(_) => Err(Refusal::invalid("system: Input should be a valid list")),
    }
}

/// An empty or whitespace-only text block is refused wherever it is.
fn text_block(block: &Value, at: &str) -> Result<(), Refusal> {
    let Some(text) = block["text"].as_str() else {
        return Err(Refusal::invalid(format!("{at}: text content blocks must have a text field")));
    };
    if text.is_empty() {
        return Err(Refusal::invalid(format!("{at}: text content blocks must be non-empty")));
    }
    if text.trim().is_empty() {
        return Err(Refusal::invalid(format!(
            "{at}: text content blocks must contain non-whitespace text"
        )));
    }
    Ok(())
}

/// The tool names, after checking each definition.
fn tools(tools: Option<&Value>) -> Result<HashSet<String>, Refusal> {
    let mut names = HashSet::new();
    let Some(tools) = tools else { return Ok(names) };
    let Some(tools) = tools.as_array() else {
        return Err(Refusal::invalid("tools: Input should be a valid list"));
    };
    for (i, tool) in tools.iter().enumerate() {
        let name = tool["name"].as_str().unwrap_or_default();
        if !is_name(name, TOOL_NAME_MAX) {
            return Err(Refusal::invalid(format!(
                "tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
            )));
        }
        match tool.get("input_schema") {
            None => {
                return Err(Refusal::invalid(format!(
                    "tools.{i}.custom.input_schema: Field required"
                )));
            }
            Some(schema) if schema["type"] != "object" => {
                return Err(Refusal::invalid(format!(
                    "tools.{i}.custom.input_schema.type: Input should be 'object'"
                )));
            }
            Some(_) => {}
        }
        if !names.insert(name.to_owned()) {
            return Err(Refusal::invalid("tools: Tool names must be unique."));
        }
    }
    Ok(names)
}

fn tool_choice(choice: Option<&Value>, tools: &HashSet<String>) -> Result<(), Refusal> {
    let Some(choice) = choice else { return Ok(()) };
    if tools.is_empty() && choice["type"] != "none" {
        return Err(Refusal::invalid(
            "tool_choice: tool_choice may only be specified while providing tools.",
        ));
    }
    if choice["type"] == "tool" {
        let name = choice["name"].as_str().unwrap_or_default();
        if !tools.contains(name) {
            return Err(Refusal::invalid(format!(
                "tool_choice: Tool '{name}' not found in provided tools"
            )));
        }
    }
    Ok(())
}

/// One message's content blocks, a bare string standing for one text block.
fn blocks(message: &Value, i: usize) -> Result<Vec<Value>, Refusal> {
    match &message["content"] {
        Value::String(text) => {
            if text.is_empty() {
                return Err(Refusal::invalid(format!(
                    "messages.{i}: all messages must have non-empty content except for the \
                     optional final assistant message"
                )));
            }
            Ok(vec![serde_json::json!({"type": "text", "text": text})])
        }
        Value::Array(blocks) => {
            if blocks.is_empty() {
                return Err(Refusal::invalid(format!(
                    "messages.{i}: all messages must have non-empty content except for the \
                     optional final assistant message"
                )));
            }
            Ok(blocks.clone())
        }
        Value::Null => Err(Refusal::invalid(format!("messages.{i}.content: Field required"))),
        _ => Err(Refusal::invalid(format!("messages.{i}.content: Input should be a valid list"))),
    }
}

fn messages(messages: Option<&Value>) -> Result<(), Refusal> {
    let Some(messages) = messages else {
        return Err(Refusal::invalid("messages: Field required"));
    };
    let Some(messages) = messages.as_array() else {
        return Err(Refusal::invalid("messages: Input should be a valid list"));
    };
    if messages.is_empty() {
        return Err(Refusal::invalid("messages: at least one message is required"));
    }
    // The ids of the previous message's tool calls, which this message must answer.
    let mut pending: Vec<String> = Vec::new();
    let mut previous_role = "";
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        if role != "user" && role != "assistant" {
            return Err(Refusal::invalid(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant'"
            )));
        }
        if i == 0 && role != "user" {
            return Err(Refusal::invalid("messages: first message must use the \"user\" role"));
        }
        if role == previous_role {
            return Err(Refusal::invalid(format!(
                "messages: roles must alternate between \"user\" and \"assistant\", but found \
                 multiple \"{role}\" roles in a row"
            )));
        }
        let blocks = blocks(message, i)?;
        let mut uses = Vec::new();
        let mut answered = HashSet::new();
        for (k, block) in blocks.iter().enumerate() {
            let at = format!("messages.{i}.content.{k}");
            match (block["type"].as_str().unwrap_or_default(), role) {
                ("text", _) => text_block(block, "messages")?,
                ("tool_use", "assistant") => uses.push(tool_use(block, &at)?),
                ("tool_result", "user") => {
                    let id = block["tool_use_id"].as_str().unwrap_or_default();
                    if !pending.iter().any(|p| p == id) {
                        return Err(Refusal::invalid(format!(
                            "{at}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. \
                             Each `tool_result` block must have a corresponding `tool_use` block \
                             in the previous message."
                        )));
                    }
                    tool_result_content(block, &at)?;
                    answered.insert(id.to_owned());
                }
                (kind @ ("tool_use" | "tool_result"), _) => {
                    return Err(Refusal::invalid(format!(
                        "{at}: `{kind}` blocks are not allowed in a \"{role}\" message"
                    )));
                }
                (other, _) => {
                    return Err(Refusal::invalid(format!(
                        "{at}.type: Input tag '{other}' found using 'type' does not match any of \
                         the expected tags"
                    )));
                }
            }
        }
        if !pending.is_empty() {
            let missing: Vec<&str> =
                pending.iter().filter(|p| !answered.contains(*p)).map(String::as_str).collect();
            if !missing.is_empty() {
                return Err(unanswered(i - 1, &missing));
            }
        }
        pending = uses;
        previous_role = role;
    }
    if !pending.is_empty() {
        let missing: Vec<&str> = pending.iter().map(String::as_str).collect();
        return Err(unanswered(messages.len() - 1, &missing));
    }
    final_assistant_prefill(messages)
}

fn unanswered(at: usize, ids: &[&str]) -> Refusal {
    Refusal::invalid(format!(
        "messages.{at}: `tool_use` ids were found without `tool_result` blocks immediately after: \
         {}. Each `tool_use` block must have a corresponding `tool_result` block in the next \
         message.",
        ids.join(", ")
    ))
}

/// A tool call's id, after checking the block.
fn tool_use(block: &Value, at: &str) -> Result<String, Refusal> {
    let id = block["id"].as_str().unwrap_or_default();
    if !is_name(id, usize::MAX) {
        return Err(Refusal::invalid(format!(
            "{at}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        )));
    }
    if !block["input"].is_object() {
        return Err(Refusal::invalid(format!(
            "{at}.tool_use.input: Input should be a valid dictionary"
        )));
    }
    if block["name"].as_str().is_none_or(str::is_empty) {
        return Err(Refusal::invalid(format!("{at}.tool_use.name: Field required")));
    }
    Ok(id.to_owned())
}

/// A tool result's content: a string, or text blocks held to the usual rules.
fn tool_result_content(block: &Value, at: &str) -> Result<(), Refusal> {
    match &block["content"] {
        Value::Null | Value::String(_) => Ok(()),
        Value::Array(inner) => {
            for part in inner {
                if part["type"] == "text" {
                    text_block(part, "messages")?;
                }
            }
            Ok(())
        }
        _ => {
            Err(Refusal::invalid(format!("{at}.tool_result.content: Input should be a valid list")))
        }
    }
}

/// A conversation may end with the assistant's words (a prefill), but not with whitespace.
fn final_assistant_prefill(messages: &[Value]) -> Result<(), Refusal> {
    let Some(last) = messages.last().filter(|m| m["role"] == "assistant") else { return Ok(()) };
    let text = match &last["content"] {
        Value::String(text) => Some(text.as_str()),
        Value::Array(blocks) => {
            blocks.last().filter(|b| b["type"] == "text").and_then(|b| b["text"].as_str())
        }
        _ => None,
    };
    if text.is_some_and(|t| t.ends_with(char::is_whitespace)) {
        return Err(Refusal::invalid(
            "messages: final assistant content cannot end with trailing whitespace",
        ));
    }
    Ok(())
}

/// Counts the blocks that carry `cache_control`: system blocks, tools and message blocks.
fn cache_breakpoints(body: &Map<String, Value>) -> Result<(), Refusal> {
    let marked = |v: &Value| v.get("cache_control").is_some_and(|c| !c.is_null());
    let list = |key: &str| body.get(key).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let mut found = list("system").iter().filter(|b| marked(b)).count()
        + list("tools").iter().filter(|t| marked(t)).count();
    for message in list("messages") {
        if let Some(blocks) = message["content"].as_array() {
            found += blocks.iter().filter(|b| marked(b)).count();
        }
    }
    if found > MAX_CACHE_BREAKPOINTS {
        return Err(Refusal::invalid(format!(
            "A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. \
             Found {found}."
        )));
    }
    Ok(())
}
