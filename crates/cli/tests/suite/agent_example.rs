//! `examples/agent/` runs offline as examples/README.md says: `pev agent` with the dark-green goal
//! on a scratch copy of `examples/agent/site`, whose `pev.toml` makes every role a script. The
//! outcome, the change in the scratch copy, and the examples tree left exactly as it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::agent_support::{
    GREEN_GOAL, assert_no_dark_green, assert_one_run_finished, assert_stream_shape, pev_clean,
};
use super::run_support::Outcome;
use super::support::{repo_root, run};

/// Every file under `dir` (relative path → bytes).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, files);
            } else {
                let rel = path.strip_prefix(root).expect("under root").to_path_buf();
                files.insert(rel, std::fs::read(&path).expect("read"));
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    files
}

#[test]
fn the_offline_agent_example_makes_the_site_dark_green_on_a_scratch_copy() {
    let root = repo_root();
    let example = root.join("examples/agent");
    let before = snapshot(&example);
    assert!(before.keys().all(|p| !p.starts_with("site/.pev")), "examples/agent has a journal");
    let tmp = tempfile::tempdir().expect("temp dir");
    let args = ["agent", GREEN_GOAL, "--workspace", "examples/agent/site", "--scratch", "--json"];
    let out = Outcome::from(run(pev_clean().current_dir(&root).env("TMPDIR", tmp.path()), &args));
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(snapshot(&example), before, "the run changed files under examples/agent");

    assert_eq!(out.status(), "success");
    assert_eq!(out.result()["goal_actions_executed"], true);
    assert_stream_shape(&out, 0, false);
    assert_one_run_finished(&out);
    assert_no_dark_green(&out);
    for id in ["patch-css", "check-html"] {
        assert_eq!(out.step_status(id), "done", "{id}");
        assert_eq!(out.step(id)["attempts"], 1, "{id}");
    }
    let evidence = out.step("patch-css")["evidence"].to_string();
    assert!(evidence.contains("judge: passed (confidence 0.90)"), "{evidence}");
    assert_eq!(out.result()["usage"]["llm_calls"], 7, "1 planner + 5 executor + 1 judge");

    // The scratch copy (its place is printed) holds the change; the example does not.
    let marker = "running on a scratch copy of ";
    let line = out.stderr.lines().find(|l| l.contains(marker)).expect("scratch line");
    let copy = PathBuf::from(line.rsplit(" at ").next().expect("path"));
    assert!(copy.starts_with(tmp.path()), "{}", copy.display());
    let css = std::fs::read_to_string(copy.join("style.css")).expect("scratch style.css");
    assert!(css.contains("background: #013220;") && !css.contains("#ffffff"), "{css}");
    let original = std::fs::read_to_string(example.join("site/style.css")).expect("style.css");
    assert!(original.contains("background: #ffffff;"), "{original}");
}

/// `pev show --conversation`: the run's model calls as the journal kept them, by step, in text
/// and in JSON (each request read back whole).
#[test]
fn the_example_runs_conversation_is_shown_from_the_journal() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let ws = example_site(tmp.path(), "site").display().to_string();
    let out = Outcome::from(run(
        pev_clean().current_dir(tmp.path()),
        &["agent", GREEN_GOAL, "-w", &ws, "--json"],
    ));
    assert_eq!(out.code, 0, "{}", out.stderr);

    let text = run(
        pev_clean().current_dir(tmp.path()),
        &["show", "last", "--conversation", "patch-css", "-w", &ws],
    );
    assert_eq!(text.code, 0, "{}", text.stderr);
    let s = &text.stdout;
    assert!(s.contains("step patch-css: 4 model call(s)"), "{s}");
    assert!(
        s.contains("call 2 · executor · step patch-css · attempt 1 · claude-sonnet-4-5"),
        "{s}"
    );
    assert!(s.contains("→ file_read {\"path\":\"style.css\"}"), "{s}");
    assert!(s.contains("← result"), "{s}");
    assert!(s.contains("call 5 · verifier"), "{s}");
    assert!(s.contains("more line(s) (--full shows them)"), "long prompts are folded: {s}");
    assert!(!s.contains("check-html"), "only the step asked for: {s}");

    let json = run(
        pev_clean().current_dir(tmp.path()),
        &["show", "last", "--conversation", "--format", "json", "-w", &ws],
    );
    assert_eq!(json.code, 0, "{}", json.stderr);
    let calls: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    let calls = calls.as_array().expect("an array");
    assert_eq!(calls.len(), 7, "every call of the run");
    let planner = &calls[0];
    assert_eq!(planner["call"]["role"], "planner");
    assert!(planner["request"]["messages"][0]["content"].to_string().contains("dark green"));
    // The executor's last call of the step sent the whole conversation: 5 messages.
    assert_eq!(calls[3]["request"]["messages"].as_array().map(Vec::len), Some(5));
    assert!(calls.iter().all(|c| c["response"].is_object()));

    let missing = run(
        pev_clean().current_dir(tmp.path()),
        &["show", "last", "--conversation", "nope", "-w", &ws],
    );
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("no model call for step `nope`"), "{}", missing.stderr);
    assert!(missing.stderr.contains("patch-css"), "{}", missing.stderr);
}

/// The example's site copied to `dir/name`, its scripts named by absolute path.
fn example_site(dir: &Path, name: &str) -> PathBuf {
    let root = repo_root();
    let site = dir.join(name);
    std::fs::create_dir(&site).expect("mkdir");
    for f in ["index.html", "style.css", "pev.toml"] {
        std::fs::copy(root.join("examples/agent/site").join(f), site.join(f)).expect("copy");
    }
    let toml = std::fs::read_to_string(site.join("pev.toml")).expect("toml");
    let scripts = root.join("examples/agent").display().to_string();
    std::fs::write(site.join("pev.toml"), toml.replace("script:..", &format!("script:{scripts}")))
        .expect("toml");
    site
}

/// `pev replay`: the recorded run replays to the same outcome with every call answered from the
/// journal (in a scratch copy put back as it was; the workspace itself is left alone); a
/// different starting file is a divergence naming the call and the message; a plan run is not
/// replayable.
#[test]
fn a_recorded_run_replays_offline_and_a_change_is_named() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let site = example_site(tmp.path(), "site");
    let ws = site.display().to_string();
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).expect("mkdir");
    let pev = || {
        let mut cmd = pev_clean();
        cmd.current_dir(tmp.path()).env("TMPDIR", &scratch);
        cmd
    };
    let out = run(&mut pev(), &["agent", GREEN_GOAL, "-w", &ws]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let after = std::fs::read_to_string(site.join("style.css")).expect("css");
    assert!(after.contains("#013220"));

    let same = run(&mut pev(), &["replay", "last", "-w", &ws]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert!(same.stderr.contains("7 of 7 recorded model calls answered"), "{}", same.stderr);
    assert!(
        same.stderr.contains("outcome success now, success when recorded\n"),
        "{}",
        same.stderr
    );
    assert!(!same.stderr.contains("diverged"), "{}", same.stderr);
    assert_eq!(std::fs::read_to_string(site.join("style.css")).expect("css"), after, "untouched");

    // The same site with one colour changed: the executor's read returns other bytes.
    let other = example_site(tmp.path(), "other");
    let css = std::fs::read_to_string(other.join("style.css")).expect("css");
    std::fs::write(other.join("style.css"), css.replace("#222222", "#333333")).expect("css");
    let changed =
        run(&mut pev(), &["replay", "last", "-w", &ws, "--from", &other.display().to_string()]);
    assert_eq!(changed.code, 1, "{}", changed.stderr);
    assert!(
        changed
            .stderr
            .contains("diverged at call 3 (executor, step patch-css, attempt 1): message 3"),
        "{}",
        changed.stderr
    );
    assert!(
        changed.stderr.contains("#222222") && changed.stderr.contains("#333333"),
        "{}",
        changed.stderr
    );
    assert!(changed.stderr.contains("DIFFERENT"), "{}", changed.stderr);

    // A plan run has no model to replay.
    let plan = tmp.path().join("plan.json");
    std::fs::write(&plan, r#"{"goal": "list", "steps": [{"id": "a", "tool": "file.list", "parameters": {"path": "."}}]}"#).expect("plan");
    let ran = run(&mut pev(), &["run", &plan.display().to_string(), "-w", &ws]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let refused = run(&mut pev(), &["replay", "last", "-w", &ws]);
    assert_eq!(refused.code, 2);
    assert!(refused.stderr.contains("not an agent run"), "{}", refused.stderr);
}

/// `pev replay` of a run that created a file, run from the workspace as a user would (issue 31):
/// the copy is put back as it was before the run (the created file removed there, through the
/// copy's own handle), the replay matches the recording, and the workspace itself keeps the
/// file. Before, the removal went to the current directory: the user's file was deleted and the
/// replay diverged at the write ("created": false).
#[test]
fn a_run_that_created_a_file_replays_and_the_workspace_keeps_it() {
    let (_tmp, ws, pev) = scripted_site("changelog");
    let goal = "Add a CHANGELOG entry for 1.2 in notes/changelog.txt";
    let out = run(&mut pev(), &["agent", goal, "--mode", "loop"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let note = ws.join("notes/changelog.txt");
    assert_eq!(std::fs::read_to_string(&note).expect("the note"), "1.2: dark green\n");

    for _ in 0..2 {
        let same = run(&mut pev(), &["replay", "last"]);
        assert_eq!(same.code, 0, "{}", same.stderr);
        assert!(
            same.stderr.contains("outcome success now, success when recorded\n"),
            "{}",
            same.stderr
        );
        assert!(!same.stderr.contains("diverged"), "{}", same.stderr);
        assert!(note.is_file(), "the replay removed the workspace's own file");
    }
}

/// A replay is not thrown by what changes from run to run in a command's output (issue 31): the
/// run's command prints the time to the nanosecond and its process id; replayed later, the
/// output differs there, and the replay still matches the recording and ends as it did.
#[test]
fn a_command_that_prints_the_time_replays_without_a_divergence() {
    let (_tmp, ws, pev) = scripted_site("stamp");
    let out = run(&mut pev(), &["agent", "Write the build time to stamp.txt", "--mode", "loop"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let stamp = std::fs::read_to_string(ws.join("stamp.txt")).expect("stamp");
    let same = run(&mut pev(), &["replay", "last"]);
    assert!(!same.stderr.contains("diverged"), "{}", same.stderr);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert!(same.stderr.contains("6 of 6 recorded model calls answered"), "{}", same.stderr);
    assert_eq!(std::fs::read_to_string(ws.join("stamp.txt")).expect("stamp"), stamp, "untouched");
}

/// Any run can be kept as a text recording (issue 31): `pev show RUN --format recording` writes
/// it, and `pev replay last --store FILE.jsonl` replays it with the workspace's own journal
/// gone; the file is JSON lines under a versioned header.
#[test]
fn a_run_kept_as_a_text_recording_replays_without_its_journal() {
    let (tmp, ws, pev) = scripted_site("changelog");
    let out = run(
        &mut pev(),
        &["agent", "Add a CHANGELOG entry for 1.2 in notes/changelog.txt", "--mode", "loop"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let shown = run(&mut pev(), &["show", "last", "--format", "recording"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let header: serde_json::Value =
        serde_json::from_str(shown.stdout.lines().next().expect("a header")).expect("JSON");
    assert_eq!(
        (header["format"].as_str(), header["version"].as_u64()),
        (Some("pev-recording"), Some(1))
    );
    let file = tmp.path().join("run.jsonl");
    std::fs::write(&file, &shown.stdout).expect("keep it");
    std::fs::remove_dir_all(ws.join(".pev")).expect("the journal gone");
    let file = file.to_str().expect("utf-8");
    let same = run(&mut pev(), &["replay", "last", "--store", file]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert!(
        same.stderr.contains("outcome success now, success when recorded\n"),
        "{}",
        same.stderr
    );
    let missing = run(&mut pev(), &["replay", "last", "--store", "nowhere.jsonl"]);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("cannot open the recording nowhere.jsonl"),
        "{}",
        missing.stderr
    );
}

/// The example site in a temp dir (kept alive by the returned guard), and `pev` run from it with
/// the executor's answers scripted by `fixtures/agent/NAME/executor.json` and scratch copies
/// under the temp dir.
fn scripted_site(
    name: &str,
) -> (tempfile::TempDir, std::path::PathBuf, impl Fn() -> assert_cmd::Command) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let ws = example_site(tmp.path(), "site");
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).expect("mkdir");
    let script = super::support::repo_root()
        .join(format!("crates/cli/tests/fixtures/agent/{name}/executor.json"));
    let dir = ws.clone();
    let pev = move || {
        let mut cmd = pev_clean();
        cmd.current_dir(&dir)
            .env("TMPDIR", &scratch)
            .env("PEV_EXECUTOR_PROVIDER", format!("script:{}", script.display()));
        cmd
    };
    (tmp, ws, pev)
}
