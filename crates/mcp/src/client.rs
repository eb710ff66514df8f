//! The other direction: `pev agent` as an MCP client. Each server of `[mcp_servers.NAME]` (the
//! user's `pev.toml`) is started as a stdio process in the workspace, initialized (2025-06-18, the
//! handshake every server answers), and its tools become [`pev_tools::Tool`]s named
//! `mcp__NAME__TOOL`. They are registered beside the built-ins, so every call goes through the
//! engine's journaled gate like any other (approval, the policy's allow/deny by that name, hooks,
//! the durable intent before an effect).
//!
//! A tool's effect comes from its annotations: `readOnlyHint` is a read, `openWorldHint: true` a
//! network call, anything else may change the workspace (`exec`). A call that fails at the
//! server is an error the model reads; a server that does not answer in time is stopped, and its
//! tools fail from then on.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use pev_protocol::tool::Effect;
use pev_providers::config::McpServerConfig;
use pev_tools::{BoxFuture, Tool, ToolContext, ToolError};
use serde_json::{Value, json};

/// How long a server may take to start and list its tools.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The most tools taken from one server.
const MAX_TOOLS: usize = 100;
/// The longest description kept.
const MAX_DESCRIPTION: usize = 1_000;

/// One running server.
pub struct Connection {
    name: String,
    timeout: Duration,
    io: Mutex<Option<Io>>,
}

struct Io {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    next_id: u64,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(mut io) = self.io.lock().unwrap_or_else(PoisonError::into_inner).take() {
            stop(&mut io.child);
        }
    }
}

/// Ends a server and everything it started (`npx`, `uvx` and shells start the real server as a
/// grandchild): it runs in its own process group, which is killed whole.
fn stop(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Connection {
    /// Starts `server` in `cwd`, initializes it and lists its tools.
    pub fn start(
        server: &McpServerConfig,
        cwd: &std::path::Path,
    ) -> Result<(Arc<Self>, Vec<Value>), String> {
        let mut child = Command::new(&server.command)
            .args(&server.args)
            .envs(server.env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| {
                format!("MCP server `{}`: cannot start `{}`: {e}", server.name, server.command)
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            stop(&mut child);
            return Err(format!("MCP server `{}`: no stdio pipes", server.name));
        };
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let conn = Arc::new(Self {
            name: server.name.clone(),
            timeout: server.timeout,
            io: Mutex::new(Some(Io { child, stdin, lines, next_id: 1 })),
        });
        let init = conn.request(
            "initialize",
            &json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "pev", "version": env!("CARGO_PKG_VERSION")},
            }),
            START_TIMEOUT,
        )?;
        if init.get("protocolVersion").and_then(Value::as_str).is_none() {
            return Err(format!(
                "MCP server `{}`: its initialize answer has no protocolVersion",
                server.name
            ));
        }
        conn.notify("notifications/initialized")?;
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..20 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = conn.request("tools/list", &params, START_TIMEOUT)?;
            if let Some(list) = page.get("tools").and_then(Value::as_array) {
                tools.extend(list.iter().cloned());
            }
            cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
            if cursor.is_none() || tools.len() >= MAX_TOOLS {
                break;
            }
        }
        tools.truncate(MAX_TOOLS);
        Ok((conn, tools))
    }

    fn notify(&self, method: &str) -> Result<(), String> {
        let mut guard = self.io.lock().unwrap_or_else(PoisonError::into_inner);
        let io = guard.as_mut().ok_or_else(|| self.gone())?;
        let line = json!({"jsonrpc": "2.0", "method": method}).to_string();
        writeln!(io.stdin, "{line}")
            .and_then(|()| io.stdin.flush())
            .map_err(|e| format!("MCP server `{}`: cannot write to it: {e}", self.name))
    }

    fn gone(&self) -> String {
        format!("MCP server `{}` is not running (it failed or timed out earlier)", self.name)
    }

    /// One request and its result; a JSON-RPC error, a closed pipe or a timeout is an `Err`.
    /// A server that times out is stopped.
    fn request(&self, method: &str, params: &Value, timeout: Duration) -> Result<Value, String> {
        let mut guard = self.io.lock().unwrap_or_else(PoisonError::into_inner);
        let io = guard.as_mut().ok_or_else(|| self.gone())?;
        let id = io.next_id;
        io.next_id = io.next_id.saturating_add(1);
        let line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        writeln!(io.stdin, "{line}")
            .and_then(|()| io.stdin.flush())
            .map_err(|e| format!("MCP server `{}`: cannot write to it: {e}", self.name))?;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match io.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    stop(&mut io.child);
                    *guard = None;
                    return Err(format!(
                        "MCP server `{}` did not answer {method} within {} s; it was stopped",
                        self.name,
                        timeout.as_secs()
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    *guard = None;
                    return Err(format!("MCP server `{}` exited", self.name));
                }
            };
            let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
            // A request from the server (sampling, roots, …): pev offers none of those.
            if message.get("method").is_some() {
                if let Some(their_id) = message.get("id") {
                    let answer = json!({"jsonrpc": "2.0", "id": their_id,
                        "error": {"code": -32601, "message": "pev does not offer this to servers"}});
                    let _ = writeln!(io.stdin, "{answer}").and_then(|()| io.stdin.flush());
                }
                continue;
            }
            if message.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(error) = message.get("error") {
                let text = error.get("message").and_then(Value::as_str).unwrap_or("error");
                return Err(format!("MCP server `{}`: {method}: {text}", self.name));
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }
}

/// One tool of a server, as pev's registry holds it.
pub struct McpTool {
    conn: Arc<Connection>,
    remote: String,
    name: &'static str,
    description: &'static str,
    schema: Value,
    effect: Effect,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool").field("name", &self.name).finish_non_exhaustive()
    }
}

/// `mcp__SERVER__TOOL`, when it is a valid wire name (`[a-zA-Z0-9_-]{1,64}`).
pub fn tool_name(server: &str, tool: &str) -> Option<String> {
    let name = format!("mcp__{server}__{tool}");
    let valid = !tool.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    valid.then_some(name)
}

/// The effect a tool's annotations claim (no annotation: it may change things).
pub fn effect_of(tool: &Value) -> Effect {
    let hint = |k: &str| tool.get("annotations").and_then(|a| a.get(k)).and_then(Value::as_bool);
    match (hint("readOnlyHint"), hint("openWorldHint")) {
        (Some(true), _) => Effect::Read,
        (_, Some(true)) => Effect::Network,
        _ => Effect::Exec,
    }
}

/// The tools of the servers, and warnings about tools left out.
pub type Connected = (Vec<Arc<dyn Tool>>, Vec<String>);

/// Starts every server and turns its tools into registry tools. A server that cannot start is
/// an error (the user asked for it); a tool whose name cannot be offered is left out with a
/// warning.
pub fn connect(servers: &[McpServerConfig], cwd: &std::path::Path) -> Result<Connected, String> {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut warnings = Vec::new();
    for server in servers {
        let (conn, listed) = Connection::start(server, cwd)?;
        for tool in listed {
            let Some(remote) = tool.get("name").and_then(Value::as_str) else { continue };
            let Some(name) = tool_name(&server.name, remote) else {
                warnings.push(format!(
                    "MCP server `{}`: tool `{remote}` is left out: `mcp__{}__{remote}` is not a valid tool name (letters, digits, `_`, `-`, at most 64)",
                    server.name, server.name
                ));
                continue;
            };
            let mut schema =
                tool.get("inputSchema").cloned().unwrap_or_else(|| json!({"type": "object"}));
            if schema.get("type").and_then(Value::as_str) != Some("object") {
                schema = json!({"type": "object", "properties": {}});
            }
            let text = tool.get("description").and_then(Value::as_str).unwrap_or_default();
            let description: String = format!("[MCP server {}] {text}", server.name)
                .chars()
                .take(MAX_DESCRIPTION)
                .collect();
            tools.push(Arc::new(McpTool {
                conn: Arc::clone(&conn),
                remote: remote.to_owned(),
                // The registry's names live as long as the process; a handful per server.
                name: Box::leak(name.into_boxed_str()),
                description: Box::leak(description.into_boxed_str()),
                effect: effect_of(&tool),
                schema,
            }));
        }
    }
    Ok((tools, warnings))
}

impl Tool for McpTool {
    fn name(&self) -> &'static str {
        self.name
    }

    fn effect(&self) -> Effect {
        self.effect
    }

    fn description(&self) -> &'static str {
        self.description
    }

    fn parameters_schema(&self) -> Value {
        self.schema.clone()
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        let conn = Arc::clone(&self.conn);
        let remote = self.remote.clone();
        let cap = ctx.policy.max_output_bytes;
        Box::pin(async move {
            let timeout = conn.timeout;
            let answer = tokio::task::spawn_blocking(move || {
                conn.request("tools/call", &json!({"name": remote, "arguments": args}), timeout)
            })
            .await
            .map_err(|e| ToolError::Fatal(format!("the MCP call was lost: {e}")))?;
            let result = answer.map_err(ToolError::RespondToModel)?;
            let text: Vec<&str> = result
                .get("content")
                .and_then(Value::as_array)
                .map(|blocks| {
                    blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect()
                })
                .unwrap_or_default();
            let text = cut(&text.join("\n"), cap);
            if result.get("isError").and_then(Value::as_bool) == Some(true) {
                return Err(ToolError::RespondToModel(if text.is_empty() {
                    "the tool failed".to_owned()
                } else {
                    text
                }));
            }
            Ok(match result.get("structuredContent") {
                Some(structured) if structured.to_string().len() <= cap => structured.clone(),
                _ => Value::String(text),
            })
        })
    }
}

fn cut(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_owned();
    }
    let mut end = cap;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [cut at {cap} bytes]", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_effects() {
        assert_eq!(tool_name("git", "status").as_deref(), Some("mcp__git__status"));
        assert_eq!(tool_name("git", "a.b"), None);
        assert_eq!(tool_name("git", &"x".repeat(70)), None);
        assert_eq!(effect_of(&json!({"annotations": {"readOnlyHint": true}})), Effect::Read);
        assert_eq!(effect_of(&json!({"annotations": {"openWorldHint": true}})), Effect::Network);
        assert_eq!(effect_of(&json!({"name": "x"})), Effect::Exec);
        assert_eq!(cut("héllo", 2), "h… [cut at 2 bytes]");
    }
}
