//! A local HTTP/1.1 server for client tests: it answers each connection with the next scripted
//! [`Reply`] (a whole body, a chunked stream with pauses and an optional cut, or silence) and
//! records every request (method, path, headers, body) for the test to check.
//!
//! Like the real services, it first checks the request: a body sent to `…/messages` is held to
//! the Anthropic API's rules, one sent to `…/chat/completions` to OpenAI's
//! ([`pev_providers::rules`]), and a request they would refuse gets their 400 and error body
//! instead of the scripted reply.
//!
//! Every response says `Connection: close`, so each request arrives on its own connection and
//! takes the next reply in order.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("request body is JSON")
    }
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A whole response with a Content-Length.
    Full { status: u16, headers: Vec<(String, String)>, body: String },
    /// A chunked response: each chunk is sent after its delay; with `cut`, the connection closes
    /// without the final empty chunk (a stream broken mid-way).
    Chunks {
        status: u16,
        headers: Vec<(String, String)>,
        chunks: Vec<(Duration, Vec<u8>)>,
        cut: bool,
    },
    /// Reads the request and never answers (a hung server).
    Hang,
}

impl Reply {
    pub fn json(status: u16, body: &str) -> Self {
        Self::Full {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_owned(),
        }
    }

    pub fn with_header(self, name: &str, value: &str) -> Self {
        match self {
            Self::Full { status, mut headers, body } => {
                headers.push((name.into(), value.into()));
                Self::Full { status, headers, body }
            }
            Self::Chunks { status, mut headers, chunks, cut } => {
                headers.push((name.into(), value.into()));
                Self::Chunks { status, headers, chunks, cut }
            }
            Self::Hang => Self::Hang,
        }
    }

    /// An SSE stream of `body` split into the given pieces (byte offsets), sent without delay.
    pub fn sse_split(body: &str, cuts: &[usize]) -> Self {
        let bytes = body.as_bytes();
        let mut chunks = Vec::new();
        let mut start = 0;
        for &c in cuts.iter().chain(std::iter::once(&bytes.len())) {
            let end = c.min(bytes.len());
            if end > start {
                chunks.push((Duration::ZERO, bytes[start..end].to_vec()));
                start = end;
            }
        }
        Self::Chunks {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks,
            cut: false,
        }
    }

    /// An SSE stream of `body`, one chunk.
    pub fn sse(body: &str) -> Self {
        Self::sse_split(body, &[])
    }
}

/// The running server.
pub struct MockServer {
    pub base_url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl MockServer {
    /// Starts serving `replies` in order on 127.0.0.1 (an ephemeral port). After the last reply,
    /// every request gets a 500 that says the script ran out.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        tokio::spawn(async move {
            let mut replies = replies.into_iter();
            loop {
                let Ok((socket, _)) = listener.accept().await else { return };
                let reply = replies.next().unwrap_or_else(|| {
                    Reply::json(500, r#"{"error":{"message":"mock: no reply left"}}"#)
                });
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move { serve(socket, reply, recorded).await });
            }
        });
        Self { base_url: format!("http://{addr}"), requests }
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(mut socket: TcpStream, reply: Reply, recorded: Arc<Mutex<Vec<Recorded>>>) {
    let Some(request) = read_request(&mut socket).await else { return };
    let reply = refusal(&request).unwrap_or(reply);
    recorded.lock().unwrap().push(request);
    match reply {
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(600)).await;
        }
        Reply::Full { status, headers, body } => {
            let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
            for (n, v) in &headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str(&format!("content-length: {}\r\nconnection: close\r\n\r\n", body.len()));
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
        Reply::Chunks { status, headers, chunks, cut } => {
            let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
            for (n, v) in &headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for (delay, chunk) in chunks {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let framed =
                    [format!("{:x}\r\n", chunk.len()).into_bytes(), chunk, b"\r\n".to_vec()]
                        .concat();
                if socket.write_all(&framed).await.is_err() {
                    return;
                }
                let _ = socket.flush().await;
            }
            if !cut {
                let _ = socket.write_all(b"0\r\n\r\n").await;
            }
            let _ = socket.shutdown().await;
        }
    }
}

/// The real service's 400 for a request it would refuse.
fn refusal(request: &Recorded) -> Option<Reply> {
    let body: serde_json::Value = serde_json::from_str(&request.body).ok()?;
    if request.path.ends_with("/messages") {
        let refused = pev_providers::rules::anthropic(&body).err()?;
        Some(Reply::json(refused.status, &refused.anthropic_body()))
    } else if request.path.ends_with("/chat/completions") {
        let refused = pev_providers::rules::openai(&body).err()?;
        Some(Reply::json(refused.status, &refused.openai_body()))
    } else {
        None
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        let n = socket.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut tmp).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    Some(Recorded { method, path, headers, body: String::from_utf8_lossy(&body).into_owned() })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}
