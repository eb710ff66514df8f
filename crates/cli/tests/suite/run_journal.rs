//! The journal and the commands that read it: `--json` events (only JSON lines, dense `seq`),
//! `pev show RUN --format json` (valid against `pev schema result`, equal to the run's
//! `run.finished` result), `pev runs --json`, run id resolution (`last`, prefixes, unknown and
//! ambiguous ids), `--store`, and the bad inputs that stop a run before any journal exists.

use serde_json::{Value, json};

use super::run_support::{Outcome, Ws};
use super::support::{pev, run};

const EVENT_NAMES: &[&str] = &[
    "run.started",
    "plan.created",
    "plan.revised",
    "step.started",
    "approval.requested",
    "approval.granted",
    "tool.called",
    "tool.finished",
    "assertion.checked",
    "step.finished",
    "warning",
    "verify.finished",
    "run.finished",
];

fn css_plan() -> Value {
    json!({"goal": "Make the background dark green", "steps": [
        {"id": "read", "tool": "file.read", "parameters": {"path": "style.css"}},
        {"id": "patch", "tool": "file.patch", "depends_on": ["read"],
         "parameters": {"path": "style.css",
                        "edits": [{"old": "background: #ffffff;", "new": "background: #013220;"}]},
         "assertions": [{"type": "content_changed", "path": "style.css"},
                        {"type": "file_contains", "path": "style.css", "pattern": "#013220"}]}
    ], "postconditions": [
        {"description": "The background is dark green",
         "assertions": [{"type": "file_not_contains", "path": "style.css", "pattern": "#ffffff"}]}
    ]})
}

fn css_ws() -> Ws {
    let ws = Ws::new();
    ws.file("style.css", "body {\n  background: #ffffff;\n}\n");
    ws
}

/// Every event has the run's id, its `seq` (dense from `first`), an `at` and a known name.
fn assert_event_stream(out: &Outcome, first: u64) {
    let run_id = out.run_id();
    for (i, e) in out.events.iter().enumerate() {
        assert_eq!(e["run_id"], run_id.as_str(), "{e}");
        assert_eq!(e["seq"].as_u64(), Some(first + i as u64), "dense seq: {e}");
        let at = e["at"].as_str().expect("at");
        assert!(at.len() == 24 && at.ends_with('Z') && at.as_bytes()[10] == b'T', "{at}");
        let name = e["event"].as_str().expect("event");
        assert!(EVENT_NAMES.contains(&name), "unknown event {name}");
    }
}

#[test]
fn json_stdout_is_only_events_with_a_dense_seq_and_resume_continues_it() {
    let ws = css_ws();
    let mut plan = css_plan();
    plan["steps"][1]["requires_approval"] = json!(true);
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 4, "{out:?}");
    // Outcome::from already failed the test if any stdout line were not a JSON object.
    assert_event_stream(&out, 0);
    assert_eq!(out.events[0]["event"], "run.started");
    assert_eq!(out.events[0]["resumed"], false);
    assert_eq!(out.events[1]["event"], "plan.created");
    assert_eq!(out.events[1]["steps"], 2);
    assert_eq!(out.events.last().expect("last")["event"], "run.finished");
    assert!(!out.stderr.contains("{\""), "no JSON on stderr: {}", out.stderr);

    let next = out.events.len() as u64;
    let resumed = ws.resume(&out.run_id(), &["--yes"]);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    assert_event_stream(&resumed, next);
    assert_eq!(resumed.events[0]["resumed"], true);
}

fn result_validator() -> jsonschema::Validator {
    let r = run(&mut pev(), &["schema", "result"]);
    assert_eq!(r.code, 0, "{r:?}");
    jsonschema::options().build(&r.json()).expect("the result schema compiles")
}

#[test]
fn show_json_is_a_valid_result_equal_to_the_run_finished_one() {
    let validator = result_validator();
    let ws = css_ws();
    let ok = ws.run(&css_plan(), &[]);
    assert_eq!(ok.code, 0, "{ok:?}");
    // The same plan again: the patch no longer applies, so the run fails.
    let failed = ws.run(&css_plan(), &[]);
    assert_eq!(failed.code, 1, "{failed:?}");
    for out in [&ok, &failed] {
        let shown = ws.show_json(&out.run_id());
        let errors: Vec<String> = validator.iter_errors(&shown).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}\n{shown}");
        assert!(validator.is_valid(out.result()), "run.finished result is valid too");
        assert_eq!(&shown, out.result(), "show == run.finished for {}", out.run_id());
    }
    let shown = ws.show_json(&ok.run_id());
    assert_eq!(shown["status"], "success");
    assert_eq!(shown["file_mutations"][0]["path"], "style.css");
    // `--json` is the same as `--format json` for show.
    let r = ws.pev(&["show", &ok.run_id(), "--json"]);
    assert_eq!(r.json(), shown);
}

#[test]
fn show_text_has_the_plan_steps_diff_and_outcome() {
    let ws = css_ws();
    let out = ws.run(&css_plan(), &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let r = ws.pev(&["show", &out.run_id(), "--color", "never"]);
    assert_eq!(r.code, 0, "{r:?}");
    let header = format!("run {}: success", out.run_id());
    for needle in [
        header.as_str(),
        "goal: Make the background dark green",
        "plan (2 steps)",
        "patch  file.patch  after read",
        "✓ patch  done",
        "content_changed",
        "-  background: #ffffff;",
        "+  background: #013220;",
        "The background is dark green",
        "outcome: success",
    ] {
        assert!(r.stdout.contains(needle), "show lacks {needle:?}:\n{}", r.stdout);
    }
    assert!(!r.stdout.contains('\u{1b}'), "no colour with --color never");
}

/// Why a step failed is in its step.finished event, in its reason, and in `pev show`.
#[test]
fn show_says_why_a_step_failed() {
    let ws = Ws::new();
    let plan = json!({"goal": "Read the notes", "steps": [
        {"id": "read", "tool": "file.read", "parameters": {"path": "missing.txt"}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    let error = out.step_error("read");
    assert!(error.contains("`missing.txt` does not exist"), "{error}");
    let reason = &out.result()["reasons"][0];
    assert_eq!(reason["code"], "step_failed");
    assert!(reason["message"].as_str().expect("message").contains(&error), "{reason}");
    let r = ws.pev(&["show", &out.run_id(), "--color", "never"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("`missing.txt` does not exist"),
        "show lacks the error:\n{}",
        r.stdout
    );
}

#[test]
fn runs_json_prints_one_object_per_run_newest_first() {
    let ws = css_ws();
    let first = ws.run(&css_plan(), &[]);
    let second = ws.run(&css_plan(), &[]);
    let third = ws.run(
        &json!({"goal": "List the files", "steps": [
            {"id": "list", "tool": "file.list", "parameters": {"path": "."}}
        ]}),
        &[],
    );
    let r = ws.pev(&["runs", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<Value> =
        r.stdout.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let ids: Vec<&str> = lines.iter().map(|l| l["run_id"].as_str().expect("run_id")).collect();
    assert_eq!(ids, vec![third.run_id(), second.run_id(), first.run_id()]);
    let statuses: Vec<&str> = lines.iter().map(|l| l["status"].as_str().expect("s")).collect();
    assert_eq!(statuses, vec!["success", "failed", "success"]);
    assert_eq!(lines[0]["goal"], "List the files");
    assert_eq!(lines[1]["goal"], "Make the background dark green");
    assert_eq!(
        (lines[0]["steps_done"].as_u64(), lines[0]["steps_total"].as_u64()),
        (Some(1), Some(1))
    );

    let text = ws.pev(&["runs", "--color", "never"]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(text.stdout.contains(&first.run_id()) && text.stdout.contains("List the files"));
}

#[test]
fn runs_are_found_by_id_unique_prefix_and_last_and_bad_ids_are_clear_errors() {
    let ws = css_ws();
    let first = ws.run(&css_plan(), &[]);
    let second = ws.run(&css_plan(), &[]);
    let (a, b) = (first.run_id(), second.run_id());
    assert_eq!(ws.show_json(&a)["run_id"], a.as_str());
    assert_eq!(ws.show_json("last")["run_id"], b.as_str());
    // The shortest prefix that tells them apart.
    let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    assert_eq!(ws.show_json(&a[..=common])["run_id"], a.as_str());
    assert_eq!(ws.show_json(&b[..=common])["run_id"], b.as_str());

    let ambiguous = ws.pev(&["show", &a[..common]]);
    assert_eq!(ambiguous.code, 2, "{ambiguous:?}");
    assert!(ambiguous.stderr.contains("ambiguous"), "{}", ambiguous.stderr);
    assert!(ambiguous.stderr.contains(&a) && ambiguous.stderr.contains(&b), "{}", ambiguous.stderr);

    for command in
        [&["show", "no-such-run"][..], &["resume", "no-such-run"], &["approve", "no-such-run"]]
    {
        let r = ws.pev(command);
        assert_eq!(r.code, 2, "{command:?}: {r:?}");
        assert!(r.stderr.contains("\"no-such-run\""), "{command:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{command:?}: {}", r.stdout);
    }
}

#[test]
fn reading_commands_in_a_workspace_without_a_journal_fail_clearly_and_create_nothing() {
    let ws = Ws::new();
    for command in [&["runs"][..], &["show", "last"], &["approve", "last"], &["resume", "last"]] {
        let r = ws.pev(command);
        assert_eq!(r.code, 2, "{command:?}: {r:?}");
        assert!(r.stderr.contains("no run has been journaled"), "{command:?}: {}", r.stderr);
    }
    assert!(!ws.path().join(".pev").exists());
}

#[test]
fn store_puts_the_journal_elsewhere() {
    let ws = css_ws();
    let store = ws.root.path().join("journal/runs.db");
    let store_arg = store.to_string_lossy().into_owned();
    let out = ws.run(&css_plan(), &["--store", &store_arg]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(store.exists());
    assert!(!ws.path().join(".pev").exists(), "nothing in the workspace");
    let r = ws.pev(&["runs", "--json", "--store", &store_arg]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains(&out.run_id()), "{}", r.stdout);
}

#[test]
fn a_plan_with_lint_errors_does_not_run_and_creates_no_journal() {
    let ws = Ws::new();
    // A step's output spliced into a shell string is injection, an error; the chaining beside it
    // is only a warning.
    let plan = json!({"goal": "Clean up", "steps": [
        {"id": "ls", "tool": "file.list", "parameters": {"path": "."}},
        {"id": "rm", "tool": "shell.exec", "depends_on": ["ls"],
         "parameters": {"command": "rm -rf ${ls.result.entries.0.path} && touch done"},
         "assertions": [{"type": "exit_code_eq", "code": 0}]}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 2, "{out:?}");
    // --json stdout holds one answer: the error event (the lint report is on stderr).
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    let error: serde_json::Value = serde_json::from_str(lines[0]).expect("json");
    assert_eq!((error["event"].as_str(), error["exit_code"].as_u64()), (Some("error"), Some(2)));
    assert!(out.stderr.contains("error[COMMAND_INJECTION] step 1 `rm`"), "{}", out.stderr);
    assert!(out.stderr.contains("it was not run"), "{}", out.stderr);
    assert!(!ws.path().join(".pev").exists(), "no journal");
    assert!(!ws.path().join("done").exists());

    // Without --json the findings are printed for people.
    let plan_path = ws.plan_file(&plan).to_string_lossy().into_owned();
    let r = run(&mut pev(), &["run", &plan_path, "--workspace", &ws.arg()]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(format!("{}{}", r.stdout, r.stderr).contains("COMMAND_INJECTION"), "{r:?}");
}

#[test]
fn a_step_without_a_tool_or_with_an_unknown_tool_is_bad_input() {
    let ws = Ws::new();
    let plan = json!({"goal": "Refactor the module", "steps": [
        {"id": "think", "title": "Decide what to change", "description": "Read and plan"}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("step `think` has no `tool`"), "{}", out.stderr);
    assert!(out.stderr.contains("pev agent"), "{}", out.stderr);
    assert!(!ws.path().join(".pev").exists());

    let plan = json!({"goal": "Query", "steps": [
        {"id": "q", "tool": "db.query", "parameters": {"sql": "select 1"}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("`db.query`") && out.stderr.contains("file.read"),
        "{}",
        out.stderr
    );
    assert!(!ws.path().join(".pev").exists());
}

#[test]
fn an_unreadable_or_invalid_plan_or_workspace_is_bad_input() {
    let ws = Ws::new();
    let ws_arg = ws.arg();
    let bad = ws.root.path().join("bad.json");
    std::fs::write(&bad, "{\"goal\": \"x\", \"steps\": [\n  {\"id\": }\n]}").expect("write");
    let bad = bad.to_string_lossy().into_owned();
    let r = run(&mut pev(), &["run", &bad, "--workspace", &ws_arg, "--json"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("bad.json:2:10: invalid JSON"), "says where: {}", r.stderr);
    let r = run(&mut pev(), &["run", "/nonexistent/plan.json", "--workspace", &ws_arg]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("/nonexistent/plan.json"), "{}", r.stderr);
    let plan = ws.plan_file(&css_plan()).to_string_lossy().into_owned();
    let r = run(&mut pev(), &["run", &plan, "--workspace", "/nonexistent/ws"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("/nonexistent/ws"), "{}", r.stderr);
    assert!(!ws.path().join(".pev").exists());
}

#[test]
fn a_bad_pev_toml_refuses_the_run_before_it_is_journaled() {
    let ws = Ws::new();
    std::fs::write(ws.path().join("pev.toml"), "[hooks]\npre_tool_use = 3\n").unwrap();
    let plan = json!({"goal": "Read it", "steps": [
        {"id": "r", "tool": "file.list", "parameters": {"path": "."}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("pev.toml"), "{}", out.stderr);
    // Nothing was journaled: no run to list, resume or show.
    let runs = run(&mut pev(), &["runs", "--workspace", &ws.arg(), "--json"]);
    assert!(runs.stdout.trim().is_empty(), "{runs:?}");
}

/// Issue 18, retention: `pev gc --older-than` deletes finished runs older than the age (a dry
/// run first says what would go, and changes nothing); a younger run stays.
#[test]
fn gc_deletes_old_finished_runs_and_a_dry_run_changes_nothing() {
    let ws = css_ws();
    let out = ws.run(&css_plan(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let run_id = out.result()["run_id"].as_str().expect("id").to_owned();

    let young = ws.pev(&["gc", "--older-than", "1d"]);
    assert_eq!(young.code, 0, "{young:?}");
    assert!(young.stdout.contains("deleted 0 run(s)"), "{}", young.stdout);
    let dry = ws.pev(&["gc", "--older-than", "0s", "--dry-run", "--json"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    let report: Value = serde_json::from_str(dry.stdout.trim()).expect("JSON");
    assert_eq!(report["report"]["runs"], json!([run_id]));
    assert!(report["report"]["blobs"].as_u64().expect("blobs") > 0, "{report}");
    assert_eq!(ws.pev(&["show", &run_id]).code, 0, "a dry run deletes nothing");

    // While another process holds the run (its lock), it stays, and no blob is collected.
    let lock_path = ws.path().join(".pev/locks").join(format!("{run_id}.lock"));
    std::fs::create_dir_all(lock_path.parent().expect("dir")).expect("locks dir");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .expect("lock file");
    lock.try_lock().expect("lock");
    let held = ws.pev(&["gc", "--older-than", "0s"]);
    assert_eq!(held.code, 0, "{held:?}");
    assert!(held.stdout.contains("deleted 0 run(s)"), "{}", held.stdout);
    assert!(held.stdout.contains("no blob was collected"), "{}", held.stdout);
    drop(lock);

    let done = ws.pev(&["gc", "--older-than", "0s"]);
    assert_eq!(done.code, 0, "{done:?}");
    assert!(done.stdout.contains(&run_id), "{}", done.stdout);
    let runs = ws.pev(&["runs", "--json"]);
    assert!(runs.stdout.trim().is_empty(), "{}", runs.stdout);
    assert_ne!(ws.pev(&["show", &run_id]).code, 0);
    assert_eq!(ws.pev(&["gc", "--older-than", "5x"]).code, 2);
}

/// Issue 18: resuming in another place needs the run's workspace. A copy that holds what the
/// journal says the run left is resumed (with a note); one where a file the run changed differs
/// is refused, naming the file, and nothing runs.
#[test]
fn a_resume_elsewhere_checks_the_workspace_against_the_journal() {
    let ws = Ws::new();
    let plan = json!({"goal": "Write two files", "steps": [
        {"id": "one", "tool": "file.write", "parameters": {"path": "a.txt", "content": "one\n"}},
        {"id": "two", "tool": "file.write", "depends_on": ["one"], "requires_approval": true,
         "parameters": {"path": "b.txt", "content": "two\n"}}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 4, "waits for approval: {}", out.stderr);
    let run_id = out.result()["run_id"].as_str().expect("id").to_owned();
    let journal = ws.path().join(".pev/pev.db");

    let copy_to = |name: &str| {
        let dest = ws.root.path().join(name);
        std::fs::create_dir_all(&dest).expect("mkdir");
        std::fs::write(dest.join("a.txt"), std::fs::read(ws.path().join("a.txt")).expect("a"))
            .expect("copy");
        dest
    };
    let same = copy_to("same");
    let changed = copy_to("changed");
    std::fs::write(changed.join("a.txt"), "edited\n").expect("edit");
    let resume = |dir: &std::path::Path| {
        run(
            &mut pev(),
            &[
                "resume",
                &run_id,
                "--workspace",
                dir.to_str().expect("utf-8"),
                "--store",
                journal.to_str().expect("utf-8"),
                "--yes",
            ],
        )
    };
    let refused = resume(&changed);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("does not hold what its journal says"), "{}", refused.stderr);
    assert!(refused.stderr.contains("a.txt (journal: sha256"), "{}", refused.stderr);
    assert!(!changed.join("b.txt").exists(), "nothing ran");

    let resumed = resume(&same);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    assert!(resumed.stderr.contains("match its journal"), "{}", resumed.stderr);
    assert_eq!(std::fs::read_to_string(same.join("b.txt")).expect("b"), "two\n");
}
