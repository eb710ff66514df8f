//! The second transport: MCP over HTTP on a loopback address (`pev mcp --http 127.0.0.1:PORT`).
//! One JSON-RPC message per `POST` to `/mcp`, answered with one JSON body (`202 Accepted` and no
//! body for a notification); no server-sent stream (`GET` is `405`), no sessions: every call names
//! its run (`run_id`, which `plan_create` returns), since one server may serve many clients.
//!
//! Bound to loopback only, and a request whose `Origin` is not a loopback origin is refused
//! (`403`), so a web page the user visits cannot drive it (DNS rebinding). Small and synchronous:
//! a thread per connection, keep-alive, bounded headers and bodies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::McpError;
use crate::rpc::Server;

const MAX_HEADER: usize = 64 * 1024;
const MAX_BODY: usize = 8 * 1024 * 1024;
const IDLE: Duration = Duration::from_secs(120);

/// Binds `addr` (loopback only).
pub fn bind(addr: &str) -> Result<TcpListener, McpError> {
    let parsed: SocketAddr = addr.parse().map_err(|e| {
        McpError(format!("--http {addr}: not an address like 127.0.0.1:8765 ({e})"))
    })?;
    if !parsed.ip().is_loopback() {
        return Err(McpError(format!(
            "--http {addr}: pev mcp listens on loopback only (127.0.0.1 or ::1); it has no \
             authentication"
        )));
    }
    TcpListener::bind(parsed).map_err(|e| McpError(format!("cannot listen on {addr}: {e}")))
}

/// Serves connections until the listener fails.
pub fn serve(
    listener: &TcpListener,
    server: &Server,
    runtime: &Arc<tokio::runtime::Runtime>,
) -> Result<(), McpError> {
    let open = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        if open.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            let _ = respond(&mut stream, 503, Some("too many connections"), "text/plain");
            continue;
        }
        open.fetch_add(1, Ordering::SeqCst);
        let (server, runtime, open) = (server.clone(), Arc::clone(runtime), Arc::clone(&open));
        std::thread::spawn(move || {
            let _ = connection(stream, &server, &runtime);
            open.fetch_sub(1, Ordering::SeqCst);
        });
    }
    Ok(())
}

/// The most connections served at once (past it one is answered 503 and closed).
const MAX_CONNECTIONS: usize = 64;

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

fn connection(
    stream: TcpStream,
    server: &Server,
    runtime: &tokio::runtime::Runtime,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IDLE))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let request = match read_request(&mut reader, &mut writer) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(()),
            Err((status, why)) => {
                respond(&mut writer, status, Some(&why), "text/plain")?;
                return Ok(());
            }
        };
        let close = request.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        answer(&request, &mut writer, server, runtime)?;
        if close {
            return Ok(());
        }
    }
}

fn answer(
    request: &Request,
    out: &mut TcpStream,
    server: &Server,
    runtime: &tokio::runtime::Runtime,
) -> std::io::Result<()> {
    if let Some(origin) = request.header("origin")
        && !loopback_origin(origin)
    {
        return respond(out, 403, Some("origin not allowed"), "text/plain");
    }
    let path = request.path.split('?').next().unwrap_or_default();
    if path != "/mcp" && path != "/" {
        return respond(out, 404, Some("not found: POST to /mcp"), "text/plain");
    }
    if request.method != "POST" {
        return respond(
            out,
            405,
            Some("pev mcp answers POST only (no event stream)"),
            "text/plain",
        );
    }
    let text = String::from_utf8_lossy(&request.body);
    match runtime.block_on(server.handle_text(text.trim())) {
        Some(body) => respond(out, 200, Some(&body), "application/json"),
        None => respond(out, 202, None, "application/json"),
    }
}

fn loopback_origin(origin: &str) -> bool {
    let rest = origin.split_once("://").map_or(origin, |(_, r)| r);
    let rest = rest.split('/').next().unwrap_or_default();
    let host = if rest.starts_with('[') {
        rest.split_inclusive(']').next().unwrap_or(rest)
    } else {
        rest.split(':').next().unwrap_or(rest)
    };
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

/// One request; `Ok(None)` when the peer closed between requests.
fn read_request(
    reader: &mut impl BufRead,
    writer: &mut impl Write,
) -> Result<Option<Request>, (u16, String)> {
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = reader
            .take(u64::try_from(MAX_HEADER).unwrap_or(u64::MAX))
            .read_until(b'\n', &mut line)
            .map_err(|e| (400, format!("read: {e}")))?;
        if n == 0 {
            return if head.is_empty() { Ok(None) } else { Err((400, "truncated request".into())) };
        }
        if line == b"\r\n" || line == b"\n" {
            if head.is_empty() {
                continue;
            }
            break;
        }
        head.push(String::from_utf8_lossy(&line).trim_end().to_owned());
        if head.iter().map(String::len).sum::<usize>() > MAX_HEADER {
            return Err((431, "headers too large".into()));
        }
    }
    let mut first =
        head.first().map(|l| l.split_whitespace()).ok_or((400, String::from("empty")))?;
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or("/").to_owned();
    let headers: Vec<(String, String)> = head
        .iter()
        .skip(1)
        .filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())))
        .collect();
    let mut request = Request { method, path, headers, body: Vec::new() };
    if request.header("transfer-encoding").is_some() {
        return Err((411, "send the body with a Content-Length".into()));
    }
    let length: usize = match request.header("content-length") {
        Some(v) => v.parse().map_err(|_| (400, "bad Content-Length".to_owned()))?,
        None => 0,
    };
    if length > MAX_BODY {
        return Err((413, format!("body larger than {MAX_BODY} bytes")));
    }
    // curl and others wait for this before they send the body.
    if length > 0
        && request.header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        writer
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .and_then(|()| writer.flush())
            .map_err(|e| (400, format!("write: {e}")))?;
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).map_err(|e| (400, format!("body: {e}")))?;
    request.body = body;
    Ok(Some(request))
}

fn respond(
    out: &mut TcpStream,
    status: u16,
    body: Option<&str>,
    kind: &str,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        503 => "Service Unavailable",
        413 => "Payload Too Large",
        _ => "Request Header Fields Too Large",
    };
    let body = body.unwrap_or_default();
    let allow = if status == 405 { "Allow: POST\r\n" } else { "" };
    write!(
        out,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{allow}Cache-Control: no-store\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_origins_and_addresses() {
        assert!(loopback_origin("http://localhost:3000"));
        assert!(loopback_origin("http://127.0.0.1"));
        assert!(loopback_origin("http://[::1]:8080"));
        assert!(!loopback_origin("https://evil.example"));
        assert!(!loopback_origin("http://localhost.evil.example:80"));
        assert!(bind("0.0.0.0:0").unwrap_err().0.contains("loopback only"));
        assert!(bind("nonsense").is_err());
        assert!(bind("127.0.0.1:0").is_ok());
    }

    #[test]
    fn reads_a_request_with_a_body_and_refuses_chunked() {
        let raw = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
        let request = read_request(&mut &raw[..], &mut Vec::new()).unwrap().unwrap();
        assert_eq!((request.method.as_str(), request.body.as_slice()), ("POST", &b"{}"[..]));
        let raw = b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(read_request(&mut &raw[..], &mut Vec::new()).err().map(|e| e.0), Some(411));
        assert!(read_request(&mut &b""[..], &mut Vec::new()).unwrap().is_none());
        let raw = b"POST /mcp HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}";
        let mut interim = Vec::new();
        let request = read_request(&mut &raw[..], &mut interim).unwrap().unwrap();
        assert_eq!(
            (interim.as_slice(), request.body.as_slice()),
            (&b"HTTP/1.1 100 Continue\r\n\r\n"[..], &b"{}"[..])
        );
    }
}
