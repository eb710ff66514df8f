//! Stopping a run while a model thinks: the first Ctrl-C (`Cancel::cancel`) abandons the model
//! call in flight (a model call has no effect), keeps what the step's tool calls did, leaves the
//! step to run again, and the run ends `cancelled`, ready to resume.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pev_engine::BoxFuture;
use pev_engine::agent::executor::{ExecutorOptions, ModelExecutor};
use pev_protocol::run::{ReasonCode, RunStatus, StepStatus};
use pev_providers::script::{ScriptTurn, ScriptedClient};
use pev_providers::{ChatRequest, ChatResponse, ModelClient, ProviderError, StreamSink};

use super::support::{Harness, codes, plan, step};
use super::wire_names::{green_step, models, patch_call};

/// Answers from a script for its first `answers` calls, then never answers.
struct HangsAfter {
    script: ScriptedClient,
    answers: usize,
    calls: AtomicUsize,
}

impl ModelClient for HangsAfter {
    fn provider(&self) -> &str {
        "hangs-after"
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n < self.answers { self.script.chat(request) } else { Box::pin(std::future::pending()) }
    }

    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        _sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        self.chat(request)
    }
}

fn executor(client: Arc<dyn ModelClient>) -> ModelExecutor {
    ModelExecutor::new(client, "m".into(), ExecutorOptions::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_the_model_thinks_abandons_the_call_and_the_step_runs_again_on_resume() {
    let h = Harness::new();
    h.write("style.css", "body { background: white; }");
    let hanging = Arc::new(HangsAfter {
        script: ScriptedClient::from_turns("first", vec![patch_call()]),
        answers: 1,
        calls: AtomicUsize::new(0),
    });
    let cfg = models(Arc::new(executor(hanging.clone())), &[]);
    // Stopped once the patch has been made, while the model is asked what next (and never
    // answers).
    h.observer.cancel_on("tool.called", "green", &cfg.cancel);
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(20), h.run(green_step(), cfg))
        .await
        .expect("the run ends although the model never answers");

    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(hanging.calls.load(Ordering::SeqCst), 2, "the second call was in flight");
    assert_eq!(step(&result, "green").status, StepStatus::Pending, "not failed: stopped");
    assert!(codes(&result).contains(&(ReasonCode::Cancelled, None)), "{:?}", result.reasons);
    assert_ne!(result.status, RunStatus::Success);
    assert_eq!(h.read("style.css"), "body { background: #006400; }", "the patch is kept");

    // Resumed, the step runs again; its evidence (the change since before its first attempt)
    // holds, and the run succeeds.
    let again = Arc::new(ScriptedClient::from_turns(
        "again",
        vec![ScriptTurn::text("The background is already #006400.")],
    ));
    let resumed = h.resume(&result.run_id, models(Arc::new(executor(again)), &[])).await;
    assert_eq!(resumed.status, RunStatus::Success, "{:?}", resumed.reasons);
}

/// `content_changed` asks whether the step changed the file, not whether this attempt did: a
/// change made by the first attempt counts when a second attempt finishes the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_by_an_earlier_attempt_counts_for_content_changed() {
    let h = Harness::new();
    h.write("style.css", "body { background: white; }");
    let write_notes = ScriptTurn::blocks(vec![pev_providers::ContentBlock::ToolUse {
        id: "w".into(),
        name: "file_write".into(),
        input: serde_json::json!({"path": "notes.txt", "content": "changed the background\n"}),
    }]);
    let client = Arc::new(ScriptedClient::from_turns(
        "two attempts",
        vec![
            patch_call(),
            ScriptTurn::text("Patched the background."),
            write_notes,
            ScriptTurn::text("Wrote the notes."),
        ],
    ));
    let plan = plan(serde_json::json!([{
        "id": "green",
        "description": "Make the page background dark green in style.css and note it in notes.txt",
        "max_attempts": 2,
        "assertions": [
            {"type": "content_changed", "path": "style.css"},
            {"type": "file_contains", "path": "notes.txt", "pattern": "background"}
        ]
    }]));
    let result = h.run(plan, models(Arc::new(executor(client)), &[])).await;
    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert_eq!(step(&result, "green").attempts, 2);
}

/// A judge that raises the stop itself as it is asked, and never answers.
struct StopsWhileJudging(Arc<pev_engine::Cancel>);

impl pev_engine::instruct::Judge for StopsWhileJudging {
    fn judge<'a>(
        &'a self,
        _request: &'a pev_engine::instruct::JudgeRequest,
    ) -> BoxFuture<'a, Result<pev_engine::instruct::JudgeVerdict, pev_engine::instruct::Interruption>>
    {
        self.0.cancel();
        Box::pin(std::future::pending())
    }
}

/// A stop while the judge thinks abandons the judge's call: the step is left to run again (not
/// failed for want of a verdict), and the run ends `cancelled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_the_judge_thinks_abandons_its_call() {
    let h = Harness::new();
    h.write("style.css", "body { background: white; }");
    let client = Arc::new(ScriptedClient::from_turns(
        "executor",
        vec![patch_call(), ScriptTurn::text("The background is #006400.")],
    ));
    let mut cfg = models(Arc::new(executor(client)), &[]);
    if let Some(models) = cfg.models.as_mut() {
        models.judge = Some(Arc::new(StopsWhileJudging(Arc::clone(&cfg.cancel))));
    }
    let plan = plan(serde_json::json!([{
        "id": "green",
        "description": "Make the page background dark green",
        "acceptance_criteria": ["the page looks dark green"],
        "assertions": [{"type": "file_contains", "path": "style.css", "pattern": "#006400"}]
    }]));
    let result = tokio::time::timeout(Duration::from_secs(20), h.run(plan, cfg))
        .await
        .expect("the run ends although the judge never answers");
    assert_eq!(step(&result, "green").status, StepStatus::Pending, "{:?}", result.reasons);
    assert!(codes(&result).contains(&(ReasonCode::Cancelled, None)), "{:?}", result.reasons);
}
