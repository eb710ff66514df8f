//! http.request against a one-shot local server: status, headers, body, caps, timeouts, and the
//! host policy. Nothing leaves loopback.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use pev_tools::ToolPolicy;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::support::Fixture;

/// Serve one connection: read the request (head and a Content-Length body), answer with
/// `response`, and hand back the request text.
async fn serve_once(response: Vec<u8>) -> (SocketAddr, JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = socket.read(&mut buf).await.unwrap();
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text[..end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap())
                    })
                    .unwrap_or(0);
                if request.len() >= end + 4 + length {
                    break;
                }
            }
            if n == 0 {
                break;
            }
        }
        socket.write_all(&response).await.unwrap();
        socket.shutdown().await.unwrap();
        String::from_utf8(request).unwrap()
    });
    (addr, handle)
}

fn response(status: &str, headers: &[&str], body: &str) -> Vec<u8> {
    let mut out =
        format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
    for h in headers {
        out.push_str(h);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.push_str(body);
    out.into_bytes()
}

#[tokio::test]
async fn get_returns_status_headers_and_body() {
    let f = Fixture::new();
    let (addr, server) = serve_once(response(
        "201 Created",
        &["x-test: one", "x-test: two", "content-type: text/plain"],
        "hello",
    ))
    .await;
    let out = f
        .ok("http.request", json!({"method": "get", "url": format!("http://{addr}/path?q=1")}))
        .await;
    assert_eq!(out["status"], 201);
    assert_eq!(out["body"], "hello");
    assert_eq!(out["body_truncated"], false);
    assert_eq!(out["headers"]["x-test"], "one, two");
    assert_eq!(out["headers"]["content-type"], "text/plain");
    let request = server.await.unwrap();
    assert!(request.starts_with("GET /path?q=1 HTTP/1.1\r\n"), "{request}");
}

#[tokio::test]
async fn post_sends_headers_and_body() {
    let f = Fixture::new();
    let (addr, server) = serve_once(response("200 OK", &[], "ok")).await;
    let out = f
        .ok(
            "http.request",
            json!({"method": "POST", "url": format!("http://localhost:{}/submit", addr.port()),
                   "headers": {"X-Custom": "v1", "content-type": "application/json"},
                   "body": "{\"a\":1}"}),
        )
        .await;
    assert_eq!(out["status"], 200);
    let request = server.await.unwrap();
    assert!(request.starts_with("POST /submit HTTP/1.1\r\n"), "{request}");
    assert!(request.contains("x-custom: v1\r\n"), "{request}");
    assert!(request.ends_with("\r\n\r\n{\"a\":1}"), "{request}");
}

#[tokio::test]
async fn the_body_is_capped() {
    let f = Fixture::with_policy(ToolPolicy { max_output_bytes: 10, ..ToolPolicy::default() });
    let (addr, _server) = serve_once(response("200 OK", &[], &"x".repeat(100))).await;
    let out =
        f.ok("http.request", json!({"method": "GET", "url": format!("http://{addr}/")})).await;
    assert_eq!(out["body"], "x".repeat(10));
    assert_eq!(out["body_truncated"], true);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let f = Fixture::new();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Accept and hold the connection without answering.
    let _server = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(socket);
    });
    let started = Instant::now();
    let msg = f
        .respond(
            "http.request",
            json!({"method": "GET", "url": format!("http://{addr}/"), "timeout_s": 0.3}),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    assert_eq!(msg, format!("http.request: GET http://{addr}/ timed out after 0.300 s"));
}

#[tokio::test]
async fn redirects_are_returned_not_followed() {
    let f = Fixture::new();
    let (addr, _server) =
        serve_once(response("302 Found", &["location: http://example.com/"], "")).await;
    let out =
        f.ok("http.request", json!({"method": "GET", "url": format!("http://{addr}/")})).await;
    assert_eq!(out["status"], 302);
    assert_eq!(out["headers"]["location"], "http://example.com/");
}

#[tokio::test]
async fn hosts_outside_loopback_and_the_policy_are_refused_before_connecting() {
    let f = Fixture::new();
    for url in ["http://example.com/", "https://10.0.0.1:8443/x", "http://[2001:db8::1]/"] {
        let msg = f.respond("http.request", json!({"method": "GET", "url": url})).await;
        assert!(
            msg.contains("is not allowed: only loopback and the policy's allow_hosts"),
            "{url}: {msg}"
        );
    }
    let msg =
        f.respond("http.request", json!({"method": "GET", "url": "http://example.com/"})).await;
    assert_eq!(
        msg,
        "http.request: host `example.com` is not allowed: only loopback and the policy's allow_hosts may be reached"
    );
}

#[tokio::test]
async fn other_argument_errors() {
    let f = Fixture::new();
    let msg =
        f.respond("http.request", json!({"method": "GET", "url": "file:///etc/passwd"})).await;
    assert_eq!(msg, "http.request: scheme `file` is not allowed; use http:// or https://");
    let msg = f.respond("http.request", json!({"method": "GET", "url": "not a url"})).await;
    assert!(msg.starts_with("http.request: invalid url `not a url`"), "{msg}");
    let msg =
        f.respond("http.request", json!({"method": "GE T", "url": "http://127.0.0.1:1/"})).await;
    assert_eq!(msg, "http.request: invalid method `GE T`");
    let msg = f
        .respond(
            "http.request",
            json!({"method": "GET", "url": "http://127.0.0.1:1/", "headers": {"bad header": "x"}}),
        )
        .await;
    assert_eq!(msg, "http.request: invalid header name `bad header`");
    let msg = f.respond("http.request", json!({"url": "http://127.0.0.1:1/"})).await;
    assert!(msg.contains("missing field `method`"), "{msg}");
}

#[tokio::test]
async fn a_refused_connection_goes_back_to_the_model() {
    let f = Fixture::new();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let msg = f
        .respond(
            "http.request",
            json!({"method": "GET", "url": format!("http://127.0.0.1:{port}/"), "timeout_s": 5}),
        )
        .await;
    assert!(
        msg.starts_with(&format!("http.request: GET http://127.0.0.1:{port}/ failed: ")),
        "{msg}"
    );
}
