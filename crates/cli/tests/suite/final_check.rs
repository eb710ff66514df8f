//! The final re-check through the binary, in both modes: work verified and then undone is
//! never `success`, the reason names the evidence that no longer holds and the later call, and
//! the summary and `pev show` say what the re-check found.

use serde_json::{Value, json};

use super::agent_support::pev_clean;
use super::run_support::Outcome;
use super::support::{repo_root, run};

/// Loop mode: the `undo-after-verify` eval's model (an honest run, then one more `file.patch`
/// that puts the white background back, then a final answer).
#[test]
fn loop_mode_work_verified_then_undone_is_partial_and_names_the_later_patch() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let eval = repo_root().join("evals/undo-after-verify");
    for file in ["style.css", "index.html"] {
        std::fs::copy(eval.join("workspace").join(file), ws.join(file)).unwrap();
    }
    let script = eval.join("model.json");
    std::fs::write(
        ws.join("pev.toml"),
        format!("[roles.executor]\nprovider = \"script:{}\"\n", script.display()),
    )
    .unwrap();
    let goal = "Change the page background in style.css to dark green (#013220)";
    let ws_arg = ws.to_string_lossy().into_owned();
    let out = Outcome::from(run(
        &mut pev_clean(),
        &["agent", goal, "--mode", "loop", "--workspace", &ws_arg, "--json"],
    ));
    assert_eq!(out.code, 3, "stderr:\n{}", out.stderr);
    let result = out.result();
    assert_eq!(result["status"], "partial");
    // The model's plan was complete and its final answer accepted: only the re-check objects.
    assert!(std::fs::read_to_string(ws.join("style.css")).unwrap().contains("#ffffff"));
    let regressed: Vec<&Value> = result["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["code"] == "evidence_regressed")
        .collect();
    assert_eq!(regressed.len(), 4, "{:#}", result["reasons"]);
    assert!(
        result["reasons"].as_array().unwrap().iter().all(|r| r["code"] == "evidence_regressed"),
        "{:#}",
        result["reasons"]
    );
    let step_reason = regressed.iter().find(|r| r["step"] == "patch").expect("the step's reason");
    let message = step_reason["message"].as_str().unwrap();
    assert!(message.contains("step 'patch''s evidence no longer holds"), "{message}");
    assert!(
        message.contains("changed after it by file.patch style.css (step 'loop')"),
        "{message}"
    );
    let post = regressed.iter().find(|r| r["step"].is_null()).expect("the postcondition's reason");
    assert!(
        post["message"]
            .as_str()
            .unwrap()
            .starts_with("postcondition \"style.css has the dark green"),
        "{post}"
    );
    let check = &result["final_check"];
    assert_eq!(check["rechecked"], 4);
    assert_eq!(check["regressed"].as_array().unwrap().len(), 4);
    // Only the undoing patch is named, not the patch that did the work before the step was done.
    for r in check["regressed"].as_array().unwrap() {
        assert_eq!(r["changed_by"], json!(["file.patch style.css (step 'loop')"]), "{r}");
    }

    let show = run(&mut pev_clean(), &["show", "last", "--workspace", &ws_arg]);
    assert_eq!(show.code, 0, "{show:?}");
    assert!(show.stdout.contains("4 no longer hold"), "{}", show.stdout);
    // What the harness saw when the model marked the step done, and what it sees now.
    assert!(show.stdout.contains("then pattern 'background: #013220;' found"), "{}", show.stdout);
    assert!(
        show.stdout.contains("now pattern 'background: #013220;' not found"),
        "{}",
        show.stdout
    );
}

/// pev mode: a later step of the plan undoes what an earlier step verified.
#[test]
fn pev_run_with_a_later_step_undoing_verified_work_is_partial_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("style.css"), "body { background: #ffffff; }\n").unwrap();
    let plan = json!({
        "goal": "Change the page background in style.css to dark green",
        "steps": [
            {"id": "green", "tool": "file.patch",
             "parameters": {"path": "style.css", "edits": [{"old": "#ffffff", "new": "#013220"}]},
             "assertions": [{"type": "file_contains", "path": "style.css", "pattern": "#013220"}]},
            {"id": "tidy", "tool": "file.patch", "depends_on": ["green"],
             "parameters": {"path": "style.css", "edits": [{"old": "#013220", "new": "#ffffff"}]}}
        ]
    });
    let plan_path = dir.path().join("plan.json");
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    let ws_arg = ws.to_string_lossy().into_owned();
    let plan_arg = plan_path.to_string_lossy().into_owned();
    let text = run(&mut pev_clean(), &["run", &plan_arg, "--workspace", &ws_arg]);
    assert_eq!(text.code, 3, "{text:?}");
    assert!(text.stdout.contains("evidence_regressed [green]"), "{}", text.stdout);
    assert!(
        text.stdout.contains(
            "final re-check: 1 assertion run again on the final workspace, 1 no longer hold"
        ),
        "{}",
        text.stdout
    );
    let show = run(&mut pev_clean(), &["show", "last", "--workspace", &ws_arg, "--format", "json"]);
    assert_eq!(show.code, 0, "{show:?}");
    let result: Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(result["status"], "partial");
    assert_eq!(result["reasons"][0]["code"], "evidence_regressed");
    assert_eq!(
        result["final_check"]["regressed"][0]["changed_by"],
        json!(["file.patch style.css (step 'tidy')"])
    );
}

/// Evidence checked once (`repeatable: false`: not run again at the end) stands only while
/// nothing it depends on changed after it was checked (issue 31). Here it names no file, so it
/// depends on the file its step changed: a later step that writes that file makes the run
/// `partial`, naming the step, the evidence and the later call; a later step that writes
/// another file leaves it standing, and the run is `success` with the usual warning.
#[test]
fn checked_once_evidence_that_a_later_step_undid_is_not_success() {
    let run_with = |later: Value| {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let plan = json!({
            "goal": "Release v1",
            "steps": [
                {"id": "release", "tool": "shell.exec",
                 "parameters": {"command": "echo v1 > release.txt"},
                 "assertions": [{"type": "command_succeeds", "command": "grep -q v1 release.txt",
                                 "repeatable": false}]},
                later
            ]
        });
        let plan_path = dir.path().join("plan.json");
        std::fs::write(&plan_path, plan.to_string()).unwrap();
        let (ws_arg, plan_arg) = (ws.display().to_string(), plan_path.display().to_string());
        let out = Outcome::from(run(
            &mut pev_clean(),
            &["run", &plan_arg, "--workspace", &ws_arg, "--jobs", "1", "--json"],
        ));
        (out.code, out.result().clone())
    };
    let (code, result) = run_with(json!(
        {"id": "rollback", "tool": "file.write", "depends_on": ["release"],
         "parameters": {"path": "release.txt", "content": "v0\n"},
         "assertions": [{"type": "file_exists", "path": "release.txt"}]}));
    assert_eq!((code, &result["status"]), (3, &json!("partial")), "{result}");
    assert_eq!(result["reasons"][0]["code"], "evidence_regressed", "{result}");
    assert_eq!(result["reasons"][0]["step"], "release", "{result}");
    let regressed = &result["final_check"]["regressed"][0];
    assert_eq!(regressed["type"], "command_succeeds");
    assert_eq!(regressed["changed_by"], json!(["file.write release.txt (step 'rollback')"]));
    assert!(regressed["now"].as_str().unwrap().contains("not run again"), "{regressed}");

    let (code, result) = run_with(json!(
        {"id": "notes", "tool": "file.write", "depends_on": ["release"],
         "parameters": {"path": "notes.txt", "content": "released\n"},
         "assertions": [{"type": "file_exists", "path": "notes.txt"}]}));
    assert_eq!((code, &result["status"]), (0, &json!("success")), "{result}");
    assert_eq!(result["final_check"]["checked_once"][0]["type"], "command_succeeds");
    assert_eq!(result["final_check"]["regressed"], json!([]));
}

/// A step reused from the cache (`--cache`) made no call in this run, and its `content_changed`
/// has no before-hash to be checked again against: checked once. It stands only while nothing
/// changed its file after the step ended (issue 31): a later step that writes the file back
/// makes the run `partial`, naming the step and the later write.
#[test]
fn a_cache_reused_step_whose_file_a_later_step_rewrote_is_not_success() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("version.txt"), "v1\n").unwrap();
    let bump = json!({"id": "bump", "tool": "file.write",
        "parameters": {"path": "version.txt", "content": "v2\n"},
        "assertions": [{"type": "content_changed", "path": "version.txt"}]});
    let run_plan = |steps: Value| {
        let plan_path = dir.path().join("plan.json");
        std::fs::write(&plan_path, json!({"goal": "Bump the version", "steps": steps}).to_string())
            .unwrap();
        let (ws_arg, plan_arg) = (ws.display().to_string(), plan_path.display().to_string());
        Outcome::from(run(
            &mut pev_clean(),
            &["run", &plan_arg, "--workspace", &ws_arg, "--cache", "--jobs", "1", "--json"],
        ))
    };
    let first = run_plan(json!([bump]));
    assert_eq!(first.status(), "success", "{}", first.stderr);
    let second =
        run_plan(json!([bump, {"id": "revert", "tool": "file.write", "depends_on": ["bump"],
        "parameters": {"path": "version.txt", "content": "v1\n"},
        "assertions": [{"type": "file_exists", "path": "version.txt"}]}]));
    let cached = second.first("step.finished", "bump").map(|e| e["cached"].clone());
    assert_eq!(cached, Some(json!(true)), "the step was reused: {}", second.stderr);
    let result = second.result();
    assert_eq!(result["status"], "partial", "{result}");
    assert_eq!(result["reasons"][0]["code"], "evidence_regressed", "{result}");
    assert_eq!(result["reasons"][0]["step"], "bump", "{result}");
    let regressed = &result["final_check"]["regressed"][0];
    assert_eq!(regressed["type"], "content_changed", "{regressed}");
    assert_eq!(regressed["changed_by"], json!(["file.write version.txt (step 'revert')"]));
}
