//! `pev agent --max-usd`: a ceiling, not a target (issue 5, "Done means"). The scripts state
//! each turn's tokens and the models have built-in prices, so cost accrues exactly; the run must
//! stop cleanly (`partial`, `budget_exhausted`) when the next call's worst case does not fit, and
//! never spend more than the budget.
//!
//! Fixture: `tests/fixtures/agent/budget/` (the honest two-step footer plan with heavier turns;
//! the planner is the cheap model there so that its long prompt's worst case fits).

use super::agent_support::{
    Scenario, assert_no_dark_green, assert_one_run_finished, assert_stream_shape, cost, reason,
};
use super::run_support::run_level;

const GOAL: &str = "Add a footer to the page and style it";

/// Where the budget bites, with the scripts' tokens at the built-in prices: the planner (haiku
/// 4.5) spends $0.0027; step 1's executor turns (sonnet 4.5) $0.009 + $0.009 + $0.036 and its
/// judge (haiku) $0.0014, $0.0581 in all. Step 1's last turn (2000 output tokens) fits only from
/// about $0.060, and step 2's first call needs about $0.013 (its prompt's worst-case input plus
/// the least clamped output), which $0.065 - $0.0581 cannot pay. So step 1 finishes and the run
/// stops before step 2, with margins of about $0.005 either way for prompt growth.
const BUDGET: f64 = 0.065;

#[test]
fn max_usd_stops_the_run_before_a_call_it_cannot_afford_and_never_overspends() {
    let s = Scenario::new("budget");
    let out = s.agent(GOAL, &["--max-usd", &BUDGET.to_string()]);
    assert_eq!(out.code, 3, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.status(), "partial");
    assert!(out.reasons().contains(&run_level("budget_exhausted")), "{:?}", out.reasons());
    let why = reason(&out, "budget_exhausted")["message"].as_str().unwrap_or_default();
    assert!(why.contains("the executor call to claude-sonnet-4-5 needs up to $"), "{why}");
    assert!(why.contains(&format!("left of ${BUDGET:.4}")), "{why}");
    assert!(out.codes().contains(&"steps_not_run".to_owned()), "{:?}", out.codes());
    assert_stream_shape(&out, 0, false);
    assert_one_run_finished(&out);
    assert_no_dark_green(&out);

    // The ceiling held: what was spent is at most the budget, and exactly what the scripts'
    // turns cost (so no refused call was paid for).
    let spent = cost(&out);
    assert!(spent <= BUDGET, "spent ${spent} of ${BUDGET}");
    assert!((spent - 0.0581).abs() < 1e-9, "{spent}");
    assert_eq!(out.result()["usage"]["llm_calls"], 5, "1 planner + 3 executor + 1 judge");

    // Step 1 is done and proved; step 2 started, was refused its first model call and is left
    // pending (not failed: it can run with more budget); nothing of it ran.
    assert_eq!(out.step_status("add-footer"), "done");
    assert_eq!(out.step_status("style-footer"), "pending");
    let stopped = out.step("style-footer")["error"].as_str().unwrap_or_default().to_owned();
    assert!(stopped.starts_with("stopped: the budget ran out"), "{stopped}");
    let finished = out.first("step.finished", "style-footer").expect("style-footer finished");
    assert_eq!(finished["status"], "pending", "{finished}");
    assert!(out.of("tool.called").iter().all(|e| e["step"] == "add-footer"));
    assert!(s.read("index.html").contains("<footer>Made with pev</footer>"));
    assert_eq!(s.read("style.css"), Scenario::original("budget", "style.css"));
}

#[test]
fn a_budget_too_small_for_the_plan_stops_before_any_run_is_journaled() {
    let s = Scenario::new("budget");
    let out = s.agent(GOAL, &["--max-usd", "0.001"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stderr, out.stdout);
    // No run events: only the error event that answers --json.
    assert_eq!(out.events.len(), 1, "{}", out.stdout);
    assert_eq!(out.events[0]["event"], "error", "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "the budget ran out before a plan was written: the planner call to \
             claude-haiku-4-5 needs up to $"
        ),
        "{}",
        out.stderr
    );
    let runs = s.pev(&["runs", "--json"]);
    assert_eq!(runs.code, 2, "{runs:?}");
    assert!(runs.stderr.contains("no run has been journaled there"), "{runs:?}");
    assert_eq!(s.read("index.html"), Scenario::original("budget", "index.html"));
}
