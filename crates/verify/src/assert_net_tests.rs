//! Tests of `socket_open` and `http_status` through `check`, against a listener and a tiny
//! hand-rolled HTTP responder on 127.0.0.1, and of the host policy.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};

use serde_json::json;

use crate::test_support::{Fixture, failed, failed_with};

/// A port on 127.0.0.1 where nothing listens (bound, then closed).
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// An HTTP server on 127.0.0.1 answering every request with `status` and `headers`; it lives
/// as long as the test process (the thread blocks in accept).
fn responder(status: u16, headers: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let response = format!(
                "HTTP/1.1 {status} Whatever\r\n{headers}Content-Length: 2\r\nConnection: close\r\n\r\nhi"
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    addr
}

#[tokio::test]
async fn socket_open_pass_and_fail() {
    let fx = Fixture::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let r = fx.check(json!({"type": "socket_open", "host": "127.0.0.1", "port": port})).await;
    assert_eq!(r.kind, "socket_open");
    assert!(r.passed, "{}", r.detail);
    assert!(
        r.detail.starts_with(&format!("connected to 127.0.0.1:{port} (127.0.0.1:{port}) in ")),
        "{}",
        r.detail
    );
    let r = fx.check(json!({"type": "socket_open", "host": "localhost", "port": port})).await;
    assert!(r.passed, "{}", r.detail);

    let closed = closed_port();
    let r = fx.check(json!({"type": "socket_open", "host": "127.0.0.1", "port": closed})).await;
    failed_with(&r, &[&format!("cannot connect to 127.0.0.1:{closed}: "), "refused"]);
    drop(listener);
}

#[tokio::test]
async fn socket_open_refuses_hosts_outside_the_policy() {
    let mut fx = Fixture::new();
    for host in ["example.com", "10.0.0.1", "192.0.2.1", "[2001:db8::1]"] {
        let r = fx.check(json!({"type": "socket_open", "host": host, "port": 80})).await;
        failed(
            &r,
            &format!(
                "host '{host}' not allowed by policy: only loopback and the policy's \
                 allow_hosts may be reached"
            ),
        );
    }
    // Allowed by the policy, the host is tried (and, being unroutable, not reached).
    fx.ctx.policy.allow_hosts = vec!["192.0.2.1".into()];
    let r = fx.check(json!({"type": "socket_open", "host": "192.0.2.1", "port": 9})).await;
    assert!(!r.passed);
    assert!(!r.detail.contains("not allowed"), "{}", r.detail);
    assert!(r.detail.contains("192.0.2.1:9"), "{}", r.detail);
}

#[tokio::test]
async fn socket_open_on_ipv6_loopback_names_the_host_with_brackets() {
    let fx = Fixture::new();
    let closed = closed_port();
    let r = fx.check(json!({"type": "socket_open", "host": "[::1]", "port": closed})).await;
    assert!(!r.passed);
    assert!(r.detail.contains(&format!("[::1]:{closed}")), "{}", r.detail);
}

#[tokio::test]
async fn http_status_default_200_pass_and_fail() {
    let fx = Fixture::new();
    let ok = responder(200, "");
    let url = format!("http://{ok}/health");
    let r = fx.check(json!({"type": "http_status", "url": url})).await;
    assert_eq!(r.kind, "http_status");
    assert!(r.passed, "{}", r.detail);
    assert!(r.detail.starts_with(&format!("GET {url} returned 200 in ")), "{}", r.detail);

    // The `http_200` alias is the same check.
    let r = fx.check(json!({"type": "http_200", "url": url})).await;
    assert!(r.passed, "{}", r.detail);
    assert_eq!(r.kind, "http_status");

    let missing = responder(404, "");
    let url = format!("http://{missing}/nope");
    let r = fx.check(json!({"type": "http_status", "url": url})).await;
    failed(&r, &format!("GET {url} returned 404; expected 200"));
    let r = fx.check(json!({"type": "http_status", "url": url, "status": 404})).await;
    assert!(r.passed, "{}", r.detail);
}

#[tokio::test]
async fn http_status_does_not_follow_redirects() {
    let fx = Fixture::new();
    let moved = responder(301, "Location: http://example.com/\r\n");
    let url = format!("http://{moved}/");
    let r = fx.check(json!({"type": "http_status", "url": url})).await;
    failed(
        &r,
        &format!(
            "GET {url} returned 301 (a redirect to 'http://example.com/', not followed); expected 200"
        ),
    );
}

#[tokio::test]
async fn http_status_failures_before_any_response() {
    let fx = Fixture::new();
    let closed = closed_port();
    let url = format!("http://127.0.0.1:{closed}/");
    let r = fx.check(json!({"type": "http_status", "url": url})).await;
    failed_with(&r, &[&format!("GET {url} failed: ")]);

    let r = fx.check(json!({"type": "http_status", "url": "https://example.com/"})).await;
    failed(
        &r,
        "host 'example.com' not allowed by policy: only loopback and the policy's allow_hosts may \
         be reached",
    );
    let r = fx.check(json!({"type": "http_status", "url": "not a url"})).await;
    failed_with(&r, &["invalid url 'not a url': "]);
    let r = fx.check(json!({"type": "http_status", "url": "ftp://127.0.0.1/x"})).await;
    failed(&r, "url 'ftp://127.0.0.1/x' has scheme 'ftp'; only http and https can be checked");
}
