use pev_providers::{ChatResponse, ContentBlock, StopReason, TokenUsage};
use serde_json::json;

use super::*;

fn response(content: Vec<ContentBlock>, stop: StopReason) -> ChatResponse {
    ChatResponse {
        id: "msg_1".into(),
        model: "m".into(),
        content,
        stop_reason: stop,
        usage: TokenUsage::default(),
    }
}

fn call(id: &str) -> ContentBlock {
    ContentBlock::ToolUse { id: id.into(), name: "file_read".into(), input: json!({"path": "a"}) }
}

#[test]
fn each_shape_of_answer_has_one_reading() {
    let prose = ContentBlock::text("Let me look first.");
    let cases = [
        (vec![prose.clone(), call("t1"), call("t2")], StopReason::ToolUse, "calls t1,t2"),
        (vec![call("t1")], StopReason::EndTurn, "calls t1"),
        (vec![prose.clone()], StopReason::EndTurn, "final"),
        (vec![ContentBlock::text("  \n")], StopReason::EndTurn, "empty"),
        (vec![], StopReason::EndTurn, "empty"),
        (vec![prose.clone(), call("t1")], StopReason::MaxTokens, "cut t1"),
        (vec![prose], StopReason::MaxTokens, "cut"),
        (vec![ContentBlock::text("I can't help with that.")], StopReason::Refusal, "refused"),
        (vec![call("t1")], StopReason::Refusal, "refused"),
    ];
    for (content, stop, want) in cases {
        let got = match read(&response(content, stop.clone())) {
            Turn::Calls(calls) => {
                format!(
                    "calls {}",
                    calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(",")
                )
            }
            Turn::Final(text) => {
                assert_eq!(text, "Let me look first.");
                "final".into()
            }
            Turn::Empty => "empty".into(),
            Turn::CutOff(calls) if calls.is_empty() => "cut".into(),
            Turn::CutOff(calls) => format!("cut {}", calls[0].id),
            Turn::Refused(_) => "refused".into(),
        };
        assert_eq!(got, want, "{stop:?}");
    }
}

#[test]
fn a_cut_off_answer_gets_a_result_for_every_call_and_a_note() {
    let calls = vec![
        Call { id: "t1".into(), name: "file_write".into(), input: json!({}) },
        Call { id: "t2".into(), name: "file_read".into(), input: json!({}) },
    ];
    let reply = cut_off_reply(&calls, 4096);
    assert_eq!(reply.len(), 3);
    for (block, id) in reply.iter().zip(["t1", "t2"]) {
        match block {
            ContentBlock::ToolResult { tool_use_id, is_error, content } => {
                assert_eq!(tool_use_id, id);
                assert!(is_error);
                assert!(content.contains("it was not made"), "{content}");
            }
            other => panic!("expected a tool result, got {other:?}"),
        }
    }
    assert!(matches!(&reply[2], ContentBlock::Text { text } if text.contains("4096 tokens")));
}

#[test]
fn a_refusal_says_whose_and_why() {
    assert_eq!(refusal("executor", ""), "the executor model refused to answer");
    assert_eq!(refusal("planner", "no"), "the planner model refused to answer: no");
}
