//! JSON-RPC 2.0 and the two MCP eras, answered by [`Server::handle`], a function of one message.
//!
//! - The handshake era (2024-11-05 … 2025-11-25; Codex speaks 2025-06-18): `initialize` (the
//!   version asked for is echoed when known, else the newest known is offered), then
//!   `notifications/initialized`, `ping`, `tools/list`, `tools/call`.
//! - The stateless era (2026-07-28): no handshake; `server/discover` says what the server
//!   supports, and every request carries its protocol version in
//!   `_meta["io.modelcontextprotocol/protocolVersion"]` (an unknown one is error -32022 with the
//!   versions supported). Results carry `resultType`, and listings `ttlMs` and `cacheScope`.
//!   Since one connection is not one session there, a call names its run (`run_id`, returned
//!   by the first `plan_create`).
//!
//! A model's mistake (bad arguments, a refused update) is a tool result with `isError: true`; a
//! JSON-RPC error is for what no model can fix (unknown method or tool, malformed message).

use std::sync::{Arc, PoisonError};

use serde_json::{Map, Value, json};

use crate::catalogue::{self, INSTRUCTIONS};
use crate::session::Sessions;

/// The stateless revision.
pub const STATELESS: &str = "2026-07-28";
/// The handshake-era revisions answered, newest first.
pub const HANDSHAKE: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT: &str = "io.modelcontextprotocol/clientInfo";

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// How long a client may cache the tool list (it changes only with pev's version).
const TOOLS_TTL_MS: u64 = 3_600_000;

/// The MCP server: the plan tools over the journal of one workspace.
#[derive(Debug, Clone)]
pub struct Server {
    pub sessions: Arc<Sessions>,
    pub version: String,
}

impl Server {
    pub fn new(sessions: Arc<Sessions>, version: &str) -> Self {
        Self { sessions, version: version.to_owned() }
    }

    /// One line of the stdio transport: the response line, if the message wants one.
    pub async fn handle_text(&self, line: &str) -> Option<String> {
        let response = match serde_json::from_str::<Value>(line) {
            Ok(message) => self.handle(message).await?,
            Err(e) => error(&Value::Null, PARSE_ERROR, &format!("parse error: {e}"), None),
        };
        Some(response.to_string())
    }

    /// Answers one JSON-RPC message; `None` for a notification.
    pub async fn handle(&self, message: Value) -> Option<Value> {
        let Value::Object(message) = message else {
            let why = if message.is_array() {
                "batches are not supported: send one request per message"
            } else {
                "a request must be a JSON object"
            };
            return Some(error(&Value::Null, INVALID_REQUEST, why, None));
        };
        let id = message.get("id").cloned();
        let method = message.get("method").and_then(Value::as_str);
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || method.is_none() {
            // A response from the client (we send no requests) or not JSON-RPC at all.
            if message.contains_key("result") || message.contains_key("error") {
                return None;
            }
            let why = "not a JSON-RPC 2.0 request: `jsonrpc` must be \"2.0\" and `method` a string";
            return Some(error(&id.unwrap_or(Value::Null), INVALID_REQUEST, why, None));
        }
        let method = method.unwrap_or_default();
        // Notifications (initialized, cancelled, …) need no answer.
        let id = id?;
        if !(id.is_string() || id.is_number()) {
            return Some(error(
                &Value::Null,
                INVALID_REQUEST,
                "`id` must be a string or a number",
                None,
            ));
        }
        let params = match message.get("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => return Some(error(&id, INVALID_PARAMS, "`params` must be an object", None)),
        };
        let meta = params.get("_meta").and_then(Value::as_object);
        let stateless = match meta.and_then(|m| m.get(META_VERSION)) {
            None => false,
            Some(Value::String(v)) if v == STATELESS => true,
            Some(other) => {
                let requested = other.as_str().map_or_else(|| other.to_string(), str::to_owned);
                let data = json!({"requested": requested, "supported": supported()});
                let why = format!("unsupported protocol version {requested}");
                return Some(error(&id, UNSUPPORTED_VERSION, &why, Some(data)));
            }
        };
        if let Some(name) = meta.and_then(|m| m.get(META_CLIENT)).and_then(|c| c.get("name")) {
            self.note_client(name);
        }
        let result = match method {
            "initialize" => Ok(self.initialize(&params)),
            "server/discover" => Ok(self.discover()),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(self.list(stateless)),
            "tools/call" => self.call(&params, stateless).await,
            other => Err((METHOD_NOT_FOUND, format!("method not found: {other}"))),
        };
        Some(match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => error(&id, code, &message, None),
        })
    }

    fn note_client(&self, name: &Value) {
        if let Some(name) = name.as_str() {
            *self.sessions.client.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(name.to_owned());
        }
    }

    fn initialize(&self, params: &Map<String, Value>) -> Value {
        if let Some(name) = params.get("clientInfo").and_then(|c| c.get("name")) {
            self.note_client(name);
        }
        let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        let version = HANDSHAKE.iter().find(|v| **v == asked).copied().unwrap_or(HANDSHAKE[0]);
        json!({
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": self.info(),
            "instructions": INSTRUCTIONS,
        })
    }

    fn discover(&self) -> Value {
        json!({
            "supportedVersions": supported(),
            "capabilities": {"tools": {"listChanged": false}},
            "instructions": INSTRUCTIONS,
            "resultType": "complete",
            "ttlMs": TOOLS_TTL_MS,
            "cacheScope": "public",
            "_meta": {"io.modelcontextprotocol/serverInfo": self.info()},
        })
    }

    fn info(&self) -> Value {
        json!({"name": "pev", "title": "pev: plans checked by the harness", "version": self.version})
    }

    fn list(&self, stateless: bool) -> Value {
        let tools: Vec<Value> = catalogue::tools()
            .into_iter()
            .map(|mut tool| {
                if tool["name"] != catalogue::LINT_PLAN {
                    add_run_id(&mut tool);
                }
                tool
            })
            .collect();
        let mut result = json!({"tools": tools});
        if stateless {
            result["resultType"] = json!("complete");
            result["ttlMs"] = json!(TOOLS_TTL_MS);
            result["cacheScope"] = json!("public");
        }
        result
    }

    async fn call(
        &self,
        params: &Map<String, Value>,
        stateless: bool,
    ) -> Result<Value, (i64, String)> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err((INVALID_PARAMS, "tools/call needs the tool's `name`".to_owned()));
        };
        let Some(schema) = catalogue::schema_of(name) else {
            let known = catalogue::ORDER.join(", ");
            return Err((INVALID_PARAMS, format!("unknown tool: {name} (the tools are {known})")));
        };
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            // Some clients send the arguments as a JSON string.
            Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                Ok(v @ Value::Object(_)) => v,
                _ => {
                    return Ok(tool_result(
                        false,
                        "`arguments` must be an object",
                        None,
                        stateless,
                    ));
                }
            },
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => {
                return Ok(tool_result(false, "`arguments` must be an object", None, stateless));
            }
        };
        let mut arguments = catalogue::coerce(&schema, arguments);
        let run = arguments.as_object_mut().and_then(|a| a.remove("run_id"));
        let run = match run {
            Some(Value::String(id)) if !id.trim().is_empty() => Some(id.trim().to_owned()),
            _ => None,
        };
        // Codex names its session in every call's `_meta` (the same id its hooks get).
        let meta = params.get("_meta");
        let session = meta
            .and_then(|m| m.get("sessionId"))
            .or_else(|| meta.and_then(|m| m.pointer("/x-codex-turn-metadata/session_id")))
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty());
        let target = crate::session::Target { run: run.as_deref(), session };
        let answer = self.sessions.call(name, arguments, target).await;
        Ok(match answer {
            Ok(answer) => tool_result(answer.ok, &answer.text, Some(answer.structured), stateless),
            Err(e) => {
                // The journal could not be read or written: the model is told, nothing was
                // recorded, and the gate will not take the call as done.
                let text = format!("pev could not record this call, so it did not count: {e}");
                tool_result(false, &text, None, stateless)
            }
        })
    }
}

/// The versions `server/discover` offers. Only the stateless one: a client that reads a
/// discover answer speaks it, and handshake-era clients never ask (they send `initialize`).
fn supported() -> Vec<&'static str> {
    vec![STATELESS]
}

/// Every plan tool takes an optional `run_id` (the stateless transport's way to say which run).
fn add_run_id(tool: &mut Value) {
    if let Some(props) = tool["inputSchema"].get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            "run_id".to_owned(),
            json!({
                "type": "string",
                "description": "The run to work on, as plan_create returned it. Needed only when \
                                the server is shared (HTTP); otherwise the session's run is used.",
            }),
        );
    }
}

fn tool_result(ok: bool, text: &str, structured: Option<Value>, stateless: bool) -> Value {
    let structured = structured.unwrap_or_else(|| json!({"ok": ok, "message": text}));
    let mut result = json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": !ok,
    });
    if stateless {
        result["resultType"] = json!("complete");
    }
    result
}

fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}
