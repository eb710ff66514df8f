//! Kill points (issue 31): a run that creates, patches, deletes and renames files is killed at
//! every journal write it makes, and each killed run is resumed (and an agent run replayed).
//!
//! The kill is the journal's test failpoint: with `PEV_FAULT_ABORT_AFTER_COMMITS=N` the process
//! aborts (SIGABRT, no destructors: a `kill -9` landing just after a durable write) right after
//! its Nth group commit (`crates/store/src/journal.rs`). Each test runs the run once without it
//! (the reference workspace), then with N = 1, 2, 3, … on a fresh copy of the workspace until a
//! run makes fewer than N commits and ends by itself: every commit the run makes is a kill point.
//! Commits are groups, so their number varies a little from run to run with thread timing; the
//! loop covers whatever this run makes.
//!
//! After every kill, `pev resume last` (without the variable) must end `success` with the
//! workspace exactly as the uninterrupted run left it (every file and its bytes), which also
//! shows no effect was applied twice: the log line a `file.patch` appends would be there twice.
//!
//! An agent run is then replayed (`pev replay last`): it must match its recording and end as it
//! did.
//!
//! Bugs this test found, fixed, and checked here by exactly their symptom (each named where it
//! is checked): a file change missing from the result or listed twice (a call's end and its
//! changes were committed apart; now one commit, `tool.finished` with them); a step started
//! over as an attempt beyond its `max_attempts`; in loop mode, a finished command's deletion
//! not seen by the resumed plan, the engine's inner result kept as the run's (it now stays
//! `running` until the loop announces the outcome), and a recovered write's made-up output (a
//! turn asked again, a replay that diverges; now the tool's own output, field for field).
//! Any of them back fails the test, naming the kill point.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use super::agent_support::pev_clean;
use super::run_support::{Outcome, at_step, pev_path};
use super::support::{Run, in_parallel, repo_root, run};

/// Kill points are counted by the run itself; this only stops a loop that would never end.
const MAX_KILL_POINTS: u64 = 400;

/// A kill point that hit one of the bugs this test found (fixed since): it fails, naming it.
fn known_bug(known: &mut Vec<String>, what: String) {
    known.push(what);
    panic!("a fixed bug is back (issue 31): {known:?}");
}

/// The paths each shell command of the runs changes (`rm`, `mv`).
const EXEC_CHANGES: [&[&str]; 2] = [&["old.txt"], &["draft.md", "final.md"]];

/// The resumed run's file changes (as [`mutations`] lists them) against the uninterrupted
/// run's: `Ok(None)` when they are the same, `Ok(Some(what))` when they differ only as the known
/// bug does, `Err` otherwise.
///
/// Fixed (issue 31), checked: a call's end and the mutation rows of the files it changed are queued
/// one after the other, and a group commit may fall between them. Killed after the end but
/// before the mutations, a resume uses the call's journaled output and never works out what a
/// shell command changed: its changes are missing from the result (and, in loop mode, from the
/// step's evidence). Killed after both but before the step was journaled done, a resume records
/// a write's mutation again: the change is listed twice. The files themselves are right.
fn file_changes(got: &[String], want: &[String]) -> Result<Option<String>, String> {
    if got == want {
        return Ok(None);
    }
    let mut once = got.to_vec();
    once.dedup();
    for lost in 0..1usize << EXEC_CHANGES.len() {
        let lost: Vec<&str> = (0..EXEC_CHANGES.len())
            .filter(|i| lost & (1 << i) != 0)
            .flat_map(|i| EXEC_CHANGES[i].iter().copied())
            .collect();
        let kept: Vec<String> = want
            .iter()
            .filter(|m| !lost.iter().any(|p| m.starts_with(&format!("{p}: "))))
            .cloned()
            .collect();
        if once == kept {
            let mut what = Vec::new();
            if once.len() < got.len() {
                what.push("a file change listed twice".to_owned());
            }
            if !lost.is_empty() {
                what.push(format!("the changes of a finished shell command missing: {lost:?}"));
            }
            return Ok(Some(format!("{} in {got:?}", what.join(", "))));
        }
    }
    Err(format!("{got:#?}\nwanted {want:#?}"))
}

/// How a run started with the failpoint ended.
enum Ended {
    /// Killed by the failpoint (SIGABRT) right after commit N.
    Aborted,
    /// It made fewer than N commits and exited with this code.
    Exited(i32),
}

/// `pev ARGS` in `dir` with only `PATH` and `env` in its environment and the failpoint at commit
/// `n`. Run through `sh` to switch core dumps off (`exec` keeps the process, so its status is
/// pev's own).
fn killed_at(dir: &Path, args: &[&str], env: &[(&str, String)], n: u64) -> Ended {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -c 0; exec \"$0\" \"$@\"")
        .arg(pev_path())
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", super::support::path())
        .env(pev_store::FAULT_ABORT_AFTER_COMMITS_ENV, n.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in env {
        cmd.env(key, value);
    }
    let out = cmd.output().expect("run pev");
    match (out.status.code(), out.status.signal()) {
        (Some(code), _) => Ended::Exited(code),
        (None, Some(6)) => Ended::Aborted,
        (_, signal) => panic!(
            "pev ended by signal {signal:?}, not the failpoint's SIGABRT: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// `pev ARGS` in `dir` with only `PATH` and `env` in its environment (no failpoint).
fn pev_at(dir: &Path, args: &[&str], env: &[(&str, String)]) -> Run {
    let mut cmd = pev_clean();
    cmd.current_dir(dir);
    for (key, value) in env {
        cmd.env(key, value);
    }
    run(&mut cmd, args)
}

/// Every file under `dir` but the journal's `.pev/` (relative path → bytes).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, files: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let path = entry.path();
            if path == root.join(".pev") {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, files);
            } else {
                let rel = path.strip_prefix(root).expect("under root").display().to_string();
                files.insert(rel, std::fs::read(&path).expect("read"));
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    files
}

/// The snapshot as text, for a message.
fn shown(files: &BTreeMap<String, Vec<u8>>) -> String {
    files.iter().map(|(p, b)| format!("{p}: {:?}\n", String::from_utf8_lossy(b))).collect()
}

/// Writes `files` under `dir` (directories created as needed).
fn fill(dir: &Path, files: &[(&str, &str)]) {
    for (rel, content) in files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir -p");
        std::fs::write(path, content).expect("write");
    }
}

/// What both runs find, beside what each brings of its own.
const COMMON_FILES: [(&str, &str); 3] =
    [("old.txt", "old\n"), ("draft.md", "draft\n"), ("log.txt", "# log\n")];

/// The log line that must be there exactly once.
const LOG_LINE: &str = "renamed draft.md to final.md\n";

/// The files the runs leave that both have: created, deleted, renamed and logged once.
fn assert_common_effects(files: &BTreeMap<String, Vec<u8>>) {
    let text = |p: &str| files.get(p).map(|b| String::from_utf8_lossy(b).into_owned());
    assert_eq!(text("notes/new.txt").as_deref(), Some("created\n"), "{}", shown(files));
    assert_eq!(text("old.txt"), None, "deleted: {}", shown(files));
    assert_eq!(text("draft.md"), None, "renamed away: {}", shown(files));
    assert_eq!(text("final.md").as_deref(), Some("draft\n"), "renamed: {}", shown(files));
    assert_eq!(text("log.txt"), Some(format!("# log\n{LOG_LINE}")), "logged once");
}

// ---------------------------------------------------------------------------------------------
// pev run

/// Creates `notes/new.txt`, patches `config.txt`, deletes `old.txt` (`rm -f`, harmless twice),
/// renames `draft.md` (a guarded `mv`, harmless twice, and marked `repeatable: false`, so a
/// resume that finds it may have run asks a person first) and appends a line to `log.txt` with
/// `file.patch` (applied twice, the line would be there twice).
fn plan() -> Value {
    json!({"goal": "Create, patch, delete and rename files", "steps": [
        {"id": "create", "tool": "file.write",
         "parameters": {"path": "notes/new.txt", "content": "created\n"},
         "assertions": [{"type": "file_contains", "path": "notes/new.txt", "pattern": "created"}]},
        {"id": "patch", "tool": "file.patch", "depends_on": ["create"],
         "parameters": {"path": "config.txt",
                        "edits": [{"old": "mode = debug", "new": "mode = release"}]},
         "assertions": [{"type": "file_contains", "path": "config.txt", "pattern": "mode = release"}]},
        {"id": "delete", "tool": "shell.exec", "depends_on": ["patch"],
         "parameters": {"command": "rm -f old.txt"},
         "assertions": [{"type": "file_not_exists", "path": "old.txt"}]},
        {"id": "rename", "tool": "shell.exec", "depends_on": ["delete"], "repeatable": false,
         "parameters": {"command": "if [ -e draft.md ]; then mv draft.md final.md; fi"},
         "assertions": [{"type": "file_exists", "path": "final.md"},
                        {"type": "file_not_exists", "path": "draft.md"}]},
        {"id": "log", "tool": "file.patch", "depends_on": ["rename"],
         "parameters": {"path": "log.txt", "edits": [{"old": "# log\n", "new": format!("# log\n{LOG_LINE}")}]},
         "assertions": [{"type": "file_contains", "path": "log.txt", "pattern": "renamed"}]}
    ]})
}

const PLAN_STEPS: [&str; 5] = ["create", "patch", "delete", "rename", "log"];

/// A fresh workspace for the plan at `dir`.
fn plan_workspace(dir: &Path) {
    fill(dir, &COMMON_FILES);
    fill(dir, &[("config.txt", "mode = debug\nlevel = 1\n")]);
}

/// The stored result's file changes, as `path bytes_before -> bytes_after`.
fn mutations(result: &Value) -> Vec<String> {
    let list = result["file_mutations"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|m| {
            let path = m["path"].as_str().unwrap_or_default();
            format!("{path}: {} -> {}", m["bytes_before"], m["bytes_after"])
        })
        .collect()
}

#[test]
fn a_plan_run_killed_at_every_journal_commit_resumes_to_the_same_workspace() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let plan_path = tmp.path().join("plan.json");
    std::fs::write(&plan_path, plan().to_string()).expect("plan");
    let plan_arg = plan_path.display().to_string();
    let run_args = |ws: &Path| -> Vec<String> {
        ["run", plan_arg.as_str(), "--workspace", &ws.display().to_string(), "--json"]
            .map(str::to_owned)
            .to_vec()
    };

    // The uninterrupted run.
    let reference = tmp.path().join("reference");
    plan_workspace(&reference);
    let args = run_args(&reference);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = Outcome::from(pev_at(tmp.path(), &args, &[]));
    assert_eq!((out.code, out.status()), (0, "success"), "{}", out.stderr);
    let want = snapshot(&reference);
    assert_common_effects(&want);
    assert_eq!(want["config.txt"], b"mode = release\nlevel = 1\n");
    let want_mutations = mutations(out.result());

    // Kill points are independent (a workspace each): a few run at once.
    let kill_points = AtomicUsize::new(0);
    let approved = std::sync::Mutex::new(Vec::new());
    in_parallel(1..=MAX_KILL_POINTS, |n| {
        let mut known = Vec::new();
        let ws = tmp.path().join(format!("kill-{n}"));
        plan_workspace(&ws);
        let args = run_args(&ws);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Ended::Exited(code) = killed_at(tmp.path(), &args, &[], n) {
            assert_eq!(code, 0, "the run that made fewer than {n} commits");
            assert_eq!(snapshot(&ws), want, "the run that made fewer than {n} commits");
            return ControlFlow::Break(());
        }
        kill_points.fetch_add(1, Ordering::SeqCst);
        let ws_arg = ws.display().to_string();
        let resume = || {
            Outcome::from(pev_at(
                tmp.path(),
                &["resume", "last", "--workspace", &ws_arg, "--json"],
                &[],
            ))
        };
        let mut out = resume();
        if out.code == 4 {
            // By design (docs/reference.md, `repeatable`): killed after the rename's intent was
            // journaled and before its end, with no mark saying the command never started, the
            // command may have run, and a step marked `repeatable: false` is not run again
            // without a person. The run waits for exactly that step; approved, it runs it
            // (harmlessly) once more. (The mark "intent" is written after the intent's commit,
            // so a kill right after that commit asks for approval of a command that never
            // started: conservative, and what the design says of a missing mark.)
            assert_eq!(out.status(), "awaiting_approval", "kill point {n}: {}", out.stderr);
            let pending: Vec<_> =
                out.reasons().into_iter().filter(|(c, _)| c == "approval_pending").collect();
            assert_eq!(pending, [at_step("approval_pending", "rename")], "kill point {n}");
            let ok =
                pev_at(tmp.path(), &["approve", "last", "rename", "--workspace", &ws_arg], &[]);
            assert_eq!(ok.code, 0, "kill point {n}: {ok:?}");
            approved.lock().unwrap_or_else(|e| e.into_inner()).push(n);
            out = resume();
        }
        assert_eq!(
            (out.code, out.status()),
            (0, "success"),
            "kill point {n}: {}\n{}",
            out.stderr,
            out.stdout
        );
        let got = snapshot(&ws);
        assert_eq!(got, want, "kill point {n}:\n{}\nwanted\n{}", shown(&got), shown(&want));
        for id in PLAN_STEPS {
            assert_eq!(out.step_status(id), "done", "kill point {n}: {id}");
            let attempts = out.step(id)["attempts"].as_u64();
            // Fixed (issue 31), checked: killed after the commit that journaled a step started and
            // before its call's intent, the resume starts it over as attempt 2, beyond its
            // max_attempts of 1 (a kill there uses up an attempt of a step that never acted;
            // with `on_fail: retry`, kills there could use them all).
            let again = out
                .events
                .iter()
                .any(|e| e["event"] == "step.started" && e["step"] == id && e["attempt"] == 2);
            if attempts == Some(2) && again {
                known_bug(&mut known, format!("{n}: step {id} started over as attempt 2 of 1"));
            } else {
                assert_eq!(attempts, Some(1), "kill point {n}: {id}");
            }
        }
        // Fixed (issue 31), checked: see `file_changes`.
        match file_changes(&mutations(out.result()), &want_mutations) {
            Ok(None) => {}
            Ok(Some(what)) => known_bug(&mut known, format!("{n}: {what}")),
            Err(why) => panic!("kill point {n}: file changes: {why}"),
        }
        ControlFlow::Continue(())
    });
    let kill_points = kill_points.into_inner();
    let mut approved = approved.into_inner().unwrap_or_else(|e| e.into_inner());
    approved.sort_unstable();
    // How many commits a run makes depends on how the journal's linger groups them, which
    // depends on timing (9 under `stress -c 2`, more on a quiet machine). Seven cannot merge
    // with anything, the plan being one chain: the intents of `create`, `patch` and `log`, each
    // made durable before its effect and after the last step's, and the start and the end of
    // each of the two commands, committed at once.
    assert!(kill_points >= 7, "only {kill_points} kill points: is the failpoint read?");
    eprintln!(
        "plan run: {kill_points} kill points, all resumed to success; approval asked (rename \
         possibly run) at {approved:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// pev agent --mode loop

const GOAL: &str = "Create, patch, delete and rename files";

/// The executor's turns: the plan, then each step opened, worked (a write, a patch, `rm`, `mv`
/// and a patch that logs the rename) and closed, the postcondition and the final answer.
fn executor_script() -> Value {
    let tool = |id: &str, name: &str, input: Value| {
        json!({"content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
               "usage": {"input_tokens": 3000, "output_tokens": 30}})
    };
    let step = |id: &str, n: usize, status: &str| {
        let mut input = json!({"id": id, "status": status});
        if status == "done" {
            input["evidence"] = json!(format!("{id} is done"));
        }
        tool(&format!("u{n}"), "step_update", input)
    };
    let plan = json!({"objective": GOAL, "steps": [
        {"id": "create", "title": "Write notes/new.txt",
         "assertions": [{"type": "file_contains", "path": "notes/new.txt", "pattern": "created"}]},
        {"id": "patch", "title": "Make the background dark green",
         "assertions": [{"type": "file_contains", "path": "style.css", "pattern": "#013220"}]},
        {"id": "delete", "title": "Delete old.txt",
         "assertions": [{"type": "file_not_exists", "path": "old.txt"}]},
        {"id": "rename", "title": "Rename draft.md to final.md and log it",
         "assertions": [{"type": "file_exists", "path": "final.md"},
                        {"type": "file_not_exists", "path": "draft.md"},
                        {"type": "file_contains", "path": "log.txt", "pattern": "renamed"}]}],
        "postconditions": [{"description": "the files are in place",
            "assertions": [{"type": "file_exists", "path": "final.md"},
                           {"type": "file_contains", "path": "style.css", "pattern": "#013220"}]}]});
    let turns = vec![
        tool("p", "plan_create", plan),
        step("create", 1, "in_progress"),
        tool("w", "file_write", json!({"path": "notes/new.txt", "content": "created\n"})),
        step("create", 2, "done"),
        step("patch", 3, "in_progress"),
        tool(
            "c",
            "file_patch",
            json!({"path": "style.css",
            "edits": [{"old": "background: #ffffff;", "new": "background: #013220;"}]}),
        ),
        step("patch", 4, "done"),
        step("delete", 5, "in_progress"),
        tool("d", "shell_exec", json!({"command": "rm -f old.txt"})),
        step("delete", 6, "done"),
        step("rename", 7, "in_progress"),
        tool(
            "r",
            "shell_exec",
            json!({"command": "if [ -e draft.md ]; then mv draft.md final.md; fi"}),
        ),
        tool(
            "l",
            "file_patch",
            json!({"path": "log.txt",
            "edits": [{"old": "# log\n", "new": format!("# log\n{LOG_LINE}")}]}),
        ),
        step("rename", 8, "done"),
        tool("v", "postcondition_verify", json!({"id": "p1", "evidence": "final.md, dark green"})),
        json!({"content": [{"type": "text", "text": "Done: created, patched, deleted, renamed."}],
               "usage": {"input_tokens": 3000, "output_tokens": 20}}),
    ];
    json!({"name": "kill points", "turns": turns})
}

/// A fresh workspace at `dir`: the example site (its `pev.toml` naming the example's scripts
/// by absolute path) and the files the run deletes, renames and logs to.
fn agent_workspace(dir: &Path) {
    let root = repo_root();
    std::fs::create_dir_all(dir).expect("mkdir");
    for f in ["index.html", "style.css", "pev.toml"] {
        std::fs::copy(root.join("examples/agent/site").join(f), dir.join(f)).expect("copy");
    }
    let toml = std::fs::read_to_string(dir.join("pev.toml")).expect("toml");
    let scripts = root.join("examples/agent").display().to_string();
    std::fs::write(dir.join("pev.toml"), toml.replace("script:..", &format!("script:{scripts}")))
        .expect("toml");
    fill(dir, &COMMON_FILES);
}

/// The executor's turns the journal holds an answer for (`pev show --conversation`): a resumed
/// process answers those from the journal and asks the script only for the ones after.
fn answered_calls(ws: &Path, env: &[(&str, String)]) -> usize {
    let shown = pev_at(ws, &["show", "last", "--conversation", "--format", "json"], env);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let calls = shown.json();
    let calls = calls.as_array().expect("an array of calls");
    calls.iter().filter(|c| c["response"].is_object()).count()
}

/// The parts of a loop run's result that must not depend on where it was killed.
fn loop_shape(result: &Value) -> Value {
    let steps: Vec<Value> = result["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| json!([s["id"], s["status"]]))
        .collect();
    json!({
        "steps": steps,
        "postconditions": result["postconditions"],
        "rechecked": result["final_check"]["rechecked"],
        "gate": result["steps"][0]["output"]["gate"],
    })
}

#[test]
fn a_loop_agent_run_killed_at_every_journal_commit_resumes_and_replays() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).expect("mkdir");
    let script: PathBuf = tmp.path().join("executor.json");
    let turns = executor_script();
    std::fs::write(&script, turns.to_string()).expect("script");
    let turns = turns["turns"].as_array().expect("turns").clone();
    let tmpdir = ("TMPDIR", scratch.display().to_string());
    let with_script = |path: &Path| {
        [tmpdir.clone(), ("PEV_EXECUTOR_PROVIDER", format!("script:{}", path.display()))]
    };
    let agent = ["agent", GOAL, "--mode", "loop", "--json"];
    let replay_ok = |ws: &Path| -> Result<(), String> {
        let same = pev_at(ws, &["replay", "last"], std::slice::from_ref(&tmpdir));
        let calls = format!("{0} of {0} recorded model calls answered", turns.len());
        let fine = same.code == 0
            && !same.stderr.contains("diverged")
            && same.stderr.contains(&calls)
            && same.stderr.contains("outcome success now, success when recorded\n");
        if fine { Ok(()) } else { Err(format!("exit {}: {}", same.code, same.stderr)) }
    };

    // The uninterrupted run, and its replay.
    let reference = tmp.path().join("reference");
    agent_workspace(&reference);
    let out = Outcome::from(pev_at(&reference, &agent, &with_script(&script)));
    assert_eq!((out.code, out.status()), (0, "success"), "{}", out.stderr);
    let want = snapshot(&reference);
    assert_common_effects(&want);
    let css = String::from_utf8_lossy(&want["style.css"]).into_owned();
    assert!(css.contains("background: #013220;") && !css.contains("#ffffff"), "{css}");
    let want_shape = loop_shape(out.result());
    let want_mutations = mutations(out.result());
    assert_eq!(want_shape["steps"].as_array().map(Vec::len), Some(5), "{want_shape}");
    assert_eq!(out.result()["usage"]["llm_calls"], turns.len());
    replay_ok(&reference).expect("the uninterrupted run replays");

    // Kill points are independent (a workspace and a script each): a few run at once.
    let kill_points = AtomicUsize::new(0);
    in_parallel(1..=MAX_KILL_POINTS, |n| {
        let mut known = Vec::new();
        let ws = tmp.path().join(format!("kill-{n}"));
        agent_workspace(&ws);
        if let Ended::Exited(code) = killed_at(&ws, &agent, &with_script(&script), n) {
            assert_eq!(code, 0, "the run that made fewer than {n} commits");
            assert_eq!(snapshot(&ws), want, "the run that made fewer than {n} commits");
            return ControlFlow::Break(());
        }
        kill_points.fetch_add(1, Ordering::SeqCst);

        // A script of the turns not answered yet.
        let answered = answered_calls(&ws, std::slice::from_ref(&tmpdir));
        let rest = tmp.path().join(format!("rest-{n}.json"));
        let left = json!({"name": format!("after {answered} turns"), "turns": turns[answered..]});
        std::fs::write(&rest, left.to_string()).expect("script");
        let out = Outcome::from(pev_at(&ws, &["resume", "last", "--json"], &with_script(&rest)));
        let at = format!("kill point {n} ({answered} turns answered)");
        let got = snapshot(&ws);
        assert_eq!(got, want, "{at}:\n{}\nwanted\n{}", shown(&got), shown(&want));

        // Fixed (issue 31), checked (see `file_changes`): killed after the commit holding the `rm`
        // call's end but before the one holding its mutation (old.txt deleted), the resume
        // answers the call from the journal and never learns that it deleted old.txt:
        // `step_update delete done` is refused
        // ("plan-execution mismatch: the step was to change old.txt, but it changed no file"),
        // the model's script goes on out of step, and the run ends failed (old.txt missing from
        // its file changes). The files still end as they should.
        //
        // Fixed (issue 31), checked (see the replay below): the model's calls were journaled by
        // a writer of their own, so one could be on disk while the end of the write it answers
        // was not. Killed there, the resume recovered the write with a made-up output, the
        // request that carries it differed from the journaled one, and that turn was asked again
        // (a real model is paid twice): the script of the remaining turns was then one turn off,
        // and the run ended failed. The same two writers could put the first answered call on
        // disk before its step's start: killed there (kill point 1, under load), the resume had
        // no started step to give the call to and asked the script again ("no turn left"). One
        // writer per file per process since (`pev_store::Journal::start`; the store's ordering
        // test checks it), so neither can happen; either would fail here.
        if out.status() != "success" {
            let talk = pev_at(&ws, &["show", "last", "--conversation", "--format", "json"], &[]);
            let refused = "plan-execution mismatch: the step was to change old.txt, but it \
                           changed no file";
            let recovered = out.of("tool.finished").iter().any(|e| e["recovered"] == true);
            if talk.stdout.contains(refused) {
                known_bug(
                    &mut known,
                    format!("{n}: `delete done` refused, old.txt's removal lost"),
                );
            } else if recovered && out.stdout.contains("no turn left") {
                known_bug(&mut known, format!("{n}: a turn asked again after a recovered write"));
            } else {
                panic!("{at}: exit {}, {}\n{}\n{}", out.code, out.status(), out.stderr, out.stdout);
            }
            return ControlFlow::Continue(());
        }
        assert_eq!(out.code, 0, "{at}: {}", out.stderr);
        assert_eq!(out.result()["usage"]["llm_calls"], turns.len(), "{at}: calls counted once");
        // Fixed (issue 31), checked: see `file_changes`.
        match file_changes(&mutations(out.result()), &want_mutations) {
            Ok(None) => {}
            Ok(Some(what)) => known_bug(&mut known, format!("{n}: {what}")),
            Err(why) => panic!("{at}: file changes: {why}"),
        }

        // Fixed (issue 31), checked: an agent run's engine journals its own result (with
        // `final_events` off) before the loop adds the model's plan, postconditions, gate and
        // final re-check and announces the real one. Killed between the two, the journal holds
        // the engine's result as the run's final one: `pev resume` says "already finished" and
        // keeps it (no plan:* steps, no postconditions, nothing re-checked, no gate counts).
        let shape = loop_shape(out.result());
        if shape != want_shape {
            assert!(
                out.stderr.contains("already finished"),
                "{at}: the resumed result differs: {shape}\nwanted {want_shape}\n{}",
                out.stderr
            );
            known_bug(&mut known, format!("{n}: the engine's inner result stood: {shape}"));
        }

        // Fixed (issue 31), checked: a write killed after it took effect is recovered on resume
        // with a made-up output (`"recovered": true`, and for file.patch without
        // `replacements`); the model was sent that output, and a replay, which runs the write,
        // gets the tool's real output and diverges at the next call.
        if let Err(why) = replay_ok(&ws) {
            let recovered = out
                .of("tool.finished")
                .iter()
                .any(|e| e["recovered"] == true && e["step"] == "loop");
            assert!(recovered && why.contains("\\\"recovered\\\":true"), "{at}: replay: {why}");
            known_bug(&mut known, format!("{n}: replay diverged at a recovered write's output"));
        }
        ControlFlow::Continue(())
    });
    let kill_points = kill_points.into_inner();
    assert!(kill_points >= 20, "only {kill_points} kill points: is the failpoint read?");
    eprintln!("loop agent run: {kill_points} kill points, all resumed with the same files");
}
