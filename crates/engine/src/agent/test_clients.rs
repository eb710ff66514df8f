//! Fake model clients shared by the agent modules' unit tests.

use pev_providers::{BoxFuture, ChatRequest, ChatResponse, ModelClient, ProviderError, StreamSink};

/// What [`Broke`] says.
pub(crate) const BROKE_MESSAGE: &str = "needs up to $0.20, $0.05 left";

/// A client whose budget never affords a call: every request is refused before it is sent.
pub(crate) struct Broke;

impl ModelClient for Broke {
    fn provider(&self) -> &str {
        "broke"
    }

    fn chat<'a>(
        &'a self,
        _request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async { Err(ProviderError::BudgetExhausted(BROKE_MESSAGE.to_owned())) })
    }

    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        _sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        self.chat(request)
    }
}

/// A journal in `dir` holding one run, `r1`, with an empty plan: where a call log can write.
pub(crate) fn journal_with_run(dir: &std::path::Path) -> (std::path::PathBuf, pev_store::Store) {
    let db = dir.join("pev.db");
    let store = pev_store::Store::open(&db).unwrap();
    store
        .create_run(&pev_store::NewRun {
            run_id: "r1".into(),
            goal: "g".into(),
            workspace: "/ws".into(),
            plan: serde_json::json!({"goal": "g", "steps": []}),
            options: serde_json::json!({}),
            created_at: "2026-01-01T00:00:00.000Z".into(),
        })
        .unwrap();
    (db, store)
}

/// A model that never answers.
pub(crate) struct Hang;

impl ModelClient for Hang {
    fn provider(&self) -> &str {
        "hang"
    }

    fn chat<'a>(
        &'a self,
        _request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(std::future::pending())
    }

    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        _sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        self.chat(request)
    }
}
