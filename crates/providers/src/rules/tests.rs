use serde_json::{Value, json};

use super::{anthropic, is_reasoning_model, openai};

fn ok_anthropic() -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "file_read", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "read a.txt"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "file_read", "input": {"path": "a.txt"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"}
            ]}
        ]
    })
}

/// Applies `edit` to a valid body and returns the message of the refusal (None when accepted).
fn anthropic_after(edit: impl FnOnce(&mut Value)) -> Option<String> {
    let mut body = ok_anthropic();
    edit(&mut body);
    anthropic(&body).err().map(|r| r.message)
}

#[test]
fn a_well_formed_messages_request_passes() {
    assert_eq!(anthropic(&ok_anthropic()), Ok(()));
}

#[test]
fn anthropic_refuses_what_the_api_refuses() {
    type Edit = fn(&mut Value);
    let cases: &[(&str, Edit, &str)] = &[
        (
            "dotted tool name",
            |b| b["tools"][0]["name"] = json!("file.read"),
            "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'",
        ),
        (
            "schema root not object",
            |b| b["tools"][0]["input_schema"] = json!({"type": "string"}),
            "tools.0.custom.input_schema.type: Input should be 'object'",
        ),
        (
            "max_tokens missing",
            |b| {
                b.as_object_mut().unwrap().remove("max_tokens");
            },
            "max_tokens: Field required",
        ),
        (
            "first message from the assistant",
            |b| {
                b["messages"] = json!([{"role": "assistant", "content": "hi"}]);
            },
            "messages: first message must use the \"user\" role",
        ),
        (
            "tool_use without its result",
            |b| {
                b["messages"][2]["content"] = json!([{"type": "text", "text": "go on"}]);
            },
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        ),
        (
            "result answering no call",
            |b| b["messages"][2]["content"][0]["tool_use_id"] = json!("toolu_9"),
            "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
        ),
        (
            "whitespace-only text",
            |b| b["messages"][1]["content"][0]["text"] = json!(" \n"),
            "messages: text content blocks must contain non-whitespace text",
        ),
        (
            "empty text",
            |b| b["messages"][1]["content"][0]["text"] = json!(""),
            "messages: text content blocks must be non-empty",
        ),
        (
            "final assistant prefill ends with whitespace",
            |b| {
                b["messages"].as_array_mut().unwrap().push(
                    json!({"role": "assistant", "content": [{"type": "text", "text": "{\n"}]}),
                );
            },
            "messages: final assistant content cannot end with trailing whitespace",
        ),
        (
            "five cache breakpoints",
            |b| {
                let mark = json!({"type": "ephemeral"});
                b["tools"][0]["cache_control"] = mark.clone();
                b["messages"][1]["content"][0]["cache_control"] = mark.clone();
                b["messages"][1]["content"][1]["cache_control"] = mark.clone();
                b["messages"][2]["content"][0]["cache_control"] = mark;
            },
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        ),
        (
            "roles do not alternate",
            |b| {
                b["messages"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"role": "user", "content": "more"}));
            },
            "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"user\" roles in a row",
        ),
        (
            "tool_choice naming no tool",
            |b| b["tool_choice"] = json!({"type": "tool", "name": "nope"}),
            "tool_choice: Tool 'nope' not found in provided tools",
        ),
        (
            "empty system block",
            |b| b["system"][0]["text"] = json!(""),
            "system: text content blocks must be non-empty",
        ),
        (
            "temperature above one",
            |b| b["temperature"] = json!(1.5),
            "temperature: Input should be less than or equal to 1",
        ),
        (
            "a bad tool_use id",
            |b| b["messages"][1]["content"][1]["id"] = json!("toolu 1"),
            "messages.1.content.1.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
        ),
    ];
    for (what, edit, message) in cases {
        assert_eq!(anthropic_after(*edit).as_deref(), Some(*message), "{what}");
    }
}

#[test]
fn anthropic_accepts_four_breakpoints_and_a_clean_prefill() {
    let accepted = anthropic_after(|b| {
        let mark = json!({"type": "ephemeral"});
        b["tools"][0]["cache_control"] = mark.clone();
        b["messages"][1]["content"][0]["cache_control"] = mark.clone();
        b["messages"][2]["content"][0]["cache_control"] = mark;
        b["messages"].as_array_mut().unwrap().push(json!({"role": "assistant", "content": "{"}));
    });
    assert_eq!(accepted, None);
}

fn ok_openai(model: &str) -> Value {
    json!({
        "model": model,
        "max_completion_tokens": 1024,
        "tools": [{"type": "function", "function": {"name": "file_read", "description": "", "parameters": {"type": "object"}}}],
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "read a.txt"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "file_read", "arguments": "{\"path\":\"a.txt\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "hello"}
        ]
    })
}

fn openai_after(model: &str, edit: impl FnOnce(&mut Value)) -> Option<(String, Option<String>)> {
    let mut body = ok_openai(model);
    edit(&mut body);
    openai(&body).err().map(|r| (r.message, r.param))
}

#[test]
fn a_well_formed_chat_completions_request_passes() {
    assert_eq!(openai(&ok_openai("gpt-4.1")), Ok(()));
    assert_eq!(openai(&ok_openai("o3")), Ok(()));
}

#[test]
fn openai_refuses_what_the_api_refuses() {
    type Edit = fn(&mut Value);
    let cases: &[(&str, &str, Edit, &str, &str)] = &[
        (
            "dotted function name",
            "gpt-4.1",
            |b| b["tools"][0]["function"]["name"] = json!("file.read"),
            "Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
            "tools[0].function.name",
        ),
        (
            "orphan tool message",
            "gpt-4.1",
            |b| {
                b["messages"].as_array_mut().unwrap().remove(2);
            },
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
            "messages.[2].role",
        ),
        (
            "unanswered call",
            "gpt-4.1",
            |b| {
                b["messages"][3] = json!({"role": "user", "content": "and?"});
            },
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_1",
            "messages.[3].role",
        ),
        (
            "max_tokens to a reasoning model",
            "o4-mini",
            |b| b["max_tokens"] = json!(100),
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            "max_tokens",
        ),
        (
            "temperature to a reasoning model",
            "gpt-5",
            |b| b["temperature"] = json!(0.2),
            "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.",
            "temperature",
        ),
        (
            "schema root not object",
            "gpt-4.1",
            |b| b["tools"][0]["function"]["parameters"] = json!({"type": "array"}),
            "Invalid schema for function 'file_read': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"array\"'.",
            "tools[0].function.parameters",
        ),
        (
            "stream_options without stream",
            "gpt-4.1",
            |b| b["stream_options"] = json!({"include_usage": true}),
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
        ),
    ];
    for (what, model, edit, message, param) in cases {
        let got = openai_after(model, *edit);
        assert_eq!(got, Some(((*message).to_owned(), Some((*param).to_owned()))), "{what}");
    }
}

#[test]
fn max_tokens_and_temperature_are_fine_on_other_models() {
    let accepted = openai_after("gpt-4.1", |b| {
        b["max_tokens"] = json!(100);
        b["temperature"] = json!(0.2);
    });
    assert_eq!(accepted, None);
}

#[test]
fn reasoning_families_are_told_apart_from_their_neighbours() {
    for model in
        ["o1", "o1-mini", "o3", "o3-pro-2025-06-10", "o4-mini", "gpt-5", "gpt-5-mini", "openai/o3"]
    {
        assert!(is_reasoning_model(model), "{model}");
    }
    for model in ["gpt-4o", "gpt-4.1-mini", "o1x", "llama3.1", "qwen3-o3"] {
        assert!(!is_reasoning_model(model), "{model}");
    }
}

#[test]
fn refusals_carry_each_services_error_shape() {
    let refusal = anthropic(&json!({"model": "m", "messages": []})).unwrap_err();
    let body: Value = serde_json::from_str(&refusal.anthropic_body()).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["message"], "max_tokens: Field required");
    let refusal = openai(&json!({"model": "o3", "max_tokens": 5, "messages": []})).unwrap_err();
    let body: Value = serde_json::from_str(&refusal.openai_body()).unwrap();
    assert_eq!(body["error"]["param"], "max_tokens");
    assert_eq!(body["error"]["code"], "unsupported_parameter");
}
