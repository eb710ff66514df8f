//! The writer thread: group commit, durability as seen from another connection, sticky
//! errors, clones and close, and numbering that continues after a reopen.

use std::thread;
use std::time::Duration;

use pev_protocol::run::StepStatus;
use pev_store::{MAX_BATCH, Record, StoreError, ToolCallEnd, ToolCallStatus};
use rusqlite::Connection;

use super::{create, db, event, event_rec, step_state};

/// Holds the database's write lock from a second connection, so the writer thread blocks on
/// its first transaction while the test queues more records behind it.
fn lock(path: &std::path::Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    conn
}

fn count(path: &std::path::Path, table: &str) -> i64 {
    let conn = Connection::open(path).unwrap();
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap()
}

#[test]
fn queued_records_are_committed_in_groups() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let journal = crate::suite::start_journal(&db.path).unwrap();
    let locker = lock(&db.path);
    for seq in 0..1000 {
        journal.record(event_rec("r1", seq)).unwrap();
    }
    locker.execute_batch("COMMIT").unwrap();
    journal.flush().unwrap();
    assert_eq!(store.events("r1").unwrap().len(), 1000);
    // At most the record the writer took before it blocked, then everything else at once.
    let commits = journal.commits();
    assert!((1..=2).contains(&commits), "{commits} commits for 1000 queued records");
}

/// Commits for `pairs` pairs of a record queued by `first` and, 300 µs later (the engine
/// between a step's end and the next intent: long enough that a writer that does not linger has
/// taken the first record alone), a durable one, on a journal lingering `linger` (if any). A
/// loaded machine may stall the sender or the writer past the pause now and then, so the rules
/// below are checked over many pairs.
fn commits_for_pairs(
    linger: Option<Duration>,
    pairs: u64,
    first: impl Fn(&pev_store::Journal, Record),
) -> u64 {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let journal = crate::suite::start_journal(&db.path).unwrap();
    if let Some(linger) = linger {
        journal.linger(linger);
    }
    journal.flush().unwrap();
    let before = journal.commits();
    for i in 0..pairs {
        first(&journal, event_rec("r1", 2 * i));
        thread::sleep(Duration::from_micros(300));
        journal.record_durable(event_rec("r1", 2 * i + 1)).unwrap();
    }
    let commits = journal.commits() - before;
    assert_eq!(store.events("r1").unwrap().len() as u64, 2 * pairs);
    commits
}

/// On a lingering journal, a record queued without waiting rides on the next durable record's
/// commit (the end of one step and the next step's intent: one fsync, not two): without the
/// linger nearly every pair is two commits.
#[test]
fn a_record_nobody_waits_on_shares_the_next_durable_commit() {
    let pairs = 100;
    let commits = commits_for_pairs(Some(pev_store::LINGER), pairs, |j, r| j.record(r).unwrap());
    assert!(commits < pairs * 5 / 4, "{commits} commits for {pairs} pairs");
}

/// A group queued with `record_all_now` (a command's end, which a resume could not rebuild) is
/// committed without lingering: the durable record after it is a commit of its own (with the
/// linger nearly every pair would be one).
#[test]
fn a_group_queued_now_does_not_linger() {
    let pairs = 50;
    let commits = commits_for_pairs(Some(pev_store::LINGER), pairs, |j, r| {
        j.record_all_now(vec![r]).unwrap();
    });
    assert!(commits >= pairs * 3 / 2, "{commits} commits for {pairs} pairs");
}

/// A journal not told to linger (an agent run's)
/// commits a group no caller waits on as soon as the writer has it.
#[test]
fn a_journal_not_told_to_linger_does_not() {
    let pairs = 50;
    let commits = commits_for_pairs(None, pairs, |j, r| j.record(r).unwrap());
    assert!(commits >= pairs * 3 / 2, "{commits} commits for {pairs} pairs");
}

/// Two `Journal::start`s on one file in one process (an agent's run journal and its call log)
/// are one writer: a durable record on either is committed with everything queued before it on
/// the other. Two writers could commit the call log's durable model call while the run's step
/// start still waited in the other queue; killed then, `pev resume` found an answered call with
/// no started step and asked the model again. Here the first handle lingers for a minute, so
/// with a writer of its own its record would still be waiting when the durable one returns.
#[test]
fn journals_started_on_one_file_commit_in_the_order_records_were_queued() {
    let db = db();
    // `Journal::start` uses the environment's journal key: the run is created with it too.
    let store = pev_store::Store::open(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    drop(store);
    let run = pev_store::Journal::start(&db.path).unwrap();
    let calls = pev_store::Journal::start(&db.path).unwrap();
    run.linger(Duration::from_secs(60));
    run.record(event_rec("r1", 0)).unwrap();
    calls.record_durable(event_rec("r1", 1)).unwrap();
    assert_eq!(count(&db.path, "events"), 2, "the record queued first is on disk too");
    // A file reached by another name is the same file.
    let dir = db.path.parent().unwrap();
    let other_name =
        dir.join("..").join(dir.file_name().unwrap()).join(db.path.file_name().unwrap());
    let third = pev_store::Journal::start(other_name.as_path()).unwrap();
    run.record(event_rec("r1", 2)).unwrap();
    third.record_durable(event_rec("r1", 3)).unwrap();
    assert_eq!(count(&db.path, "events"), 4);
    // Once every handle is gone, the next start opens a writer of its own (not lingering).
    drop((run, calls, third));
    let fresh = pev_store::Journal::start(&db.path).unwrap();
    fresh.record(event_rec("r1", 4)).unwrap();
    fresh.flush().unwrap();
    assert_eq!(count(&db.path, "events"), 5);
}

#[test]
fn a_group_holds_at_most_max_batch_records() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let journal = crate::suite::start_journal(&db.path).unwrap();
    let locker = lock(&db.path);
    let n = 10_000u64;
    for seq in 0..n {
        journal.record(event_rec("r1", seq)).unwrap();
    }
    locker.execute_batch("COMMIT").unwrap();
    journal.flush().unwrap();
    assert_eq!(count(&db.path, "events"), 10_000);
    // 10,000 records need at least ceil(10000 / 4096) = 3 transactions; the one the writer
    // took before blocking adds at most one.
    assert_eq!(MAX_BATCH, 4096);
    let commits = journal.commits();
    assert!((3..=4).contains(&commits), "{commits} commits");
    assert_eq!(store.load_run("r1").unwrap().next_seq, n);
}

#[test]
fn record_durable_is_visible_to_another_connection_when_it_returns() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let journal = crate::suite::start_journal(&db.path).unwrap();
    for seq in 0..5 {
        journal.record(event_rec("r1", seq)).unwrap();
        journal.record_durable(event_rec("r1", seq + 100)).unwrap();
        // A brand-new connection, not the store's: nothing cached can hide a missing commit.
        let seen = count(&db.path, "events");
        assert_eq!(seen, i64::try_from(2 * (seq + 1)).unwrap());
    }
    journal.record_durable(Record::StepState(step_state("r1", "s0", StepStatus::Done))).unwrap();
    assert_eq!(store.load_run("r1").unwrap().steps[0].status, StepStatus::Done);
}

#[test]
fn a_failed_record_fails_its_whole_batch_and_the_error_sticks() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let journal = crate::suite::start_journal(&db.path).unwrap();
    journal.record_durable(event_rec("r1", 0)).unwrap();

    // The writer takes seq 1 and blocks on the lock; seq 2 and the duplicate seq 0 then queue
    // up behind it and form one batch.
    let locker = lock(&db.path);
    journal.record(event_rec("r1", 1)).unwrap();
    thread::sleep(Duration::from_millis(300));
    journal.record(event_rec("r1", 2)).unwrap();
    journal.record(event_rec("r1", 0)).unwrap();
    locker.execute_batch("COMMIT").unwrap();

    let err = journal.flush().unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, StoreError::Stopped(_)), "{err:?}");
    assert!(msg.contains("UNIQUE constraint failed: events.run_id, events.seq"), "{msg}");
    assert!(msg.contains("write event of run r1"), "{msg}");
    assert!(msg.contains(&db.path.display().to_string()), "{msg}");
    // seq 2 was in the failed batch: rolled back with it, not half-written.
    let seqs: Vec<u64> = store.events("r1").unwrap().iter().map(|e| e.seq).collect();
    assert!(!seqs.contains(&2), "{seqs:?}");
    assert!(seqs.starts_with(&[0]), "{seqs:?}");

    // Every later call, on any handle, returns the same error; nothing more is written.
    let clone = journal.clone();
    let later = clone.record(event_rec("r1", 3)).unwrap_err();
    assert!(later.to_string().contains("UNIQUE"), "{later}");
    assert!(journal.record_durable(event_rec("r1", 4)).is_err());
    assert!(journal.flush().is_err());
    drop(clone);
    let closed = journal.close().unwrap_err();
    assert!(closed.to_string().contains("UNIQUE"), "{closed}");
    let seqs: Vec<u64> = store.events("r1").unwrap().iter().map(|e| e.seq).collect();
    assert!(!seqs.iter().any(|s| *s >= 2), "{seqs:?}");
}

#[test]
fn the_end_of_a_call_that_never_started_is_an_error() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let journal = crate::suite::start_journal(&db.path).unwrap();
    let end = ToolCallEnd {
        run_id: "r1".into(),
        call_id: "ghost".into(),
        status: ToolCallStatus::Finished,
        output: None,
        error: None,
        ended_at: "2026-01-01T00:00:01.000Z".into(),
        duration_ms: 1,
    };
    let err = journal.record_durable(Record::ToolCallFinished(end)).unwrap_err();
    assert!(err.to_string().contains("tool call \"ghost\" of run r1 was never recorded"), "{err}");
}

#[test]
fn a_record_for_an_unknown_run_is_an_error() {
    let db = db();
    let journal = crate::suite::start_journal(&db.path).unwrap();
    let err = journal.record_durable(event_rec("nope", 0)).unwrap_err();
    assert!(err.to_string().contains("FOREIGN KEY constraint failed"), "{err}");
    let status = crate::suite::start_journal(&db.path).unwrap();
    let err = status
        .record_durable(Record::RunStatus {
            run_id: "nope".into(),
            status: "failed".into(),
            result: None,
            updated_at: "x".into(),
        })
        .unwrap_err();
    assert!(err.to_string().contains("no run \"nope\""), "{err}");
}

#[test]
fn clones_share_the_writer_and_dropping_the_last_commits_what_was_queued() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let journal = crate::suite::start_journal(&db.path).unwrap();
    let workers: Vec<_> = (0..4u64)
        .map(|w| {
            let j = journal.clone();
            thread::spawn(move || {
                for i in 0..250 {
                    j.record(event_rec("r1", w * 1000 + i)).unwrap();
                }
                // Closing a handle that is not the last only flushes.
                j.close().unwrap();
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(count(&db.path, "events"), 1000);
    journal.record(event_rec("r1", 5000)).unwrap();
    // No close: the drop of the last handle still commits the queued record.
    drop(journal);
    assert_eq!(count(&db.path, "events"), 1001);
}

#[test]
fn numbering_continues_after_a_reopen() {
    let db = db();
    {
        let store = crate::suite::open_store(&db.path).unwrap();
        create(&store, "r1", "2026-01-01T00:00:00.000Z");
        let journal = crate::suite::start_journal(&db.path).unwrap();
        for seq in 0..4 {
            journal.record(event_rec("r1", seq)).unwrap();
        }
        journal.close().unwrap();
    }
    let store = crate::suite::open_store(&db.path).unwrap();
    let next = store.load_run("r1").unwrap().next_seq;
    assert_eq!(next, 4);
    let journal = crate::suite::start_journal(&db.path).unwrap();
    journal.record(Record::Event(event("r1", next))).unwrap();
    journal.close().unwrap();
    let seqs: Vec<u64> = store.events("r1").unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
    assert_eq!(store.load_run("r1").unwrap().next_seq, 5);
}

#[test]
fn a_store_reads_and_approves_while_a_journal_writes() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let journal = crate::suite::start_journal(&db.path).unwrap();
    let writer = {
        let j = journal.clone();
        thread::spawn(move || {
            for seq in 0..2000 {
                j.record(event_rec("r1", seq)).unwrap();
                if seq % 100 == 0 {
                    j.flush().unwrap();
                }
            }
            j.flush().unwrap();
        })
    };
    let mut last = 0;
    while !writer.is_finished() {
        // Reads see a growing, consistent prefix; a write from this connection waits its turn.
        let n = store.events("r1").unwrap().len();
        assert!(n >= last, "{n} < {last}");
        last = n;
        assert_eq!(store.list_runs().unwrap().len(), 1);
    }
    store.approve("r1", "s0", "reader").unwrap();
    writer.join().unwrap();
    journal.close().unwrap();
    assert_eq!(store.events("r1").unwrap().len(), 2000);
    assert_eq!(store.load_run("r1").unwrap().approvals[0].by, "reader");
}

/// A blob is committed with the record queued after it (the row naming it), never alone, even
/// when a group ends between them; a flush or a close commits one still held.
#[test]
fn a_blob_waits_for_the_row_that_names_it() {
    let db = db();
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    let journal = crate::suite::start_journal(&db.path).unwrap();
    journal.record(event_rec("r1", 0)).unwrap();
    journal.flush().unwrap();
    let before = journal.commits();
    let sha = "a".repeat(64);
    journal.record(Record::Blob { sha256: sha.clone(), content: b"one".to_vec() }).unwrap();
    // Whenever the writer took it, it holds it: nothing names it yet.
    thread::sleep(Duration::from_millis(100));
    assert_eq!(store.blob(&sha).unwrap(), None);
    assert_eq!(journal.commits(), before);
    let mut named = step_state("r1", "s0", StepStatus::Done);
    named.output = Some(serde_json::json!({ "sha": sha }));
    journal.record(Record::StepState(named)).unwrap();
    journal.flush().unwrap();
    assert_eq!(journal.commits(), before + 1, "the blob and its row in one transaction");
    assert_eq!(store.blob(&sha).unwrap().as_deref(), Some(&b"one"[..]));
    // A blob nothing follows is committed by a flush, and by the close.
    let (flushed, closed) = ("b".repeat(64), "c".repeat(64));
    journal.record(Record::Blob { sha256: flushed.clone(), content: b"f".to_vec() }).unwrap();
    journal.flush().unwrap();
    assert!(store.blob(&flushed).unwrap().is_some());
    journal.record(Record::Blob { sha256: closed.clone(), content: b"c".to_vec() }).unwrap();
    journal.close().unwrap();
    assert!(store.blob(&closed).unwrap().is_some());
}
