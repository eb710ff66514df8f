//! The OpenAI-compatible client's streaming against the mock server: text and tool-call deltas
//! reassembled whatever the chunking (inside strings, inside `\u` escapes, one byte per chunk,
//! two calls interleaved), Ollama's parallel calls, `error` chunks, cut and idle streams.

use std::sync::Mutex;
use std::time::Duration;

use pev_providers::{
    ChatRequest, ChatResponse, ContentBlock, ModelClient, ProviderError, StopReason, StreamEvent,
    TokenUsage,
};
use serde_json::json;

use super::mock::{MockServer, Reply};
use super::openai::{
    KEY, client, fixture, read_file_tool, short_timeouts, simple_request, timeouts,
};

/// Streams `request` from a server that plays `reply`; the result and the events seen.
async fn stream(
    reply: Reply,
    request: &ChatRequest,
) -> (Result<ChatResponse, ProviderError>, Vec<StreamEvent>, MockServer) {
    let server = MockServer::start(vec![reply]).await;
    let events = Mutex::new(Vec::new());
    let sink = |e: StreamEvent| events.lock().unwrap().push(e);
    let result = client(&server, Some(KEY), timeouts()).chat_stream(request, &sink).await;
    (result, events.into_inner().unwrap(), server)
}

/// The text of the `TextDelta`s at `index`, joined.
fn text_at(events: &[StreamEvent], index: usize) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { index: i, text } if *i == index => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The argument fragments at `index`, joined.
fn arguments_at(events: &[StreamEvent], index: usize) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallDelta { index: i, partial_json } if *i == index => {
                Some(partial_json.as_str())
            }
            _ => None,
        })
        .collect()
}

fn starts(events: &[StreamEvent]) -> Vec<(usize, String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallStart { index, id, name } => {
                Some((*index, id.clone(), name.clone()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn streamed_text_is_reassembled_with_usage() {
    let (result, events, server) =
        stream(Reply::sse(fixture!("stream_text.sse")), &simple_request()).await;
    let response = result.unwrap();
    let want = "Step one: read the file. Café ☕ done.";
    assert_eq!(response.text(), want);
    assert_eq!(response.content, vec![ContentBlock::text(want)]);
    assert_eq!(text_at(&events, 0), want);
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.id, "chatcmpl-pev0003");
    assert_eq!(response.model, "gpt-4o-mini-2024-07-18");
    assert_eq!(
        response.usage,
        TokenUsage {
            input_tokens: 18,
            output_tokens: 9,
            cache_read_tokens: 32,
            cache_write_tokens: 0
        }
    );

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("accept"), Some("text/event-stream"));
    let body = sent.json();
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

/// Byte offsets into `body` that split it at awkward places: inside every `\u` escape, inside
/// every `"` pair of a fragment, and inside multi-byte characters.
fn awkward_cuts(body: &str) -> Vec<Vec<usize>> {
    let mut plans = vec![Vec::new()];
    for (at, _) in body.match_indices("\\\\u") {
        plans.push(vec![at + 1, at + 3, at + 5]);
    }
    for (at, _) in body.match_indices("\\\"") {
        plans.push(vec![at + 1]);
    }
    for (at, c) in body.char_indices().filter(|(_, c)| c.len_utf8() > 1) {
        plans.push(vec![at + 1, at + c.len_utf8() - 1]);
    }
    // Every event in its own chunk, cut right after `data:`.
    plans.push(body.match_indices("data:").map(|(at, _)| at + 5).collect());
    // One byte per chunk.
    plans.push((1..body.len()).collect());
    plans
}

#[tokio::test]
async fn streamed_tool_call_arguments_survive_any_split() {
    let body = fixture!("stream_tool_calls.sse");
    let plans = awkward_cuts(body);
    assert!(plans.len() > 8, "the fixture should offer awkward places: {}", plans.len());
    let mut request = simple_request();
    request.tools = vec![read_file_tool()];
    for cuts in plans {
        let (result, events, _server) = stream(Reply::sse_split(body, &cuts), &request).await;
        let response = result.unwrap_or_else(|e| panic!("cuts {cuts:?}: {e}"));
        assert_eq!(
            response.content,
            vec![
                ContentBlock::text("Let me look."),
                ContentBlock::ToolUse {
                    id: "call_A1".into(),
                    name: "read_file".into(),
                    input: json!({"path": "docs/name.txt"})
                },
                ContentBlock::ToolUse {
                    id: "call_B2".into(),
                    name: "search".into(),
                    input: json!({"query": "café \"quoted\" 😀", "limit": 5})
                },
            ],
            "cuts {cuts:?}"
        );
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(response.usage.input_tokens, 400);
        assert_eq!(response.usage.output_tokens, 61);
        assert_eq!(text_at(&events, 0), "Let me look.");
        assert_eq!(
            starts(&events),
            vec![(1, "call_A1".into(), "read_file".into()), (2, "call_B2".into(), "search".into())]
        );
        assert_eq!(arguments_at(&events, 1), r#"{"path": "docs/name.txt"}"#);
        assert_eq!(
            arguments_at(&events, 2),
            r#"{"query": "caf\u00e9 \"quoted\" \ud83d\ude00", "limit": 5}"#
        );
        // A call's start comes before its first fragment.
        for index in [1, 2] {
            let start = events.iter().position(
                |e| matches!(e, StreamEvent::ToolCallStart { index: i, .. } if *i == index),
            );
            let first = events.iter().position(
                |e| matches!(e, StreamEvent::ToolCallDelta { index: i, .. } if *i == index),
            );
            assert!(start < first, "{events:?}");
        }
    }
}

#[tokio::test]
async fn ollama_parallel_calls_sharing_index_0_stay_apart() {
    let (result, events, _server) =
        stream(Reply::sse(fixture!("ollama_stream_tools.sse")), &simple_request()).await;
    let response = result.unwrap();
    assert_eq!(
        response.content,
        vec![
            ContentBlock::ToolUse {
                id: "call_wteop8bt".into(),
                name: "run_command".into(),
                input: json!({"command": "ls"})
            },
            ContentBlock::ToolUse {
                id: "call_rk2xye1l".into(),
                name: "run_command".into(),
                input: json!({"command": "ls -l"})
            },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.usage, TokenUsage::default());
    assert_eq!(response.model, "qwen2.5-coder:7b");
    assert_eq!(starts(&events).len(), 2);
}

#[tokio::test]
async fn an_error_chunk_is_a_typed_error() {
    let (result, events, _server) =
        stream(Reply::sse(fixture!("stream_error.sse")), &simple_request()).await;
    match result {
        Err(ProviderError::Server { status: 500, message, .. }) => {
            assert_eq!(message, "The server had an error while processing your request.");
        }
        other => panic!("expected Server, got {other:?}"),
    }
    assert_eq!(text_at(&events, 0), "Partial");

    let limited = "data: {\"error\":{\"message\":\"slow down\",\"type\":\"rate_limit_error\"}}\n\n";
    let (result, _, _server) = stream(Reply::sse(limited), &simple_request()).await;
    assert!(matches!(result, Err(ProviderError::RateLimited { .. })), "{result:?}");
    let string = "data: {\"error\":\"context window exceeded\"}\n\n";
    let (result, _, _server) = stream(Reply::sse(string), &simple_request()).await;
    assert!(matches!(result, Err(ProviderError::ContextTooLong { .. })), "{result:?}");
    let opaque = "data: {\"error\":\"worker died\"}\n\n";
    let (result, _, _server) = stream(Reply::sse(opaque), &simple_request()).await;
    assert!(matches!(result, Err(ProviderError::Server { status: 500, .. })), "{result:?}");
}

#[tokio::test]
async fn a_stream_without_done_or_finish_reason_is_malformed() {
    let (result, events, _server) =
        stream(Reply::sse(fixture!("stream_no_done.sse")), &simple_request()).await;
    match result {
        Err(ProviderError::Malformed { message, .. }) => {
            assert!(message.contains("finish_reason"), "{message}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
    assert_eq!(text_at(&events, 0), "This answer never ends");
}

#[tokio::test]
async fn a_stream_cut_mid_way_is_malformed() {
    let body = fixture!("stream_tool_calls.sse");
    let half = body.len() / 2;
    let reply = Reply::Chunks {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        chunks: vec![(Duration::ZERO, body.as_bytes()[..half].to_vec())],
        cut: true,
    };
    let (result, _, _server) = stream(reply, &simple_request()).await;
    assert!(matches!(result, Err(ProviderError::Malformed { .. })), "{result:?}");
}

#[tokio::test]
async fn invalid_streamed_arguments_are_malformed_and_name_the_tool() {
    let chunk = json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
        "choices": [{"index": 0, "finish_reason": null, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "apply_patch", "arguments": "{\"patch\": \"--- a"}}]}}]});
    let finish = json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
    let body = format!("data: {chunk}\n\ndata: {finish}\n\ndata: [DONE]\n\n");
    let (result, _, _server) = stream(Reply::sse(&body), &simple_request()).await;
    match result {
        Err(ProviderError::Malformed { message, .. }) => {
            assert!(message.contains("apply_patch"), "{message}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_chunk_that_is_not_json_is_malformed() {
    let (result, _, _server) =
        stream(Reply::sse("data: {\"choices\": [\n\n"), &simple_request()).await;
    assert!(matches!(result, Err(ProviderError::Malformed { .. })), "{result:?}");
}

#[tokio::test]
async fn an_idle_stream_times_out() {
    let body = fixture!("stream_text.sse");
    let first_event = body.find("\n\n").unwrap() + 2;
    let reply = Reply::Chunks {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        chunks: vec![
            (Duration::ZERO, body.as_bytes()[..first_event].to_vec()),
            (Duration::from_secs(5), body.as_bytes()[first_event..].to_vec()),
        ],
        cut: false,
    };
    let server = MockServer::start(vec![reply]).await;
    let sink = |_: StreamEvent| {};
    let err = client(&server, None, short_timeouts())
        .chat_stream(&simple_request(), &sink)
        .await
        .unwrap_err();
    match err {
        ProviderError::Timeout { what, after, .. } => {
            assert_eq!(what, "stream idle");
            assert_eq!(after, Duration::from_millis(300));
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
}

#[tokio::test]
async fn a_hanging_server_times_out_before_the_stream_starts() {
    let server = MockServer::start(vec![Reply::Hang]).await;
    let sink = |_: StreamEvent| {};
    let err = client(&server, None, short_timeouts())
        .chat_stream(&simple_request(), &sink)
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Timeout { what: "request", .. }), "{err:?}");
}

#[tokio::test]
async fn an_error_status_before_the_stream_is_typed() {
    let reply = Reply::json(429, fixture!("error_rate_limit.json")).with_header("retry-after", "2");
    let (result, events, _server) = stream(reply, &simple_request()).await;
    match result {
        Err(ProviderError::RateLimited { retry_after, .. }) => {
            assert_eq!(retry_after, Some(Duration::from_secs(2)));
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
    assert!(events.is_empty());
}
