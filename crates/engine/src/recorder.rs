//! The one place events are numbered: each event gets the next `seq`, goes to the journal, and is
//! shown to the observer, under one lock so that the journal, the `--json` stream and the live
//! view all see the same order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use pev_protocol::event::{Event, EventBody, now_rfc3339};
use pev_store::{Journal, Record, StoreError};

use crate::engine::Observer;

pub(crate) struct Recorder {
    run_id: String,
    next_seq: Mutex<u64>,
    journal: Journal,
    observer: Arc<dyn Observer>,
    /// Tool calls journaled in this session (a position in the journal's list of calls, for
    /// naming the calls made after a piece of evidence was taken).
    calls_started: AtomicU64,
}

impl Recorder {
    pub(crate) fn new(
        run_id: String,
        next_seq: u64,
        journal: Journal,
        observer: Arc<dyn Observer>,
    ) -> Self {
        Self {
            run_id,
            next_seq: Mutex::new(next_seq),
            journal,
            observer,
            calls_started: AtomicU64::new(0),
        }
    }

    pub(crate) fn journal(&self) -> &Journal {
        &self.journal
    }

    /// How many tool calls this session has journaled so far.
    pub(crate) fn calls_started(&self) -> u64 {
        self.calls_started.load(Ordering::SeqCst)
    }

    fn count(&self, record: &Record) {
        if matches!(record, Record::ToolCallStarted(_)) {
            self.calls_started.fetch_add(1, Ordering::SeqCst);
        }
    }

    pub(crate) fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Numbers, journals (queued, not yet durable) and shows one event.
    pub(crate) fn emit(&self, body: EventBody) -> Result<(), StoreError> {
        self.emit_as(body, false)
    }

    /// [`Self::emit`], with the event's group committed without lingering for more
    /// (`Journal::record_all_now`): the `tool.called` of a command, so that no commit of the
    /// journal waits into the time the command runs (a kill landing there would find the
    /// command's intent and not its end, which is the case a resume settles worst).
    pub(crate) fn emit_at_once(&self, body: EventBody) -> Result<(), StoreError> {
        self.emit_as(body, true)
    }

    fn emit_as(&self, body: EventBody, at_once: bool) -> Result<(), StoreError> {
        let mut seq = self.next_seq.lock().unwrap_or_else(PoisonError::into_inner);
        let event = Event { run_id: self.run_id.clone(), seq: *seq, at: now_rfc3339(), body };
        *seq += 1;
        if at_once {
            self.journal.record_all_now(vec![Record::Event(event.clone())])?;
        } else {
            self.journal.record(Record::Event(event.clone()))?;
        }
        self.observer.on_event(&event);
        Ok(())
    }

    /// Queues a record (not an event).
    pub(crate) fn record(&self, record: Record) -> Result<(), StoreError> {
        self.count(&record);
        self.journal.record(record)
    }

    /// Queues `records`, and then the event `body` (numbered and shown as by [`Self::emit`]),
    /// to be committed together (`Journal::record_all`): a tool call's end, the changes it made
    /// and its `tool.finished` are on disk all together or not at all. `at_once`: committed
    /// without lingering for more (`Journal::record_all_now`), for what a resume could not
    /// rebuild from the workspace.
    pub(crate) fn record_all(
        &self,
        mut records: Vec<Record>,
        body: Option<EventBody>,
        at_once: bool,
    ) -> Result<(), StoreError> {
        for record in &records {
            self.count(record);
        }
        // The number is taken and the batch queued under one lock, as `emit` does, so events
        // reach the journal in the order of their numbers.
        let mut seq = self.next_seq.lock().unwrap_or_else(PoisonError::into_inner);
        let event = body.map(|body| {
            let event = Event { run_id: self.run_id.clone(), seq: *seq, at: now_rfc3339(), body };
            *seq += 1;
            event
        });
        if let Some(event) = &event {
            records.push(Record::Event(event.clone()));
        }
        if at_once {
            self.journal.record_all_now(records)?;
        } else {
            self.journal.record_all(records)?;
        }
        drop(seq);
        if let Some(event) = &event {
            self.observer.on_event(event);
        }
        Ok(())
    }

    /// Queues `records` and waits until the last of them (and so all of them, and everything
    /// queued before) is on disk. Runs the wait on a blocking thread.
    pub(crate) async fn durable(&self, mut records: Vec<Record>) -> Result<(), StoreError> {
        let Some(last) = records.pop() else { return Ok(()) };
        for record in records {
            self.count(&record);
            self.journal.record(record)?;
        }
        self.count(&last);
        let journal = self.journal.clone();
        match tokio::task::spawn_blocking(move || journal.record_durable(last)).await {
            Ok(result) => result,
            // The blocking task panicked or was cancelled: the write's fate is unknown, so the
            // caller must not go on as if it were durable.
            Err(e) => Err(wait_failed(&e)),
        }
    }

    pub(crate) async fn flush(&self) -> Result<(), StoreError> {
        let journal = self.journal.clone();
        match tokio::task::spawn_blocking(move || journal.flush()).await {
            Ok(result) => result,
            Err(e) => Err(wait_failed(&e)),
        }
    }
}

/// The blocking wait for the journal did not return (it panicked or was cancelled).
fn wait_failed(e: &tokio::task::JoinError) -> StoreError {
    StoreError::Invalid {
        path: pev_store::Location::File(std::path::PathBuf::from("(journal)")),
        message: format!("waiting for the writer failed: {e}"),
    }
}
