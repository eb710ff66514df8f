//! COMMAND_INJECTION and PATH_TRAVERSAL: references spliced into shell commands, chaining and
//! substitution outside quotes, shells run on code that holds a reference, and paths that leave
//! the workspace; with the near-misses a quote-aware reading must let through.

use pev_protocol::LintCode::{CommandInjection, PathTraversal};
use serde_json::{Value, json};

use super::support::{findings, found, lint_default};

/// A plan whose first step `src` lists files, then `(tool, parameters)` as step `s1`.
fn plan(tool: &str, params: Value) -> String {
    let mut doc = json!({"goal": "g", "steps": [
        {"id": "src", "tool": "file.list", "parameters": {"path": "."}},
        {"id": "s1", "tool": tool, "depends_on": ["src"]},
    ]});
    doc["steps"][1]["parameters"] = params;
    doc.to_string()
}

/// The `(path, msg)` of each finding with `code`, all of which must be on step 1.
fn at_step1(plan: &str, code: pev_protocol::LintCode) -> Vec<(String, String)> {
    let result = lint_default(plan);
    let all = findings(&result, code);
    assert!(all.iter().all(|f| f.step == Some(1)), "{all:#?}");
    all.iter().map(|f| (f.path.clone(), f.msg.clone())).collect()
}

#[test]
fn reference_in_a_shell_command() {
    let p = plan("shell.exec", json!({"command": "cat '${src.result.entries.0.path}'"}));
    let got = at_step1(&p, CommandInjection);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].0, "/steps/1/parameters/command");
    assert!(got[0].1.contains("${src.result.entries.0.path} is spliced into a shell command"));
}

#[test]
fn chaining_and_substitution_outside_single_quotes() {
    for (command, op) in [
        ("ls; rm -rf /", "`;`"),
        ("make && make install", "`&&`"),
        ("test -f x || touch x", "`||`"),
        ("echo `whoami`", "backticks"),
        ("echo $(whoami)", "`$(`"),
        ("echo \"user: $(id -un)\"", "`$(`"),
        ("echo \"`id`\"", "backticks"),
        ("ls\nrm x", "a newline"),
        ("sleep 9 & rm x", "`&`"),
        ("echo 'a' ;echo b", "`;`"),
    ] {
        for tool in ["shell.exec", "shell.run", "ci.exec"] {
            let got = at_step1(&plan(tool, json!({ "command": command })), CommandInjection);
            assert_eq!(got.len(), 1, "{tool} {command:?}: {got:#?}");
            assert_eq!(got[0].0, "/steps/1/parameters/command");
            assert!(got[0].1.contains(&format!("({op})")), "{command:?}: {}", got[0].1);
        }
    }
    let got = at_step1(&plan("shell.exec", json!({"command": "a; b && c; d"})), CommandInjection);
    assert!(got[0].1.contains("(`;`, `&&`)"), "{}", got[0].1);
}

#[test]
fn a_reference_and_chaining_are_two_findings() {
    let p = plan("shell.exec", json!({"command": "cd ${src.result.dir} && make"}));
    let got = at_step1(&p, CommandInjection);
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(got[0].1.contains("spliced") && got[1].1.contains("(`&&`)"));
}

#[test]
fn shell_or_interpreter_running_a_reference_from_argv() {
    for (argv, index, program) in [
        (json!(["bash", "-c", "echo ${src.result.x}"]), 2, "bash"),
        (json!(["/bin/sh", "-lc", "{{src.result.cmd}}"]), 2, "sh"),
        (json!(["env", "FOO=1", "bash", "-e", "-c", "x ${src.result.y}"]), 5, "bash"),
        (json!(["python3", "-c", "print('${src.result.v}')"]), 2, "python3"),
        (json!(["node", "-e", "run(${src.result.v})"]), 2, "node"),
    ] {
        let got = at_step1(&plan("shell.exec", json!({ "argv": argv })), CommandInjection);
        assert_eq!(got.len(), 1, "{argv}: {got:#?}");
        assert_eq!(got[0].0, format!("/steps/1/parameters/argv/{index}"));
        assert!(got[0].1.contains(&format!("code that `{program}` runs")), "{}", got[0].1);
    }
    // `command` given as an array is an argv too.
    let p = plan("shell.exec", json!({"command": ["sh", "-c", "ls ${src.result.d}"]}));
    assert_eq!(
        found(&lint_default(&p), CommandInjection),
        [(Some(1), "/steps/1/parameters/command/2".to_owned())]
    );
}

#[test]
fn command_near_misses() {
    for params in [
        json!({"command": "ls -la src"}),
        json!({"command": "grep 'a;b' f.txt"}),
        json!({"command": "grep 'x && y || `z` $(w)' f.txt"}),
        json!({"command": "echo \"$HOME\""}),
        json!({"command": "echo ${HOME} $PATH"}),
        json!({"command": "cat a | grep b | wc -l"}),
        json!({"command": "make 2>&1 >log &>/dev/null"}),
        json!({"command": "echo $((1 + 2))"}),
        json!({"command": "echo hi # a; b && c"}),
        json!({"command": "echo a\\;b"}),
        json!({"command": "ls -la\n"}),
        json!({"argv": ["cat", "${src.result.path}"]}),
        json!({"argv": ["bash", "script.sh", "${src.result.x}"]}),
        json!({"argv": ["bash", "-c", "echo hi; echo there"]}),
        json!({"argv": ["grep", "-c", "${src.result.x}", "f"]}),
        json!({"command": "ls", "env": {"TARGET": "${src.result.path}"}}),
    ] {
        let result = lint_default(&plan("shell.exec", params.clone()));
        assert_eq!(found(&result, CommandInjection), [], "{params}");
    }
    // Not a shell tool: a `command` parameter is just text.
    let p = plan("notify.slack", json!({"command": "a; b ${src.result.x}"}));
    assert_eq!(found(&lint_default(&p), CommandInjection), []);
}

#[test]
fn paths_that_leave_the_workspace() {
    for (tool, params, pointer, reason) in [
        ("file.read", json!({"path": "../etc/passwd"}), "path", "`..` component"),
        ("file.read", json!({"path": "logs\\..\\..\\secret"}), "path", "`..` component"),
        ("file.read", json!({"path": "/etc/passwd"}), "path", "is absolute"),
        ("file.read", json!({"path": "C:\\Windows\\system32"}), "path", "is absolute"),
        ("file.read", json!({"path": "\\\\server\\share"}), "path", "is absolute"),
        ("file.read", json!({"path": "~/.ssh/id_rsa"}), "path", "starts with `~`"),
        ("file.read", json!({"path": "a\u{0}b"}), "path", "NUL byte"),
        ("file.list", json!({"dir": ".."}), "dir", "`..` component"),
        ("file.copy", json!({"src": "ok.txt", "dest": "/tmp/x"}), "dest", "is absolute"),
        ("file.read", json!({"paths": ["ok.txt", "a/../../b"]}), "paths/1", "`..` component"),
        (
            "file.write",
            json!({"path": "out/${src.result.name}.txt", "content": "x"}),
            "path",
            "built from step output ${src.result.name}",
        ),
    ] {
        let got = at_step1(&plan(tool, params.clone()), PathTraversal);
        assert_eq!(got.len(), 1, "{params}: {got:#?}");
        assert_eq!(got[0].0, format!("/steps/1/parameters/{pointer}"), "{params}");
        assert!(got[0].1.contains(reason), "{params}: {}", got[0].1);
    }
}

#[test]
fn path_message_lists_every_reason_and_escapes_the_path() {
    let p = plan("file.read", json!({"path": "/x/../${src.result.n}\u{0}"}));
    let got = at_step1(&p, PathTraversal);
    assert_eq!(got.len(), 1);
    let msg = &got[0].1;
    for reason in ["`..` component", "is absolute", "NUL byte", "built from step output"] {
        assert!(msg.contains(reason), "{reason}: {msg}");
    }
    assert!(msg.contains("\\0") && !msg.contains('\0'), "{msg}");
}

#[test]
fn path_near_misses() {
    for params in [
        json!({"path": "a..b.txt"}),
        json!({"path": "./x/y"}),
        json!({"path": "dir/.hidden"}),
        json!({"path": "..foo"}),
        json!({"path": "src/main.rs", "dest": "backup/main.rs"}),
        json!({"path": "${src.result.entries.0.path}"}),
        json!({"paths": ["a.txt", "{{src.result.entries.1.path}}"]}),
        json!({"path": "notes/a:b.txt"}),
        json!({"content": "../../etc/passwd is a path in text", "path": "x.txt"}),
    ] {
        let result = lint_default(&plan("file.write", params.clone()));
        assert_eq!(found(&result, PathTraversal), [], "{params}");
    }
    // Path-like parameters of a tool that is not a file tool are not file paths.
    let p = plan("http.request", json!({"url": "https://x", "path": "../api"}));
    assert_eq!(found(&lint_default(&p), PathTraversal), []);
}
