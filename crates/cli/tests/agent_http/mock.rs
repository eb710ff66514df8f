//! A local model server speaking the Anthropic Messages API (`POST /v1/messages`), for running
//! `pev agent` through the real HTTP client. It tells the roles apart by the request's `model`
//! (the test's pev.toml gives each role its own), asks the test's responder for each answer, and
//! records every request (headers, JSON body, arrival time) for the test to check.
//!
//! The responder sees the request as parsed ([`Request`]): which role sent it, which call of that
//! role it is, and, for the executor, which step and which turn of the conversation it is for,
//! read from the conversation itself. So an answer depends on what pev asked, not on the order in
//! which parallel steps happen to arrive.
//!
//! Like the real API, it first checks each request ([`pev_providers::rules::anthropic`]) and
//! answers one the API would refuse with its 400 and error body, without asking the responder.
//!
//! Plain threads and `std::net`: one thread accepts, one thread serves each connection, and every
//! response says `connection: close`, so each request comes on its own connection.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The models the test's pev.toml gives the roles.
pub const PLANNER_MODEL: &str = "claude-opus-4-6";
pub const EXECUTOR_MODEL: &str = "claude-sonnet-4-5";
pub const VERIFIER_MODEL: &str = "claude-haiku-4-5";

/// The biggest request the server reads (pev's prompts are far smaller).
const MAX_REQUEST_BYTES: usize = 16 << 20;

/// The role a request came from, by its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Planner,
    Executor,
    Verifier,
    /// A model the test did not configure.
    Unknown,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Null` when it was not JSON).
    pub body: Value,
    /// When the whole request had arrived.
    pub at: Instant,
    pub role: Role,
    /// The index of this request among those of its role (0 for the first).
    pub call: usize,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn messages(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// How many times the model has answered in this conversation so far (0 for a new one).
    pub fn turn(&self) -> usize {
        self.messages().iter().filter(|m| m["role"] == "assistant").count()
    }

    /// The system prompt's text (every text block, joined).
    pub fn system(&self) -> String {
        match &self.body["system"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => {
                blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
            }
            _ => String::new(),
        }
    }

    /// The text of the first user message (the executor's kickoff names its step there).
    pub fn first_user_text(&self) -> String {
        let Some(first) = self.messages().first() else { return String::new() };
        match &first["content"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => {
                blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
            }
            _ => String::new(),
        }
    }

    /// The executor's step: the id in backquotes in its kickoff ("Carry out step `ID` now").
    pub fn step(&self) -> Option<String> {
        let text = self.first_user_text();
        let start = text.find('`')? + 1;
        let len = text.get(start..)?.find('`')?;
        text.get(start..start + len).map(str::to_owned)
    }

    /// The executor's attempt, from the system prompt's "attempt: N of M".
    pub fn attempt(&self) -> Option<u32> {
        let system = self.system();
        let rest = &system[system.find("attempt: ")? + "attempt: ".len()..];
        rest.split_whitespace().next()?.parse().ok()
    }
}

/// An HTTP response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    fn message(model: &str, content: &Value, stop_reason: &str, usage: (u64, u64)) -> Reply {
        let body = json!({
            "id": format!("msg_mock_{}", next_id()),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": {"input_tokens": usage.0, "output_tokens": usage.1},
        });
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }

    /// A turn that ends with `text`.
    pub fn text(model: &str, text: &str) -> Reply {
        Reply::message(model, &json!([{"type": "text", "text": text}]), "end_turn", (1200, 150))
    }

    /// A turn that calls tools: `(id, name, input)` each.
    pub fn tool_uses(model: &str, calls: &[(&str, &str, Value)]) -> Reply {
        let content: Vec<Value> = calls
            .iter()
            .map(|(id, name, input)| {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            })
            .collect();
        Reply::message(model, &Value::Array(content), "tool_use", (1500, 80))
    }

    /// The API's error body with `status`.
    pub fn error(status: u16, kind: &str, message: &str) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// Unique message ids, process-wide.
fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

type Responder = dyn Fn(&Request) -> Reply + Send + Sync;

struct Shared {
    responder: Box<Responder>,
    requests: Mutex<Vec<Request>>,
    stop: AtomicBool,
}

/// The running server; it stops when dropped.
pub struct MockModel {
    pub base_url: String,
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl MockModel {
    /// Serves on 127.0.0.1 (an ephemeral port), answering each request with `responder`.
    pub fn start(responder: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> MockModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the mock model");
        let addr = listener.local_addr().expect("the mock's address");
        let shared = Arc::new(Shared {
            responder: Box::new(responder),
            requests: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let accepting = Arc::clone(&shared);
        std::thread::spawn(move || {
            for socket in listener.incoming() {
                if accepting.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(socket) = socket else { continue };
                let serving = Arc::clone(&accepting);
                std::thread::spawn(move || serve(socket, &serving));
            }
        });
        MockModel { base_url: format!("http://{addr}"), addr, shared }
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The requests of one role, in arrival order.
    pub fn of(&self, role: Role) -> Vec<Request> {
        self.requests().into_iter().filter(|r| r.role == role).collect()
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accepting thread so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

fn role_of(model: &str) -> Role {
    match model {
        PLANNER_MODEL => Role::Planner,
        EXECUTOR_MODEL => Role::Executor,
        VERIFIER_MODEL => Role::Verifier,
        _ => Role::Unknown,
    }
}

fn serve(mut socket: TcpStream, shared: &Shared) {
    let _ = socket.set_read_timeout(Some(Duration::from_secs(30)));
    let Some(Raw { method, path, headers, body }) = read_request(&mut socket) else { return };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let role = role_of(body["model"].as_str().unwrap_or_default());
    let request = {
        // The call index and the record are taken under one lock, so indexes follow arrival.
        let mut requests = shared.requests.lock().unwrap();
        let call = requests.iter().filter(|r| r.role == role).count();
        let request = Request { method, path, headers, body, at: Instant::now(), role, call };
        requests.push(request.clone());
        request
    };
    let reply = if request.method != "POST" || request.path != "/v1/messages" {
        Reply::error(404, "not_found_error", "mock: only POST /v1/messages is served")
    } else if request.role == Role::Unknown {
        Reply::error(400, "invalid_request_error", "mock: a model the test did not configure")
    } else if let Err(refused) = pev_providers::rules::anthropic(&request.body) {
        Reply::error(refused.status, refused.kind, &refused.message)
    } else {
        (shared.responder)(&request)
    };
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\nconnection: close\r\n\r\n", reply.body.len()));
    let _ = socket.write_all(head.as_bytes());
    let _ = socket.write_all(reply.body.as_bytes());
    let _ = socket.flush();
}

/// One HTTP/1.1 request as read off the socket.
struct Raw {
    method: String,
    path: String,
    /// Names lower-cased.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Reads one request with a Content-Length (all pev sends).
fn read_request(socket: &mut TcpStream) -> Option<Raw> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let head_end = loop {
        let n = socket.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_REQUEST_BYTES {
            return None;
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
        .unwrap_or(0)
        .min(MAX_REQUEST_BYTES);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Raw { method, path, headers, body })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// The test's own check of the mock: the step is read from the kickoff, the turn from the
/// conversation, the attempt from the system prompt.
#[test]
fn the_mock_reads_step_turn_and_attempt_from_the_request() {
    let body = json!({
        "model": EXECUTOR_MODEL,
        "system": [{"type": "text", "text": "id: s1\nattempt: 2 of 3\n"}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Carry out step `s1` now"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
            {"role": "user", "content": [{"type": "text", "text": "y"}]}
        ]
    });
    let r = Request {
        method: "POST".into(),
        path: "/v1/messages".into(),
        headers: vec![],
        body,
        at: std::time::Instant::now(),
        role: Role::Executor,
        call: 0,
    };
    assert_eq!(r.step().as_deref(), Some("s1"));
    assert_eq!(r.turn(), 1);
    assert_eq!(r.attempt(), Some(2));
}
