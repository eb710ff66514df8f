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
