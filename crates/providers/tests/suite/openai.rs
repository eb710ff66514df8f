//! The OpenAI-compatible client against the mock server, whole (non-streamed) responses: parsing
//! of the documented shapes (hosted OpenAI, Ollama) and the request bodies it sends. Also the
//! helpers the other `openai_*` test files share.

use std::time::Duration;

use pev_providers::http::Timeouts;
use pev_providers::openai::{OpenAiClient, OpenAiConfig};
use pev_providers::{
    ChatRequest, ContentBlock, Message, ModelClient, StopReason, TokenUsage, ToolChoice, ToolSpec,
};
use serde_json::{Value, json};

use super::mock::{MockServer, Reply};

pub const KEY: &str = "sk-test-0123456789abcdef-secret";

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../fixtures/openai/", $name))
    };
}
pub(crate) use fixture;

pub fn timeouts() -> Timeouts {
    Timeouts { request: Duration::from_secs(10), idle: Duration::from_secs(10) }
}

pub fn short_timeouts() -> Timeouts {
    Timeouts { request: Duration::from_millis(300), idle: Duration::from_millis(300) }
}

/// A client of the mock server's `/v1`.
pub fn client(server: &MockServer, key: Option<&str>, timeouts: Timeouts) -> OpenAiClient {
    OpenAiClient::new(OpenAiConfig {
        api_key: key.map(str::to_owned),
        base_url: format!("{}/v1", server.base_url),
        timeouts,
    })
    .unwrap()
}

pub fn read_file_tool() -> ToolSpec {
    ToolSpec {
        name: "read_file".into(),
        description: "Read a file of the workspace.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": false
        }),
    }
}

pub fn simple_request() -> ChatRequest {
    let mut request = ChatRequest::new("gpt-4o-mini", vec![Message::user("Plan the work.")]);
    request.system = Some("You are the planner.".into());
    request
}

#[tokio::test]
async fn plain_text_is_parsed_and_cached_tokens_are_counted_once() {
    let server = MockServer::start(vec![Reply::json(200, fixture!("text.json"))]).await;
    let mut request = simple_request();
    request.temperature = Some(0.2);
    request.stop_sequences = vec!["END".into()];
    request.max_tokens = 512;
    let response = client(&server, Some(KEY), timeouts()).chat(&request).await.unwrap();

    assert_eq!(response.text(), "The plan has three steps.");
    assert_eq!(response.content.len(), 1);
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.id, "chatcmpl-pev0001");
    assert_eq!(response.model, "gpt-4o-mini-2024-07-18");
    // prompt_tokens 1200 of which 1024 cached: 176 fresh input, 1024 cache reads.
    assert_eq!(
        response.usage,
        TokenUsage {
            input_tokens: 176,
            output_tokens: 42,
            cache_read_tokens: 1024,
            cache_write_tokens: 0
        }
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.json(),
        json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "You are the planner."},
                {"role": "user", "content": "Plan the work."}
            ],
            "max_tokens": 512,
            "temperature": 0.2,
            "stop": ["END"],
            "stream": false
        })
    );
}

#[tokio::test]
async fn two_tool_calls_in_one_response_become_tool_use_blocks() {
    let server = MockServer::start(vec![Reply::json(200, fixture!("tool_calls.json"))]).await;
    let mut request = simple_request();
    request.tools = vec![read_file_tool()];
    let response = client(&server, Some(KEY), timeouts()).chat(&request).await.unwrap();
    assert_eq!(
        response.content,
        vec![
            ContentBlock::ToolUse {
                id: "call_R3adF1le".into(),
                name: "read_file".into(),
                input: json!({"path": "src/main.rs"})
            },
            ContentBlock::ToolUse {
                id: "call_L1stD1r".into(),
                name: "list_dir".into(),
                input: json!({"path": "src", "depth": 2})
            },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.usage.input_tokens, 310);
    assert_eq!(response.usage.output_tokens, 57);
    assert_eq!(response.usage.cache_read_tokens, 0);
}

#[tokio::test]
async fn an_ollama_response_without_usage_and_without_a_key() {
    let server = MockServer::start(vec![Reply::json(200, fixture!("ollama_text.json"))]).await;
    let mut request = simple_request();
    request.model = "qwen2.5-coder:7b".into();
    let response = client(&server, None, timeouts()).chat(&request).await.unwrap();
    assert_eq!(response.text(), "Hello from a local model.");
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.usage, TokenUsage::default());
    assert_eq!(response.model, "qwen2.5-coder:7b");
    let sent = &server.requests()[0];
    assert_eq!(sent.header("authorization"), None);
}

#[tokio::test]
async fn a_tool_call_with_finish_reason_stop_is_still_tool_use() {
    let server = MockServer::start(vec![Reply::json(200, fixture!("ollama_tool_call.json"))]).await;
    let response = client(&server, None, timeouts()).chat(&simple_request()).await.unwrap();
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.content,
        vec![ContentBlock::ToolUse {
            id: "call_x7k2m9qa".into(),
            name: "run_command".into(),
            input: json!({"command": "cargo test"})
        }]
    );
}

#[tokio::test]
async fn finish_reasons_map_to_stop_reasons() {
    let body = |reason: &str| {
        json!({
            "id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "…"},
                         "finish_reason": reason}]
        })
        .to_string()
    };
    let server = MockServer::start(vec![
        Reply::json(200, &body("length")),
        Reply::json(200, &body("content_filter")),
        Reply::json(200, &body("stop")),
    ])
    .await;
    let client = client(&server, None, timeouts());
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(client.chat(&simple_request()).await.unwrap().stop_reason);
    }
    assert_eq!(got, vec![StopReason::MaxTokens, StopReason::Refusal, StopReason::EndTurn]);
}

/// A conversation with tool calls and their results, one of them failed.
pub fn conversation_with_tool_results() -> ChatRequest {
    let mut request = ChatRequest::new(
        "gpt-4o",
        vec![
            Message::user("What is in src?"),
            Message::assistant(vec![
                ContentBlock::text("Looking."),
                ContentBlock::ToolUse {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    input: json!({"path": "src/lib.rs"}),
                },
                ContentBlock::ToolUse {
                    id: "call_2".into(),
                    name: "read_file".into(),
                    input: json!({"path": "src/missing.rs"}),
                },
            ]),
            Message {
                role: pev_providers::Role::User,
                content: vec![
                    ContentBlock::ToolResult {
                        tool_use_id: "call_1".into(),
                        content: "pub fn run() {}".into(),
                        is_error: false,
                    },
                    ContentBlock::ToolResult {
                        tool_use_id: "call_2".into(),
                        content: "no such file".into(),
                        is_error: true,
                    },
                    ContentBlock::text("Go on."),
                ],
            },
        ],
    );
    request.system = Some("Be brief.".into());
    request.tools = vec![read_file_tool()];
    request
}

#[tokio::test]
async fn tool_results_follow_the_assistant_message_as_tool_messages() {
    let server = MockServer::start(vec![Reply::json(200, fixture!("text.json"))]).await;
    client(&server, Some(KEY), timeouts()).chat(&conversation_with_tool_results()).await.unwrap();
    let body = server.requests()[0].json();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is in src?"},
            {"role": "assistant", "content": "Looking.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "read_file", "arguments": "{\"path\":\"src/lib.rs\"}"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "read_file", "arguments": "{\"path\":\"src/missing.rs\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "pub fn run() {}"},
            {"role": "tool", "tool_call_id": "call_2", "content": "ERROR: no such file"},
            {"role": "user", "content": "Go on."}
        ])
    );
    // The arguments are a JSON string that parses back to the input.
    let args = body["messages"][2]["tool_calls"][0]["function"]["arguments"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(args).unwrap(), json!({"path": "src/lib.rs"}));
    assert_eq!(
        body["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file of the workspace.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                    "additionalProperties": false
                }
            }
        }])
    );
    assert_eq!(body["tool_choice"], json!("auto"));
}

#[tokio::test]
async fn an_assistant_message_with_only_tool_calls_has_null_content() {
    let server = MockServer::start(vec![Reply::json(200, fixture!("text.json"))]).await;
    let mut request = conversation_with_tool_results();
    request.messages[1].content.remove(0);
    client(&server, None, timeouts()).chat(&request).await.unwrap();
    let body = server.requests()[0].json();
    let assistant = &body["messages"][2];
    assert_eq!(assistant["role"], "assistant");
    assert!(assistant.as_object().unwrap().contains_key("content"));
    assert_eq!(assistant["content"], Value::Null);
    assert_eq!(assistant["tool_calls"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn tool_choice_maps_to_the_api_values() {
    let replies = (0..4).map(|_| Reply::json(200, fixture!("text.json"))).collect();
    let server = MockServer::start(replies).await;
    let client = client(&server, None, timeouts());
    let choices =
        [ToolChoice::Auto, ToolChoice::Any, ToolChoice::None, ToolChoice::Tool("read_file".into())];
    for choice in choices {
        let mut request = simple_request();
        request.tools = vec![read_file_tool()];
        request.tool_choice = choice;
        client.chat(&request).await.unwrap();
    }
    let sent: Vec<Value> =
        server.requests().iter().map(|r| r.json()["tool_choice"].clone()).collect();
    assert_eq!(
        sent,
        vec![
            json!("auto"),
            json!("required"),
            json!("none"),
            json!({"type": "function", "function": {"name": "read_file"}})
        ]
    );
}

#[tokio::test]
async fn no_tools_means_no_tools_and_no_tool_choice() {
    let server = MockServer::start(vec![Reply::json(200, fixture!("text.json"))]).await;
    let mut request = simple_request();
    request.tool_choice = ToolChoice::Any;
    client(&server, None, timeouts()).chat(&request).await.unwrap();
    let body = server.requests()[0].json();
    let object = body.as_object().unwrap();
    assert!(!object.contains_key("tools"), "{body}");
    assert!(!object.contains_key("tool_choice"), "{body}");
    assert!(!object.contains_key("stream_options"), "{body}");
    assert!(!object.contains_key("temperature"), "{body}");
    assert_eq!(body["stream"], json!(false));
}

/// OpenAI's reasoning families refuse `max_tokens` and any temperature but the default: the
/// client sends `max_completion_tokens` and leaves the temperature out, and the mock (holding
/// the request to the API's rules) accepts it. Other models keep `max_tokens`.
#[tokio::test]
async fn reasoning_models_get_max_completion_tokens_and_no_temperature() {
    for (model, reasoning) in [("o3", true), ("gpt-5-mini", true), ("gpt-4.1", false)] {
        let server = MockServer::start(vec![Reply::json(200, fixture!("text.json"))]).await;
        let mut request = simple_request();
        request.model = model.into();
        request.temperature = Some(0.2);
        request.max_tokens = 777;
        client(&server, Some(KEY), timeouts()).chat(&request).await.unwrap();
        let body = server.requests()[0].json();
        if reasoning {
            assert_eq!(body["max_completion_tokens"], 777, "{model}");
            assert!(body.get("max_tokens").is_none(), "{model}");
            assert!(body.get("temperature").is_none(), "{model}");
        } else {
            assert_eq!(body["max_tokens"], 777, "{model}");
            assert!(body.get("max_completion_tokens").is_none(), "{model}");
            assert_eq!(body["temperature"], json!(0.2), "{model}");
        }
    }
}

/// The mock refuses what the API refuses, with the API's error body; the client reports the
/// server's message as a bad request, not retried.
#[tokio::test]
async fn a_request_the_api_refuses_is_a_bad_request_with_its_message() {
    let server = MockServer::start(vec![Reply::json(200, fixture!("text.json"))]).await;
    let mut request = simple_request();
    request.tools = vec![ToolSpec { name: "file.read".into(), ..read_file_tool() }];
    let error = client(&server, Some(KEY), timeouts()).chat(&request).await.unwrap_err();
    match error {
        pev_providers::ProviderError::BadRequest { status: 400, message, .. } => assert_eq!(
            message,
            "Invalid 'tools[0].function.name': string does not match pattern. Expected a string \
             that matches the pattern '^[a-zA-Z0-9_-]+$'."
        ),
        other => panic!("expected a 400, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1, "a 400 is not retried");
}
