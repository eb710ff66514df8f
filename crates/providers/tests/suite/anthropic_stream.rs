//! The Anthropic client's streaming against the mock server: text and tool-call streams, tool
//! arguments split at awkward places (inside a JSON string, inside an escape, between CR and LF,
//! inside a UTF-8 character, one byte per chunk), `error` events, cut and silent streams, and
//! event types the client does not know.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use pev_providers::{
    ChatResponse, ContentBlock, ModelClient, ProviderError, StopReason, StreamEvent, TokenUsage,
};
use serde_json::{Value, json};

use super::anthropic::{SHORT, assert_head, body_of, client, client_with, fixture, request};
use super::mock::{MockServer, Reply};

/// Streams one call, returning its result and the events the sink saw.
async fn stream(
    client: &dyn ModelClient,
) -> (Result<ChatResponse, ProviderError>, Vec<StreamEvent>) {
    let events = Mutex::new(Vec::new());
    let sink = |e: StreamEvent| events.lock().unwrap().push(e);
    let result = client.chat_stream(&request(), &sink).await;
    (result, events.into_inner().unwrap())
}

fn tool_json(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallDelta { partial_json, .. } => Some(partial_json.as_str()),
            _ => None,
        })
        .collect()
}

const TOOL_ID: &str = "toolu_01T1x1fJ34qAmk2tNTrN7Up6";
const TOOL_JSON: &str = "{\"path\": \"src/main.rs\", \"content\": \"fn main() {\\n    println!(\\\"café → ok\\\");\\n}\\n\", \"mode\": 420}";

fn tool_input() -> Value {
    json!({
        "path": "src/main.rs",
        "content": "fn main() {\n    println!(\"café → ok\");\n}\n",
        "mode": 420
    })
}

#[tokio::test]
async fn streamed_text() {
    let server = MockServer::start(vec![Reply::sse(&fixture("stream_text.sse"))]).await;
    let client = client(&server);
    let (result, events) = stream(&client).await;
    let response = result.unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta { index: 0, text: "Hello".into() },
            StreamEvent::TextDelta { index: 0, text: ", wörld!".into() },
        ]
    );
    assert_eq!(response.id, "msg_01StreamText4hV2");
    assert_eq!(response.model, "claude-haiku-4-5");
    assert_eq!(response.content, vec![ContentBlock::text("Hello, wörld!")]);
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(
        response.usage,
        TokenUsage {
            input_tokens: 25,
            output_tokens: 15,
            cache_read_tokens: 0,
            cache_write_tokens: 0
        }
    );
    let sent = &server.requests()[0];
    assert_head(sent);
    assert_eq!(sent.json()["stream"], json!(true));
}

#[tokio::test]
async fn streamed_tool_call() {
    let server = MockServer::start(vec![Reply::sse(&fixture("stream_tool_use.sse"))]).await;
    let client = client(&server);
    let (result, events) = stream(&client).await;
    let response = result.unwrap();
    assert_eq!(
        events[..2],
        [
            StreamEvent::TextDelta { index: 0, text: "Writing the file.".into() },
            StreamEvent::ToolCallStart { index: 1, id: TOOL_ID.into(), name: "write_file".into() },
        ]
    );
    // The empty first fragment is not reported; the four others are, in order.
    assert_eq!(events.len(), 6, "{events:?}");
    assert!(events[2..].iter().all(|e| matches!(e, StreamEvent::ToolCallDelta { index: 1, .. })));
    assert_eq!(tool_json(&events), TOOL_JSON);
    assert_eq!(
        response.content,
        vec![
            ContentBlock::text("Writing the file."),
            ContentBlock::ToolUse {
                id: TOOL_ID.into(),
                name: "write_file".into(),
                input: tool_input()
            },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.usage,
        TokenUsage {
            input_tokens: 472,
            output_tokens: 89,
            cache_read_tokens: 1890,
            cache_write_tokens: 0
        }
    );
}

/// Byte offsets just after each occurrence of `needle` plus `shift`.
fn offsets(body: &str, needle: &str, shift: usize) -> Vec<usize> {
    let found: Vec<usize> = body.match_indices(needle).map(|(i, _)| i + shift).collect();
    assert!(!found.is_empty(), "{needle:?} not in the fixture");
    found
}

#[tokio::test]
async fn tool_arguments_split_at_awkward_places_assemble_whole() {
    let lf = fixture("stream_tool_use.sse");
    let crlf = lf.replace('\n', "\r\n");
    let bytes_one_by_one: Vec<usize> = (1..lf.len()).collect();
    let cases: Vec<(&str, &str, Vec<usize>)> = vec![
        // Inside the JSON string "src/ma|in.rs" of a fragment.
        ("inside a JSON string", &lf, offsets(&lf, "src/ma", 6)),
        // Inside the escaped backslash and inside the escaped quote before "café".
        (
            "inside an escape",
            &lf,
            [offsets(&lf, "\\\\\\\"caf", 1), offsets(&lf, "\\\\\\\"caf", 3)].concat(),
        ),
        // Between every CR and its LF.
        ("between CR and LF", &crlf, offsets(&crlf, "\r\n", 1)),
        // Between the two bytes of "é" and inside the three of "→".
        ("inside UTF-8 characters", &lf, [offsets(&lf, "é", 1), offsets(&lf, "→", 2)].concat()),
        ("one byte per chunk", &lf, bytes_one_by_one),
    ];
    let replies = cases.iter().map(|(_, body, cuts)| Reply::sse_split(body, cuts)).collect();
    let server = MockServer::start(replies).await;
    let client = client(&server);
    for (name, _, _) in &cases {
        let (result, events) = stream(&client).await;
        let response = result.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(tool_json(&events), TOOL_JSON, "{name}");
        let (id, tool, input) = response.tool_calls().next().unwrap_or_else(|| panic!("{name}"));
        assert_eq!((id, tool, input), (TOOL_ID, "write_file", &tool_input()), "{name}");
        assert_eq!(response.text(), "Writing the file.", "{name}");
    }
}

#[tokio::test]
async fn an_error_event_mid_stream_is_typed() {
    let rate = fixture("stream_error.sse").replace(
        r#"{"type":"overloaded_error","message":"Overloaded"}"#,
        r#"{"type":"rate_limit_error","message":"Slow down"}"#,
    );
    let api = fixture("stream_error.sse").replace(
        r#"{"type":"overloaded_error","message":"Overloaded"}"#,
        r#"{"type":"api_error","message":"Internal server error"}"#,
    );
    let server = MockServer::start(vec![
        Reply::sse(&fixture("stream_error.sse")),
        Reply::sse(&rate),
        Reply::sse(&api),
    ])
    .await;
    let client = client(&server);

    let (result, events) = stream(&client).await;
    assert_eq!(
        result.unwrap_err(),
        ProviderError::Overloaded {
            provider: "anthropic".into(),
            retry_after: None,
            message: "Overloaded".into()
        }
    );
    assert_eq!(events, vec![StreamEvent::TextDelta { index: 0, text: "Let me".into() }]);

    let (result, _) = stream(&client).await;
    assert!(
        matches!(&result, Err(ProviderError::RateLimited { message, retry_after: None, .. }) if message == "Slow down"),
        "{result:?}"
    );
    let (result, _) = stream(&client).await;
    assert!(
        matches!(&result, Err(ProviderError::Server { status: 500, message, .. }) if message == "Internal server error"),
        "{result:?}"
    );
}

#[tokio::test]
async fn an_error_status_before_the_stream_is_typed() {
    let server = MockServer::start(vec![
        Reply::json(529, &fixture("error_overloaded.json")).with_header("retry-after", "3"),
    ])
    .await;
    let client = client(&server);
    let (result, events) = stream(&client).await;
    assert_eq!(
        result.unwrap_err(),
        ProviderError::Overloaded {
            provider: "anthropic".into(),
            retry_after: Some(Duration::from_secs(3)),
            message: "Overloaded".into()
        }
    );
    assert!(events.is_empty());
}

/// The text stream's first `n` events, as raw SSE.
fn first_events(n: usize) -> String {
    let body = fixture("stream_text.sse");
    body.split_inclusive("\n\n").take(n).collect()
}

#[tokio::test]
async fn a_stream_cut_mid_way_is_malformed() {
    let head = first_events(4);
    let partial = "event: content_block_delta\ndata: {\"type\":\"content_block_del";
    let cut = Reply::Chunks {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        chunks: vec![(Duration::ZERO, head.clone().into_bytes()), (Duration::ZERO, partial.into())],
        cut: true,
    };
    // A clean end of the body, but before message_stop.
    let short = Reply::sse(&first_events(5));
    let server = MockServer::start(vec![cut, short]).await;
    let client = client(&server);

    let (result, events) = stream(&client).await;
    assert!(
        matches!(&result, Err(ProviderError::Malformed { message, .. }) if message.starts_with("the stream broke")),
        "{result:?}"
    );
    assert_eq!(events, vec![StreamEvent::TextDelta { index: 0, text: "Hello".into() }]);

    let (result, _) = stream(&client).await;
    assert_eq!(
        result.unwrap_err(),
        ProviderError::Malformed {
            provider: "anthropic".into(),
            message: "the stream ended before message_stop".into()
        }
    );
}

#[tokio::test]
async fn a_silent_stream_times_out() {
    let silent = Reply::Chunks {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        chunks: vec![
            (Duration::ZERO, first_events(3).into_bytes()),
            (Duration::from_secs(30), b"event: ping\ndata: {\"type\":\"ping\"}\n\n".to_vec()),
        ],
        cut: false,
    };
    let server = MockServer::start(vec![silent]).await;
    let client = client_with(&server, SHORT);
    let started = Instant::now();
    let (result, _) = stream(&client).await;
    assert_eq!(
        result.unwrap_err(),
        ProviderError::Timeout {
            provider: "anthropic".into(),
            after: Duration::from_millis(300),
            what: "stream idle"
        }
    );
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_stream_that_hangs_before_its_head_times_out() {
    let server = MockServer::start(vec![Reply::Hang]).await;
    let client = client_with(&server, SHORT);
    let (result, _) = stream(&client).await;
    assert!(matches!(result, Err(ProviderError::Timeout { what: "request", .. })), "{result:?}");
}

#[tokio::test]
async fn after_message_stop_a_lingering_connection_does_not_matter() {
    let lingering = Reply::Chunks {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        chunks: vec![
            (Duration::ZERO, fixture("stream_text.sse").into_bytes()),
            (Duration::from_secs(30), b": bye\n\n".to_vec()),
        ],
        cut: false,
    };
    let server = MockServer::start(vec![lingering]).await;
    let client = client_with(&server, SHORT);
    let (result, _) = stream(&client).await;
    assert_eq!(result.unwrap().text(), "Hello, wörld!");
}

fn tool_stream(fragments: &[&str]) -> String {
    let mut body = String::from(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_x\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-haiku-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n\
         event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_x\",\"name\":\"list_dir\",\"input\":{}}}\n\n",
    );
    for fragment in fragments {
        let data = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": fragment}});
        body.push_str(&format!("event: content_block_delta\ndata: {data}\n\n"));
    }
    body.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
         event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":12}}\n\n\
         event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    body
}

#[tokio::test]
async fn tool_arguments_empty_or_invalid() {
    let server = MockServer::start(vec![
        Reply::sse(&tool_stream(&[])),
        Reply::sse(&tool_stream(&["", "  "])),
        Reply::sse(&tool_stream(&["{\"path\": \"src", "\""])),
    ])
    .await;
    let client = client(&server);
    for _ in 0..2 {
        let (result, _) = stream(&client).await;
        let response = result.unwrap();
        assert_eq!(response.tool_calls().next().map(|(_, _, input)| input), Some(&json!({})));
        assert_eq!(response.usage.output_tokens, 12);
    }
    let (result, _) = stream(&client).await;
    let Err(ProviderError::Malformed { message, .. }) = &result else { panic!("{result:?}") };
    assert!(message.contains("list_dir (toolu_x) is not valid JSON"), "{message}");
}

#[tokio::test]
async fn unknown_events_blocks_and_deltas_are_skipped() {
    let extra = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me think\"}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQB\"}}\n\n\
        event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
        event: brand_new_event\ndata: {\"type\":\"brand_new_event\",\"detail\":{\"x\":1}}\n\n";
    let body = fixture("stream_text.sse").replace("\"index\":0", "\"index\":1");
    let (head, tail) = body.split_at(body.find("event: content_block_start").unwrap());
    let body = format!("{head}{extra}{tail}");
    let server = MockServer::start(vec![Reply::sse(&body)]).await;
    let client = client(&server);
    let (result, events) = stream(&client).await;
    let response = result.unwrap();
    assert_eq!(response.content, vec![ContentBlock::text("Hello, wörld!")]);
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events.iter().all(|e| matches!(e, StreamEvent::TextDelta { index: 1, .. })));
}

#[tokio::test]
async fn protocol_violations_are_malformed() {
    let not_json = first_events(1) + "event: ping\ndata: {not json\n\n";
    let early_delta = first_events(1)
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":4,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n";
    let server = MockServer::start(vec![Reply::sse(&not_json), Reply::sse(&early_delta)]).await;
    let client = client(&server);
    let (result, _) = stream(&client).await;
    let Err(ProviderError::Malformed { message, .. }) = &result else { panic!("{result:?}") };
    assert!(message.starts_with("bad \"ping\" event"), "{message}");
    let (result, _) = stream(&client).await;
    let Err(ProviderError::Malformed { message, .. }) = &result else { panic!("{result:?}") };
    assert!(message.contains("content block 4 before its start"), "{message}");
    assert_eq!(body_of(&server, 1)["stream"], json!(true));
}
