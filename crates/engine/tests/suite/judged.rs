//! Final verification that does not cry wolf, with scripted models: a plan's postconditions
//! written in prose go to the verifier, whose confident yes lets an honest run succeed; its
//! "no", its absence and its failure leave the run `partial` saying why; its yes never
//! outweighs other evidence (a lazy run). And the plan-execution mismatch rule: a step told to
//! change `site/style.css` that wrote `site/theme.css` is not done, whatever a judge says.

use std::sync::Arc;

use pev_engine::agent::executor::{ExecutorOptions, ModelExecutor};
use pev_engine::agent::judge::QUESTIONS;
use pev_engine::agent::judge::{JudgeOptions, ModelJudge};
use pev_engine::agent::judge_post::POSTCONDITION_QUESTIONS;
use pev_engine::instruct::Judge;
use pev_engine::{EngineConfig, ModelHooks};
use pev_protocol::event::EventBody;
use pev_protocol::run::{ReasonCode, RunResult, RunStatus, StepStatus};
use pev_providers::script::{FailureKind, ScriptTurn, ScriptedClient};
use pev_providers::{ContentBlock, ModelClient};
use serde_json::{Value, json};

use super::support::{Harness, codes, config, reason_message, step};

const GOAL: &str = "Change the site background to dark green";
const POST: &str = "The page background is dark green";
const WHITE: &str = "body { background: white; }\n";

/// A model turn that calls `name` with `input`.
fn call(name: &str, input: Value) -> ScriptTurn {
    ScriptTurn::blocks(vec![ContentBlock::ToolUse { id: "c1".into(), name: name.into(), input }])
}

/// An executor that patches `site/style.css` green and says so.
fn honest_executor() -> Vec<ScriptTurn> {
    vec![
        call(
            "file_patch",
            json!({"path": "site/style.css", "edits": [{"old": "white", "new": "#013220"}]}),
        ),
        ScriptTurn::text("The background is #013220 now."),
    ]
}

/// The verifier's answer about `p1`: `holds`, each question answered `yes` at `confidence`.
fn verdict(holds: bool, confidence: f64, explanation: &str) -> ScriptTurn {
    let answers: Vec<Value> = POSTCONDITION_QUESTIONS
        .iter()
        .map(|q| json!({"question": q, "yes": holds, "confidence": confidence}))
        .collect();
    ScriptTurn::text(
        json!({"postconditions": [{"id": "p1", "answers": answers, "holds": holds,
            "confidence": confidence, "explanation": explanation}]})
        .to_string(),
    )
}

/// A step judge's lenient "pass" (all four questions yes).
fn lenient_step_verdict() -> ScriptTurn {
    let answers: Vec<Value> =
        QUESTIONS.iter().map(|q| json!({"question": q, "yes": true, "confidence": 0.95})).collect();
    ScriptTurn::text(
        json!({"answers": answers, "pass": true, "confidence": 0.95, "feedback": "Looks done."})
            .to_string(),
    )
}

struct Models {
    executor: Arc<ScriptedClient>,
    verifier: Arc<ScriptedClient>,
}

/// An engine config with a scripted executor and, when `with_judge`, a scripted verifier.
fn models(
    executor: Vec<ScriptTurn>,
    verifier: Vec<ScriptTurn>,
    with_judge: bool,
) -> (EngineConfig, Models) {
    let executor = Arc::new(ScriptedClient::from_turns("executor", executor));
    let verifier = Arc::new(ScriptedClient::from_turns("verifier", verifier));
    let judge: Option<Arc<dyn Judge>> = with_judge.then(|| {
        Arc::new(ModelJudge::new(
            Arc::clone(&verifier) as Arc<dyn ModelClient>,
            "claude-haiku-4-5",
            JudgeOptions::default(),
        )) as Arc<dyn Judge>
    });
    let hooks = ModelHooks {
        executor: Arc::new(ModelExecutor::new(
            Arc::clone(&executor) as Arc<dyn ModelClient>,
            "claude-sonnet-4-5".into(),
            ExecutorOptions::default(),
        )),
        judge,
        judge_threshold: 0.7,
        budget_note: Arc::new(|| None),
        usage: Arc::new(Default::default),
        allowed_tools: Vec::new(),
        delegator: None,
    };
    (EngineConfig { models: Some(hooks), ..config(1) }, Models { executor, verifier })
}

/// One instruction step that changes the background in `site/style.css`, checked by an
/// assertion, and one postcondition in prose.
fn green_plan() -> Value {
    json!({
        "goal": GOAL,
        "steps": [{
            "id": "green",
            "description": "Change the background in site/style.css to dark green (#013220)",
            "max_attempts": 1,
            "assertions": [{"type": "file_contains", "path": "site/style.css", "pattern": "#013220"}]
        }],
        "postconditions": [POST]
    })
}

fn white_site() -> Harness {
    let h = Harness::new();
    h.write("site/style.css", WHITE);
    h.write("site/theme.css", ":root { --accent: blue; }\n");
    h
}

fn postcondition_evidence(result: &RunResult) -> &str {
    &result.postconditions[0].evidence
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_honest_run_with_a_prose_postcondition_succeeds_on_the_judges_confident_yes() {
    let h = white_site();
    let (cfg, m) =
        models(honest_executor(), vec![verdict(true, 0.9, "The diff sets #013220 on body.")], true);
    let result = h.run(green_plan(), cfg).await;

    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    let post = &result.postconditions[0];
    assert!(post.satisfied);
    assert_eq!(
        post.evidence,
        "judged by claude-haiku-4-5: yes (confidence 0.90): The diff sets #013220 on body."
    );
    let judgment = post.judge.as_ref().expect("the judge's answers are kept");
    assert_eq!(judgment.answers.len(), 3);
    assert!(judgment.holds);
    // Asked once, with the run's evidence: the diff and the journaled call.
    let requests = m.verifier.requests();
    assert_eq!(requests.len(), 1);
    let prompt = format!("{:?}", requests[0].messages[0].content);
    for wanted in
        ["The page background is dark green", "+body { background: #013220; }", "file.patch"]
    {
        assert!(prompt.contains(wanted), "{wanted:?} not in the prompt: {prompt}");
    }
    // Journaled as a `judge` check of the postcondition, so `pev show` and the live view see it.
    let record = h.store().load_run(&result.run_id).unwrap();
    assert_eq!(record.result.as_ref().unwrap().postconditions[0].judge, post.judge);
    let judged = h.observer.events().into_iter().find_map(|e| match e.body {
        EventBody::AssertionChecked { postcondition: Some(p), result, .. }
            if result.kind == "judge" =>
        {
            Some((p, result))
        }
        _ => None,
    });
    let (about, check) = judged.expect("an assertion.checked event of kind judge");
    assert_eq!(about, POST);
    assert!(check.passed && check.detail.starts_with("judged by claude-haiku-4-5: yes"));
    assert_eq!(m.executor.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judges_no_leaves_the_run_partial_with_its_reason() {
    let h = white_site();
    let (cfg, _) = models(
        honest_executor(),
        vec![verdict(false, 0.85, "Only the body rule changed; the header is still white.")],
        true,
    );
    let result = h.run(green_plan(), cfg).await;
    assert_eq!(result.status, RunStatus::Partial);
    assert_eq!(codes(&result), [(ReasonCode::PostconditionUnverified, None)]);
    let message = reason_message(&result, ReasonCode::PostconditionUnverified);
    assert!(
        message.contains("judged by claude-haiku-4-5: no (confidence 0.85): Only the body rule"),
        "{message}"
    );
    assert!(!result.postconditions[0].satisfied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsure_yes_is_not_enough() {
    let h = white_site();
    let (cfg, _) = models(honest_executor(), vec![verdict(true, 0.5, "Probably.")], true);
    let result = h.run(green_plan(), cfg).await;
    assert_eq!(result.status, RunStatus::Partial);
    assert!(
        postcondition_evidence(&result).starts_with(
            "judged by claude-haiku-4-5: yes, but not confidently enough (confidence 0.50)"
        ),
        "{}",
        postcondition_evidence(&result)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_verifier_the_postcondition_stays_unverified_and_the_reason_says_why() {
    let h = white_site();
    let (cfg, _) = models(honest_executor(), vec![], false);
    let result = h.run(green_plan(), cfg).await;
    assert_eq!(result.status, RunStatus::Partial);
    assert_eq!(step(&result, "green").status, StepStatus::Done);
    let message = reason_message(&result, ReasonCode::PostconditionUnverified);
    assert!(message.contains("no verifier model is configured"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pev_run_without_models_says_it_has_no_verifier() {
    let h = white_site();
    let plan = json!({
        "goal": GOAL,
        "steps": [{"id": "patch", "tool": "file.patch",
                   "parameters": {"path": "site/style.css",
                                  "edits": [{"old": "white", "new": "#013220"}]}}],
        "postconditions": [POST]
    });
    let result = h.run(plan, config(1)).await;
    assert_eq!(result.status, RunStatus::Partial);
    let message = reason_message(&result, ReasonCode::PostconditionUnverified);
    assert!(message.contains("`pev run` has no verifier model"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judge_that_fails_leaves_the_run_partial() {
    let h = white_site();
    let (cfg, _) =
        models(honest_executor(), vec![ScriptTurn::failure(FailureKind::Overloaded, None)], true);
    let result = h.run(green_plan(), cfg).await;
    assert_eq!(result.status, RunStatus::Partial);
    let message = reason_message(&result, ReasonCode::PostconditionUnverified);
    assert!(message.contains("the judge could not be asked"), "{message}");
    assert!(message.contains("overloaded"), "{message}");
    assert!(result.postconditions[0].judge.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_run_is_not_success_though_the_judge_would_say_yes() {
    // The step names no file and the executor does nothing but claim: the goal's no_effects
    // rule keeps the run from success, and the judge is not even asked.
    let h = white_site();
    let plan = json!({
        "goal": GOAL,
        "steps": [{"id": "green", "description": "Make the page background dark green",
                   "max_attempts": 1}],
        "postconditions": [POST]
    });
    let (cfg, m) = models(
        vec![ScriptTurn::text("Done: the background is dark green.")],
        vec![verdict(true, 1.0, "Sure.")],
        true,
    );
    let result = h.run(plan, cfg).await;
    assert_ne!(result.status, RunStatus::Success);
    let found: Vec<ReasonCode> = result.reasons.iter().map(|r| r.code).collect();
    assert!(found.contains(&ReasonCode::NoEffects), "{found:?}");
    assert!(found.contains(&ReasonCode::PostconditionUnverified), "{found:?}");
    assert!(m.verifier.requests().is_empty(), "a judge's yes could not have changed the outcome");

    // The same with a failed assertion: the judge is not asked either.
    let h = white_site();
    let (cfg, m) = models(
        vec![ScriptTurn::text("Done: the background is dark green.")],
        vec![verdict(true, 1.0, "Sure.")],
        true,
    );
    let result = h.run(green_plan(), cfg).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(codes(&result)[0], (ReasonCode::AssertionFailed, Some("green")));
    assert!(m.verifier.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_without_steps_is_not_made_a_success_by_the_judge() {
    let h = white_site();
    let plan = json!({"goal": "Confirm the site is styled", "steps": [], "postconditions": [POST]});
    let (cfg, m) = models(vec![], vec![verdict(true, 1.0, "Sure.")], true);
    let result = h.run(plan, cfg).await;
    assert_ne!(result.status, RunStatus::Success);
    let message = reason_message(&result, ReasonCode::PostconditionUnverified);
    assert!(message.contains("the plan has no steps"), "{message}");
    assert!(m.verifier.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_told_to_change_style_css_that_wrote_theme_css_is_not_done_whatever_the_judge_says()
{
    let h = white_site();
    let plan = json!({
        "goal": GOAL,
        "steps": [{
            "id": "green",
            "description": "Change the background in site/style.css to dark green (#013220)",
            "acceptance_criteria": ["The page background is dark green"],
            "max_attempts": 1
        }],
        "postconditions": [POST]
    });
    let executor = vec![
        call(
            "file_write",
            json!({"path": "site/theme.css",
                                   "content": "body { background: #013220; }\n"}),
        ),
        ScriptTurn::text("The background is dark green."),
    ];
    // A lenient judge would pass the step and the postcondition.
    let (cfg, m) =
        models(executor, vec![lenient_step_verdict(), verdict(true, 1.0, "Green.")], true);
    let result = h.run(plan, cfg).await;

    assert_ne!(result.status, RunStatus::Success);
    assert_eq!(step(&result, "green").status, StepStatus::Failed);
    assert_eq!(codes(&result)[0], (ReasonCode::PlanExecutionMismatch, Some("green")));
    let message = reason_message(&result, ReasonCode::PlanExecutionMismatch);
    assert!(
        message.contains("the step was to change site/style.css, but it changed site/theme.css"),
        "{message}"
    );
    assert!(m.verifier.requests().is_empty(), "the rule comes before any judge");
    assert_eq!(h.read("site/style.css"), WHITE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_file_changed_by_a_shell_command_counts() {
    let h = white_site();
    let plan = json!({
        "goal": GOAL,
        "steps": [{
            "id": "green",
            "description": "Change the background in site/style.css to dark green (#013220)",
            "max_attempts": 1
        }]
    });
    let executor = vec![
        call("shell_exec", json!({"command": "sed -i 's/white/#013220/' site/style.css"})),
        ScriptTurn::text("Done with sed."),
    ];
    let (cfg, _) = models(executor, vec![], false);
    let result = h.run(plan, cfg).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert!(h.read("site/style.css").contains("#013220"));
    // The command's change, credited to it, once (not again as the executor's at the end).
    let evidence = &step(&result, "green").evidence;
    let changed: Vec<&String> =
        evidence.iter().filter(|e| e.contains(" changed site/style.css")).collect();
    assert_eq!(changed.len(), 1, "{evidence:?}");
    assert!(changed[0].starts_with("shell.exec changed site/style.css"), "{evidence:?}");
    let mutations = result.file_mutations.iter().filter(|m| m.path == "site/style.css").count();
    assert_eq!(mutations, 1, "{:?}", result.file_mutations);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_step_naming_a_file_is_not_held_to_it() {
    let h = white_site();
    let plan = json!({
        "goal": "Report the page background",
        "steps": [{"id": "look", "description": "Read site/style.css and report the background",
                   "max_attempts": 1}]
    });
    let executor =
        vec![call("file_read", json!({"path": "site/style.css"})), ScriptTurn::text("white")];
    let (cfg, _) = models(executor, vec![], false);
    let result = h.run(plan, cfg).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
}
