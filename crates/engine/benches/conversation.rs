//! What journaling a model conversation costs (issue 16): a 50-turn loop-mode-sized session
//! (a 6 KB system prompt, 4 KB of tool definitions, a tool call and a 1.5 KB tool result per
//! turn) sent through `LoggedClient` into a journal on disk.
//!
//! Prints the journal bytes per call with the prefix deduplication (as pev stores it: each
//! message once, deflated where it pays) and without it (each request stored whole, as a naive
//! journal would), then measures the time one call spends in the log (hashing the request,
//! queueing the new blobs, the durable commit) against the bare client.
//!
//! `cargo bench -p pev-engine --features bench --bench conversation`

#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use pev_engine::agent::call_log::{CallLog, LoggedClient};
use pev_engine::model_scope;
use pev_providers::{
    BoxFuture, ChatRequest, ChatResponse, ContentBlock, Message, ModelClient, ProviderError, Role,
    StopReason, StreamSink, TokenUsage, ToolSpec,
};
use pev_store::{NewRun, Store};
use serde_json::json;

const TURNS: usize = 50;

/// Answers every request at once with one tool call.
struct Instant;

impl ModelClient for Instant {
    fn provider(&self) -> &str {
        "bench"
    }

    fn chat<'a>(
        &'a self,
        r: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        let turn = r.messages.len() / 2;
        Box::pin(async move {
            Ok(ChatResponse {
                id: format!("msg_{turn}"),
                model: "m".into(),
                content: vec![
                    ContentBlock::text(
                        format!("Reading part {turn} of the module to find the handler. ")
                            .repeat(4),
                    ),
                    ContentBlock::ToolUse {
                        id: format!("toolu_{turn}"),
                        name: "file_read".into(),
                        input: json!({"path": format!("src/part{turn}.rs")}),
                    },
                ],
                stop_reason: StopReason::ToolUse,
                usage: TokenUsage {
                    input_tokens: 1000,
                    output_tokens: 80,
                    ..TokenUsage::default()
                },
            })
        })
    }

    fn chat_stream<'a>(
        &'a self,
        r: &'a ChatRequest,
        _sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        self.chat(r)
    }
}

fn first_request() -> ChatRequest {
    let mut chat =
        ChatRequest::new("m", vec![Message::user("Fix the failing handler in src/. ".repeat(10))]);
    chat.system = Some("You are the executor of one step of a plan. Rules follow. ".repeat(100));
    chat.tools = (0..8)
        .map(|i| ToolSpec {
            name: format!("tool_{i}"),
            description: "Does one thing to the workspace, with care. ".repeat(8),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        })
        .collect();
    chat
}

fn tool_result(turn: usize) -> Message {
    let content = (0..30)
        .map(|l| format!("    let value_{l} = compute({turn}, {l}); // line {l}\n"))
        .collect();
    Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: format!("toolu_{turn}"),
            content,
            is_error: false,
        }],
    }
}

/// Runs one session through `client`; returns the bytes a naive journal would hold.
async fn session(client: &dyn ModelClient) -> usize {
    let mut chat = first_request();
    let mut naive = 0;
    for turn in 0..TURNS {
        let response = client.chat(&chat).await.unwrap();
        naive +=
            serde_json::to_vec(&chat).unwrap().len() + serde_json::to_vec(&response).unwrap().len();
        chat.messages.push(Message::assistant(response.content));
        chat.messages.push(tool_result(turn));
    }
    naive
}

fn journal(dir: &std::path::Path) -> (std::path::PathBuf, Arc<CallLog>) {
    let db = dir.join("pev.db");
    Store::open(&db)
        .unwrap()
        .create_run(&NewRun {
            run_id: "r".into(),
            goal: "g".into(),
            workspace: "/ws".into(),
            plan: json!({"goal": "g", "steps": []}),
            options: json!({}),
            created_at: "2026-01-01T00:00:00.000Z".into(),
        })
        .unwrap();
    let log = CallLog::new();
    log.attach(&db, "r").unwrap();
    (db, log)
}

fn bench(c: &mut Criterion) {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    // Bytes, once.
    let dir = tempfile::tempdir().unwrap();
    let (db, log) = journal(dir.path());
    let client = LoggedClient::new(Arc::new(Instant), "executor", Arc::clone(&log));
    let naive = rt.block_on(model_scope::scoped("s", 1, session(&client)));
    log.close();
    let conn = rusqlite_bytes(&db);
    eprintln!(
        "{TURNS}-turn session: {} bytes per call stored (blobs {} + records {}), {} bytes per call \
         without the dedup (each request and response whole, uncompressed): {:.1}x smaller",
        conn.0 / TURNS,
        conn.1,
        conn.2,
        naive / TURNS,
        naive as f64 / conn.0 as f64
    );

    let mut group = c.benchmark_group("model call");
    group.sample_size(20);
    group.bench_function("bare client, 50-turn session", |b| {
        b.iter(|| rt.block_on(session(&Instant)));
    });
    group.bench_function("journaled, 50-turn session", |b| {
        b.iter(|| {
            let dir = tempfile::tempdir().unwrap();
            let (_db, log) = journal(dir.path());
            let client = LoggedClient::new(Arc::new(Instant), "executor", Arc::clone(&log));
            rt.block_on(model_scope::scoped("s", 1, session(&client)));
            log.close();
        });
    });
    group.finish();
}

/// (total, blobs, call records) bytes of the journal's model-call data.
fn rusqlite_bytes(db: &std::path::Path) -> (usize, usize, usize) {
    let store = Store::open_existing(db).unwrap();
    let calls = store.model_calls("r").unwrap();
    let mut shas = std::collections::HashSet::new();
    let mut records = 0;
    for c in &calls {
        records += serde_json::to_vec(c).unwrap().len();
        let r = c.request.as_ref().unwrap();
        shas.extend(r.messages.iter().cloned());
        shas.extend(r.system.iter().cloned());
        shas.extend(r.tools.iter().cloned());
        shas.extend(c.response_sha256.iter().cloned());
    }
    let blobs = shas.iter().map(|s| store.stored_bytes(s).unwrap()).sum::<usize>();
    (blobs + records, blobs, records)
}

criterion_group!(benches, bench);
criterion_main!(benches);
