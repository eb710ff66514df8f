//! The backend conformance suite: every case runs against a SQLite file and against a Postgres
//! database, through the same public API, and must see the same behaviour.
//!
//! The Postgres half needs a server: `PEV_TEST_POSTGRES` is a connection URL whose role may
//! create databases (`scripts/with-postgres.sh` starts a throwaway one and sets it; `.ci/run`
//! does). Each case gets a database of its own. Without the variable the Postgres half says so
//! and passes, unless `PEV_REQUIRE_POSTGRES=1`, which `.ci/run` sets so a missing server fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use pev_protocol::event::EventBody;
use pev_protocol::run::StepStatus;
use pev_store::{Location, Record, StoreError};
use serde_json::json;

use super::{event_rec, new_run, step_state};

/// A journal of one backend, removed (file) or dropped (database) with the value.
pub struct Backend {
    pub at: Location,
    _dir: Option<tempfile::TempDir>,
    #[cfg(feature = "postgres")]
    _db: Option<pg::Database>,
}

pub(super) fn sqlite() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    let at = Location::File(pev_store::default_path(dir.path()));
    Backend {
        at,
        _dir: Some(dir),
        #[cfg(feature = "postgres")]
        _db: None,
    }
}

/// A fresh Postgres database, or `None` (with a note) when no server is configured.
#[allow(clippy::print_stderr)] // the note says why the Postgres half did not run
pub(super) fn postgres() -> Option<Backend> {
    pev_test_support::server("the Postgres half")?;
    #[cfg(feature = "postgres")]
    {
        let db = pg::Database::create();
        let at = Location::parse(&db.url).unwrap();
        Some(Backend { at, _dir: None, _db: Some(db) })
    }
    #[cfg(not(feature = "postgres"))]
    {
        panic!("PEV_TEST_POSTGRES is set but pev-store was built without `--features postgres`");
    }
}

#[cfg(feature = "postgres")]
pub mod pg {
    pub use pev_test_support::{Database, with_dbname};
}

/// The README's `cargo test` on a machine without PostgreSQL (issue 33): the store's server
/// tests, run without `PEV_TEST_POSTGRES`, pass and each says it skipped.
#[cfg(feature = "postgres")]
#[test]
fn without_a_server_every_postgres_test_skips_and_says_so() {
    let suite = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite");
    pev_test_support::check_skips(&pev_test_support::ServerTests {
        suite: &suite,
        modules: &["conformance", "gc", "pg_tls"],
        filters: &[
            "suite::conformance::postgres::",
            "suite::gc::blobs_are_collected_while_another_process_drives_a_run",
            "suite::pg_tls::",
        ],
        local: &["a_host_that_is_not_this_machine_gets_no_cleartext_unless_the_url_says_disable"],
        this_test: "suite::conformance::without_a_server_every_postgres_test_skips_and_says_so",
    });
}

/// `conformance!(name)`: `name(&Backend)` as a SQLite test and a Postgres test.
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $case() { super::$case(&super::sqlite()); })*
        }
        mod postgres {
            $(#[test] fn $case() { if let Some(b) = super::postgres() { super::$case(&b); } })*
        }
    };
}

conformance!(
    create_resolve_and_list_order,
    event_sequence_is_gapless_and_a_duplicate_is_rejected,
    a_duplicate_run_is_rejected,
    blobs_are_deduplicated_and_come_back_whole,
    approvals_keep_the_first,
    json_round_trips_byte_for_byte,
    an_error_in_a_batch_is_sticky,
    reads_during_writes_see_whole_commits,
    racing_opens_migrate_once,
    a_newer_schema_is_refused,
    a_lease_is_exclusive_and_released,
    gc_collects_old_runs_and_their_blobs,
    events_after_reads_only_what_is_new,
    events_are_read_by_kind,
    quotes_backslashes_and_nul_in_text_survive,
    a_failed_write_rolls_back_its_whole_transaction,
);

fn a_failed_write_rolls_back_its_whole_transaction(b: &Backend) {
    use pev_protocol::tool::Effect;
    use pev_store::{ToolCallEnd, ToolCallStart, ToolCallStatus};
    let store = crate::suite::open_store(&b.at).unwrap();
    store.create_run(&new_run("r1", T0, 1)).unwrap();
    let start = ToolCallStart {
        run_id: "r1".into(),
        call_id: "c1".into(),
        step_id: "s0".into(),
        attempt: 1,
        tool: "file.read".into(),
        effect: Effect::Read,
        arguments: json!({"path": "a"}),
        path: None,
        pre_sha256: None,
        intended_sha256: None,
        started_at: T0.into(),
    };
    let ghost = ToolCallEnd {
        run_id: "r1".into(),
        call_id: "never-started".into(),
        status: ToolCallStatus::Finished,
        output: None,
        error: None,
        ended_at: T0.into(),
        duration_ms: 1,
    };
    let records = [Record::ToolCallStarted(start), Record::ToolCallFinished(ghost)];
    let body = EventBody::StepStarted { step: "s0".into(), attempt: 1 };
    let err = store.append_guarded("r1", None, &records, vec![body]).unwrap_err();
    assert!(err.to_string().contains("was never recorded as started"), "{err}");
    // Neither the call that did start nor the event was written.
    let run = store.load_run("r1").unwrap();
    assert!(run.tool_calls.is_empty(), "{:?}", run.tool_calls);
    assert!(store.events("r1").unwrap().is_empty());
    // A statement the database refuses names its record.
    let journal = crate::suite::start_journal(&b.at).unwrap();
    journal.record_durable(event_rec("r1", 0)).unwrap();
    let err = journal.record_durable(event_rec("r1", 0)).unwrap_err();
    assert!(err.to_string().contains("write event of run r1"), "{err}");
}

fn quotes_backslashes_and_nul_in_text_survive(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    store.create_run(&new_run("r1", T0, 1)).unwrap();
    let journal = crate::suite::start_journal(&b.at).unwrap();
    let text = "it's \\ a 'quote'; DROP TABLE runs; -- ünï \u{0} end";
    let mut state = step_state("r1", "s0", StepStatus::Failed);
    state.error = Some(text.to_owned());
    state.output = Some(json!({"stdout": text}));
    journal.record(Record::StepState(state)).unwrap();
    journal.record(Record::Blob { sha256: "f".repeat(64), content: vec![0, 39, 92, 255] }).unwrap();
    journal.flush().unwrap();
    let loaded = store.load_run("r1").unwrap();
    let expected = match &b.at {
        Location::File(_) => text.to_owned(),
        // Postgres text cannot hold NUL: it is stored as U+FFFD (JSON keeps `\u0000`).
        #[cfg(feature = "postgres")]
        Location::Postgres(_) => text.replace('\0', "\u{FFFD}"),
    };
    assert_eq!(loaded.steps[0].error.as_deref(), Some(expected.as_str()));
    assert_eq!(loaded.steps[0].output, Some(json!({"stdout": text})));
    assert_eq!(store.blob(&"f".repeat(64)).unwrap(), Some(vec![0, 39, 92, 255]));
    assert_eq!(store.list_runs().unwrap().len(), 1);
}

const T0: &str = "2026-01-01T00:00:00.000Z";

fn create_resolve_and_list_order(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    store.create_run(&new_run("20260101-000000-aaaaaa", "2026-01-01T00:00:00.000Z", 2)).unwrap();
    store.create_run(&new_run("20260101-000001-bbbbbb", "2026-01-01T00:00:01.000Z", 3)).unwrap();
    store
        .create_run(&new_run("20260101-000001-bbbbbb.s1.1", "2026-01-01T00:00:02.000Z", 1))
        .unwrap();
    let mut child = new_run("20260101-000001-bbbbbb.s1.1", "x", 1);
    child.run_id = "20260101-000001-bbbbbb.s1.2".into();
    child.created_at = "2026-01-01T00:00:03.000Z".into();
    child.options =
        json!({"parent": {"run": "20260101-000001-bbbbbb", "step": "s1", "attempt": 2}});
    store.create_run(&child).unwrap();
    let list = store.list_runs().unwrap();
    let ids: Vec<&str> = list.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "20260101-000001-bbbbbb.s1.2",
            "20260101-000001-bbbbbb.s1.1",
            "20260101-000001-bbbbbb",
            "20260101-000000-aaaaaa"
        ]
    );
    assert_eq!(list[2].steps_total, 3);
    assert_eq!(list[0].parent.as_deref(), Some("20260101-000001-bbbbbb"));
    assert_eq!(list[0].parent_step.as_deref(), Some("s1"));
    assert_eq!(list[1].parent, None);
    // `last` skips the child the parent link names; the other one has none, so it is newest.
    assert_eq!(store.resolve_run("last").unwrap(), "20260101-000001-bbbbbb.s1.1");
    assert_eq!(store.resolve_run("20260101-000000").unwrap(), "20260101-000000-aaaaaa");
    assert_eq!(store.resolve_run("20260101-000001").unwrap(), "20260101-000001-bbbbbb");
    assert!(matches!(store.resolve_run("2026"), Err(StoreError::Ambiguous { .. })));
    assert!(matches!(store.resolve_run("nope"), Err(StoreError::NotFound(_))));
    assert_eq!(
        store.parent_of("20260101-000001-bbbbbb.s1.2").unwrap().as_deref(),
        Some("20260101-000001-bbbbbb")
    );
    assert_eq!(store.parent_of("20260101-000000-aaaaaa").unwrap(), None);
    let options = store.run_options().unwrap();
    assert_eq!(options.len(), 4);
    assert_eq!(options[3].options, json!({"jobs": 2}));
}

fn event_sequence_is_gapless_and_a_duplicate_is_rejected(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    store.create_run(&new_run("r1", T0, 3)).unwrap();
    let journal = crate::suite::start_journal(&b.at).unwrap();
    for seq in 0..50 {
        journal.record(event_rec("r1", seq)).unwrap();
    }
    journal.flush().unwrap();
    let appended = store
        .append_event("r1", EventBody::ApprovalGranted { step: "s1".into(), by: "alice".into() })
        .unwrap();
    assert_eq!(appended.seq, 50);
    let events = store.events("r1").unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..=50).collect::<Vec<_>>());
    assert!(
        store.integrity("r1").unwrap().describe().contains("51"),
        "{:?}",
        store.integrity("r1")
    );
    assert!(!store.integrity("r1").unwrap().is_broken());
    assert_eq!(store.load_run("r1").unwrap().next_seq, 51);
    // The same sequence number again is refused, and the journal says so from then on.
    let err = journal.record_durable(event_rec("r1", 7)).unwrap_err();
    assert!(err.to_string().contains("r1"), "{err}");
    assert_eq!(store.events("r1").unwrap().len(), 51);
}

fn a_duplicate_run_is_rejected(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    store.create_run(&new_run("r1", T0, 3)).unwrap();
    let err = store.create_run(&new_run("r1", T0, 1)).unwrap_err();
    assert!(matches!(err, StoreError::Db { .. }), "{err}");
    // The first run is untouched: its plan has 3 steps still.
    assert_eq!(store.list_runs().unwrap()[0].steps_total, 3);
}

fn blobs_are_deduplicated_and_come_back_whole(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    let text = "line of a file that repeats\n".repeat(200).into_bytes();
    let binary: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    for (sha, content) in [("a".repeat(64), &text), ("b".repeat(64), &binary)] {
        for _ in 0..3 {
            store.write(&Record::Blob { sha256: sha.clone(), content: content.clone() }).unwrap();
        }
        assert_eq!(store.blob(&sha).unwrap().as_ref(), Some(content));
    }
    // Text is kept deflated, and once.
    let stored = store.stored_bytes(&"a".repeat(64)).unwrap();
    assert!(stored > 0 && stored < text.len() / 4, "{stored} of {}", text.len());
    assert_eq!(store.blob(&"c".repeat(64)).unwrap(), None);
}

fn approvals_keep_the_first(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    store.create_run(&new_run("r1", T0, 3)).unwrap();
    store.approve("r1", "s1", "alice").unwrap();
    store.approve("r1", "s1", "bob").unwrap();
    store.approve("r1", "s2", "bob").unwrap();
    let approvals = store.load_run("r1").unwrap().approvals;
    let who: Vec<(&str, &str)> =
        approvals.iter().map(|a| (a.step_id.as_str(), a.by.as_str())).collect();
    assert_eq!(who, [("s1", "alice"), ("s2", "bob")]);
    assert!(matches!(store.approve("nope", "s1", "x"), Err(StoreError::NotFound(_))));
}

fn json_round_trips_byte_for_byte(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    // Key order, unicode, escapes, big and fractional numbers: what went in comes out.
    let plan_text = r#"{"goal":"ünïcode \"quoted\" \\ tab\t","zeta":1,"alpha":[1.5,-0,12345678901234567890,1e-7],"steps":[{"tool":"file.read","id":"s0"}],"nested":{"b":null,"a":true}}"#;
    let plan: serde_json::Value = serde_json::from_str(plan_text).unwrap();
    let mut run = new_run("r1", T0, 1);
    run.plan = plan.clone();
    run.goal = "ünïcode \u{1F600}".into();
    store.create_run(&run).unwrap();
    let loaded = store.load_run("r1").unwrap();
    assert_eq!(serde_json::to_string(&loaded.plan).unwrap(), serde_json::to_string(&plan).unwrap());
    assert_eq!(loaded.goal, "ünïcode \u{1F600}");
    let journal = crate::suite::start_journal(&b.at).unwrap();
    let state = step_state("r1", "s0", StepStatus::Done);
    journal.record(Record::StepState(state.clone())).unwrap();
    journal.record(event_rec("r1", 0)).unwrap();
    journal.flush().unwrap();
    let loaded = store.load_run("r1").unwrap();
    assert_eq!(
        serde_json::to_string(&loaded.steps[0]).unwrap(),
        serde_json::to_string(&state).unwrap()
    );
    let event = &store.events("r1").unwrap()[0];
    assert_eq!(
        serde_json::to_value(event).unwrap(),
        serde_json::to_value(super::event("r1", 0)).unwrap()
    );
}

fn an_error_in_a_batch_is_sticky(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    store.create_run(&new_run("r1", T0, 3)).unwrap();
    let journal = crate::suite::start_journal(&b.at).unwrap();
    // A status for a run that does not exist fails its batch.
    let bad = Record::RunStatus {
        run_id: "ghost".into(),
        status: "success".into(),
        result: None,
        updated_at: T0.into(),
    };
    assert!(journal.record_durable(bad).is_err());
    // Everything after it is refused, and nothing of the failed batch was written.
    let later = journal.record_durable(event_rec("r1", 1));
    assert!(matches!(later, Err(StoreError::Stopped(_))), "{later:?}");
    assert!(journal.flush().is_err());
    assert!(store.events("r1").unwrap().is_empty());
}

fn reads_during_writes_see_whole_commits(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    store.create_run(&new_run("r1", T0, 3)).unwrap();
    let journal = crate::suite::start_journal(&b.at).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let reader = {
        let (at, done, reads) = (b.at.clone(), Arc::clone(&done), Arc::clone(&reads));
        thread::spawn(move || {
            let store = crate::suite::open_existing(&at).unwrap();
            while !done.load(Ordering::Relaxed) {
                let run = store.load_run("r1").unwrap();
                // Step state i is queued before event i, and a commit holds a prefix of the
                // queue: a snapshot read after the step states (one instant, not two) never has
                // more events than step states, nor two step states past its last event.
                let steps = run.steps.len() as u64;
                assert!(
                    (run.next_seq..=run.next_seq + 1).contains(&steps),
                    "{steps} step states beside {} events: not one snapshot",
                    run.next_seq
                );
                reads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    for i in 0..200u64 {
        journal
            .record(Record::StepState(step_state("r1", &format!("s{i}"), StepStatus::Done)))
            .unwrap();
        journal.record_durable(event_rec("r1", i)).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    assert!(reads.load(Ordering::Relaxed) > 0);
    assert_eq!(store.load_run("r1").unwrap().next_seq, 200);
}

fn racing_opens_migrate_once(b: &Backend) {
    // Eight fresh handles of the journal at once (eight processes meeting a new database).
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let at = reparse(&b.at);
            thread::spawn(move || crate::suite::open_store(&at).map(drop))
        })
        .collect();
    for h in handles {
        h.join().unwrap().unwrap();
    }
    let store = crate::suite::open_existing(&b.at).unwrap();
    assert!(store.list_runs().unwrap().is_empty());
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

fn a_newer_schema_is_refused(b: &Backend) {
    crate::suite::open_store(&b.at).unwrap();
    match &b.at {
        Location::File(path) => {
            let conn = rusqlite::Connection::open(path).unwrap();
            conn.pragma_update(None, "user_version", 99).unwrap();
        }
        #[cfg(feature = "postgres")]
        Location::Postgres(_) => {
            let db = b._db.as_ref().unwrap();
            db.client()
                .batch_execute("UPDATE pev.meta SET value = '99' WHERE key = 'schema_version'")
                .unwrap();
        }
    }
    let err = crate::suite::open_store(reparse(&b.at)).unwrap_err();
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
    assert!(err.to_string().contains("newer pev"), "{err}");
}

fn a_lease_is_exclusive_and_released(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    store.create_run(&new_run("r1", T0, 3)).unwrap();
    // Two handles that share nothing, as two processes would.
    let first = b.at.lease_keyed("r1", &crate::suite::keying()).unwrap();
    let other = reparse(&b.at);
    let refused = other.lease_keyed("r1", &crate::suite::keying()).unwrap_err();
    assert!(refused.to_string().contains("being run by another pev process"), "{refused}");
    // Another run is free.
    let _r2 = other.lease_keyed("r2", &crate::suite::keying()).unwrap();
    drop(first);
    let again = other.lease_keyed("r1", &crate::suite::keying()).unwrap();
    drop(again);
}

fn gc_collects_old_runs_and_their_blobs(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    let sha_old = "d".repeat(64);
    let sha_kept = "e".repeat(64);
    for (id, at) in [("old", "2020-01-01T00:00:00.000Z"), ("new", "2030-01-01T00:00:00.000Z")] {
        store.create_run(&new_run(id, at, 1)).unwrap();
        store
            .write(&Record::RunStatus {
                run_id: id.into(),
                status: "success".into(),
                result: None,
                updated_at: at.into(),
            })
            .unwrap();
    }
    store.write(&Record::Blob { sha256: sha_old.clone(), content: b"old".to_vec() }).unwrap();
    store.write(&Record::Blob { sha256: sha_kept.clone(), content: b"kept".to_vec() }).unwrap();
    let mut st = step_state("old", "s0", StepStatus::Done);
    st.output = Some(json!({"sha": sha_old}));
    store.write(&Record::StepState(st)).unwrap();
    let mut st = step_state("new", "s0", StepStatus::Done);
    st.output = Some(json!({"sha": sha_kept}));
    store.write(&Record::StepState(st)).unwrap();
    let options = pev_store::GcOptions { dry_run: false, keep: &[], collect_blobs: true };
    let report = store.gc("2025-01-01T00:00:00.000Z", options).unwrap();
    assert_eq!(report.runs, ["old"]);
    assert_eq!(report.blobs, 1);
    assert_eq!(store.blob(&sha_old).unwrap(), None);
    assert_eq!(store.blob(&sha_kept).unwrap().as_deref(), Some(&b"kept"[..]));
    let ids: Vec<String> = store.list_runs().unwrap().into_iter().map(|r| r.run_id).collect();
    assert_eq!(ids, ["new"]);
}

fn events_after_reads_only_what_is_new(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    store.create_run(&new_run("r1", T0, 3)).unwrap();
    let journal = crate::suite::start_journal(&b.at).unwrap();
    for seq in 0..5 {
        journal.record(event_rec("r1", seq)).unwrap();
    }
    journal.flush().unwrap();
    let seqs = |after| -> Vec<u64> {
        store.events_after("r1", after).unwrap().iter().map(|e| e.seq).collect()
    };
    assert_eq!(seqs(None), [0, 1, 2, 3, 4]);
    assert_eq!(seqs(Some(2)), [3, 4]);
    assert!(seqs(Some(4)).is_empty());
    assert!(matches!(store.events_after("nope", None), Err(StoreError::NotFound(_))));
}

/// Reads by kind (what the stop gate and the plan tools use instead of every event): counts
/// and newest seq per kind, one kind's events in order, and the newest one a filter takes,
/// found across more rows than one page of the backwards walk.
fn events_are_read_by_kind(b: &Backend) {
    let store = crate::suite::open_store(&b.at).unwrap();
    store.create_run(&new_run("r1", T0, 3)).unwrap();
    let journal = crate::suite::start_journal(&b.at).unwrap();
    // seq 0..30: a warning every third event (0, 3, …, 27), step starts between.
    for seq in 0..30u64 {
        let mut event = super::event("r1", seq);
        if seq % 3 == 0 {
            event.body = EventBody::Warning { step: None, message: format!("w{seq}") };
        }
        journal.record(Record::Event(event)).unwrap();
    }
    journal.flush().unwrap();
    let kinds = store.event_kinds("r1").unwrap();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert_eq!(kinds["warning"], pev_store::KindCount { count: 10, newest: 27 });
    assert_eq!(kinds["step.started"], pev_store::KindCount { count: 20, newest: 29 });
    let warnings: Vec<u64> =
        store.events_of_kind("r1", "warning").unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(warnings, [0, 3, 6, 9, 12, 15, 18, 21, 24, 27]);
    assert!(store.events_of_kind("r1", "run.finished").unwrap().is_empty());
    // The newest the filter takes, walking back past the first page (8 rows).
    let mut seen = Vec::new();
    let found = store
        .newest_of_kind("r1", "step.started", |e| {
            seen.push(e.seq);
            (e.seq < 8).then_some(e.seq)
        })
        .unwrap();
    assert_eq!(found, Some(7));
    assert_eq!(seen.first(), Some(&29), "newest first");
    assert!(seen.windows(2).all(|w| w[0] > w[1]), "walked strictly backwards: {seen:?}");
    assert_eq!(seen.len(), 16, "stopped at the first taken: {seen:?}");
    let none = store.newest_of_kind("r1", "step.started", |_| None::<()>).unwrap();
    assert_eq!(none, None);
    assert!(store.event_kinds("nope").unwrap().is_empty());
}

/// The same journal through a handle that shares nothing with `at` (another process's view).
fn reparse(at: &Location) -> Location {
    match at {
        Location::File(p) => Location::File(p.clone()),
        #[cfg(feature = "postgres")]
        Location::Postgres(_) => {
            let url = std::env::var("PEV_TEST_POSTGRES").unwrap();
            let shown = at.to_string();
            let name = shown.split('?').next().unwrap().rsplit('/').next().unwrap().to_owned();
            Location::parse(&pg::with_dbname(&url, &name)).unwrap()
        }
    }
}

/// A Postgres lease dies with its session: terminated from outside, the run is free at once,
/// and the old holder's journal commits nothing more (its next intent fails).
#[cfg(feature = "postgres")]
#[test]
fn postgres_a_lost_session_frees_the_run_and_fences_its_writer() {
    let Some(b) = postgres() else { return };
    let store = crate::suite::open_store(&b.at).unwrap();
    store.create_run(&new_run("r1", T0, 3)).unwrap();
    let lease = b.at.lease_keyed("r1", &crate::suite::keying()).unwrap();
    let journal = crate::suite::start_journal(&b.at).unwrap();
    journal.record_durable(event_rec("r1", 0)).unwrap();
    let other = reparse(&b.at);
    let refused = other.lease_keyed("r1", &crate::suite::keying()).unwrap_err();
    assert!(refused.to_string().contains(" on "), "the holder's host is named: {refused}");
    // Someone ends the holder's session (a machine that vanished, pg_terminate_backend).
    // Only this test's database: pg_locks is the whole server's, and the tests running beside
    // this one hold advisory locks of their own (a migration's, their runs' leases).
    let mut admin = b._db.as_ref().unwrap().client();
    let ended = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_locks
             WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[],
        )
        .unwrap();
    assert_eq!(ended.len(), 1, "one session held the lease");
    let taken = (0..50).find_map(|_| {
        other.lease_keyed("r1", &crate::suite::keying()).ok().or_else(|| {
            thread::sleep(std::time::Duration::from_millis(20));
            None
        })
    });
    assert!(taken.is_some(), "the run was not free after its holder's session ended");
    // The old holder wants to record the intent of an effect: refused, and nothing lands.
    assert!(journal.record_durable(event_rec("r1", 1)).is_err());
    assert_eq!(store.events("r1").unwrap().len(), 1);
    // Nor does anything it writes outside its journal: a run's status, a child run.
    let status = Record::RunStatus {
        run_id: "r1".into(),
        status: "success".into(),
        result: None,
        updated_at: T0.into(),
    };
    assert!(store.write(&status).is_err());
    assert!(store.create_run(&new_run("r1.s1.1", T0, 1)).is_err());
    let seen = crate::suite::open_existing(reparse(&b.at)).unwrap();
    assert_eq!(seen.load_run("r1").unwrap().status, "running");
    assert!(seen.load_run("r1.s1.1").is_err());
    drop(lease);
}
