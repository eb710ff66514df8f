//! Tests of the scripted model: turns in order, defaults, expectations, error turns, streaming,
//! and the errors of bad script files.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::{Message, ToolSpec};

fn request(text: &str) -> ChatRequest {
    ChatRequest::new("m1", vec![Message::user(text)])
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
}

fn chat(client: &ScriptedClient, req: &ChatRequest) -> Result<ChatResponse, ProviderError> {
    block_on(client.chat(req))
}

fn stream(
    client: &ScriptedClient,
    req: &ChatRequest,
) -> (Vec<StreamEvent>, Result<ChatResponse, ProviderError>) {
    let events = Mutex::new(Vec::new());
    let sink = |e: StreamEvent| events.lock().unwrap().push(e);
    let result = block_on(client.chat_stream(req, &sink));
    (events.into_inner().unwrap(), result)
}

fn config_message(result: Result<ScriptedClient, ProviderError>) -> String {
    match result {
        Err(ProviderError::Config(message)) => message,
        other => panic!("expected a Config error, got {other:?}"),
    }
}

fn script_message(result: Result<ChatResponse, ProviderError>) -> String {
    match result {
        Err(ProviderError::Script { script, message }) => {
            assert_eq!(script, "t.json");
            message
        }
        other => panic!("expected a Script error, got {other:?}"),
    }
}

const TWO_TURNS: &str = r#"{
  "name": "read then answer",
  "turns": [
    {"content": [
      {"type": "text", "text": "Let me look."},
      {"type": "tool_use", "id": "t1", "name": "file_read", "input": {"path": "a.txt"}}
    ],
     "usage": {"input_tokens": 120, "output_tokens": 30, "cache_read_input_tokens": 100}},
    {"content": [{"type": "text", "text": "It says hi."}]}
  ]
}"#;

#[test]
fn turns_are_answered_in_order_with_defaults() {
    let client = ScriptedClient::parse("t.json", TWO_TURNS).unwrap();
    assert_eq!(client.title(), Some("read then answer"));
    assert_eq!(client.provider(), "script:t.json");
    assert_eq!(client.remaining(), 2);

    let first = chat(&client, &request("read a.txt")).unwrap();
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    assert_eq!(first.text(), "Let me look.");
    let calls: Vec<_> = first.tool_calls().collect();
    assert_eq!(calls, vec![("t1", "file_read", &json!({"path": "a.txt"}))]);
    assert_eq!(
        first.usage,
        TokenUsage {
            input_tokens: 120,
            output_tokens: 30,
            cache_read_tokens: 100,
            cache_write_tokens: 0
        }
    );
    assert_eq!(first.model, "m1");
    assert_eq!(first.id, "script-1");
    assert_eq!(client.remaining(), 1);

    let second = chat(&client, &request("and?")).unwrap();
    assert_eq!(second.stop_reason, StopReason::EndTurn);
    assert_eq!(second.text(), "It says hi.");
    assert_eq!(second.usage, TokenUsage::default());
    assert_eq!(client.remaining(), 0);

    let seen = client.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].messages[0], Message::user("and?"));
}

#[test]
fn running_out_of_turns_is_a_script_error() {
    let client = ScriptedClient::from_turns("t.json", vec![ScriptTurn::text("only")]);
    chat(&client, &request("1")).unwrap();
    let message = script_message(chat(&client, &request("2")));
    assert_eq!(message, "no turn left: the script has 1 turns and this is request 2");
    let message = script_message(chat(&client, &request("3")));
    assert!(message.ends_with("this is request 3"), "{message}");
    assert_eq!(client.remaining(), 0);
}

#[test]
fn an_explicit_stop_reason_is_kept_and_unknown_ones_verbatim() {
    let text = r#"{"turns": [
        {"content": [{"type": "text", "text": "cut"}], "stop_reason": "max_tokens"},
        {"content": [{"type": "text", "text": "no"}], "stop_reason": "refusal"}
    ]}"#;
    let client = ScriptedClient::parse("t.json", text).unwrap();
    assert_eq!(chat(&client, &request("a")).unwrap().stop_reason, StopReason::MaxTokens);
    assert_eq!(chat(&client, &request("b")).unwrap().stop_reason, StopReason::Refusal);
}

fn expecting(expect: Expect) -> ScriptedClient {
    ScriptedClient::from_turns("t.json", vec![ScriptTurn::text("ok").with_expect(expect)])
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: String::new(),
        input_schema: json!({"type": "object"}),
    }
}

#[test]
fn matching_expectations_answer() {
    let client = expecting(Expect {
        last_user_contains: Some("result: 42".into()),
        tools_include: vec!["file_read".into()],
        system_contains: Some("planner".into()),
        model: Some("m1".into()),
    });
    let mut req = request("first question");
    req.system = Some("You are the planner.".into());
    req.tools = vec![tool("shell"), tool("file_read")];
    req.messages.push(Message::assistant(vec![ContentBlock::ToolUse {
        id: "t1".into(),
        name: "shell".into(),
        input: json!({}),
    }]));
    // The last user message is a tool result: its content counts.
    req.messages.push(Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: "t1".into(),
            content: "result: 42".into(),
            is_error: false,
        }],
    });
    assert_eq!(chat(&client, &req).unwrap().text(), "ok");
}

#[test]
fn a_wrong_model_says_what_was_asked() {
    let client = expecting(Expect { model: Some("big".into()), ..Expect::default() });
    let message = script_message(chat(&client, &request("x")));
    assert_eq!(message, r#"turn 1: expected model "big", the request asks for "m1""#);
}

#[test]
fn a_missing_system_text_quotes_the_system_prompt() {
    let client =
        expecting(Expect { system_contains: Some("verifier".into()), ..Expect::default() });
    let mut req = request("x");
    req.system = Some("You are the planner.".into());
    let message = script_message(chat(&client, &req));
    assert_eq!(
        message,
        r#"turn 1: expected the system prompt to contain "verifier"; it is "You are the planner.""#
    );

    let client =
        expecting(Expect { system_contains: Some("verifier".into()), ..Expect::default() });
    let message = script_message(chat(&client, &request("x")));
    assert!(message.ends_with("the request has none"), "{message}");
}

#[test]
fn missing_tools_are_named_with_the_offered_ones() {
    let client = expecting(Expect {
        tools_include: vec!["file_read".into(), "shell".into()],
        ..Expect::default()
    });
    let mut req = request("x");
    req.tools = vec![tool("shell"), tool("http_get")];
    let message = script_message(chat(&client, &req));
    assert_eq!(
        message,
        r#"turn 1: expected the tools to include ["file_read"]; the request offers ["shell", "http_get"]"#
    );
}

#[test]
fn a_last_user_mismatch_quotes_an_excerpt() {
    let client =
        expecting(Expect { last_user_contains: Some("needle".into()), ..Expect::default() });
    let long = "é".repeat(500);
    let message = script_message(chat(&client, &request(&long)));
    let quoted = format!("{:?}", "é".repeat(200));
    assert_eq!(
        message,
        format!(
            "turn 1: expected the last user message to contain \"needle\"; it is {quoted}… (500 characters)"
        )
    );

    // Only the last user message counts, not an earlier one.
    let client =
        expecting(Expect { last_user_contains: Some("needle".into()), ..Expect::default() });
    let mut req = request("needle here");
    req.messages.push(Message::assistant(vec![ContentBlock::text("ok")]));
    req.messages.push(Message::user("something else"));
    let message = script_message(chat(&client, &req));
    assert!(message.ends_with(r#"it is "something else""#), "{message}");

    let client =
        expecting(Expect { last_user_contains: Some("needle".into()), ..Expect::default() });
    let mut req = request("needle");
    req.messages[0].content = vec![ContentBlock::ToolResult {
        tool_use_id: "t1".into(),
        content: "needle".into(),
        is_error: false,
    }];
    req.messages.insert(0, Message::user("start"));
    req.messages.insert(
        1,
        Message::assistant(vec![ContentBlock::ToolUse {
            id: "t1".into(),
            name: "file_read".into(),
            input: json!({}),
        }]),
    );
    // A tool result counts as what the user said.
    assert!(chat(&client, &req).is_ok());
}

/// A request the real APIs would refuse gets their 400, and the turn stays for the next request.
#[test]
fn a_request_the_apis_refuse_is_refused_and_takes_no_turn() {
    let client = ScriptedClient::parse("t.json", TWO_TURNS).unwrap();
    let cases: Vec<(ChatRequest, &str)> = vec![
        (
            ChatRequest::new("m1", Vec::new()),
            "Anthropic API would refuse this request: messages: at least one message is required",
        ),
        // pev leaves blank text out, which leaves no message at all.
        (
            request("   "),
            "Anthropic API would refuse this request: messages: at least one message is required",
        ),
        (
            {
                let mut r = request("hi");
                r.tools = vec![ToolSpec {
                    name: "file.read".into(),
                    description: String::new(),
                    input_schema: json!({"type": "object"}),
                }];
                r
            },
            "Anthropic API would refuse this request: tools.0.custom.name: String should match pattern",
        ),
        (
            {
                let mut r = request("hi");
                r.messages.push(Message::assistant(vec![ContentBlock::ToolUse {
                    id: "x1".into(),
                    name: "f".into(),
                    input: json!({}),
                }]));
                r.messages.push(Message::user("go on"));
                r
            },
            "Anthropic API would refuse this request: messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: x1.",
        ),
    ];
    for (req, expected) in cases {
        match chat(&client, &req) {
            Err(ProviderError::BadRequest { status: 400, message, .. }) => {
                assert!(message.contains(expected), "{message}");
            }
            other => panic!("expected a 400 for {expected:?}, got {other:?}"),
        }
    }
    assert_eq!(client.remaining(), 2, "no turn was taken");
    assert_eq!(chat(&client, &request("hi")).unwrap().text(), "Let me look.");
}

#[test]
fn error_turns_return_typed_errors() {
    let text = r#"{"turns": [
        {"error": {"kind": "rate_limited", "retry_after_s": 7}},
        {"error": {"kind": "overloaded"}},
        {"error": {"kind": "server", "status": 502, "message": "bad gateway"}},
        {"error": {"kind": "timeout"}},
        {"error": {"kind": "bad_request"}},
        {"error": {"kind": "context_too_long", "message": "too long"}},
        {"content": [{"type": "text", "text": "fine"}]}
    ]}"#;
    let client = ScriptedClient::parse("t.json", text).unwrap();
    let provider = "script:t.json".to_owned();
    let r = request("x");
    assert_eq!(
        chat(&client, &r),
        Err(ProviderError::RateLimited {
            provider: provider.clone(),
            retry_after: Some(Duration::from_secs(7)),
            message: "scripted RateLimited".into(),
        })
    );
    assert_eq!(
        chat(&client, &r),
        Err(ProviderError::Overloaded {
            provider: provider.clone(),
            retry_after: None,
            message: "scripted Overloaded".into(),
        })
    );
    assert_eq!(
        chat(&client, &r),
        Err(ProviderError::Server {
            provider: provider.clone(),
            status: 502,
            message: "bad gateway".into()
        })
    );
    let timeout = chat(&client, &r).unwrap_err();
    assert!(matches!(timeout, ProviderError::Timeout { .. }), "{timeout:?}");
    assert!(timeout.is_retryable());
    let bad = chat(&client, &r).unwrap_err();
    assert!(matches!(bad, ProviderError::BadRequest { status: 400, .. }), "{bad:?}");
    assert_eq!(
        chat(&client, &r),
        Err(ProviderError::ContextTooLong { provider, message: "too long".into() })
    );
    assert_eq!(chat(&client, &r).unwrap().text(), "fine");
}

#[test]
fn streaming_emits_text_in_pieces_and_tool_calls_whole() {
    let client = ScriptedClient::parse("t.json", TWO_TURNS).unwrap();
    let (events, result) = stream(&client, &request("x"));
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta { index: 0, text: "Let me".into() },
            StreamEvent::TextDelta { index: 0, text: " look.".into() },
            StreamEvent::ToolCallStart { index: 1, id: "t1".into(), name: "file_read".into() },
            StreamEvent::ToolCallDelta { index: 1, partial_json: r#"{"path":"a.txt"}"#.into() },
        ]
    );
    let response = result.unwrap();
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.content.len(), 2);
}

#[test]
fn streaming_splits_multibyte_text_on_a_char_boundary() {
    let client = ScriptedClient::from_turns("t.json", vec![ScriptTurn::text("ééé")]);
    let (events, result) = stream(&client, &request("x"));
    let texts: Vec<_> = events
        .iter()
        .map(|e| match e {
            StreamEvent::TextDelta { text, .. } => text.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(texts, vec!["é", "éé"]);
    assert_eq!(result.unwrap().text(), "ééé");
}

#[test]
fn a_streamed_error_turn_emits_its_content_then_fails() {
    let mut turn = ScriptTurn::failure(FailureKind::Malformed, None);
    turn.content = vec![ContentBlock::text("partial")];
    let client = ScriptedClient::from_turns("t.json", vec![turn.clone(), turn]);
    let (events, result) = stream(&client, &request("x"));
    assert_eq!(events.len(), 2);
    assert!(matches!(result, Err(ProviderError::Malformed { .. })), "{result:?}");
    // Not streamed: just the error.
    assert!(matches!(chat(&client, &request("x")), Err(ProviderError::Malformed { .. })));
}

#[test]
fn a_failed_expectation_streams_nothing() {
    let client = expecting(Expect { model: Some("other".into()), ..Expect::default() });
    let (events, result) = stream(&client, &request("x"));
    assert!(events.is_empty());
    assert!(script_message(result).contains("expected model"));
}

#[test]
fn a_missing_file_names_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.json");
    let message = config_message(ScriptedClient::load(&path));
    assert!(
        message.starts_with(&format!("cannot read the script {}: ", path.display())),
        "{message}"
    );
}

#[test]
fn a_file_loads_and_names_itself_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    std::fs::write(&path, TWO_TURNS).unwrap();
    let client = ScriptedClient::load(&path).unwrap();
    assert_eq!(client.provider(), format!("script:{}", path.display()));
    assert_eq!(client.remaining(), 2);
}

#[test]
fn not_json_gives_line_and_column() {
    let message = config_message(ScriptedClient::parse("bad.json", "{\"turns\": [\n  {,}\n]}"));
    assert!(message.starts_with("script bad.json is not JSON: "), "{message}");
    assert!(message.contains("line 2 column 4"), "{message}");
}

#[test]
fn wrong_shapes_name_the_turn_the_field_and_the_position() {
    let cases = [
        (r#"{"turn": []}"#, vec!["unknown field `turn`", "line 1"]),
        (r#"{"name": "x"}"#, vec!["missing field `turns`"]),
        (
            "{\"turns\": [{\"content\": []},\n {\"contnt\": []}]}",
            vec!["turns[1]: ", "unknown field `contnt`", "line 2"],
        ),
        (
            r#"{"turns": [{"content": [{"type": "text", "text": "a"}, {"type": "tool_call"}]}]}"#,
            vec!["turns[0].content[1]: ", "unknown variant `tool_call`"],
        ),
        (
            r#"{"turns": [{"content": [{"type": "tool_use", "id": "t", "name": "n"}]}]}"#,
            vec!["turns[0].content[0]: ", "missing field `input`"],
        ),
        (
            r#"{"turns": [{"error": {"kind": "exploded"}}]}"#,
            vec!["turns[0]: ", "unknown variant `exploded`"],
        ),
        (
            r#"{"turns": [{"error": {"kind": "rate_limited", "retry_after_s": -1}}]}"#,
            vec!["turns[0]: ", "retry_after_s must be a non-negative number of seconds"],
        ),
        (
            r#"{"turns": [{"expect": {"last_user": "x"}}]}"#,
            vec!["turns[0]: ", "unknown field `last_user`"],
        ),
        (r#"{"turns": [{"usage": {"input": 1}}]}"#, vec!["turns[0]: ", "unknown field `input`"]),
        (r#"{"turns": {}}"#, vec!["invalid type: map, expected a sequence"]),
    ];
    for (text, wants) in cases {
        let message = config_message(ScriptedClient::parse("bad.json", text));
        assert!(message.starts_with("script bad.json: "), "{text}: {message}");
        for want in wants {
            assert!(message.contains(want), "{text}: want {want:?} in {message}");
        }
    }
}

#[test]
fn a_tool_result_in_a_turn_is_refused() {
    let text = r#"{"turns": [{"content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}]}"#;
    let message = config_message(ScriptedClient::parse("bad.json", text));
    assert_eq!(
        message,
        "script bad.json: turns[0].content[0] is a tool_result; a model's turn holds text and \
         tool_use blocks"
    );
}

#[tokio::test]
async fn scripted_output_is_cut_to_the_requests_max_tokens() {
    let usage = TokenUsage { input_tokens: 10, output_tokens: 5000, ..TokenUsage::default() };
    let client = ScriptedClient::from_turns("cap", vec![ScriptTurn::text("x").with_usage(usage)]);
    let mut request = ChatRequest::new("m", vec![Message::user("hi")]);
    request.max_tokens = 300;
    let response = client.chat(&request).await.unwrap();
    assert_eq!(response.usage.output_tokens, 300);
    assert_eq!(response.usage.input_tokens, 10);
}
