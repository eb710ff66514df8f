//! Chat Completions rules (`POST /v1/chat/completions`), as the hosted API enforces them.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{Refusal, is_name, type_name};

/// OpenAI's limit on function names.
const FUNCTION_NAME_MAX: usize = 64;

/// Whether `model` is one of OpenAI's reasoning families (o1, o3, o4-mini, gpt-5…), which refuse
/// `max_tokens` (they take `max_completion_tokens`) and any temperature but the default.
pub fn is_reasoning_model(model: &str) -> bool {
    // A router's prefix (`openai/o3`) names the same model.
    let model = model.rsplit('/').next().unwrap_or(model);
    let family = |prefix: &str| {
        model.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    };
    family("o1") || family("o3") || family("o4-mini") || family("o4") || model.starts_with("gpt-5")
}

/// Checks a Chat Completions request body as the hosted API would.
pub fn check(body: &Value) -> Result<(), Refusal> {
    let Some(body) = body.as_object() else {
        return Err(Refusal::invalid("We could not parse the JSON body of your request."));
    };
    let model = match body.get("model") {
        Some(Value::String(m)) if !m.is_empty() => m.as_str(),
        _ => {
            return Err(Refusal::invalid("you must provide a model parameter").param("model"));
        }
    };
    reasoning_parameters(body, model)?;
    stream_options(body)?;
    let tools = tools(body.get("tools"))?;
    tool_choice(body.get("tool_choice"), &tools)?;
    messages(body.get("messages"))
}

fn reasoning_parameters(body: &Map<String, Value>, model: &str) -> Result<(), Refusal> {
    if !is_reasoning_model(model) {
        return Ok(());
    }
    if body.contains_key("max_tokens") {
        return Err(Refusal::invalid(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use \
             'max_completion_tokens' instead.",
        )
        .param("max_tokens")
        .code("unsupported_parameter"));
    }
    if let Some(t) = body.get("temperature").filter(|t| t.as_f64() != Some(1.0)) {
        return Err(Refusal::invalid(format!(
            "Unsupported value: 'temperature' does not support {t} with this model. Only the \
             default (1) value is supported."
        ))
        .param("temperature")
        .code("unsupported_value"));
    }
    Ok(())
}

fn stream_options(body: &Map<String, Value>) -> Result<(), Refusal> {
    let streaming = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if body.get("stream_options").is_some_and(|o| !o.is_null()) && !streaming {
        return Err(Refusal::invalid(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
        )
        .param("stream_options"));
    }
    Ok(())
}

fn tools(tools: Option<&Value>) -> Result<HashSet<String>, Refusal> {
    let mut names = HashSet::new();
    let Some(tools) = tools else { return Ok(names) };
    let Some(tools) = tools.as_array() else {
        return Err(Refusal::invalid(format!(
            "Invalid type for 'tools': expected an array, but got {} instead.",
            type_name(tools)
        ))
        .param("tools")
        .code("invalid_type"));
    };
    for (i, tool) in tools.iter().enumerate() {
        let param = format!("tools[{i}].function.name");
        let name = tool["function"]["name"].as_str().unwrap_or_default();
        if name.len() > FUNCTION_NAME_MAX {
            return Err(Refusal::invalid(format!(
                "Invalid '{param}': string too long. Expected a string with maximum length \
                 {FUNCTION_NAME_MAX}, but got a string with length {} instead.",
                name.len()
            ))
            .param(param)
            .code("string_above_max_length"));
        }
        if !is_name(name, FUNCTION_NAME_MAX) {
            return Err(Refusal::invalid(format!(
                "Invalid '{param}': string does not match pattern. Expected a string that matches \
                 the pattern '^[a-zA-Z0-9_-]+$'."
            ))
            .param(param)
            .code("invalid_value"));
        }
        if let Some(parameters) = tool["function"].get("parameters") {
            let root = &parameters["type"];
            if root != "object" {
                return Err(Refusal::invalid(format!(
                    "Invalid schema for function '{name}': schema must be a JSON Schema of 'type: \
                     \"object\"', got 'type: {root}'."
                ))
                .param(format!("tools[{i}].function.parameters"))
                .code("invalid_function_parameters"));
            }
        }
        names.insert(name.to_owned());
    }
    Ok(names)
}

fn tool_choice(choice: Option<&Value>, tools: &HashSet<String>) -> Result<(), Refusal> {
    let Some(choice) = choice.filter(|c| !c.is_null()) else { return Ok(()) };
    if tools.is_empty() {
        return Err(Refusal::invalid(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are \
             specified.",
        )
        .param("tool_choice"));
    }
    if let Some(name) = choice["function"]["name"].as_str().filter(|n| !tools.contains(*n)) {
        return Err(Refusal::invalid(format!(
            "Invalid value for 'tool_choice': function '{name}' is not among the tools."
        ))
        .param("tool_choice"));
    }
    Ok(())
}

fn messages(messages: Option<&Value>) -> Result<(), Refusal> {
    let messages = messages.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if messages.is_empty() {
        return Err(Refusal::invalid("[] is too short - 'messages'").param("messages"));
    }
    // The calls of the last assistant message not yet answered by a `tool` message.
    let mut open: Vec<String> = Vec::new();
    let mut calls_made = false;
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        if role != "tool" && !open.is_empty() {
            return Err(Refusal::invalid(format!(
                "An assistant message with 'tool_calls' must be followed by tool messages \
                 responding to each 'tool_call_id'. The following tool_call_ids did not have \
                 response messages: {}",
                open.join(", ")
            ))
            .param(format!("messages.[{i}].role")));
        }
        match role {
            "system" | "developer" | "user" => {
                calls_made = false;
                content(message, i, false)?;
            }
            "assistant" => {
                let calls = message["tool_calls"].as_array().map_or(&[][..], Vec::as_slice);
                if calls.is_empty() {
                    content(message, i, false)?;
                }
                for (k, call) in calls.iter().enumerate() {
                    let arguments = &call["function"]["arguments"];
                    if !arguments.is_string() {
                        return Err(Refusal::invalid(format!(
                            "Invalid type for 'messages[{i}].tool_calls[{k}].function.arguments': \
                             expected a string, but got {} instead.",
                            type_name(arguments)
                        ))
                        .param(format!("messages[{i}].tool_calls[{k}].function.arguments"))
                        .code("invalid_type"));
                    }
                    open.push(call["id"].as_str().unwrap_or_default().to_owned());
                }
                calls_made = !calls.is_empty();
            }
            "tool" => {
                if !calls_made {
                    return Err(Refusal::invalid(
                        "Invalid parameter: messages with role 'tool' must be a response to a \
                         preceeding message with 'tool_calls'.",
                    )
                    .param(format!("messages.[{i}].role")));
                }
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                let Some(at) = open.iter().position(|o| o == id) else {
                    return Err(Refusal::invalid(format!(
                        "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of \
                         previous message."
                    ))
                    .param(format!("messages.[{i}].tool_call_id")));
                };
                open.remove(at);
                content(message, i, true)?;
            }
            other => {
                return Err(Refusal::invalid(format!(
                    "Invalid value: '{other}'. Supported values are: 'system', 'assistant', \
                     'user', 'tool', 'function', and 'developer'."
                ))
                .param(format!("messages[{i}].role"))
                .code("invalid_value"));
            }
        }
    }
    if !open.is_empty() {
        return Err(Refusal::invalid(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding \
             to each 'tool_call_id'. The following tool_call_ids did not have response messages: \
             {}",
            open.join(", ")
        ))
        .param(format!("messages.[{}].role", messages.len() - 1)));
    }
    Ok(())
}

/// A message's `content`: a string or a list of parts; required except on an assistant message
/// that calls tools (checked by the caller) — a tool message may answer with an empty string.
fn content(message: &Value, i: usize, empty_ok: bool) -> Result<(), Refusal> {
    match &message["content"] {
        Value::String(s) if s.is_empty() && !empty_ok && message["role"] == "assistant" => {
            Err(Refusal::invalid(format!(
                "Invalid value for 'messages[{i}].content': an assistant message needs content \
                 or tool_calls."
            ))
            .param(format!("messages[{i}].content")))
        }
        Value::String(_) | Value::Array(_) => Ok(()),
        Value::Null => {
            Err(Refusal::invalid("Invalid value for 'content': expected a string, got null.")
                .param(format!("messages.[{i}].content")))
        }
        other => Err(Refusal::invalid(format!(
            "Invalid type for 'messages[{i}].content': expected one of a string or array of \
             objects, but got {} instead.",
            type_name(other)
        ))
        .param(format!("messages[{i}].content"))
        .code("invalid_type")),
    }
}
