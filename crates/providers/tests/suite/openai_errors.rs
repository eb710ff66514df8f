//! The OpenAI-compatible client's failures against the mock server: error statuses and the
//! error bodies of hosted OpenAI, vLLM, llama.cpp and proxies, malformed responses, timeouts,
//! and configuration from variables (a key is never shown).

use std::time::{Duration, Instant};

use pev_providers::openai::{DEFAULT_BASE_URL, OpenAiClient, OpenAiConfig};
use pev_providers::{ModelClient, ProviderError};
use serde_json::json;

use super::mock::{MockServer, Reply};
use super::openai::{KEY, client, fixture, short_timeouts, simple_request, timeouts};

async fn error_for(reply: Reply) -> ProviderError {
    let server = MockServer::start(vec![reply]).await;
    client(&server, Some(KEY), timeouts()).chat(&simple_request()).await.unwrap_err()
}

#[tokio::test]
async fn invalid_tool_arguments_are_malformed_and_name_the_tool() {
    let body = json!({
        "id": "x", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_9", "type": "function",
                            "function": {"name": "write_file", "arguments": "{\"path\": "}}]
        }}]
    });
    let err = error_for(Reply::json(200, &body.to_string())).await;
    match err {
        ProviderError::Malformed { provider, message } => {
            assert_eq!(provider, "openai");
            assert!(message.contains("write_file"), "{message}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_body_that_is_not_json_is_malformed() {
    let err = error_for(Reply::json(200, "{\"id\": \"chatcmpl-1\", \"choices\": [")).await;
    assert!(matches!(err, ProviderError::Malformed { .. }), "{err:?}");
    let err =
        error_for(Reply::json(200, r#"{"id": "x", "object": "chat.completion", "choices": []}"#))
            .await;
    match err {
        ProviderError::Malformed { message, .. } => assert!(message.contains("no choices")),
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[tokio::test]
async fn rate_limit_with_retry_after() {
    let reply = Reply::json(429, fixture!("error_rate_limit.json")).with_header("retry-after", "7");
    match error_for(reply).await {
        ProviderError::RateLimited { provider, retry_after, message } => {
            assert_eq!(provider, "openai");
            assert_eq!(retry_after, Some(Duration::from_secs(7)));
            assert!(message.starts_with("Rate limit reached for requests"), "{message}");
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
    // OpenAI's millisecond header is honoured when the plain one is absent.
    let reply =
        Reply::json(429, fixture!("error_rate_limit.json")).with_header("retry-after-ms", "1500");
    assert_eq!(error_for(reply).await.retry_after(), Some(Duration::from_millis(1500)));
}

#[tokio::test]
async fn a_huge_retry_after_ms_is_capped_never_a_panic() {
    let hour = Some(Duration::from_secs(3600));
    for (value, want) in [
        ("1e300", hour),
        ("1e18", hour),
        ("3600001", hour),
        ("250", Some(Duration::from_millis(250))),
        ("1e400", None),
        ("NaN", None),
        ("-1", None),
    ] {
        let reply = Reply::json(429, fixture!("error_rate_limit.json"))
            .with_header("retry-after-ms", value);
        assert_eq!(error_for(reply).await.retry_after(), want, "retry-after-ms: {value}");
        let reply = Reply::json(503, fixture!("error_overloaded.json"))
            .with_header("retry-after-ms", value);
        assert_eq!(error_for(reply).await.retry_after(), want, "503, retry-after-ms: {value}");
    }
    let reply =
        Reply::json(429, fixture!("error_rate_limit.json")).with_header("retry-after", "1e300");
    assert_eq!(error_for(reply).await.retry_after(), hour);
}

#[tokio::test]
async fn a_retry_after_past_the_retry_budget_ends_the_call_at_once() {
    use std::sync::Arc;

    use pev_providers::retry::{RetryPolicy, Retrying};

    let server = MockServer::start(vec![
        Reply::json(429, fixture!("error_rate_limit.json")).with_header("retry-after", "1e300"),
        Reply::json(200, fixture!("text.json")),
    ])
    .await;
    let inner: Arc<dyn ModelClient> = Arc::new(client(&server, Some(KEY), timeouts()));
    let retrying = Retrying::new(inner, RetryPolicy::default());
    let started = Instant::now();
    let err = retrying.chat(&simple_request()).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(2), "gave up after {elapsed:?}");
    match err {
        ProviderError::RateLimited { provider, retry_after, .. } => {
            assert_eq!(provider, "openai");
            assert_eq!(retry_after, Some(Duration::from_secs(3600)));
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1, "no second request");
}

#[tokio::test]
async fn status_errors_map_to_their_kinds() {
    match error_for(Reply::json(500, fixture!("error_server.json"))).await {
        ProviderError::Server { status: 500, message, .. } => {
            assert_eq!(message, "The server had an error while processing your request.");
        }
        other => panic!("expected Server, got {other:?}"),
    }
    match error_for(Reply::json(503, fixture!("error_overloaded.json"))).await {
        ProviderError::Overloaded { message, retry_after: None, .. } => {
            assert!(message.contains("currently overloaded"), "{message}");
        }
        other => panic!("expected Overloaded, got {other:?}"),
    }
    match error_for(Reply::json(401, fixture!("error_auth.json"))).await {
        ProviderError::Authentication { status: 401, message, .. } => {
            assert!(message.starts_with("Incorrect API key provided"), "{message}");
        }
        other => panic!("expected Authentication, got {other:?}"),
    }
    match error_for(Reply::json(400, fixture!("error_bad_request.json"))).await {
        ProviderError::BadRequest { status: 400, message, .. } => {
            assert!(message.contains("tool_choice"), "{message}");
        }
        other => panic!("expected BadRequest, got {other:?}"),
    }
}

#[tokio::test]
async fn context_length_errors_are_context_too_long() {
    match error_for(Reply::json(400, fixture!("error_context_length.json"))).await {
        ProviderError::ContextTooLong { message, .. } => {
            assert!(message.contains("maximum context length is 128000"), "{message}");
        }
        other => panic!("expected ContextTooLong, got {other:?}"),
    }
    // llama.cpp words it differently; its error type says it too.
    match error_for(Reply::json(400, fixture!("llamacpp_context.json"))).await {
        ProviderError::ContextTooLong { message, .. } => {
            assert!(message.contains("available context size"), "{message}");
        }
        other => panic!("expected ContextTooLong, got {other:?}"),
    }
}

#[tokio::test]
async fn error_messages_come_from_every_known_body_shape() {
    // `{"error": "text"}`, as some compatible servers send it.
    match error_for(Reply::json(404, fixture!("error_string.json"))).await {
        ProviderError::BadRequest { status: 404, message, .. } => {
            assert_eq!(message, "Model 'no-such-model' is not loaded");
        }
        other => panic!("expected BadRequest, got {other:?}"),
    }
    // vLLM's `{"object": "error", "message": ...}`.
    let vllm = r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#;
    match error_for(Reply::json(404, vllm)).await {
        ProviderError::BadRequest { message, .. } => {
            assert_eq!(message, "The model `x` does not exist.");
        }
        other => panic!("expected BadRequest, got {other:?}"),
    }
    // Not JSON at all: an excerpt of the body.
    let proxy = Reply::Full {
        status: 502,
        headers: vec![("content-type".into(), "text/plain".into())],
        body: "upstream connect error or disconnect/reset before headers".into(),
    };
    match error_for(proxy).await {
        ProviderError::Server { status: 502, message, .. } => {
            assert!(message.starts_with("upstream connect error"), "{message}");
        }
        other => panic!("expected Server, got {other:?}"),
    }
    // An error object in a 200 body is still an error.
    let in_200 = r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#;
    assert!(matches!(error_for(Reply::json(200, in_200)).await, ProviderError::Overloaded { .. }));
}

#[tokio::test]
async fn a_key_echoed_by_the_server_is_redacted() {
    let body = json!({"error": {"message": format!("Incorrect API key provided: {KEY}."),
                                "type": "invalid_request_error", "code": "invalid_api_key"}});
    let err = error_for(Reply::json(401, &body.to_string())).await;
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
}

#[tokio::test]
async fn a_hanging_server_times_out() {
    let server = MockServer::start(vec![Reply::Hang]).await;
    let started = Instant::now();
    let err = client(&server, None, short_timeouts()).chat(&simple_request()).await.unwrap_err();
    match err {
        ProviderError::Timeout { after, what, .. } => {
            assert_eq!(after, Duration::from_millis(300));
            assert_eq!(what, "request");
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[tokio::test]
async fn debug_output_never_shows_the_key() {
    let config = OpenAiConfig {
        api_key: Some(KEY.into()),
        base_url: "http://127.0.0.1:9/v1".into(),
        timeouts: timeouts(),
    };
    let shown = format!("{config:?}");
    assert!(!shown.contains(KEY) && shown.contains("<redacted>"), "{shown}");
    let client = OpenAiClient::new(config).unwrap();
    let shown = format!("{client:?}");
    assert!(!shown.contains(KEY) && shown.contains("<redacted>"), "{shown}");
    assert!(shown.contains("http://127.0.0.1:9/v1/chat/completions"), "{shown}");
}

#[tokio::test]
async fn from_vars_requires_a_key_only_for_the_hosted_api() {
    let none = |_: &str| None;
    match OpenAiClient::from_vars(&none, timeouts()) {
        Err(ProviderError::Config(message)) => {
            assert!(message.contains("OPENAI_API_KEY"), "{message}");
            assert!(message.contains(DEFAULT_BASE_URL), "{message}");
        }
        other => panic!("expected a Config error, got {other:?}"),
    }
    let hosted = |k: &str| (k == "OPENAI_BASE_URL").then(|| format!("{DEFAULT_BASE_URL}/"));
    assert!(matches!(OpenAiClient::from_vars(&hosted, timeouts()), Err(ProviderError::Config(_))));

    let ollama = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://localhost:11434/v1".to_owned());
    let client = OpenAiClient::from_vars(&ollama, timeouts()).unwrap();
    assert!(format!("{client:?}").contains("http://localhost:11434/v1/chat/completions"));

    let bad = |k: &str| (k == "OPENAI_BASE_URL").then(|| "localhost:11434/v1".to_owned());
    assert!(matches!(OpenAiClient::from_vars(&bad, timeouts()), Err(ProviderError::Config(_))));
}

#[tokio::test]
async fn from_vars_sends_the_key_it_read_and_none_when_unset() {
    let server = MockServer::start(vec![
        Reply::json(200, fixture!("ollama_text.json")),
        Reply::json(200, fixture!("ollama_text.json")),
    ])
    .await;
    let base = format!("{}/v1/", server.base_url);
    let keyless = |k: &str| (k == "OPENAI_BASE_URL").then(|| base.clone());
    OpenAiClient::from_vars(&keyless, timeouts()).unwrap().chat(&simple_request()).await.unwrap();
    let keyed = |k: &str| match k {
        "OPENAI_BASE_URL" => Some(base.clone()),
        "OPENAI_API_KEY" => Some(KEY.to_owned()),
        _ => None,
    };
    OpenAiClient::from_vars(&keyed, timeouts()).unwrap().chat(&simple_request()).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), None);
    assert_eq!(requests[1].header("authorization"), Some(format!("Bearer {KEY}").as_str()));
}
