use std::sync::{Arc, Mutex};

use pev_providers::script::{ScriptTurn, ScriptedClient};
use pev_providers::{
    BoxFuture, ChatRequest, ChatResponse, ContentBlock, Message, ModelClient, ProviderError,
    StreamSink, ToolSpec,
};
use serde_json::json;

use super::*;
use crate::agent::call_log::{CallLog, LoggedClient};
use crate::model_scope;

/// Keeps every request it is sent, answered by a script.
struct Recording {
    inner: ScriptedClient,
    sent: Mutex<Vec<ChatRequest>>,
}

impl ModelClient for Recording {
    fn provider(&self) -> &str {
        "recording"
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        self.sent.lock().unwrap().push(request.clone());
        self.inner.chat(request)
    }

    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        _sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        self.chat(request)
    }
}

#[tokio::test]
async fn a_conversation_is_stored_once_and_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (db, store) = crate::agent::test_clients::journal_with_run(dir.path());
    let turns = 12;
    let script: Vec<ScriptTurn> = (0..turns)
        .map(|i| {
            ScriptTurn::blocks(vec![ContentBlock::ToolUse {
                id: format!("toolu_{i}"),
                name: "file_read".into(),
                input: json!({"path": format!("f{i}.txt")}),
            }])
        })
        .collect();
    let inner = Arc::new(Recording {
        inner: ScriptedClient::from_turns("s", script),
        sent: Mutex::new(Vec::new()),
    });
    let log = CallLog::new();
    log.attach(&db, "r1").unwrap();
    let client = LoggedClient::new(inner.clone(), "executor", Arc::clone(&log));
    let mut chat = ChatRequest::new("m", vec![Message::user("do the thing ".repeat(50))]);
    chat.system = Some("You are careful. ".repeat(100));
    chat.tools = vec![ToolSpec {
        name: "file_read".into(),
        description: "Reads a file".into(),
        input_schema: json!({"type": "object"}),
    }];
    model_scope::scoped("a", 1, async {
        for i in 0..turns {
            let response = client.chat(&chat).await.unwrap();
            chat.messages.push(Message::assistant(response.content));
            chat.messages.push(Message {
                role: pev_providers::Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: format!("toolu_{i}"),
                    content: format!("contents of f{i}.txt\n").repeat(20),
                    is_error: false,
                }],
            });
        }
    })
    .await;
    log.close();

    let calls = store.model_calls("r1").unwrap();
    assert_eq!(calls.len(), turns);
    // Each call after the first names the one before and lists only its two new messages.
    for (i, call) in calls.iter().enumerate().skip(1) {
        let r = call.request.as_ref().unwrap();
        assert_eq!(r.prior, Some(calls[i - 1].seq), "call {i}");
        assert_eq!((r.prior_messages, r.messages.len()), (2 * i - 1, 2), "call {i}");
        assert_eq!(r.system, calls[0].request.as_ref().unwrap().system, "one system prompt");
    }
    let exchanges = exchanges(&store, &calls).unwrap();
    let sent = inner.sent.lock().unwrap();
    for (x, sent) in exchanges.iter().zip(sent.iter()) {
        assert_eq!(x.request.as_ref(), Some(sent), "call {} reads back as sent", x.call.seq);
        assert!(x.response.is_some());
    }
    assert_eq!(exchanges[3].prior_messages, 5);
}
