//! The client for Anthropic's Messages API (`POST {base_url}/v1/messages`): whole and streamed
//! turns, tool use, prompt caching, typed errors.
//!
//! The wire format lives in `anthropic_wire.rs` and the assembly of a streamed response in
//! `anthropic_stream.rs`; this file holds the configuration, the HTTP exchange and its timeouts.
//! The key goes only into the `x-api-key` header (marked sensitive); `Debug` redacts it and no
//! error quotes it.

use std::fmt;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};

use crate::error::ProviderError;
use crate::http::{self, Timeouts};
use crate::types::{ChatRequest, ChatResponse};
use crate::{BoxFuture, ModelClient, StreamSink};

#[path = "anthropic_stream.rs"]
mod stream;
#[path = "anthropic_wire.rs"]
mod wire;

/// The JSON body this client would send for `request` (not streamed), for checking it against
/// the API's rules ([`crate::rules`]) without a server.
pub(crate) fn request_json(request: &ChatRequest) -> Result<String, ProviderError> {
    wire::request_body(request, false)
}

/// The provider's name in errors and messages.
const PROVIDER: &str = "anthropic";

/// The variable that holds the key.
pub const API_KEY_VAR: &str = "ANTHROPIC_API_KEY";
/// The variable that overrides the endpoint (a proxy, a gateway, a test server).
pub const BASE_URL_VAR: &str = "ANTHROPIC_BASE_URL";

/// How to reach the API.
#[derive(Clone, PartialEq, Eq)]
pub struct AnthropicConfig {
    pub api_key: String,
    /// Without the `/v1/messages` path; default [`AnthropicConfig::DEFAULT_BASE_URL`].
    pub base_url: String,
    /// The `anthropic-version` header; default [`AnthropicConfig::DEFAULT_VERSION`].
    pub version: String,
    pub timeouts: Timeouts,
}

impl AnthropicConfig {
    pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
    pub const DEFAULT_VERSION: &str = "2023-06-01";

    /// The public endpoint, the default version and default timeouts.
    pub fn new(api_key: impl Into<String>) -> Self {
        Self {
            api_key: api_key.into(),
            base_url: Self::DEFAULT_BASE_URL.to_owned(),
            version: Self::DEFAULT_VERSION.to_owned(),
            timeouts: Timeouts::default(),
        }
    }
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("api_key", &"<redacted>")
            .field("base_url", &self.base_url)
            .field("version", &self.version)
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

/// A Messages API client.
pub struct AnthropicClient {
    http: reqwest::Client,
    base_url: String,
    /// `{base_url}/v1/messages`.
    url: String,
    headers: HeaderMap,
    version: String,
    timeouts: Timeouts,
}

impl fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("api_key", &"<redacted>")
            .field("base_url", &self.base_url)
            .field("version", &self.version)
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

impl AnthropicClient {
    pub fn new(config: AnthropicConfig) -> Result<Self, ProviderError> {
        let AnthropicConfig { api_key, base_url, version, timeouts } = config;
        if api_key.trim().is_empty() {
            return Err(ProviderError::Config("anthropic: the API key is empty".to_owned()));
        }
        let base_url = base_url.trim().trim_end_matches('/').to_owned();
        match reqwest::Url::parse(&base_url) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => {}
            _ => {
                return Err(ProviderError::Config(format!(
                    "anthropic: the base URL {base_url:?} is not an http(s) URL"
                )));
            }
        }
        // The key is never quoted: the error says only what is wrong with it.
        let mut key = HeaderValue::from_str(api_key.trim()).map_err(|_| {
            ProviderError::Config(
                "anthropic: the API key holds characters an HTTP header cannot carry".to_owned(),
            )
        })?;
        key.set_sensitive(true);
        let version_header = HeaderValue::from_str(&version).map_err(|_| {
            ProviderError::Config(format!("anthropic: bad anthropic-version {version:?}"))
        })?;
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", key);
        headers.insert("anthropic-version", version_header);
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(Self {
            http: http::client(PROVIDER)?,
            url: format!("{base_url}/v1/messages"),
            base_url,
            headers,
            version,
            timeouts,
        })
    }

    /// Reads [`API_KEY_VAR`] (required) and [`BASE_URL_VAR`] (optional) through `get`.
    pub fn from_vars(
        get: &dyn Fn(&str) -> Option<String>,
        timeouts: Timeouts,
    ) -> Result<Self, ProviderError> {
        let set = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let Some(api_key) = set(API_KEY_VAR) else {
            return Err(ProviderError::Config(format!(
                "anthropic: {API_KEY_VAR} is not set (the key from console.anthropic.com)"
            )));
        };
        let mut config = AnthropicConfig::new(api_key);
        if let Some(base_url) = set(BASE_URL_VAR) {
            config.base_url = base_url;
        }
        config.timeouts = timeouts;
        Self::new(config)
    }

    /// [`AnthropicClient::from_vars`] over the process environment.
    pub fn from_env(timeouts: Timeouts) -> Result<Self, ProviderError> {
        Self::from_vars(&|k| std::env::var(k).ok(), timeouts)
    }

    fn post(&self, body: String) -> reqwest::RequestBuilder {
        self.http.post(&self.url).headers(self.headers.clone()).body(body)
    }

    fn timeout(&self, what: &'static str) -> ProviderError {
        ProviderError::Timeout { provider: PROVIDER.to_owned(), after: self.timeouts.request, what }
    }

    /// Sends `body` and waits for the response head, within the request timeout.
    async fn send(&self, body: String) -> Result<reqwest::Response, ProviderError> {
        let limit = self.timeouts.request;
        match tokio::time::timeout(limit, self.post(body).send()).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(http::send_error(PROVIDER, &e, limit)),
            Err(_) => Err(self.timeout("request")),
        }
    }

    /// The typed error of a non-success response, from its body.
    async fn failure(&self, response: reqwest::Response, limit: Duration) -> ProviderError {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        match http::read_body(PROVIDER, response, limit).await {
            Ok(body) => wire::status_error(status, &headers, &body),
            // The status alone still says what kind of failure it was.
            Err(_) => http::status_error(PROVIDER, status, &headers, "(no body)".to_owned()),
        }
    }

    async fn chat_whole(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let body = wire::request_body(request, false)?;
        let limit = self.timeouts.request;
        // One deadline for the whole exchange: head and body.
        let call = async {
            let response = self.send(body).await?;
            if !response.status().is_success() {
                return Err(self.failure(response, limit).await);
            }
            let text = http::read_body(PROVIDER, response, limit).await?;
            wire::parse_response(&text)
        };
        tokio::time::timeout(limit, call).await.unwrap_or_else(|_| Err(self.timeout("request")))
    }

    async fn chat_streamed(
        &self,
        request: &ChatRequest,
        sink: StreamSink<'_>,
    ) -> Result<ChatResponse, ProviderError> {
        let body = wire::request_body(request, true)?;
        let response = self.send(body).await?;
        if !response.status().is_success() {
            return Err(self.failure(response, self.timeouts.request).await);
        }
        let mut assembler = stream::StreamAssembler::new(sink);
        let read = http::read_sse(PROVIDER, response, self.timeouts.idle, |event| {
            assembler.on_event(&event)
        })
        .await;
        match read {
            // After message_stop the response is whole; what the connection does next (linger,
            // break) does not matter.
            Err(_) if assembler.is_done() => {}
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        assembler.finish()
    }
}

impl ModelClient for AnthropicClient {
    fn provider(&self) -> &str {
        PROVIDER
    }

    fn server(&self) -> Option<String> {
        crate::server_of(&self.base_url)
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(self.chat_whole(request))
    }

    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(self.chat_streamed(request, sink))
    }
}
