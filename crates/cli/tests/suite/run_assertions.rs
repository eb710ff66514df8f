//! Every assertion type of CONTRACTS.md §2, passing and failing, checked by `pev run` after its
//! step: one plan where all of them pass (the run succeeds) and one where each step carries one
//! failing assertion (each step fails with `assertion_failed` and a detail saying what was seen).

use serde_json::{Value, json};

use super::run_support::{HttpServer, Outcome, Ws, at_step};

fn types(out: &Outcome, id: &str) -> Vec<(String, bool)> {
    out.assertions(id).into_iter().map(|(t, passed, _)| (t, passed)).collect()
}

#[test]
fn every_assertion_type_passes_when_its_condition_holds() {
    let server = HttpServer::start();
    let ws = Ws::new();
    ws.file("old.txt", "stale\n");
    let plan = json!({"goal": "Write the report and check it", "steps": [
        {"id": "write", "tool": "file.write",
         "parameters": {"path": "out/report.txt", "content": "total: 42\nstatus: ok\n"},
         "assertions": [
            {"type": "file_exists", "path": "out/report.txt"},
            {"type": "file_not_exists", "path": "out/missing.txt"},
            {"type": "file_contains", "path": "out/report.txt", "pattern": "total: 42"},
            {"type": "file_contains", "path": "out/report.txt", "pattern": "total: \\d+",
             "regex": true},
            {"type": "file_not_contains", "path": "out/report.txt", "pattern": "error"},
            {"type": "file_not_contains", "path": "out/report.txt", "pattern": "^fail",
             "regex": true},
            {"type": "file_size_gt", "path": "out/report.txt", "bytes": 20},
            {"type": "content_changed", "path": "out/report.txt"},
            {"assert": "file_exists", "path": "old.txt"}
         ]},
        {"id": "build", "tool": "shell.exec", "depends_on": ["write"],
         "parameters": {"argv": ["echo", "build ok"]},
         "assertions": [
            {"type": "exit_code_eq", "code": 0},
            {"type": "output_contains", "pattern": "build ok"},
            {"type": "output_contains", "pattern": "build o+k", "regex": true},
            {"type": "command_succeeds", "command": "test -f out/report.txt", "timeout_s": 5}
         ]},
        {"id": "serve", "tool": "http.request",
         "parameters": {"method": "GET", "url": server.url("/")},
         "assertions": [
            {"type": "http_status", "url": server.url("/")},
            {"type": "http_status", "url": server.url("/missing"), "status": 404},
            {"type": "http_200", "url": server.url("/page")},
            {"type": "socket_open", "host": "127.0.0.1", "port": server.port},
            {"type": "output_contains", "pattern": "hello from the test server"}
         ]},
        {"id": "later", "tool": "file.read", "depends_on": ["build"],
         "parameters": {"path": "out/report.txt"},
         "assertions": [
            {"type": "output_contains", "pattern": "build ok", "step": "build"},
            {"type": "exit_code_eq", "code": 0, "step": "build"}
         ]}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.status(), "success", "{}", out.result());
    for id in ["write", "build", "serve", "later"] {
        let failed: Vec<_> = out.assertions(id).into_iter().filter(|a| !a.1).collect();
        assert!(failed.is_empty(), "{id}: {failed:?}");
    }
    assert_eq!(types(&out, "write").len(), 9);
    assert_eq!(types(&out, "build").len(), 4);
    assert_eq!(types(&out, "serve").len(), 5);
    let serve: Vec<String> = types(&out, "serve").into_iter().map(|(t, _)| t).collect();
    assert!(serve.contains(&"socket_open".to_owned()), "{serve:?}");
    // One assertion.checked event per assertion, each passed.
    let checked = out.of("assertion.checked");
    assert_eq!(checked.len(), 9 + 4 + 5 + 2, "{checked:?}");
    assert!(checked.iter().all(|e| e["result"]["passed"] == true));
}

/// A step of the failing plan: `tool` with `parameters`, one `assertion`, `on_fail: continue`.
fn failing(id: &str, tool: &str, parameters: Value, assertion: Value) -> Value {
    let mut step = json!({"id": id, "tool": tool, "on_fail": "continue"});
    step["parameters"] = parameters;
    step["assertions"] = Value::Array(vec![assertion]);
    step
}

#[test]
fn every_assertion_type_fails_with_a_detail_when_its_condition_does_not_hold() {
    let server = HttpServer::start();
    // A port nothing listens on: bound, then released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed_port = closed.local_addr().expect("addr").port();
    drop(closed);
    let ws = Ws::new();
    ws.file("a.txt", "hello\n");
    let read = json!({"path": "a.txt"});
    let steps = vec![
        failing(
            "exists",
            "file.read",
            read.clone(),
            json!({"type": "file_exists", "path": "nope.txt"}),
        ),
        failing(
            "not-exists",
            "file.read",
            read.clone(),
            json!({"type": "file_not_exists", "path": "a.txt"}),
        ),
        failing(
            "contains",
            "file.read",
            read.clone(),
            json!({"type": "file_contains", "path": "a.txt", "pattern": "goodbye"}),
        ),
        failing(
            "contains-re",
            "file.read",
            read.clone(),
            json!({"type": "file_contains", "path": "a.txt", "pattern": "^h[0-9]+", "regex": true}),
        ),
        failing(
            "not-contains",
            "file.read",
            read.clone(),
            json!({"type": "file_not_contains", "path": "a.txt", "pattern": "hello"}),
        ),
        failing(
            "size",
            "file.read",
            read.clone(),
            json!({"type": "file_size_gt", "path": "a.txt", "bytes": 1000}),
        ),
        failing(
            "changed",
            "file.write",
            json!({"path": "a.txt", "content": "hello\n"}),
            json!({"type": "content_changed", "path": "a.txt"}),
        ),
        failing(
            "output",
            "shell.exec",
            json!({"argv": ["echo", "hi"]}),
            json!({"type": "output_contains", "pattern": "bye"}),
        ),
        failing(
            "exit",
            "shell.exec",
            json!({"argv": ["sh", "-c", "exit 3"]}),
            json!({"type": "exit_code_eq", "code": 0}),
        ),
        failing(
            "command",
            "file.read",
            read.clone(),
            json!({"type": "command_succeeds", "command": "test -f nope.txt"}),
        ),
        failing(
            "socket",
            "file.read",
            read.clone(),
            json!({"type": "socket_open", "host": "127.0.0.1", "port": closed_port}),
        ),
        failing(
            "http",
            "file.read",
            read,
            json!({"type": "http_status", "url": server.url("/missing"), "status": 200,
                       "recovery": "serve the page first"}),
        ),
    ];
    let ids: Vec<String> = steps.iter().map(|s| s["id"].as_str().expect("id").to_owned()).collect();
    let plan = json!({"goal": "Check the workspace", "steps": steps});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.status(), "failed", "no step is done");

    let mut expected = Vec::new();
    for id in &ids {
        assert_eq!(out.step_status(id), "failed", "{id}");
        let results = out.assertions(id);
        assert_eq!(results.len(), 1, "{id}: {results:?}");
        assert!(!results[0].1, "{id} must fail: {results:?}");
        expected.push(at_step("assertion_failed", id));
        assert!(out.step_error(id).contains("assertion"), "{id}: {}", out.step_error(id));
    }
    let got: Vec<_> =
        out.reasons().into_iter().filter(|(code, _)| code == "assertion_failed").collect();
    assert_eq!(got, expected);
    // The write that changed nothing is also a no-op mutation.
    assert!(out.reasons().contains(&at_step("no_op_mutation", "changed")), "{:?}", out.reasons());

    let detail = |id: &str| out.assertions(id).remove(0).2;
    let expect_in = |id: &str, needles: &[&str]| {
        let d = detail(id);
        for n in needles {
            assert!(d.contains(n), "{id}: detail {d:?} lacks {n:?}");
        }
    };
    expect_in("exists", &["nope.txt"]);
    expect_in("not-exists", &["a.txt"]);
    expect_in("contains", &["goodbye", "a.txt"]);
    expect_in("contains-re", &["^h[0-9]+"]);
    expect_in("not-contains", &["hello", "line 1"]);
    expect_in("size", &["6", "1000"]);
    expect_in("changed", &["a.txt"]);
    expect_in("output", &["bye"]);
    expect_in("exit", &["3"]);
    expect_in("command", &["test -f nope.txt"]);
    expect_in("socket", &[&closed_port.to_string()]);
    expect_in("http", &["404"]);
}

#[test]
fn an_assertion_path_outside_the_workspace_is_a_failed_assertion_not_a_read() {
    let ws = Ws::new();
    std::fs::write(ws.outside().join("secret.txt"), "top secret\n").expect("write outside");
    std::os::unix::fs::symlink(ws.outside().join("secret.txt"), ws.path().join("link.txt"))
        .expect("symlink");
    ws.file("a.txt", "a\n");
    let plan = json!({"goal": "Check the secret", "steps": [
        {"id": "check", "tool": "file.read", "parameters": {"path": "a.txt"},
         "assertions": [
            {"type": "file_contains", "path": "link.txt", "pattern": "top secret"},
            {"type": "file_exists", "path": "../outside/secret.txt"}
         ]}
    ]});
    let policy = ws.root.path().join("policy.yaml");
    std::fs::write(&policy, "severity:\n  PATH_TRAVERSAL: warning\n  INVALID_ASSERTION: warning\n")
        .expect("policy");
    let out = ws.run(&plan, &["--policy", policy.to_str().expect("utf-8")]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.step_status("check"), "failed");
    let results = out.assertions("check");
    assert!(results.iter().all(|(_, passed, _)| !passed), "{results:?}");
    for (_, _, detail) in &results {
        assert!(detail.contains("leaves the workspace"), "{detail}");
        assert!(!detail.contains("top secret"), "no content leaks: {detail}");
    }
}
