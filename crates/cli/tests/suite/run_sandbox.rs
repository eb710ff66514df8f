//! Sandbox escapes through plans run by `pev run`: `..`, absolute paths, symlinks to outside
//! files and directories (already there, or created mid-run by a shell step), each refused with a
//! clear error while the outside file stays untouched; the shell timeout killing a whole process
//! group; and the 1 MiB output caps.
//!
//! Lint refuses `..` and absolute paths before a run (PATH_TRAVERSAL), so the plans that use
//! them literally run with a policy turning that code into a warning, and one plan smuggles the
//! path in through a reference, which lint cannot see.

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};

use super::run_support::{BIG_BODY, HttpServer, Outcome, Ws, process_alive_with, unique_marker};

const OUTSIDE_TEXT: &str = "outside original\n";

/// A workspace with `outside/victim.txt` beside it.
fn with_victim() -> (Ws, PathBuf) {
    let ws = Ws::new();
    let victim = ws.outside().join("victim.txt");
    std::fs::write(&victim, OUTSIDE_TEXT).expect("write victim");
    (ws, victim)
}

/// Runs `steps` (each gets `on_fail: continue`) with PATH_TRAVERSAL lowered to a warning.
fn run_lenient(ws: &Ws, steps: Vec<Value>) -> Outcome {
    let steps: Vec<Value> = steps
        .into_iter()
        .map(|mut s| {
            s["on_fail"] = json!("continue");
            s
        })
        .collect();
    let policy = ws.root.path().join("lenient.yaml");
    std::fs::write(&policy, "severity:\n  PATH_TRAVERSAL: warning\n").expect("policy");
    let plan = json!({"goal": "Update the files", "steps": steps});
    ws.run(&plan, &["--policy", policy.to_str().expect("utf-8"), "--jobs", "1"])
}

/// Each of `ids` failed with an error saying `path` leaves the workspace.
fn assert_refused(out: &Outcome, cases: &[(&str, &str)]) {
    for (id, path) in cases {
        assert_eq!(out.step_status(id), "failed", "{id}: {}", out.result());
        let error = out.step_error(id);
        assert!(
            error.contains(&format!("`{path}`")) && error.contains("leaves the workspace"),
            "{id}: {error}"
        );
    }
}

#[test]
fn dot_dot_and_absolute_paths_are_refused_by_every_file_tool() {
    let (ws, victim) = with_victim();
    let out = run_lenient(
        &ws,
        vec![
            json!({"id": "read-up", "tool": "file.read",
                   "parameters": {"path": "../outside/victim.txt"}}),
            json!({"id": "read-abs", "tool": "file.read", "parameters": {"path": "/etc/passwd"}}),
            json!({"id": "read-deep", "tool": "file.read",
                   "parameters": {"path": "a/../../outside/victim.txt"}}),
            json!({"id": "write-up", "tool": "file.write",
               "parameters": {"path": "../outside/victim.txt", "content": "pwned"}}),
            json!({"id": "write-abs", "tool": "file.write",
               "parameters": {"path": victim.to_str().expect("utf-8"), "content": "pwned"}}),
            json!({"id": "new-up", "tool": "file.write",
               "parameters": {"path": "../outside/new.txt", "content": "pwned"}}),
            json!({"id": "patch-up", "tool": "file.patch",
               "parameters": {"path": "../outside/victim.txt",
                              "edits": [{"old": "original", "new": "pwned"}]}}),
            json!({"id": "list-up", "tool": "file.list", "parameters": {"path": ".."}}),
            json!({"id": "list-abs", "tool": "file.list", "parameters": {"path": "/etc"}}),
        ],
    );
    assert_eq!(out.code, 1, "{out:?}");
    let victim_arg = victim.to_string_lossy().into_owned();
    assert_refused(
        &out,
        &[
            ("read-up", "../outside/victim.txt"),
            ("read-abs", "/etc/passwd"),
            ("read-deep", "a/../../outside/victim.txt"),
            ("write-up", "../outside/victim.txt"),
            ("write-abs", &victim_arg),
            ("new-up", "../outside/new.txt"),
            ("patch-up", "../outside/victim.txt"),
            ("list-up", ".."),
            ("list-abs", "/etc"),
        ],
    );
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), OUTSIDE_TEXT);
    assert!(!ws.outside().join("new.txt").exists());
    assert_eq!(out.result()["file_mutations"], json!([]));
    // No content from outside reached the journal.
    assert!(!out.stdout.contains("root:"), "no /etc/passwd content in the events");
}

#[test]
fn a_path_smuggled_in_through_a_reference_is_refused_at_run_time() {
    let (ws, victim) = with_victim();
    let plan = json!({"goal": "Update the file", "steps": [
        {"id": "name", "tool": "shell.exec",
         "parameters": {"argv": ["printf", "../outside/victim.txt"]},
         "assertions": [{"type": "exit_code_eq", "code": 0}]},
        {"id": "write", "tool": "file.write",
         "parameters": {"path": "${name.result.stdout}", "content": "pwned"},
         "assertions": [{"type": "file_exists", "path": "victim.txt"}]}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_refused(&out, &[("write", "../outside/victim.txt")]);
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), OUTSIDE_TEXT);
}

#[test]
fn symlinks_that_point_outside_are_refused_for_reads_writes_patches_and_lists() {
    let (ws, victim) = with_victim();
    symlink("/etc/passwd", ws.path().join("passwd")).expect("symlink");
    symlink(&victim, ws.path().join("victim-link.txt")).expect("symlink");
    symlink(ws.outside(), ws.path().join("outdir")).expect("symlink");
    ws.file("inside.txt", "inside\n");
    let out = run_lenient(
        &ws,
        vec![
            json!({"id": "read-passwd", "tool": "file.read", "parameters": {"path": "passwd"}}),
            json!({"id": "write-link", "tool": "file.write",
               "parameters": {"path": "victim-link.txt", "content": "pwned"}}),
            json!({"id": "write-through-dir", "tool": "file.write",
               "parameters": {"path": "outdir/victim.txt", "content": "pwned"}}),
            json!({"id": "create-through-dir", "tool": "file.write",
               "parameters": {"path": "outdir/new.txt", "content": "pwned"}}),
            json!({"id": "patch-link", "tool": "file.patch",
               "parameters": {"path": "victim-link.txt",
                              "edits": [{"old": "original", "new": "pwned"}]}}),
            json!({"id": "list-dir", "tool": "file.list", "parameters": {"path": "outdir"}}),
            json!({"id": "list-all", "tool": "file.list",
                   "parameters": {"path": ".", "recursive": true}}),
        ],
    );
    assert_refused(
        &out,
        &[
            ("read-passwd", "passwd"),
            ("write-link", "victim-link.txt"),
            ("write-through-dir", "outdir/victim.txt"),
            ("create-through-dir", "outdir/new.txt"),
            ("patch-link", "victim-link.txt"),
            ("list-dir", "outdir"),
        ],
    );
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), OUTSIDE_TEXT);
    assert!(!ws.outside().join("new.txt").exists());
    // A recursive list shows the links as links and does not descend into them.
    assert_eq!(out.step_status("list-all"), "done");
    let entries = out.step("list-all")["output"]["entries"].as_array().expect("entries").clone();
    let outdir = entries.iter().find(|e| e["path"] == "outdir").expect("outdir listed");
    assert_eq!(outdir["kind"], "symlink");
    assert!(!entries.iter().any(|e| e["path"] == "outdir/victim.txt"), "{entries:?}");
    assert!(!out.stdout.contains("root:"), "no /etc/passwd content in the events");
}

#[test]
fn a_symlink_created_mid_run_by_a_shell_step_is_refused_by_later_steps() {
    let (ws, victim) = with_victim();
    let victim_arg = victim.to_string_lossy().into_owned();
    let outside_arg = ws.outside().to_string_lossy().into_owned();
    ws.file("data.txt", "inside\n");
    let steps = vec![
        json!({"id": "read-first", "tool": "file.read", "parameters": {"path": "data.txt"}}),
        // The same name, swapped for a link to the outside after it was read.
        json!({"id": "swap", "tool": "shell.exec", "depends_on": ["read-first"],
               "parameters": {"argv": ["ln", "-sfn", victim_arg, "data.txt"]},
               "assertions": [{"type": "exit_code_eq", "code": 0}]}),
        json!({"id": "link-dir", "tool": "shell.exec", "depends_on": ["swap"],
               "parameters": {"argv": ["ln", "-s", outside_arg, "later"]},
               "assertions": [{"type": "exit_code_eq", "code": 0}]}),
        json!({"id": "read-again", "tool": "file.read", "depends_on": ["link-dir"],
               "parameters": {"path": "data.txt"}}),
        json!({"id": "write-again", "tool": "file.write", "depends_on": ["link-dir"],
               "parameters": {"path": "data.txt", "content": "pwned"}}),
        json!({"id": "write-dir", "tool": "file.write", "depends_on": ["link-dir"],
               "parameters": {"path": "later/victim.txt", "content": "pwned"}}),
    ];
    let out = run_lenient(&ws, steps);
    assert_eq!(out.step_status("read-first"), "done");
    assert_eq!(out.step_status("swap"), "done");
    assert_eq!(out.step_status("link-dir"), "done");
    assert_refused(
        &out,
        &[
            ("read-again", "data.txt"),
            ("write-again", "data.txt"),
            ("write-dir", "later/victim.txt"),
        ],
    );
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), OUTSIDE_TEXT);
    assert!(!out.stdout.contains("outside original"), "no outside content in the events");
}

#[test]
fn a_shell_timeout_kills_the_whole_process_group_quickly() {
    let ws = Ws::new();
    // `sleep 30.<marker>`: a duration no other process on the machine uses.
    let marker = format!("30.{}", unique_marker());
    let script = format!("sleep {marker} & sleep {marker}");
    let plan = json!({"goal": "Run the hung job", "steps": [
        {"id": "hang", "tool": "shell.exec",
         "parameters": {"argv": ["sh", "-c", script], "timeout_s": 1},
         "assertions": [{"type": "exit_code_eq", "code": 0}]}
    ]});
    let started = Instant::now();
    let out = ws.run(&plan, &[]);
    let took = started.elapsed();
    assert!(took.as_secs_f64() < 5.0, "the run took {took:?}");
    assert_eq!(out.code, 1, "{out:?}");
    let output = &out.step("hang")["output"];
    assert_eq!(output["timed_out"], true, "{output}");
    assert_eq!(output["exit_code"], Value::Null);
    assert!(out.step_error("hang").contains("timed out"), "{}", out.step_error("hang"));
    assert!(
        !process_alive_with(&format!("sleep {marker}")),
        "a `sleep {marker}` survived the timeout"
    );
}

#[test]
fn outputs_over_one_mib_are_capped_and_flagged() {
    const MIB: usize = 1024 * 1024;
    let server = HttpServer::start();
    let ws = Ws::new();
    ws.file("big.txt", &"r".repeat(MIB + 1000));
    let script =
        "head -c 1100000 /dev/zero | tr '\\0' o; head -c 1100000 /dev/zero | tr '\\0' e >&2";
    let plan = json!({"goal": "Read the big outputs", "steps": [
        {"id": "shell", "tool": "shell.exec",
         "parameters": {"argv": ["sh", "-c", script]},
         "assertions": [{"type": "exit_code_eq", "code": 0}]},
        {"id": "read", "tool": "file.read", "parameters": {"path": "big.txt"}},
        {"id": "http", "tool": "http.request",
         "parameters": {"method": "GET", "url": server.url("/big")}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let shell = &out.step("shell")["output"];
    assert_eq!(shell["stdout_truncated"], true);
    assert_eq!(shell["stderr_truncated"], true);
    assert_eq!(shell["stdout"].as_str().map(str::len), Some(MIB));
    assert_eq!(shell["stderr"].as_str().map(str::len), Some(MIB));
    let read = &out.step("read")["output"];
    assert_eq!(read["truncated"], true);
    assert!(read["content"].as_str().map_or(0, str::len) <= MIB);
    assert_eq!(read["bytes"].as_u64(), Some((MIB + 1000) as u64), "the size is the file's");
    let http = &out.step("http")["output"];
    assert_eq!(http["body_truncated"], true);
    let body = http["body"].as_str().map_or(0, str::len);
    assert!(body > 0 && body <= MIB, "{body} bytes kept of {BIG_BODY}");
}

// Regression (fixed): the journal lives inside the workspace (`.pev/pev.db`) and the file tools may write
// there: a plan step overwrote the journal, the run still reported `success`, and every later
// `pev runs`/`pev show` fails with "database disk image is malformed". The sandbox should refuse
// paths under the workspace's `.pev/` directory (as a failed step), and the journal stay intact.
#[test]
fn a_plan_cannot_overwrite_its_own_journal() {
    let ws = Ws::new();
    let plan = json!({"goal": "Reset the state", "steps": [
        {"id": "clobber", "tool": "file.write",
         "parameters": {"path": ".pev/pev.db", "content": "garbage"},
         "assertions": [{"type": "file_exists", "path": ".pev/pev.db"}]}
    ]});
    let out = ws.run(&plan, &[]);
    let runs = ws.pev(&["runs", "--json"]);
    assert_eq!(runs.code, 0, "the journal survives: {runs:?}");
    assert_eq!(out.step_status("clobber"), "failed", "{}", out.result());
    assert!(out.step_error("clobber").contains(".pev"), "{}", out.step_error("clobber"));
    assert_eq!(out.code, 1, "{out:?}");
}
