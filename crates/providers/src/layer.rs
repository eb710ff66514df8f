//! One way to stack wrappers around a model client (tower's `Layer`, without tower): a wrapper
//! implements [`Layer`], saying which client it wraps and what one turn through it does, and
//! [`layered!`](crate::layered) writes its `ModelClient` once: `provider` and `server` are the
//! wrapped client's, `chat` and `chat_stream` are one [`Layer::turn`] (without and with a
//! stream's sink). Retrying, the budget, the call log and resuming from the journal are layers;
//! each writes only what it adds.

use crate::{BoxFuture, ChatRequest, ChatResponse, ModelClient, ProviderError, StreamSink};

/// A wrapper around one model client.
pub trait Layer: Send + Sync {
    /// The client this layer wraps.
    fn inner(&self) -> &dyn ModelClient;

    /// One turn through this layer; `sink` is a streamed turn's (see
    /// [`ModelClient::chat_stream`]), `None` for a whole one.
    fn turn<'a>(
        &'a self,
        request: &'a ChatRequest,
        sink: Option<StreamSink<'a>>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>>;
}

/// `layered!(Type)`: `ModelClient` for a [`Layer`] `Type`.
#[macro_export]
macro_rules! layered {
    ($layer:ty) => {
        impl $crate::ModelClient for $layer {
            fn provider(&self) -> &str {
                $crate::layer::Layer::inner(self).provider()
            }

            fn server(&self) -> Option<String> {
                $crate::layer::Layer::inner(self).server()
            }

            fn chat<'a>(
                &'a self,
                request: &'a $crate::ChatRequest,
            ) -> $crate::BoxFuture<'a, Result<$crate::ChatResponse, $crate::ProviderError>> {
                $crate::layer::Layer::turn(self, request, None)
            }

            fn chat_stream<'a>(
                &'a self,
                request: &'a $crate::ChatRequest,
                sink: $crate::StreamSink<'a>,
            ) -> $crate::BoxFuture<'a, Result<$crate::ChatResponse, $crate::ProviderError>> {
                $crate::layer::Layer::turn(self, request, Some(sink))
            }
        }
    };
}

/// A layer that only forwards: what `layered!` writes, checked against the client it wraps.
#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::script::ScriptedClient;

    struct Pass(Arc<dyn ModelClient>);

    impl Layer for Pass {
        fn inner(&self) -> &dyn ModelClient {
            self.0.as_ref()
        }

        fn turn<'a>(
            &'a self,
            request: &'a ChatRequest,
            sink: Option<StreamSink<'a>>,
        ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
            match sink {
                Some(sink) => self.0.chat_stream(request, sink),
                None => self.0.chat(request),
            }
        }
    }

    crate::layered!(Pass);

    #[test]
    fn a_layer_is_the_client_it_wraps_for_provider_and_server() {
        let dir = std::env::temp_dir().join(format!("pev-layer-{}.json", std::process::id()));
        std::fs::write(&dir, r#"{"turns": []}"#).expect("script");
        let inner: Arc<dyn ModelClient> = Arc::new(ScriptedClient::load(&dir).expect("loads"));
        let layered = Pass(Arc::clone(&inner));
        assert_eq!(layered.provider(), inner.provider());
        assert_eq!(layered.server(), inner.server());
        let _ = std::fs::remove_file(&dir);
    }
}
