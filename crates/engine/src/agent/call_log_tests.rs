use std::sync::Arc;
use std::time::Duration;

use pev_providers::script::{FailureKind, ScriptTurn, ScriptedClient};
use pev_providers::{ChatRequest, Message, ModelClient, TokenUsage};

use super::*;
use crate::model_scope;

fn request(model: &str) -> ChatRequest {
    ChatRequest::new(model, vec![Message::user("hi")])
}

#[tokio::test]
async fn calls_before_the_run_exists_are_written_when_it_is_attached_and_later_ones_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (db, store) = crate::agent::test_clients::journal_with_run(dir.path());
    let usage = TokenUsage {
        input_tokens: 11,
        output_tokens: 7,
        cache_read_tokens: 5,
        ..TokenUsage::default()
    };
    let script = ScriptedClient::from_turns(
        "t",
        vec![
            ScriptTurn::text("plan").with_usage(usage),
            ScriptTurn::failure(FailureKind::RateLimited, Some(Duration::from_secs(1))),
            ScriptTurn::text("done"),
        ],
    );
    let log = CallLog::new();
    let planner = LoggedClient::new(Arc::new(script), "planner", Arc::clone(&log));
    planner.chat(&request("m-plan")).await.unwrap();
    assert!(store.model_calls("r1").unwrap().is_empty(), "no run named yet: kept");
    log.attach(&db, "r1").unwrap();
    assert_eq!(store.model_calls("r1").unwrap().len(), 1, "written on attach");

    let failed = model_scope::scoped("step-a", 2, planner.chat(&request("m-exec"))).await;
    assert!(failed.is_err());
    // Durable before the answer is handed back: visible to another connection at once.
    let calls = store.model_calls("r1").unwrap();
    assert_eq!(calls.len(), 2);
    let first = &calls[0];
    assert_eq!((first.seq, first.role.as_str(), first.step_id.as_deref()), (1, "planner", None));
    assert_eq!(first.provider, "script", "the script's file is not the provider's name");
    assert_eq!(first.request_model, "m-plan");
    assert_eq!(first.finish_reason.as_deref(), Some("end_turn"));
    assert_eq!((first.input_tokens, first.output_tokens, first.cache_read_tokens), (11, 7, 5));
    assert_eq!(first.error_type, None);
    let second = &calls[1];
    assert_eq!((second.step_id.as_deref(), second.attempt), (Some("step-a"), Some(2)));
    assert_eq!(second.error_type.as_deref(), Some("rate_limited"));
    assert!(second.error.is_some());
    assert_eq!(second.finish_reason, None);
    assert!(log.error().is_none());
    log.close();
}

#[tokio::test]
async fn an_abandoned_call_is_journaled_as_abandoned() {
    let dir = tempfile::tempdir().unwrap();
    let (db, store) = crate::agent::test_clients::journal_with_run(dir.path());
    let log = CallLog::new();
    log.attach(&db, "r1").unwrap();
    let client =
        LoggedClient::new(Arc::new(crate::agent::test_clients::Hang), "executor", Arc::clone(&log));
    let req = request("m");
    let timed_out = tokio::time::timeout(Duration::from_millis(50), client.chat(&req)).await;
    assert!(timed_out.is_err());
    // Queued, not waited for (nothing acts on an abandoned call): on disk once flushed.
    log.close();
    let calls = store.model_calls("r1").unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].error_type.as_deref(), Some("abandoned"));
    // The time the call waited: its clock starts at its first poll, which a busy machine may
    // make a few milliseconds after the timeout's (20 ms against 20 once measured 19).
    assert!(calls[0].duration_ms >= 25, "{}", calls[0].duration_ms);
    assert!(calls[0].request.is_some(), "what was asked is kept");
}

#[tokio::test]
async fn a_journal_that_fails_is_reported_once_and_does_not_fail_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _store) = crate::agent::test_clients::journal_with_run(dir.path());
    let log = CallLog::new();
    // A run the journal does not hold: the write is refused (foreign key).
    log.attach(&db, "no-such-run").unwrap();
    let script =
        ScriptedClient::from_turns("t", vec![ScriptTurn::text("a"), ScriptTurn::text("b")]);
    let client = LoggedClient::new(Arc::new(script), "executor", Arc::clone(&log));
    assert!(client.chat(&request("m")).await.is_ok());
    let error = log.error().expect("the failure is kept");
    assert!(error.contains("no longer journaled"), "{error}");
    assert!(client.chat(&request("m")).await.is_ok());
    assert_eq!(log.error(), Some(error), "the first error is kept");
}
