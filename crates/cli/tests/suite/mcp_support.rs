//! An MCP client for the tests: `pev mcp` as a child process, one JSON-RPC message per line, the
//! way Claude Code, Codex and the SDKs talk to a stdio server.

#![allow(dead_code)] // each module uses a subset

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

pub struct Client {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    next_id: u64,
    /// `_meta` added to every request (the stateless era), if any.
    pub meta: Option<Value>,
}

pub const STATELESS: &str = "2026-07-28";

impl Client {
    /// `pev mcp --workspace ws` with `env` set (and the session variables of the test's own
    /// environment removed).
    pub fn start(ws: &Path, env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("pev"));
        cmd.args(["mcp", "--workspace"])
            .arg(ws)
            .env_remove("PEV_SESSION_ID")
            .env_remove("CLAUDE_CODE_SESSION_ID")
            .env_remove("CLAUDE_PROJECT_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("pev mcp starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout: ChildStdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, stdin, lines, next_id: 1, meta: None }
    }

    /// The stateless era: every request carries its protocol version in `_meta`.
    pub fn stateless(ws: &Path, env: &[(&str, &str)]) -> Self {
        let mut client = Self::start(ws, env);
        client.meta = Some(json!({
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "pev-tests", "version": "1"},
        }));
        client
    }

    /// The handshake era, as Codex does it (2025-06-18).
    pub fn initialized(ws: &Path, env: &[(&str, &str)]) -> Self {
        let mut client = Self::start(ws, env);
        let init = client.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "codex-mcp-client", "title": "Codex", "version": "0.169.0"},
            }),
        );
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        client.notify("notifications/initialized", None);
        client
    }

    pub fn send_raw(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("write to pev mcp");
        self.stdin.flush().expect("flush");
    }

    pub fn read(&mut self) -> Value {
        let line =
            self.lines.recv_timeout(Duration::from_secs(60)).expect("pev mcp answers within 60 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// A request; its response (checked to carry the same id).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut params = params;
        if let (Some(meta), Value::Object(map)) = (&self.meta, &mut params) {
            map.insert("_meta".to_owned(), meta.clone());
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&message.to_string());
        let response = self.read();
        assert_eq!(response["id"], id, "{response}");
        assert_eq!(response["jsonrpc"], "2.0");
        response
    }

    pub fn notify(&mut self, method: &str, params: Option<Value>) {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            message["params"] = p;
        }
        self.send_raw(&message.to_string());
    }

    /// `tools/call`; the result (not the JSON-RPC envelope).
    #[allow(clippy::needless_pass_by_value)] // call sites build the arguments inline
    pub fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let response = self.request("tools/call", json!({"name": tool, "arguments": &arguments}));
        let result = response.get("result").unwrap_or_else(|| panic!("no result: {response}"));
        let text = result["content"][0]["text"].as_str().expect("a text block");
        // Claude Code shows the model structuredContent, not the text: the answer is in both.
        if let Some(message) = result["structuredContent"]["message"].as_str() {
            assert_eq!(message, text, "{result}");
        }
        result.clone()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The plan the tests create: one step writing hello.txt and a postcondition, both checked.
pub fn hello_plan() -> Value {
    json!({
        "objective": "Create hello.txt containing hi",
        "steps": [
            {"id": "write", "title": "Write hello.txt",
             "assertions": [{"type": "file_contains", "path": "hello.txt", "pattern": "hi"}]},
            {"id": "check", "title": "Read it back"}
        ],
        "postconditions": [
            {"description": "hello.txt says hi",
             "assertions": [{"type": "file_contains", "path": "hello.txt", "pattern": "hi"}]}
        ]
    })
}
