//! Each built-in tool (CONTRACTS.md §3) through a plan run by `pev run`: what it returns, what it
//! does to the workspace, and how it fails. `http.request` talks to a hand-rolled server on
//! 127.0.0.1.

use serde_json::json;

use super::run_support::{HttpServer, Outcome, Ws, at_step, run_level};
use super::support::{pev, run};

/// sha256("hello\n").
const HELLO_SHA: &str = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";

#[test]
fn file_read_returns_content_size_hash_and_a_line_window() {
    let ws = Ws::new();
    ws.file("hello.txt", "hello\n");
    ws.file("lines.txt", "one\ntwo\nthree\nfour\n");
    let plan = json!({"goal": "Read two files", "steps": [
        {"id": "whole", "tool": "file.read", "parameters": {"path": "hello.txt"}},
        {"id": "window", "tool": "file.read",
         "parameters": {"path": "lines.txt", "offset": 1, "limit": 2}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.status(), "success");
    let whole = &out.step("whole")["output"];
    assert_eq!(whole["content"], "hello\n");
    assert_eq!(whole["bytes"], 6);
    assert_eq!(whole["sha256"], HELLO_SHA);
    assert_eq!(whole["truncated"], false);
    let window = &out.step("window")["output"];
    assert_eq!(window["content"], "two\nthree\n", "{window}");
    assert_eq!(window["total_lines"], 4);
    assert_eq!(out.result()["goal_actions_executed"], false, "reading is not a goal action");
}

#[test]
fn file_list_lists_a_directory_recursively_and_by_glob() {
    let ws = Ws::new();
    ws.file("src/a.rs", "a\n");
    ws.file("src/b.txt", "bb\n");
    ws.file("src/sub/c.rs", "ccc\n");
    ws.file("top.md", "t\n");
    let plan = json!({"goal": "List the sources", "steps": [
        {"id": "top", "tool": "file.list", "parameters": {"path": "."}},
        {"id": "rs", "tool": "file.list",
         "parameters": {"path": "src", "recursive": true, "glob": "*.rs"}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let paths = |id: &str| -> Vec<(String, String, u64)> {
        let entries = out.step(id)["output"]["entries"].as_array().expect("entries").clone();
        entries
            .iter()
            .map(|e| {
                (
                    e["path"].as_str().expect("path").to_owned(),
                    e["kind"].as_str().expect("kind").to_owned(),
                    e["bytes"].as_u64().expect("bytes"),
                )
            })
            .collect()
    };
    let top = paths("top");
    assert!(top.contains(&("src".into(), "dir".into(), 0)), "{top:?}");
    assert!(top.contains(&("top.md".into(), "file".into(), 2)), "{top:?}");
    assert!(!top.iter().any(|(p, _, _)| p.starts_with("src/")), "not recursive: {top:?}");
    assert_eq!(
        paths("rs"),
        vec![("src/a.rs".into(), "file".into(), 2), ("src/sub/c.rs".into(), "file".into(), 4)]
    );
}

#[test]
fn file_write_creates_the_file_and_reports_the_mutation() {
    let ws = Ws::new();
    let plan = json!({"goal": "Write the notes file", "steps": [
        {"id": "write", "tool": "file.write",
         "parameters": {"path": "docs/notes.txt", "content": "hello\n"},
         "assertions": [{"type": "file_exists", "path": "docs/notes.txt"}]}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.status(), "success");
    assert_eq!(ws.read("docs/notes.txt"), "hello\n");
    let output = &out.step("write")["output"];
    assert_eq!(output["bytes"], 6);
    assert_eq!(output["sha256"], HELLO_SHA);
    assert_eq!(output["created"], true);
    assert_eq!(out.result()["goal_actions_executed"], true);
    assert_eq!(
        out.result()["file_mutations"],
        json!([{"path": "docs/notes.txt", "bytes_before": 0, "bytes_after": 6,
                "lines_added": 1, "lines_removed": 0, "no_op": false}])
    );
}

#[test]
fn file_patch_edits_in_place_and_a_missing_old_text_fails_the_step() {
    let ws = Ws::new();
    ws.file("style.css", "body {\n  background: #ffffff;\n  color: #222;\n}\n");
    let plan = json!({"goal": "Make the background dark green", "steps": [
        {"id": "patch", "tool": "file.patch",
         "parameters": {"path": "style.css",
                        "edits": [{"old": "#ffffff", "new": "#013220"}]},
         "assertions": [{"type": "content_changed", "path": "style.css"}]}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(ws.read("style.css"), "body {\n  background: #013220;\n  color: #222;\n}\n");
    let output = &out.step("patch")["output"];
    assert_eq!(output["changed"], true);
    assert_eq!(output["bytes_before"], 47);
    assert_eq!(output["bytes_after"], 47);
    let m = &out.result()["file_mutations"][0];
    assert_eq!((m["lines_added"].as_u64(), m["lines_removed"].as_u64()), (Some(1), Some(1)));

    // The same edit again: `#ffffff` is gone, so the patch cannot apply.
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.step_status("patch"), "failed");
    assert_eq!(out.reasons(), vec![at_step("step_failed", "patch"), run_level("no_effects")]);
    let error = out.step_error("patch");
    assert!(error.contains("edits[0].old was not found in `style.css`"), "{error}");
    assert_eq!(ws.read("style.css"), "body {\n  background: #013220;\n  color: #222;\n}\n");
}

#[test]
fn shell_exec_runs_a_command_string_and_an_argv_in_the_workspace() {
    let ws = Ws::new();
    ws.file("marker-file.txt", "x");
    let plan = json!({"goal": "Run commands", "steps": [
        {"id": "cmd", "tool": "shell.exec", "parameters": {"command": "echo 'hello  world'"},
         "assertions": [{"type": "exit_code_eq", "code": 0}]},
        {"id": "ls", "tool": "shell.exec", "parameters": {"command": "ls"},
         "assertions": [{"type": "exit_code_eq", "code": 0}]},
        // argv is not split by a shell: "a b" stays one argument, `$HOME` stays literal.
        {"id": "argv", "tool": "shell.exec",
         "parameters": {"argv": ["printf", "%s|", "a b", "$HOME", "c"]},
         "assertions": [{"type": "exit_code_eq", "code": 0}]},
        {"id": "code", "tool": "shell.exec",
         "parameters": {"argv": ["sh", "-c", "echo oops >&2; exit 7"]},
         "assertions": [{"type": "exit_code_eq", "code": 7}]}
    ]});
    let out = ws.run(&plan, &["--jobs", "1"]);
    assert_eq!(out.code, 0, "{out:?}");
    let cmd = &out.step("cmd")["output"];
    assert_eq!(cmd["exit_code"], 0);
    assert_eq!(cmd["stdout"], "hello  world\n", "run by sh -c: {cmd}");
    let ls = out.step("ls")["output"]["stdout"].as_str().expect("stdout").to_owned();
    assert!(ls.lines().any(|l| l == "marker-file.txt"), "cwd is the workspace: {ls}");
    assert_eq!(out.step("argv")["output"]["stdout"], "a b|$HOME|c|");
    let code = &out.step("code")["output"];
    assert_eq!((code["exit_code"].as_i64(), code["stderr"].as_str()), (Some(7), Some("oops\n")));
}

#[test]
fn shell_exec_scrubs_the_environment_and_passes_the_steps_env() {
    let ws = Ws::new();
    let plan = json!({"goal": "Print the environment", "steps": [
        {"id": "env", "tool": "shell.exec",
         "parameters": {"argv": ["env"], "env": {"GREETING": "hi there"}},
         "assertions": [{"type": "exit_code_eq", "code": 0}]}
    ]});
    let plan = ws.plan_file(&plan).to_string_lossy().into_owned();
    let ws_arg = ws.arg();
    let r = run(
        pev().env("ANTHROPIC_API_KEY", "sk-ant-leak").env("PEV_TEST_SECRET", "leak-me"),
        &["run", &plan, "--workspace", &ws_arg, "--json"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let out = Outcome::from(r);
    let stdout = out.step("env")["output"]["stdout"].as_str().expect("stdout").to_owned();
    assert!(stdout.contains("GREETING=hi there\n"), "{stdout}");
    assert!(stdout.contains("PATH="), "PATH is on the allow-list: {stdout}");
    assert!(!stdout.contains("leak"), "no inherited secrets: {stdout}");
    assert!(!stdout.contains("ANTHROPIC_API_KEY"), "{stdout}");
}

#[test]
fn http_request_gets_and_posts_to_a_local_server() {
    let server = HttpServer::start();
    let ws = Ws::new();
    let plan = json!({"goal": "Post the report", "steps": [
        {"id": "get", "tool": "http.request",
         "parameters": {"method": "GET", "url": server.url("/hello")}},
        {"id": "post", "tool": "http.request", "depends_on": ["get"],
         "parameters": {"method": "POST", "url": server.url("/echo"),
                        "headers": {"X-Token": "t-123"}, "body": "report body"},
         "assertions": [{"type": "output_contains", "pattern": "report body"}]},
        {"id": "missing", "tool": "http.request", "depends_on": ["post"],
         "parameters": {"method": "GET", "url": server.url("/missing")}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let get = &out.step("get")["output"];
    assert_eq!(get["status"], 200);
    assert_eq!(get["body"], "hello from the test server");
    assert_eq!(get["headers"]["x-test"], "yes");
    assert_eq!(out.step("post")["output"]["body"], "report body");
    assert_eq!(out.step("missing")["output"]["status"], 404);
    assert_eq!(out.result()["goal_actions_executed"], true, "a POST is a goal action");

    let received = server.received();
    let post = received.iter().find(|r| r.path == "/echo").expect("the POST arrived");
    assert_eq!(post.method, "POST");
    assert_eq!(post.body, "report body");
    assert!(post.headers.contains(&("x-token".into(), "t-123".into())), "{post:?}");
    assert_eq!(received.len(), 3, "{received:?}");
}

#[test]
fn http_request_refuses_a_host_that_is_not_allowed() {
    let ws = Ws::new();
    let plan = json!({"goal": "Fetch a page", "steps": [
        {"id": "fetch", "tool": "http.request",
         "parameters": {"method": "GET", "url": "http://example.com/"}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.step_status("fetch"), "failed");
    let error = out.step_error("fetch");
    assert!(error.contains("example.com") && error.contains("not allowed"), "{error}");
}
