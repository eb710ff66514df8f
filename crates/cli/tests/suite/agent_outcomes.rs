//! `pev agent` verdicts against scripted models (issue 5, "Done means"): an honest model
//! succeeds; a lazy model that edits two of three files and claims all three never succeeds and
//! the reasons name the file it skipped; the dark-green model that only looks is `partial` with
//! `no_effects` even when a gullible judge believes it; a judge that rejects with high confidence
//! fails the step on every attempt.
//!
//! Fixtures: `tests/fixtures/agent/{honest,lazy,discovery,judge}/` (their scripts hold the turns
//! and the `expect` checks on what the agent sent).

use super::agent_support::{
    GREEN_GOAL, Scenario, assert_no_dark_green, assert_one_run_finished, assert_stream_shape,
    reason, started_attempts, warnings,
};
use super::run_support::{at_step, run_level};

const FOOTER_GOAL: &str = "Add a footer to the page and style it";
const LAZY_GOAL: &str = "Rename the product from Widget to Gadget in intro.md, guide.md and faq.md";
const JUDGE_GOAL: &str = "Change the page heading to 'Welcome to pev'";

#[test]
fn an_honest_model_succeeds_with_evidence_for_every_step() {
    let s = Scenario::new("honest");
    let out = s.agent(FOOTER_GOAL, &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.status(), "success");
    assert_eq!(out.codes(), Vec::<String>::new());
    assert_stream_shape(&out, 0, false);
    assert_one_run_finished(&out);
    assert_no_dark_green(&out);

    let result = out.result();
    assert_eq!(result["goal"], FOOTER_GOAL);
    assert_eq!(result["goal_actions_executed"], true);
    let plan = &out.events[1];
    assert_eq!((plan["event"].as_str(), plan["version"].as_u64()), (Some("plan.created"), Some(1)));
    assert_eq!(plan["steps"], 2);
    for id in ["add-footer", "style-footer"] {
        assert_eq!(out.step_status(id), "done", "{id}");
        assert_eq!(out.step(id)["attempts"], 1, "{id}");
        assert_eq!(started_attempts(&out, id), [1], "{id}");
        let evidence = out.step(id)["evidence"].to_string();
        assert!(evidence.contains("judge: passed (confidence 0.90)"), "{id}: {evidence}");
        assert!(out.assertions(id).iter().all(|(_, passed, _)| *passed), "{id}");
    }
    // Dependency order: the second step starts after the first finished.
    let finished_first = out.first("step.finished", "add-footer").expect("finished")["seq"].clone();
    let started_second = out.first("step.started", "style-footer").expect("started")["seq"].clone();
    assert!(finished_first.as_u64() < started_second.as_u64());
    // The step's output is the executor's summary, recorded as a claim, next to the evidence.
    assert_eq!(
        out.step("add-footer")["output"]["summary"],
        "Added the footer before </body> and read the file back."
    );
    assert_eq!(out.step("add-footer")["output"]["tool_calls"], 2);

    let mutated: Vec<&str> = result["file_mutations"]
        .as_array()
        .expect("file_mutations")
        .iter()
        .map(|m| m["path"].as_str().expect("path"))
        .collect();
    assert_eq!(mutated, ["index.html", "style.css"]);
    assert!(s.read("index.html").contains("  <footer>Made with pev</footer>\n</body>"));
    assert!(s.read("style.css").ends_with("}\n\nfooter {\n  color: #666666;\n}\n"));

    // Usage is exactly what the scripts said: 1 planner + 5 executor + 2 judge calls; the cost
    // is those tokens at the built-in prices of the three models (opus 4.6 plans, sonnet 4.5
    // executes, haiku 4.5 judges): 0.0135 + 0.0189 + 0.0022.
    let usage = &result["usage"];
    assert_eq!(usage["llm_calls"], 8, "{usage}");
    assert_eq!(usage["tool_calls"], 3, "{usage}");
    assert_eq!(
        (usage["input_tokens"].as_u64(), usage["output_tokens"].as_u64()),
        (Some(8100), Some(620))
    );
    let cost = usage["cost_usd"].as_f64().expect("cost");
    assert!((cost - 0.0346).abs() < 1e-9, "{cost}");
}

#[test]
fn a_lazy_model_that_skips_one_of_three_edits_never_succeeds_and_the_reasons_name_the_file() {
    let s = Scenario::new("lazy");
    // No replan: the point is the verdict on what the executor did, over its three attempts.
    let out = s.agent(LAZY_GOAL, &["--max-replans", "0"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.status(), "failed");
    assert_stream_shape(&out, 0, false);
    assert_one_run_finished(&out);
    assert_no_dark_green(&out);

    // The executor said "done" three times; the harness checked each time.
    assert_eq!(started_attempts(&out, "rename"), [1, 2, 3]);
    assert_eq!(out.step_status("rename"), "failed");
    assert_eq!(out.step("rename")["attempts"], 3);
    assert_eq!(
        out.step("rename")["output"]["summary"],
        "All three files already say Gadget; nothing left to do."
    );
    let assertions = out.assertions("rename");
    let failed: Vec<&str> =
        assertions.iter().filter(|(_, passed, _)| !passed).map(|(_, _, d)| d.as_str()).collect();
    assert_eq!(failed.len(), 1, "{assertions:?}");
    assert!(failed[0].contains("faq.md") && failed[0].contains("Is Widget free?"), "{failed:?}");

    // The missing edit is named in the reasons, and only it.
    assert!(out.reasons().contains(&at_step("assertion_failed", "rename")), "{:?}", out.reasons());
    assert!(out.reasons().contains(&run_level("postcondition_unverified")), "{:?}", out.reasons());
    let assertion = reason(&out, "assertion_failed")["message"].as_str().unwrap_or_default();
    assert!(assertion.contains("'Widget' found in faq.md"), "{assertion}");
    let postcondition =
        reason(&out, "postcondition_unverified")["message"].as_str().unwrap_or_default();
    assert!(postcondition.contains("faq.md names the product Gadget"), "{postcondition}");
    for done in ["intro.md", "guide.md"] {
        assert!(!assertion.contains(done) && !postcondition.contains(done), "{done}");
    }
    // Each retry was told which file was left (the script's `expect` checked the prompt too).
    let retries = warnings(&out);
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert!(retries.iter().all(|w| w.contains("faq.md")), "{retries:?}");

    // The two real edits are on disk and reported; the third file is untouched.
    assert_eq!(s.read("intro.md"), "# Intro\n\nGadget is a tool for notes.\n");
    assert_eq!(s.read("guide.md"), "# Guide\n\nInstall Gadget with one command.\n");
    assert_eq!(s.read("faq.md"), Scenario::original("lazy", "faq.md"));
    let mutated: Vec<&str> = out.result()["file_mutations"]
        .as_array()
        .expect("file_mutations")
        .iter()
        .map(|m| m["path"].as_str().expect("path"))
        .collect();
    assert_eq!(mutated, ["intro.md", "guide.md"]);
}

#[test]
fn the_dark_green_model_that_only_looks_is_partial_with_no_effects() {
    let s = Scenario::new("discovery");
    let out = s.agent(GREEN_GOAL, &[]);
    assert_eq!(out.code, 3, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.status(), "partial");
    assert_eq!(out.result()["goal_actions_executed"], false);
    // The one reason: no effect ran. (The plan has no postconditions, so nothing else applies.)
    assert_eq!(out.reasons(), [run_level("no_effects")]);
    assert!(
        reason(&out, "no_effects")["message"].as_str().unwrap_or_default().contains(GREEN_GOAL),
        "{}",
        out.result()["reasons"]
    );
    assert_stream_shape(&out, 0, false);
    assert_one_run_finished(&out);
    assert_no_dark_green(&out);

    // Every step is done, and the judge believed the claim of the first: it does not matter.
    for id in ["inspect-css", "inspect-html"] {
        assert_eq!(out.step_status(id), "done", "{id}");
    }
    let evidence = out.step("inspect-css")["evidence"].to_string();
    assert!(evidence.contains("judge: passed"), "{evidence}");
    assert_eq!(
        out.step("inspect-css")["output"]["summary"],
        "The body background is now dark green (#013220)."
    );
    // Only reads ran; nothing changed.
    let effects: Vec<&str> =
        out.of("tool.called").iter().map(|e| e["effect"].as_str().unwrap_or("?")).collect();
    assert_eq!(effects, ["read", "read", "read"]);
    assert_eq!(out.result()["file_mutations"], serde_json::json!([]));
    assert_eq!(s.read("style.css"), Scenario::original("discovery", "style.css"));
    // The planner's unchecked step was flagged before anything ran.
    assert!(out.stderr.contains("plan warning: UNVERIFIED_EFFECT"), "{}", out.stderr);
}

#[test]
fn a_judge_that_rejects_with_high_confidence_fails_the_step_on_every_attempt() {
    let s = Scenario::new("judge");
    let out = s.agent(JUDGE_GOAL, &["--max-replans", "0"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.status(), "failed");
    assert_stream_shape(&out, 0, false);
    assert_one_run_finished(&out);
    assert_no_dark_green(&out);

    assert!(out.reasons().contains(&at_step("judge_rejected", "retitle")), "{:?}", out.reasons());
    let message = reason(&out, "judge_rejected")["message"].as_str().unwrap_or_default();
    assert!(message.contains("confidence 0.95"), "{message}");
    assert!(message.contains("lost its stylesheet link"), "{message}");
    assert!(message.contains("Is the step free of unwanted side effects? (no"), "{message}");

    // Tier 1 passed every attempt (the heading is there); the judge failed each one, and its
    // feedback reached the next attempt (the executor script's `expect` checks the prompt).
    assert_eq!(started_attempts(&out, "retitle"), [1, 2, 3]);
    assert_eq!(out.step_status("retitle"), "failed");
    assert_eq!(out.step("retitle")["attempts"], 3);
    let passed: Vec<bool> = out
        .of("assertion.checked")
        .iter()
        .map(|e| e["result"]["passed"].as_bool().expect("passed"))
        .collect();
    assert_eq!(passed, [true, true, true]);
    let retries = warnings(&out);
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert!(retries.iter().all(|w| w.contains("the judge rejected the step")), "{retries:?}");
    assert_eq!(out.result()["usage"]["llm_calls"], 10, "1 planner + 6 executor + 3 judge");
}
