//! Loop mode's postconditions without assertions, decided by the verifier after the loop: an
//! honest loop succeeds on a confident yes; without a verifier, or after the model dropped a
//! step, they stay unverified and the reason says why. And loop mode's mismatch rule: a step
//! named for `site/style.css` that wrote `site/theme.css` is never done.

use std::sync::Arc;

use pev_engine::agent::judge::{JudgeOptions, ModelJudge};
use pev_engine::agent::judge_post::POSTCONDITION_QUESTIONS;
use pev_engine::agent::loop_mode::{LoopExecutor, LoopOptions};
use pev_engine::agent::loop_run::{LoopRun, loop_plan};
use pev_engine::instruct::{InstructionExecutor, Judge};
use pev_engine::{EngineConfig, ModelHooks};
use pev_protocol::run::{ReasonCode, RunResult, RunStatus};
use pev_providers::script::{ScriptTurn, ScriptedClient};
use pev_providers::{ContentBlock, ModelClient};
use pev_tools::{ToolContext, Workspace};
use serde_json::{Value, json};

use super::support::{Harness, config, reason_message};

const GOAL: &str = "Change the page background in site/style.css to dark green (#013220)";
const POST: &str = "The page background is dark green";

fn call(name: &str, input: Value) -> ScriptTurn {
    ScriptTurn::blocks(vec![ContentBlock::ToolUse { id: "c".into(), name: name.into(), input }])
}

fn plan_create(steps: &Value) -> ScriptTurn {
    call(
        "plan_create",
        json!({"objective": "Dark green background", "steps": steps,
               "postconditions": [{"description": POST}]}),
    )
}

fn done(id: &str) -> ScriptTurn {
    call(
        "step_update",
        json!({"id": id, "status": "done",
                               "evidence": "patched the body rule and read it back"}),
    )
}

fn patch_style() -> ScriptTurn {
    call(
        "file_patch",
        json!({"path": "site/style.css",
                              "edits": [{"old": "white", "new": "#013220"}]}),
    )
}

fn verify_p1() -> ScriptTurn {
    call("postcondition_verify", json!({"id": "p1", "evidence": "the body rule sets #013220"}))
}

/// An honest loop: plans, patches the named file, marks the step done, claims the postcondition.
fn honest_loop() -> Vec<ScriptTurn> {
    vec![
        plan_create(&json!([{"id": "patch", "title": "Patch the body rule in site/style.css"}])),
        call("step_update", json!({"id": "patch", "status": "in_progress"})),
        patch_style(),
        done("patch"),
        verify_p1(),
        ScriptTurn::text("The background is dark green."),
    ]
}

fn yes(confidence: f64) -> ScriptTurn {
    let answers: Vec<Value> = POSTCONDITION_QUESTIONS
        .iter()
        .map(|q| json!({"question": q, "yes": true, "confidence": confidence}))
        .collect();
    ScriptTurn::text(
        json!({"postconditions": [{"id": "p1", "answers": answers, "holds": true,
            "confidence": confidence, "explanation": "The diff sets #013220 on body."}]})
        .to_string(),
    )
}

/// Runs `GOAL` in loop mode with `turns`, and a scripted verifier answering `verifier` (or no
/// verifier, with `Err`).
async fn run_loop(
    h: &Harness,
    turns: Vec<ScriptTurn>,
    verifier: Result<Vec<ScriptTurn>, &str>,
) -> (RunResult, Option<Arc<ScriptedClient>>) {
    let client = Arc::new(ScriptedClient::from_turns("loop", turns));
    let ctx = Arc::new(ToolContext::new(Workspace::open(&h.root).unwrap()));
    let executor = Arc::new(LoopExecutor::new(
        client as Arc<dyn ModelClient>,
        "loop-model".into(),
        LoopOptions::default(),
        ctx,
    ));
    let hooks = ModelHooks {
        executor: Arc::clone(&executor) as Arc<dyn InstructionExecutor>,
        judge: None,
        judge_threshold: 0.7,
        budget_note: Arc::new(|| None),
        usage: Arc::new(Default::default),
        allowed_tools: Vec::new(),
        delegator: None,
    };
    let engine = h.engine(EngineConfig { models: Some(hooks), ..config(1) });
    let (verifier, script) = match verifier {
        Ok(turns) => {
            let script = Arc::new(ScriptedClient::from_turns("verifier", turns));
            let judge = ModelJudge::new(
                Arc::clone(&script) as Arc<dyn ModelClient>,
                "claude-haiku-4-5",
                JudgeOptions::default(),
            );
            (Ok(Arc::new(judge) as Arc<dyn Judge>), Some(script))
        }
        Err(why) => (Err(why.to_owned()), None),
    };
    let (run_id, _) = h.create(&serde_json::to_value(loop_plan(GOAL)).unwrap());
    let db = pev_store::Location::from(&h.db);
    let run = LoopRun { engine: &engine, executor, db: &db, verifier };
    (run.run(run_id, GOAL).await.unwrap(), script)
}

fn site() -> Harness {
    let h = Harness::new();
    h.write("site/style.css", "body { background: white; }\n");
    h.write("site/theme.css", ":root { --accent: blue; }\n");
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_honest_loop_with_a_prose_postcondition_succeeds_on_the_judges_yes() {
    let h = site();
    let (result, verifier) = run_loop(&h, honest_loop(), Ok(vec![yes(0.9)])).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    let post = &result.postconditions[0];
    assert_eq!((post.description.as_str(), post.satisfied), (POST, true));
    assert_eq!(
        post.evidence,
        "judged by claude-haiku-4-5: yes (confidence 0.90): The diff sets #013220 on body."
    );
    let prompt = format!("{:?}", verifier.unwrap().requests()[0].messages[0].content);
    assert!(prompt.contains("+body { background: #013220; }"), "{prompt}");
    assert!(prompt.contains("claims, not evidence"), "{prompt}");
    // `pev show` reads the stored result.
    let stored = h.store().load_run(&result.run_id).unwrap().result.unwrap();
    assert_eq!(stored.postconditions, result.postconditions);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_verifier_the_loops_prose_postcondition_is_unverified_and_says_why() {
    let h = site();
    let (result, _) = run_loop(&h, honest_loop(), Err("ANTHROPIC_API_KEY is not set")).await;
    assert_eq!(result.status, RunStatus::Partial);
    let message = reason_message(&result, ReasonCode::PostconditionUnverified);
    assert!(message.contains("no verifier model: ANTHROPIC_API_KEY is not set"), "{message}");
    assert!(!result.postconditions[0].satisfied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_that_dropped_a_step_is_not_rescued_by_the_judge() {
    let h = site();
    let turns = vec![
        plan_create(&json!([
            {"id": "patch", "title": "Patch the body rule in site/style.css"},
            {"id": "test", "title": "Run the visual tests"}
        ])),
        patch_style(),
        done("patch"),
        call(
            "plan_create",
            json!({
                "objective": "Dark green background",
                "steps": [{"id": "patch", "title": "Patch the body rule in site/style.css"}],
                "postconditions": [{"description": POST}],
                "dropped": [{"id": "test", "reason": "the tests are slow"}]
            }),
        ),
        verify_p1(),
        ScriptTurn::text("Done."),
    ];
    let (result, verifier) = run_loop(&h, turns, Ok(vec![yes(1.0)])).await;
    assert_ne!(result.status, RunStatus::Success, "{:?}", result.reasons);
    let message = reason_message(&result, ReasonCode::PostconditionUnverified);
    assert!(message.contains("dropped step(s) `test` (the tests are slow)"), "{message}");
    assert!(verifier.unwrap().requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_step_named_for_style_css_that_wrote_theme_css_is_never_done() {
    let h = site();
    let final_answer = || ScriptTurn::text("The background is dark green.");
    let turns = vec![
        plan_create(&json!([{"id": "patch", "title": "Patch the body rule in site/style.css"}])),
        call(
            "file_write",
            json!({"path": "site/theme.css",
                                   "content": "body { background: #013220; }\n"}),
        ),
        done("patch"),
        verify_p1(),
        final_answer(),
        final_answer(),
        final_answer(),
    ];
    let (result, verifier) = run_loop(&h, turns, Ok(vec![yes(1.0)])).await;
    assert_eq!(result.status, RunStatus::Partial, "{:?}", result.reasons);
    let plan_step = result.steps.iter().find(|s| s.id == "plan:patch").unwrap();
    assert_ne!(plan_step.status, pev_protocol::run::StepStatus::Done);
    assert!(
        result.reasons.iter().any(|r| r.code == ReasonCode::StepsNotRun),
        "{:?}",
        result.reasons
    );
    assert!(verifier.unwrap().requests().is_empty(), "the judge could change nothing here");
}
