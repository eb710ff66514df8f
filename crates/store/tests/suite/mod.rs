//! Shared fixtures: a journal in a temporary directory, runs, and one record of each kind.

mod append;
mod batched;
mod chain;
mod conformance;
mod gc;
mod journal;
mod keyed;
mod open;
#[cfg(feature = "postgres")]
mod pg_tls;
mod reads;
mod recording;
mod roundtrip;

use std::path::PathBuf;

use pev_protocol::assertion::AssertionResult;
use pev_protocol::event::{Event, EventBody};
use pev_protocol::run::StepStatus;
use pev_store::{NewRun, Record, StepState, Store};
use serde_json::{Value, json};
use tempfile::TempDir;

/// A temporary directory and the journal path inside it (under `.pev/`, not yet created).
pub struct Db {
    /// Removed on drop, with the journal in it.
    _dir: TempDir,
    pub path: PathBuf,
}

pub fn db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let path = pev_store::default_path(dir.path());
    Db { _dir: dir, path }
}

/// A plan with `n` steps `s0`, `s1`, ….
pub fn plan(n: usize) -> Value {
    let steps: Vec<Value> =
        (0..n).map(|i| json!({"id": format!("s{i}"), "tool": "file.read"})).collect();
    json!({"goal": "g", "steps": steps})
}

pub fn new_run(run_id: &str, created_at: &str, steps: usize) -> NewRun {
    NewRun {
        run_id: run_id.to_owned(),
        goal: format!("goal of {run_id}"),
        workspace: "/ws".to_owned(),
        plan: plan(steps),
        options: json!({"jobs": 2}),
        created_at: created_at.to_owned(),
    }
}

/// Creates a run with a 3-step plan.
pub fn create(store: &Store, run_id: &str, created_at: &str) {
    store.create_run(&new_run(run_id, created_at, 3)).unwrap();
}

pub fn event(run_id: &str, seq: u64) -> Event {
    Event {
        run_id: run_id.to_owned(),
        seq,
        at: format!("2026-01-01T00:00:{:02}.000Z", seq % 60),
        body: EventBody::StepStarted { step: format!("s{seq}"), attempt: 1 },
    }
}

pub fn event_rec(run_id: &str, seq: u64) -> Record {
    Record::Event(event(run_id, seq))
}

pub fn step_state(run_id: &str, step: &str, status: StepStatus) -> StepState {
    StepState {
        run_id: run_id.to_owned(),
        step_id: step.to_owned(),
        status,
        attempts: 1,
        output: Some(json!({"content": "body { }", "n": 3})),
        error: None,
        started_at: Some("2026-01-01T00:00:01.000Z".to_owned()),
        ended_at: Some("2026-01-01T00:00:02.000Z".to_owned()),
        assertions: vec![AssertionResult {
            kind: "file_exists".to_owned(),
            passed: true,
            detail: "exists".to_owned(),
        }],
        evidence: vec!["read 8 bytes".to_owned()],
    }
}

/// The journal key every test journal is written with: one file under the target's temporary
/// directory, never the home directory's.
pub fn keying() -> pev_store::Keying {
    let file =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pev-store-tests").join("journal.key");
    pev_store::Keying::from_file(&file, pev_store::CreateKey::Yes).unwrap()
}

/// `Store::open` with the tests' key.
pub fn open_store(at: impl Into<pev_store::Location>) -> Result<Store, pev_store::StoreError> {
    Store::open_keyed(at, keying())
}

/// `Store::open_existing` with the tests' key.
pub fn open_existing(at: impl Into<pev_store::Location>) -> Result<Store, pev_store::StoreError> {
    Store::open_existing_keyed(at, keying())
}

/// `Journal::start` with the tests' key.
pub fn start_journal(
    at: impl Into<pev_store::Location>,
) -> Result<pev_store::Journal, pev_store::StoreError> {
    pev_store::Journal::start_keyed(at, keying())
}
