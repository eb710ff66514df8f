//! `http.request`: one HTTP exchange with a timeout and a body cap, to loopback or to a host the
//! policy allows.
//!
//! The client is reqwest over rustls with the *ring* crypto provider, handed to reqwest as a
//! ready `ClientConfig` (reqwest's own default provider, aws-lc, needs cmake to build). Redirects
//! are not followed: a redirect to another host would bypass the host check, so the 3xx and its
//! `location` header go back to the caller, who can request the new URL (and be checked again).
//! Proxies from the environment are ignored for the same reason.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use pev_protocol::tool::Effect;
use reqwest::header::{HeaderName, HeaderValue};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{output, parse_args, schema_for, timeout_from_secs};
use crate::net::host_allowed;
use crate::text::decode;
use crate::{BoxFuture, Tool, ToolContext, ToolError};

/// Arguments of `http.request`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpRequestArgs {
    /// GET, POST, PUT, PATCH, DELETE, HEAD, ...
    pub method: String,
    /// An http:// or https:// URL on loopback or an allowed host.
    pub url: String,
    #[serde(default)]
    pub headers: Option<BTreeMap<String, String>>,
    /// The request body, sent as is.
    #[serde(default)]
    pub body: Option<String>,
    /// Seconds for the whole exchange, body included.
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

/// What `http.request` returns.
#[derive(Debug, Clone, Serialize)]
pub struct HttpRequestOutput {
    pub status: u16,
    /// Response headers, lower-case names; repeated headers joined with `, `.
    pub headers: BTreeMap<String, String>,
    pub body: String,
    /// The body was cut at the output cap.
    pub body_truncated: bool,
    pub duration_ms: u64,
}

/// The `http.request` tool. Holds one client, built on first use, so that connections and the
/// TLS setup are shared between calls.
#[derive(Debug, Default)]
pub struct HttpRequest {
    client: OnceLock<Result<reqwest::Client, String>>,
}

impl Tool for HttpRequest {
    fn name(&self) -> &'static str {
        "http.request"
    }

    fn effect(&self) -> Effect {
        Effect::Network
    }

    fn description(&self) -> &'static str {
        "Send one HTTP request to localhost or an allowed host and return the status, headers \
         and body (capped). Redirects are returned, not followed."
    }

    fn parameters_schema(&self) -> Value {
        schema_for::<HttpRequestArgs>()
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let args: HttpRequestArgs = parse_args(self.name(), args)?;
            let out = self.request(ctx, args).await?;
            output(&out)
        })
    }
}

impl HttpRequest {
    fn client(&self) -> Result<&reqwest::Client, ToolError> {
        self.client
            .get_or_init(build_client)
            .as_ref()
            .map_err(|e| ToolError::Fatal(format!("http.request: cannot build the client: {e}")))
    }

    async fn request(
        &self,
        ctx: &ToolContext,
        args: HttpRequestArgs,
    ) -> Result<HttpRequestOutput, ToolError> {
        let respond = |msg: String| ToolError::RespondToModel(format!("http.request: {msg}"));
        let url = reqwest::Url::parse(&args.url)
            .map_err(|e| respond(format!("invalid url `{}`: {e}", args.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(respond(format!(
                "scheme `{}` is not allowed; use http:// or https://",
                url.scheme()
            )));
        }
        let host = url.host_str().unwrap_or_default();
        if host.is_empty() {
            return Err(respond(format!("url `{url}` has no host")));
        }
        if !host_allowed(host, &ctx.policy.allow_hosts) {
            return Err(respond(format!(
                "host `{host}` is not allowed: only loopback and the policy's allow_hosts \
                 may be reached"
            )));
        }
        let method = reqwest::Method::from_bytes(args.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| respond(format!("invalid method `{}`", args.method)))?;
        let timeout = timeout_from_secs(self.name(), args.timeout_s, ctx.policy.default_timeout)?;

        let mut request = self.client()?.request(method.clone(), url.clone());
        for (name, value) in args.headers.unwrap_or_default() {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| respond(format!("invalid header name `{name}`")))?;
            let value = HeaderValue::from_str(&value)
                .map_err(|_| respond(format!("invalid value for header `{name}`")))?;
            request = request.header(header, value);
        }
        if let Some(body) = args.body {
            request = request.body(body);
        }

        let cap = ctx.policy.max_output_bytes;
        let started = Instant::now();
        let exchange = async {
            let mut response = request.send().await?;
            let status = response.status().as_u16();
            let mut headers: BTreeMap<String, String> = BTreeMap::new();
            for (name, value) in response.headers() {
                let value = String::from_utf8_lossy(value.as_bytes());
                headers
                    .entry(name.as_str().to_owned())
                    .and_modify(|v| {
                        v.push_str(", ");
                        v.push_str(&value);
                    })
                    .or_insert_with(|| value.into_owned());
            }
            let mut body = Vec::new();
            let mut truncated = false;
            while let Some(chunk) = response.chunk().await? {
                let room = cap.saturating_sub(body.len());
                let take = chunk.len().min(room);
                body.extend_from_slice(chunk.get(..take).unwrap_or_default());
                if take < chunk.len() {
                    // Stop reading: dropping the response closes the connection.
                    truncated = true;
                    break;
                }
            }
            Ok::<_, reqwest::Error>((status, headers, body, truncated))
        };
        let (status, headers, body, body_truncated) =
            match tokio::time::timeout(timeout, exchange).await {
                Ok(Ok(parts)) => parts,
                Ok(Err(e)) => return Err(respond(format!("{method} {url} failed: {}", chain(&e)))),
                Err(_) => {
                    return Err(respond(format!(
                        "{method} {url} timed out after {:.3} s",
                        timeout.as_secs_f64()
                    )));
                }
            };
        Ok(HttpRequestOutput {
            status,
            headers,
            body: decode(body, body_truncated).text,
            body_truncated,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        })
    }
}

/// A reqwest client on rustls with ring and the platform's trust store. If the trust store
/// cannot be set up, TLS falls back to an empty root store (every https request then fails
/// verification, loudly) rather than plain http failing too.
///
/// Public so that the verifier's `http_status` reaches hosts exactly the way `http.request` does
/// (reqwest is built without a default TLS provider: a client built any other way panics).
pub fn build_client() -> Result<reqwest::Client, String> {
    use rustls_platform_verifier::BuilderVerifierExt;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let tls = match builder.clone().with_platform_verifier() {
        Ok(b) => b.with_no_client_auth(),
        Err(_) => {
            builder.with_root_certificates(rustls::RootCertStore::empty()).with_no_client_auth()
        }
    };
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        // A host that does not take the connection in 10 s is not there for an interactive tool;
        // the rest of a request has its own limits.
        .connect_timeout(std::time::Duration::from_secs(10))
        .user_agent(concat!("pev/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| chain(&e))
}

/// An error and its sources, `: `-separated: reqwest's own message rarely says why.
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = e.source();
    }
    out
}
