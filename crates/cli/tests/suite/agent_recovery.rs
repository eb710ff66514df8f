//! `pev agent` recovering from failures with scripted models (issue 5, "Done means"): a retry
//! told why its first attempt failed passes on attempt 2; a step that cannot be fixed in its
//! three attempts is replanned and the new plan version succeeds, the done step never re-run; a
//! planner whose first answer is not JSON is told so and asked again.
//!
//! Fixtures: `tests/fixtures/agent/{retry,replan,invalid-json}/`.

use super::agent_support::{
    GREEN_GOAL, Scenario, assert_no_dark_green, assert_one_run_finished, assert_stream_shape,
    names, started_attempts, warnings,
};

#[test]
fn a_retry_told_which_assertion_failed_passes_on_attempt_two() {
    let s = Scenario::new("retry");
    let out = s.agent(GREEN_GOAL, &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.status(), "success");
    assert_eq!(out.codes(), Vec::<String>::new());
    assert_stream_shape(&out, 0, false);
    assert_one_run_finished(&out);
    assert_no_dark_green(&out);

    assert_eq!(out.step_status("patch-css"), "done");
    assert_eq!(out.step("patch-css")["attempts"], 2);
    assert_eq!(started_attempts(&out, "patch-css"), [1, 2]);
    let finished = out.first("step.finished", "patch-css").expect("step.finished");
    assert_eq!(
        (finished["status"].as_str(), finished["attempts"].as_u64()),
        (Some("done"), Some(2))
    );

    // Attempt 1's failed assertion, then the retry warning, then attempt 2 started. The
    // executor script's turn 3 `expect`s this failure text and the recovery hint in the system
    // prompt of attempt 2: had the feedback not reached the model, the turn would have failed
    // the step.
    let checked: Vec<(bool, String)> = out
        .of("assertion.checked")
        .iter()
        .filter(|e| e["step"] == "patch-css")
        .map(|e| {
            let r = &e["result"];
            (r["passed"].as_bool().expect("passed"), r["detail"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    assert_eq!(checked.len(), 4, "{checked:?}");
    assert_eq!(
        checked[1],
        (false, "pattern 'background: #013220;' not found in style.css (122 bytes)".to_owned())
    );
    assert!(checked[2].0 && checked[3].0, "{checked:?}");
    let retry = warnings(&out);
    assert_eq!(retry.len(), 1, "{retry:?}");
    assert!(retry[0].contains("attempt 1 of 3 failed"), "{retry:?}");
    assert!(retry[0].contains("trying again with feedback"), "{retry:?}");

    // The wrong green was replaced by the right one, in two real changes of one file.
    let expected = Scenario::original("retry", "style.css").replace("#ffffff", "#013220");
    assert_eq!(s.read("style.css"), expected);
    let mutations = out.result()["file_mutations"].as_array().expect("file_mutations").clone();
    assert!(!mutations.is_empty() && mutations.iter().all(|m| m["path"] == "style.css"));
    assert_eq!(out.result()["usage"]["llm_calls"], 5, "1 planner + 4 executor, no judge");
}

#[test]
fn a_step_that_cannot_be_fixed_is_replanned_and_plan_version_two_succeeds() {
    let s = Scenario::new("replan");
    let out = s.agent(GREEN_GOAL, &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.status(), "success");
    assert_eq!(out.codes(), Vec::<String>::new());
    assert_stream_shape(&out, 0, false);
    // Version 1's end is not announced: one `verify.finished` and one `run.finished`, at the end
    // of the stream, after the replan (a consumer that stops at the first reads the outcome).
    assert_one_run_finished(&out);
    assert_no_dark_green(&out);

    // Version 1: the done tool step, then three failed attempts at the patch.
    assert_eq!(
        started_attempts(&out, "read-css"),
        [1],
        "the done step ran once: {:?}",
        names(&out)
    );
    assert_eq!(started_attempts(&out, "patch-css"), [1, 2, 3]);
    let failed = out.first("step.finished", "patch-css").expect("patch-css finished");
    assert_eq!((failed["status"].as_str(), failed["attempts"].as_u64()), (Some("failed"), Some(3)));
    let patch_errors = out
        .of("tool.finished")
        .iter()
        .filter(|e| e["step"] == "patch-css" && e["ok"] == false)
        .count();
    assert_eq!(patch_errors, 3, "each attempt's patch found nothing to replace");

    // The replan (the planner script's 2nd turn `expect`s the failure in its prompt) is
    // journaled as version 2, which keeps read-css and replaces patch-css.
    let revised = out.of("plan.revised");
    assert_eq!(revised.len(), 1, "{:?}", names(&out));
    assert_eq!(revised[0]["version"], 2);
    assert_eq!(revised[0]["steps"], 2);
    let why = revised[0]["reason"].as_str().unwrap_or_default();
    assert!(why.starts_with("replan 1: step `patch-css` failed after 3 attempt(s)"), "{why}");
    let revised_at = revised[0]["seq"].as_u64().expect("seq");
    let rewrite = out.first("step.started", "rewrite-css").expect("rewrite-css started");
    assert!(rewrite["seq"].as_u64().expect("seq") > revised_at);
    assert_eq!(started_attempts(&out, "rewrite-css"), [1]);

    // The result is version 2's: the kept step and the new one, both done.
    let ids: Vec<&str> = out.result()["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|st| st["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["read-css", "rewrite-css"]);
    assert_eq!(out.step_status("read-css"), "done");
    assert_eq!(out.step_status("rewrite-css"), "done");
    assert_eq!(out.result()["postconditions"][0]["satisfied"], true);
    let expected = Scenario::original("replan", "style.css").replace("#ffffff", "#013220");
    assert_eq!(s.read("style.css"), expected);
    assert_eq!(out.result()["usage"]["llm_calls"], 10, "2 planner + 8 executor");

    // `pev show` tells the revision: what it dropped and what it added.
    let run_id = out.run_id();
    let text = s.show_text(&run_id);
    assert!(text.contains("plan revisions\n  v2  "), "{text}");
    assert!(text.contains("      dropped: patch-css\n      added: rewrite-css\n"), "{text}");
    let stored = s.show_json(&run_id);
    assert_eq!(stored["status"], "success");
    assert_eq!(&stored, out.result(), "the journal's result is the streamed one");
}

#[test]
fn a_planner_whose_first_answer_is_not_json_is_asked_again() {
    let s = Scenario::new("invalid-json");
    let out = s.agent(GREEN_GOAL, &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.status(), "success");
    assert_stream_shape(&out, 0, false);
    assert_one_run_finished(&out);
    assert_no_dark_green(&out);

    // The planner was called twice: the second call `expect`s the "not a valid plan" feedback
    // (else it fails), and the usage counts both. One plan was linted (one "try").
    let usage = &out.result()["usage"];
    assert_eq!(usage["llm_calls"], 6, "2 planner + 3 executor + 1 judge: {usage}");
    assert_eq!(usage["input_tokens"], 6400, "{usage}");
    assert!(out.stderr.contains("the planner wrote 1 step(s) in 1 try"), "{}", out.stderr);
    // Only the valid plan was run.
    assert_eq!(out.of("plan.created").len(), 1);
    assert_eq!(out.of("plan.created")[0]["steps"], 1);
    assert_eq!(out.step_status("patch-css"), "done");
    assert_eq!(out.step("patch-css")["attempts"], 1);
    assert!(s.read("style.css").contains("background: #013220;"));
}
