//! The Anthropic Messages client against the mock server: whole responses (text, tool calls),
//! the request bodies it sends (headers, system and tool caching, tool schemas, tool results,
//! tool choice), every error kind the API documents, timeouts, and configuration from variables
//! with the key kept out of Debug output and errors.

use std::time::{Duration, Instant};

use pev_providers::anthropic::{AnthropicClient, AnthropicConfig};
use pev_providers::http::Timeouts;
use pev_providers::{
    ChatRequest, ContentBlock, Message, ModelClient, ProviderError, Role, StopReason, TokenUsage,
    ToolChoice, ToolSpec,
};
use serde_json::{Value, json};

use super::mock::{MockServer, Reply};

pub(super) const KEY: &str = "sk-ant-test-S3CRET-key-0123456789";

pub(super) fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/anthropic/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub(super) fn client_with(server: &MockServer, timeouts: Timeouts) -> AnthropicClient {
    let mut config = AnthropicConfig::new(KEY);
    config.base_url = server.base_url.clone();
    config.timeouts = timeouts;
    AnthropicClient::new(config).unwrap()
}

pub(super) fn client(server: &MockServer) -> AnthropicClient {
    client_with(
        server,
        Timeouts { request: Duration::from_secs(10), idle: Duration::from_secs(10) },
    )
}

/// Timeouts short enough for a hung server to fail a test quickly.
pub(super) const SHORT: Timeouts =
    Timeouts { request: Duration::from_millis(300), idle: Duration::from_millis(300) };

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file of the workspace.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}, "max_lines": {"type": "integer"}},
                "required": ["path"]
            }),
        },
        ToolSpec {
            name: "write_file".into(),
            description: "Write a file of the workspace.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"]
            }),
        },
    ]
}

pub(super) fn request() -> ChatRequest {
    let mut request =
        ChatRequest::new("claude-sonnet-4-5", vec![Message::user("Read src/main.rs")]);
    request.system = Some("You are pev's executor.".into());
    request.tools = tools();
    request
}

async fn error_of(reply: Reply) -> ProviderError {
    let server = MockServer::start(vec![reply]).await;
    client(&server).chat(&request()).await.unwrap_err()
}

#[tokio::test]
async fn plain_text_response_and_the_request_head() {
    let server = MockServer::start(vec![Reply::json(200, &fixture("text.json"))]).await;
    let response = client(&server).chat(&request()).await.unwrap();
    assert_eq!(response.id, "msg_01TxtPlainAnswer7Qf3");
    assert_eq!(response.model, "claude-sonnet-4-5-20250929");
    assert_eq!(
        response.content,
        vec![ContentBlock::text("The build passes: 42 tests, no failures.")]
    );
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(
        response.usage,
        TokenUsage {
            input_tokens: 1523,
            output_tokens: 14,
            cache_read_tokens: 2048,
            cache_write_tokens: 0
        }
    );

    let sent = server.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].method, "POST");
    assert_eq!(sent[0].path, "/v1/messages");
    assert_eq!(sent[0].header("x-api-key"), Some(KEY));
    assert_eq!(sent[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent[0].header("content-type"), Some("application/json"));
    assert_eq!(sent[0].json().get("stream"), None, "a whole call does not ask for a stream");
}

#[tokio::test]
async fn tool_call_response() {
    let server = MockServer::start(vec![Reply::json(200, &fixture("tool_use.json"))]).await;
    let response = client(&server).chat(&request()).await.unwrap();
    assert_eq!(
        response.content,
        vec![
            ContentBlock::text("I'll read the file first."),
            ContentBlock::ToolUse {
                id: "toolu_01A09q90qw90lq917835lq9".into(),
                name: "read_file".into(),
                input: json!({"path": "src/main.rs", "max_lines": 200}),
            },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.usage.cache_write_tokens, 3100);
    assert_eq!(response.usage.input_tokens, 812);
    assert_eq!(response.usage.output_tokens, 61);
}

#[tokio::test]
async fn the_body_carries_system_tools_and_caching_in_the_documented_shape() {
    let server = MockServer::start(vec![Reply::json(200, &fixture("text.json"))]).await;
    let mut req = request();
    req.temperature = Some(0.25);
    req.stop_sequences = vec!["</plan>".into()];
    req.max_tokens = 1000;
    client(&server).chat(&req).await.unwrap();
    let body = server.requests()[0].json();
    let want = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": [{
            "type": "text",
            "text": "You are pev's executor.",
            "cache_control": {"type": "ephemeral"}
        }],
        "messages": [{"role": "user", "content": [{
            "type": "text",
            "text": "Read src/main.rs",
            "cache_control": {"type": "ephemeral"}
        }]}],
        "tools": [
            {
                "name": "read_file",
                "description": "Read a file of the workspace.",
                "input_schema": tools()[0].input_schema
            },
            {
                "name": "write_file",
                "description": "Write a file of the workspace.",
                "input_schema": tools()[1].input_schema,
                "cache_control": {"type": "ephemeral"}
            }
        ],
        "tool_choice": {"type": "auto"},
        "temperature": 0.25,
        "stop_sequences": ["</plan>"]
    });
    assert_eq!(body, want);
}

#[tokio::test]
async fn without_caching_no_block_is_marked() {
    let server = MockServer::start(vec![Reply::json(200, &fixture("text.json"))]).await;
    let mut req = request();
    req.cache = false;
    client(&server).chat(&req).await.unwrap();
    let sent = &server.requests()[0];
    assert!(!sent.body.contains("cache_control"), "{}", sent.body);
    let body = sent.json();
    assert_eq!(body["system"], json!([{"type": "text", "text": "You are pev's executor."}]));
    assert_eq!(body["tools"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn tool_results_travel_in_a_user_message_paired_with_their_calls() {
    let server = MockServer::start(vec![Reply::json(200, &fixture("text.json"))]).await;
    let mut req = request();
    // The breakpoints are another test's subject.
    req.cache = false;
    req.messages = vec![
        Message::user("Read two files"),
        Message::assistant(vec![
            ContentBlock::text("Reading both."),
            ContentBlock::ToolUse {
                id: "toolu_a".into(),
                name: "read_file".into(),
                input: json!({"path": "a.rs"}),
            },
            ContentBlock::ToolUse {
                id: "toolu_b".into(),
                name: "read_file".into(),
                input: json!({"path": "b.rs"}),
            },
        ]),
        // Text first, then the results in a second user message: merged into one, results first.
        Message::user("Note: b.rs may be missing."),
        Message {
            role: Role::User,
            content: vec![
                ContentBlock::ToolResult {
                    tool_use_id: "toolu_a".into(),
                    content: "fn a() {}".into(),
                    is_error: false,
                },
                ContentBlock::ToolResult {
                    tool_use_id: "toolu_b".into(),
                    content: "no such file".into(),
                    is_error: true,
                },
            ],
        },
    ];
    client(&server).chat(&req).await.unwrap();
    let body = server.requests()[0].json();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Read two files"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.rs"}},
                {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {"path": "b.rs"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "fn a() {}", "is_error": false},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no such file", "is_error": true},
                {"type": "text", "text": "Note: b.rs may be missing."}
            ]}
        ])
    );
}

#[tokio::test]
async fn a_tool_result_in_an_assistant_message_still_goes_out_as_user() {
    let server = MockServer::start(vec![Reply::json(200, &fixture("text.json"))]).await;
    let mut req = request();
    req.messages = vec![
        Message::user("go"),
        Message::assistant(vec![
            ContentBlock::ToolUse { id: "t1".into(), name: "read_file".into(), input: json!({}) },
            ContentBlock::ToolResult {
                tool_use_id: "t1".into(),
                content: "ok".into(),
                is_error: false,
            },
            ContentBlock::text(""),
        ]),
    ];
    client(&server).chat(&req).await.unwrap();
    let messages = server.requests()[0].json()["messages"].clone();
    let roles: Vec<&str> =
        messages.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "t1");
    assert_eq!(messages[1]["content"].as_array().unwrap().len(), 1, "empty text is dropped");
}

#[tokio::test]
async fn tool_choice_maps_to_the_api_forms() {
    let cases = [
        (ToolChoice::Auto, json!({"type": "auto"})),
        (ToolChoice::Any, json!({"type": "any"})),
        (ToolChoice::None, json!({"type": "none"})),
        (ToolChoice::Tool("write_file".into()), json!({"type": "tool", "name": "write_file"})),
    ];
    let replies = (0..=cases.len()).map(|_| Reply::json(200, &fixture("text.json"))).collect();
    let server = MockServer::start(replies).await;
    let client = client(&server);
    for (choice, _) in &cases {
        let mut req = request();
        req.tool_choice = choice.clone();
        client.chat(&req).await.unwrap();
    }
    // Without tools the API refuses a tool_choice, so none is sent.
    let mut bare = request();
    bare.tools.clear();
    bare.tool_choice = ToolChoice::Any;
    client.chat(&bare).await.unwrap();

    let sent = server.requests();
    for (i, (_, want)) in cases.iter().enumerate() {
        assert_eq!(&sent[i].json()["tool_choice"], want, "case {i}");
    }
    let last = sent[cases.len()].json();
    assert_eq!(last.get("tool_choice"), None);
    assert_eq!(last.get("tools"), None);
}

#[tokio::test]
async fn rate_limited_with_retry_after() {
    let reply = Reply::json(429, &fixture("error_rate_limit.json")).with_header("retry-after", "7");
    let err = error_of(reply).await;
    assert_eq!(
        err,
        ProviderError::RateLimited {
            provider: "anthropic".into(),
            retry_after: Some(Duration::from_secs(7)),
            message: "This request would exceed the rate limit for your organization of 50 requests per minute.".into(),
        }
    );
    assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));
}

#[tokio::test]
async fn a_huge_or_unusable_retry_after_is_capped_or_ignored_never_a_panic() {
    // Seconds past what a Duration holds are cut to an hour before converting; what is not a
    // finite, non-negative number of seconds (an HTTP date included) is no retry-after at all.
    let hour = Some(Duration::from_secs(3600));
    let cases = [
        ("1e300", hour),
        ("18446744073709551616", hour),
        ("3600.5", hour),
        ("0.25", Some(Duration::from_millis(250))),
        ("1e400", None),
        ("inf", None),
        ("NaN", None),
        ("-5", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),
    ];
    for (value, want) in cases {
        let reply =
            Reply::json(429, &fixture("error_rate_limit.json")).with_header("retry-after", value);
        let err = error_of(reply).await;
        assert!(matches!(err, ProviderError::RateLimited { .. }), "{value}: {err:?}");
        assert_eq!(err.retry_after(), want, "retry-after: {value}");
    }
    let reply =
        Reply::json(529, &fixture("error_overloaded.json")).with_header("retry-after", "1e300");
    assert_eq!(error_of(reply).await.retry_after(), hour);
}

#[tokio::test]
async fn overloaded_529() {
    let err = error_of(Reply::json(529, &fixture("error_overloaded.json"))).await;
    assert_eq!(
        err,
        ProviderError::Overloaded {
            provider: "anthropic".into(),
            retry_after: None,
            message: "Overloaded".into()
        }
    );
}

#[tokio::test]
async fn server_error_500() {
    let err = error_of(Reply::json(500, &fixture("error_api.json"))).await;
    assert_eq!(
        err,
        ProviderError::Server {
            provider: "anthropic".into(),
            status: 500,
            message: "Internal server error".into()
        }
    );
}

#[tokio::test]
async fn a_proxy_error_page_is_quoted_briefly() {
    let page = format!("<html><body>502 Bad Gateway{}</body></html>", " ".repeat(5000));
    let err = error_of(Reply::json(502, &page)).await;
    let ProviderError::Server { status: 502, message, .. } = &err else { panic!("{err:?}") };
    assert!(message.starts_with("\"<html><body>502 Bad Gateway"), "{message}");
    assert!(message.len() < 300, "{} chars", message.len());
}

#[tokio::test]
async fn authentication_401_never_quotes_the_key() {
    let err = error_of(Reply::json(401, &fixture("error_authentication.json"))).await;
    assert_eq!(
        err,
        ProviderError::Authentication {
            provider: "anthropic".into(),
            status: 401,
            message: "invalid x-api-key".into()
        }
    );
    assert!(!err.to_string().contains(KEY));
    assert!(!format!("{err:?}").contains(KEY));
}

#[tokio::test]
async fn prompt_too_long_is_context_too_long() {
    let err = error_of(Reply::json(400, &fixture("error_prompt_too_long.json"))).await;
    assert_eq!(
        err,
        ProviderError::ContextTooLong {
            provider: "anthropic".into(),
            message: "prompt is too long: 208514 tokens > 200000 maximum".into()
        }
    );
}

#[tokio::test]
async fn another_invalid_request_is_a_bad_request() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#;
    let err = error_of(Reply::json(400, body)).await;
    assert_eq!(
        err,
        ProviderError::BadRequest {
            provider: "anthropic".into(),
            status: 400,
            message: "max_tokens: Field required".into()
        }
    );
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn a_hanging_server_times_out() {
    let server = MockServer::start(vec![Reply::Hang]).await;
    let started = Instant::now();
    let err = client_with(&server, SHORT).chat(&request()).await.unwrap_err();
    assert_eq!(
        err,
        ProviderError::Timeout {
            provider: "anthropic".into(),
            after: Duration::from_millis(300),
            what: "request"
        }
    );
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[tokio::test]
async fn malformed_json_is_malformed() {
    let err =
        error_of(Reply::json(200, r#"{"id": "msg_1", "content": [{"type": "text", "te"#)).await;
    let ProviderError::Malformed { message, .. } = &err else { panic!("{err:?}") };
    assert!(message.contains(r#"{\"id\": \"msg_1\""#), "quotes the body: {message}");

    // Valid JSON without the documented fields.
    let err = error_of(Reply::json(200, r#"{"id": "msg_1", "model": "m"}"#)).await;
    let ProviderError::Malformed { message, .. } = &err else { panic!("{err:?}") };
    assert!(message.contains("missing field `content`"), "{message}");

    let missing_stop = fixture("text.json").replace(r#""end_turn""#, "null");
    let err = error_of(Reply::json(200, &missing_stop)).await;
    let ProviderError::Malformed { message, .. } = &err else { panic!("{err:?}") };
    assert!(message.starts_with("no stop_reason"), "{message}");
}

#[tokio::test]
async fn unknown_stop_reasons_and_block_types_pass_through() {
    let body = fixture("tool_use.json")
        .replace(r#""stop_reason": "tool_use""#, r#""stop_reason": "pause_turn""#)
        .replace(
            r#"{
      "type": "text","#,
            r#"{"type": "thinking", "thinking": "hmm", "signature": "sig"},
    {
      "type": "text","#,
        );
    let server = MockServer::start(vec![Reply::json(200, &body)]).await;
    let response = client(&server).chat(&request()).await.unwrap();
    assert_eq!(response.stop_reason, StopReason::Other("pause_turn".into()));
    assert_eq!(response.content.len(), 2, "{:?}", response.content);
    assert_eq!(response.text(), "I'll read the file first.");
}

#[test]
fn debug_output_redacts_the_key() {
    let mut config = AnthropicConfig::new(KEY);
    config.base_url = "http://127.0.0.1:9".into();
    let shown = format!("{config:?}");
    assert!(!shown.contains(KEY) && shown.contains("<redacted>"), "{shown}");
    let client = AnthropicClient::new(config).unwrap();
    let shown = format!("{client:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("<redacted>") && shown.contains("http://127.0.0.1:9"), "{shown}");
    assert!(!format!("{client:#?}").contains("S3CRET"));
}

#[test]
fn from_vars_needs_the_key_variable() {
    let none = |_: &str| -> Option<String> { None };
    let err = AnthropicClient::from_vars(&none, Timeouts::default()).unwrap_err();
    let ProviderError::Config(message) = &err else { panic!("{err:?}") };
    assert!(message.contains("ANTHROPIC_API_KEY"), "{message}");

    // Set but empty is not set.
    let empty = |k: &str| (k == "ANTHROPIC_API_KEY").then(String::new);
    assert!(matches!(
        AnthropicClient::from_vars(&empty, Timeouts::default()),
        Err(ProviderError::Config(m)) if m.contains("ANTHROPIC_API_KEY")
    ));
}

#[test]
fn from_vars_reads_the_key_and_the_base_url() {
    let vars = |k: &str| match k {
        "ANTHROPIC_API_KEY" => Some(KEY.to_owned()),
        "ANTHROPIC_BASE_URL" => Some("http://127.0.0.1:8080/".to_owned()),
        _ => None,
    };
    let client = AnthropicClient::from_vars(&vars, SHORT).unwrap();
    let shown = format!("{client:?}");
    assert!(shown.contains("\"http://127.0.0.1:8080\""), "{shown}");
    assert!(shown.contains("2023-06-01"), "{shown}");
    assert_eq!(client.provider(), "anthropic");

    let only_key = |k: &str| (k == "ANTHROPIC_API_KEY").then(|| KEY.to_owned());
    let client = AnthropicClient::from_vars(&only_key, SHORT).unwrap();
    assert!(format!("{client:?}").contains("https://api.anthropic.com"));
}

#[test]
fn a_bad_base_url_or_key_is_a_config_error() {
    let mut config = AnthropicConfig::new(KEY);
    config.base_url = "api.anthropic.com".into();
    let err = AnthropicClient::new(config).unwrap_err();
    assert!(matches!(&err, ProviderError::Config(m) if m.contains("api.anthropic.com")), "{err:?}");

    let err = AnthropicClient::new(AnthropicConfig::new("sk-ant-\nline")).unwrap_err();
    assert!(matches!(&err, ProviderError::Config(m) if !m.contains("sk-ant")), "{err:?}");

    let err = AnthropicClient::new(AnthropicConfig::new("  ")).unwrap_err();
    assert!(matches!(err, ProviderError::Config(_)));
}

/// The key and version headers are what the body claims, whatever the request.
pub(super) fn assert_head(sent: &super::mock::Recorded) {
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
}

/// The JSON body of the `i`th request.
pub(super) fn body_of(server: &MockServer, i: usize) -> Value {
    server.requests()[i].json()
}

/// A long conversation: the last block and the last user message before it carry breakpoints
/// (with the system prompt's and the tools', four: the API's limit); blank text is left out and
/// the closing assistant message loses its trailing whitespace, as the API requires.
#[tokio::test]
async fn the_conversation_carries_two_breakpoints_and_nothing_the_api_refuses() {
    let server = MockServer::start(vec![Reply::json(200, &fixture("text.json"))]).await;
    let mut req = request();
    let call = |id: &str| ContentBlock::ToolUse {
        id: id.into(),
        name: "read_file".into(),
        input: json!({"path": "a.rs"}),
    };
    let result = |id: &str| ContentBlock::ToolResult {
        tool_use_id: id.into(),
        content: "fn a() {}".into(),
        is_error: false,
    };
    req.messages = vec![
        Message::user("Read a.rs twice"),
        Message::assistant(vec![ContentBlock::text("  \n"), call("toolu_1")]),
        Message { role: Role::User, content: vec![result("toolu_1")] },
        Message::assistant(vec![call("toolu_2")]),
        Message { role: Role::User, content: vec![result("toolu_2"), ContentBlock::text(" ")] },
        Message::assistant(vec![ContentBlock::text("{\n  \"done\": ")]),
    ];
    client(&server).chat(&req).await.unwrap();
    let body = server.requests()[0].json();
    let mark = json!({"type": "ephemeral"});
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 6);
    assert_eq!(messages[1]["content"].as_array().unwrap().len(), 1, "the blank text is left out");
    assert_eq!(
        messages[4]["content"],
        json!([{
            "type": "tool_result", "tool_use_id": "toolu_2", "content": "fn a() {}", "is_error": false,
            "cache_control": mark
        }])
    );
    assert_eq!(
        messages[5]["content"],
        json!([{
            "type": "text", "text": "{\n  \"done\":", "cache_control": mark
        }])
    );
    let marks = body.to_string().matches("cache_control").count();
    assert_eq!(marks, 4);
    assert_eq!(pev_providers::rules::anthropic(&body), Ok(()));
}

/// The mock refuses what the API refuses (here a dotted tool name, the bug that kept every real
/// `pev agent` run from its first call), with the API's error body; the client reports it as a
/// bad request with the server's message.
#[tokio::test]
async fn a_request_the_api_refuses_is_a_bad_request_with_its_message() {
    let server = MockServer::start(vec![Reply::json(200, &fixture("text.json"))]).await;
    let mut req = request();
    req.tools[1].name = "file.write".into();
    match client(&server).chat(&req).await.unwrap_err() {
        ProviderError::BadRequest { status: 400, message, .. } => assert_eq!(
            message,
            "tools.1.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"
        ),
        other => panic!("expected a 400, got {other:?}"),
    }
}
