//! The network assertions: `socket_open` (a TCP connect succeeds) and `http_status` (a GET
//! returns the expected status).
//!
//! Both reach only loopback and the hosts the policy's `allow_hosts` names, decided by the same
//! `pev_tools::net::host_allowed` as `http.request`, on the host as written (never on what it
//! resolves to). Both give up after [`NET_TIMEOUT`]: an assertion is a quick probe, and a
//! server that is not answering within seconds is not "up". `http_status` uses the client of
//! `http.request`, so redirects are not followed: a 301 is seen as 301, and the detail says
//! where it points.

use pev_tools::error_chain as chain;
use std::time::{Duration, Instant};

use pev_tools::ToolContext;
use pev_tools::net::host_allowed;
use tokio::net::TcpStream;

use crate::assert::Verdict;
use crate::text::{CLIP, clip};

/// How long a connect (and, for `http_status`, the whole exchange up to the status line) may
/// take.
pub(crate) const NET_TIMEOUT: Duration = Duration::from_secs(5);

fn not_allowed(host: &str) -> Verdict {
    Verdict::fail(format!(
        "host '{host}' not allowed by policy: only loopback and the policy's allow_hosts may be \
         reached"
    ))
}

pub(crate) async fn socket_open(ctx: &ToolContext, host: &str, port: u16) -> Verdict {
    if !host_allowed(host, &ctx.policy.allow_hosts) {
        return not_allowed(host);
    }
    let bare = host.trim();
    let bare = bare.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(bare);
    let shown =
        if bare.contains(':') { format!("[{bare}]:{port}") } else { format!("{bare}:{port}") };
    let started = Instant::now();
    match tokio::time::timeout(NET_TIMEOUT, TcpStream::connect((bare, port))).await {
        Ok(Ok(stream)) => {
            let peer = stream.peer_addr().map(|a| format!(" ({a})")).unwrap_or_default();
            Verdict::pass(format!(
                "connected to {shown}{peer} in {} ms",
                started.elapsed().as_millis()
            ))
        }
        Ok(Err(e)) => Verdict::fail(format!("cannot connect to {shown}: {e}")),
        Err(_) => Verdict::fail(format!(
            "connecting to {shown} timed out after {} s",
            NET_TIMEOUT.as_secs()
        )),
    }
}

pub(crate) async fn http_status(ctx: &ToolContext, url: &str, want: u16) -> Verdict {
    let shown = clip(url, CLIP);
    let parsed = match reqwest::Url::parse(url) {
        Ok(u) => u,
        Err(e) => return Verdict::fail(format!("invalid url '{shown}': {e}")),
    };
    if !matches!(parsed.scheme(), "http" | "https") {
        return Verdict::fail(format!(
            "url '{shown}' has scheme '{}'; only http and https can be checked",
            parsed.scheme()
        ));
    }
    let host = parsed.host_str().unwrap_or_default();
    if host.is_empty() {
        return Verdict::fail(format!("url '{shown}' has no host"));
    }
    if !host_allowed(host, &ctx.policy.allow_hosts) {
        return not_allowed(host);
    }
    // A client per check: checks are rare, and a client shared across tokio runtimes (one per
    // test, or per engine) can hand out pooled connections whose runtime is gone.
    let client = match pev_tools::build_client() {
        Ok(c) => c,
        Err(e) => return Verdict::fail(format!("cannot build the HTTP client: {e}")),
    };
    let started = Instant::now();
    let response = match tokio::time::timeout(NET_TIMEOUT, client.get(parsed).send()).await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => return Verdict::fail(format!("GET {shown} failed: {}", chain(&e))),
        Err(_) => {
            return Verdict::fail(format!(
                "GET {shown} timed out after {} s",
                NET_TIMEOUT.as_secs()
            ));
        }
    };
    let seen = response.status().as_u16();
    let elapsed = started.elapsed().as_millis();
    let redirect = response
        .headers()
        .get(reqwest::header::LOCATION)
        .filter(|_| response.status().is_redirection())
        .map(|l| {
            format!(
                " (a redirect to '{}', not followed)",
                clip(&String::from_utf8_lossy(l.as_bytes()), CLIP)
            )
        })
        .unwrap_or_default();
    if seen == want {
        Verdict::pass(format!("GET {shown} returned {seen}{redirect} in {elapsed} ms"))
    } else {
        Verdict::fail(format!("GET {shown} returned {seen}{redirect}; expected {want}"))
    }
}

#[cfg(test)]
#[path = "assert_net_tests.rs"]
mod tests;
