//! `pev mcp` driven over stdio by an MCP client, in both protocol eras: the handshake (as Codex
//! sends it) and the stateless 2026-07-28 revision; the plan tools' rules (evidence checked by
//! pev, refusals as `isError` results), revisions journaled, and JSON-RPC errors.

use serde_json::{Value, json};

use super::mcp_support::{Client, hello_plan};
use super::support::pev_in;

const TOOLS: [&str; 6] =
    ["plan_create", "plan_show", "step_update", "postcondition_verify", "todo_write", "lint_plan"];

fn names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn handshake_era_plan_update_refused_then_accepted_verify_and_revise() {
    let ws = tempfile::tempdir().unwrap();
    let mut client = Client::initialized(ws.path(), &[]);

    let list = client.request("tools/list", json!({}));
    assert_eq!(names(&list["result"]), TOOLS);
    assert!(list["result"].get("resultType").is_none(), "no stateless fields in the old era");
    let plan_show = &list["result"]["tools"][1];
    assert_eq!(plan_show["annotations"]["readOnlyHint"], true);
    assert_eq!(plan_show["_meta"]["anthropic/alwaysLoad"], true);

    let created = client.call("plan_create", hello_plan());
    assert_eq!(created["isError"], false, "{created}");
    let run_id = created["structuredContent"]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(created["structuredContent"]["plan"]["steps"][0]["status"], "pending");

    // Done without the work: pev runs the assertion and refuses, saying what it saw.
    let refused = client.call(
        "step_update",
        json!({"id": "write", "status": "done", "evidence": "wrote hello.txt"}),
    );
    assert_eq!(refused["isError"], true);
    let text = refused["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("file_contains") && text.contains("hello.txt"), "{text}");
    assert_eq!(refused["structuredContent"]["plan"]["steps"][0]["status"], "pending");

    // Evidence that says nothing is refused too.
    let placeholder =
        client.call("step_update", json!({"id": "write", "status": "done", "evidence": "done"}));
    assert_eq!(placeholder["isError"], true);

    std::fs::write(ws.path().join("hello.txt"), "hi\n").unwrap();
    // By position, sent as a number: read as the first step.
    let done = client
        .call("step_update", json!({"id": 1, "status": "done", "evidence": "wrote hello.txt"}));
    assert_eq!(done["isError"], false, "{done}");
    assert_eq!(done["structuredContent"]["plan"]["steps"][0]["status"], "done");

    // At most one step in progress.
    let a = client.call("step_update", json!({"id": "check", "status": "in_progress"}));
    assert_eq!(a["isError"], false);

    let verified =
        client.call("postcondition_verify", json!({"id": "1", "evidence": "it says hi"}));
    assert_eq!(verified["isError"], false, "{verified}");
    assert_eq!(
        verified["structuredContent"]["plan"]["postconditions"][0]["checked_by_harness"],
        true
    );

    // A revision that drops a step without a reason is refused; with one it is journaled.
    let mut revised = hello_plan();
    revised["steps"].as_array_mut().unwrap().truncate(1);
    revised["dropped"] = json!([{"id": "check", "reason": ""}]);
    let no_reason = client.call("plan_create", revised.clone());
    assert_eq!(no_reason["isError"], true);
    assert!(no_reason["content"][0]["text"].as_str().unwrap().contains("needs a reason"));
    revised["dropped"] =
        json!([{"id": "check", "reason": "reading it back is what the postcondition does"}]);
    let ok = client.call("plan_create", revised);
    assert_eq!(ok["isError"], false, "{ok}");
    assert_eq!(ok["structuredContent"]["run_id"], run_id.as_str(), "the same run");
    assert_eq!(
        ok["structuredContent"]["plan"]["steps"][0]["status"], "done",
        "done steps stay done"
    );
    drop(client);

    // The journal holds the run: its plan versions and every call.
    let shown = pev_in(ws.path(), &["show", &run_id]);
    assert_eq!(shown.code, 0, "{}{}", shown.stdout, shown.stderr);
    assert!(shown.stdout.contains("dropped"), "{}", shown.stdout);
    assert!(shown.stdout.contains("open: success if the client stopped now"), "{}", shown.stdout);
    let status = pev_in(ws.path(), &["gate", "status", "--run", &run_id]);
    assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
    assert_eq!(status.json()["status"], "success");
}

#[test]
fn stateless_era_discover_meta_and_runs_named_by_id() {
    let ws = tempfile::tempdir().unwrap();
    let mut client = Client::stateless(ws.path(), &[]);
    let discover = client.request("server/discover", json!({}));
    let result = &discover["result"];
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(result["resultType"], "complete");
    assert!(result["ttlMs"].is_u64() && result["cacheScope"].is_string(), "{result}");
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "pev");
    assert!(result["instructions"].as_str().unwrap().contains("plan_create"));

    let list = client.request("tools/list", json!({}));
    assert_eq!(names(&list["result"]), TOOLS);
    assert_eq!(list["result"]["resultType"], "complete");
    assert!(list["result"]["tools"][0]["inputSchema"]["properties"]["run_id"].is_object());

    let created = client.call("plan_create", hello_plan());
    assert_eq!(created["resultType"], "complete");
    let run_id = created["structuredContent"]["run_id"].as_str().unwrap().to_owned();

    // A second server process (any instance may answer a stateless request) with the run id.
    let mut other = Client::stateless(ws.path(), &[]);
    std::fs::write(ws.path().join("hello.txt"), "hi").unwrap();
    let done = other.call(
        "step_update",
        json!({"run_id": run_id, "id": "write", "status": "done", "evidence": "wrote it"}),
    );
    assert_eq!(done["isError"], false, "{done}");
    let unknown = other.call("plan_show", json!({"run_id": "nope"}));
    assert_eq!(unknown["isError"], true);
    assert!(unknown["content"][0]["text"].as_str().unwrap().contains("unknown run"));

    // An unknown protocol version is -32022 with the versions supported.
    other.meta = Some(json!({"io.modelcontextprotocol/protocolVersion": "2099-01-01"}));
    let bad = other.request("tools/list", json!({}));
    assert_eq!(bad["error"]["code"], -32022);
    assert_eq!(bad["error"]["data"]["supported"], json!(["2026-07-28"]));
    assert_eq!(bad["error"]["data"]["requested"], "2099-01-01");
}

#[test]
fn json_rpc_errors_and_notifications() {
    let ws = tempfile::tempdir().unwrap();
    let mut client = Client::start(ws.path(), &[]);
    client.send_raw("{ not json");
    assert_eq!(client.read()["error"]["code"], -32700);
    client.send_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
    assert_eq!(client.read()["error"]["code"], -32600);
    client.send_raw(r#"{"jsonrpc":"1.0","id":2,"method":"ping"}"#);
    let old = client.read();
    assert_eq!((old["error"]["code"].as_i64(), old["id"].as_i64()), (Some(-32600), Some(2)));
    // A notification gets no answer: the next line is the ping's.
    client.notify("notifications/cancelled", Some(json!({"requestId": 9})));
    let pong = client.request("ping", json!({}));
    assert_eq!(pong["result"], json!({}));
    assert_eq!(client.request("resources/list", json!({}))["error"]["code"], -32601);
    let unknown = client.request("tools/call", json!({"name": "shell_exec", "arguments": {}}));
    assert_eq!(unknown["error"]["code"], -32602);
    assert!(unknown["error"]["message"].as_str().unwrap().contains("plan_create"));
    // An unknown version asked in initialize is answered with the newest known one.
    let init = client.request("initialize", json!({"protocolVersion": "1999-01-01", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}));
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "pev");
    // A model's mistakes are isError results, not protocol errors.
    let wrong = client.call("plan_create", json!({"objective": "x", "steps": "write a file"}));
    assert_eq!(wrong["isError"], true);
    assert!(
        wrong["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("invalid arguments for plan_create at steps")
    );
    let no_plan =
        client.call("step_update", json!({"id": "1", "status": "done", "evidence": "x y"}));
    assert_eq!(no_plan["isError"], true);
    assert!(no_plan["content"][0]["text"].as_str().unwrap().contains("plan_create first"));
    // Arrays sent as JSON text are read as arrays.
    let steps = r#"[{"title": "Say hello"}]"#;
    let created = client.call("plan_create", json!({"objective": "Say hello", "steps": steps}));
    assert_eq!(created["isError"], false, "{created}");
    let lint = client.call("lint_plan", json!({"plan": {"goal": "g", "steps": []}}));
    assert_eq!(lint["isError"], false);
    assert!(lint["structuredContent"]["status"].is_string());
}

#[test]
fn a_step_naming_a_file_is_not_done_while_the_file_is_unchanged() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("app.py"), "print('hi')\n").unwrap();
    let mut client = Client::initialized(ws.path(), &[]);
    let plan = json!({"objective": "Make app.py greet in French", "steps": [{"id": "edit", "title": "Edit app.py to print bonjour"}]});
    assert_eq!(client.call("plan_create", plan)["isError"], false);
    let refused = client.call(
        "step_update",
        json!({"id": "edit", "status": "done", "evidence": "changed the print"}),
    );
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(refused["content"][0]["text"].as_str().unwrap().contains("app.py"));
    // The client edits the file with its own tools; pev sees the change in the workspace.
    std::fs::write(ws.path().join("app.py"), "print('bonjour')\n").unwrap();
    let done = client.call(
        "step_update",
        json!({"id": "edit", "status": "done", "evidence": "changed the print"}),
    );
    assert_eq!(done["isError"], false, "{done}");
}

/// One HTTP exchange on a fresh connection: status line and body.
fn http(port: u16, method: &str, body: &str, headers: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let request = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

#[test]
fn http_transport_on_loopback_is_stateless_and_refuses_foreign_origins() {
    use std::io::BufRead;
    let ws = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("pev"))
        .args(["mcp", "--http", "127.0.0.1:0", "--workspace"])
        .arg(ws.path())
        .env_remove("CLAUDE_PROJECT_DIR")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
    let port: u16 =
        line.trim().rsplit(':').next().unwrap().trim_end_matches("/mcp").parse().unwrap();

    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let (status, body) = http(port, "POST", init, "");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["result"]["protocolVersion"],
        "2025-11-25"
    );
    let (status, body) =
        http(port, "POST", r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, "");
    assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 202 Accepted", ""));
    assert_eq!(http(port, "GET", "", "").0, "HTTP/1.1 405 Method Not Allowed");
    assert_eq!(
        http(port, "POST", init, "Origin: https://evil.example\r\n").0,
        "HTTP/1.1 403 Forbidden"
    );

    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let call = |args: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{{meta},"name":"plan_show","arguments":{args}}}}}"#
        )
    };
    // Shared: a call without its run is refused, not guessed.
    let (_, body) = http(port, "POST", &call("{}"), "");
    let result = &serde_json::from_str::<Value>(&body).unwrap()["result"];
    assert_eq!(result["isError"], true);
    assert!(result["content"][0]["text"].as_str().unwrap().contains("run_id"), "{result}");
    let create = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{{meta},"name":"plan_create","arguments":{}}}}}"#,
        hello_plan()
    );
    let (_, body) = http(port, "POST", &create, "");
    let run_id =
        serde_json::from_str::<Value>(&body).unwrap()["result"]["structuredContent"]["run_id"]
            .as_str()
            .unwrap()
            .to_owned();
    let (_, body) = http(port, "POST", &call(&format!(r#"{{"run_id":"{run_id}"}}"#)), "");
    let result = &serde_json::from_str::<Value>(&body).unwrap()["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["resultType"], "complete");
    let _ = child.kill();
    let _ = child.wait();
}

/// Codex names its session in each call's `_meta`: a new session gets its own run and never
/// takes over an older session's open one.
#[test]
fn a_session_named_in_meta_gets_its_own_run() {
    let ws = tempfile::tempdir().unwrap();
    let mut old = Client::initialized(ws.path(), &[]);
    let first = old.call("plan_create", hello_plan());
    let old_run = first["structuredContent"]["run_id"].as_str().unwrap().to_owned();
    drop(old);
    let mut codex = Client::initialized(ws.path(), &[]);
    let call = |client: &mut Client, name: &str, arguments: Value| {
        let params = json!({"name": name, "arguments": arguments,
                            "_meta": {"sessionId": "codex-2", "threadId": "codex-2", "callId": "c1"}});
        client.request("tools/call", params)["result"].clone()
    };
    let shown = call(&mut codex, "plan_show", json!({}));
    assert_eq!(shown["structuredContent"]["run_id"], Value::Null, "{shown}");
    let created = call(&mut codex, "plan_create", hello_plan());
    let new_run = created["structuredContent"]["run_id"].as_str().unwrap().to_owned();
    assert_ne!(new_run, old_run);
    assert!(created["content"][0]["text"].as_str().unwrap().contains("revision 1"));
    let status = pev_in(ws.path(), &["gate", "status", "--session", "codex-2"]);
    assert_eq!(status.json()["run_id"], new_run.as_str());
}
