//! The live exporter a run uses ([`Live`]): spans leave while the run runs, the way an
//! OpenTelemetry SDK's batch span processor sends them, so that little is left to send when the
//! run ends and the process waits for the flush.
//!
//! Two threads, neither of them the run's. The *looker* follows the run's journal through its
//! own connection ([`Following`]: only the rows it has not read yet), maps it every two
//! seconds or less often (its looks take at most a twentieth of a core), and hands the spans
//! that ended to a bounded queue without waiting: when the queue is full they stay unsent and
//! go with a later look (the journal is the buffer, so nothing is dropped). The *sender* builds its HTTP client on
//! its first batch (TLS and the platform's roots only for an `https` endpoint), joins whatever
//! is queued into one request, and sends it. At the end the looker reads the last rows, queues
//! the rest (the root last, with the session's outcome), and the sender sends what is queued at
//! once: no batch timer is waited on.
//!
//! A trace backend that is down or slow must never change or hold up a run: every request has
//! a timeout, a failed batch is tried again with the next one, the third failure in a row (or
//! a failed last send) turns the exporter off and becomes one warning, and the wait at the end
//! is bounded. What was not sent can be sent later from the journal (`pev export`).

use std::collections::HashSet;
use std::sync::mpsc::{
    Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError, channel, sync_channel,
};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pev_store::Store;

use crate::export::{OtlpConfig, client_for, send};
use crate::follow::Following;
use crate::span::{Span, SpanId};

/// The least time between two looks at the journal. Each look maps the whole run again, so on
/// a quiet machine looks every 250 ms made a 1.4 s run pay 159 ms of wall time for its traces
/// (11.7%) against 50 ms with no look before the end (BENCHMARKS.md, issue 32): a run shorter
/// than this pays only the end.
const INTERVAL: Duration = Duration::from_secs(2);

/// A look that took `t` is followed by at least `t` times this of rest, so the looks take at
/// most a twentieth of one core however long the run grows (each maps the whole run again),
/// and fewer still when the machine is busy (a look then takes longer).
const REST: u32 = 19;

/// Batches the queue holds before a look leaves its spans for the next one.
pub const QUEUE: usize = 4;

enum Msg {
    /// Follow this run; `resumed` runs' spans from before now were sent by their first session.
    Run {
        run_id: String,
        resumed: bool,
    },
    Finish,
}

/// Exports a run's spans while it runs (see the module's text). The run only ever sends it a
/// message; the end ([`Live::finish`]) waits for the last spans to be sent, bounded by the
/// request timeout.
pub struct Live {
    tx: Option<Sender<Msg>>,
    done: Option<Receiver<Option<String>>>,
    timeout: Duration,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").finish_non_exhaustive()
    }
}

impl Live {
    /// Starts the exporter for the journal `db`. Nothing is read, built or connected here: the
    /// run's thread only spawns the looker.
    pub fn start(config: OtlpConfig, db: pev_store::Location) -> Self {
        let (tx, rx) = channel();
        let (done_tx, done) = channel();
        let timeout = config.timeout;
        let spawned = std::thread::Builder::new().name("pev-otlp".to_owned()).spawn(move || {
            let warning = Looker::new(config, db).run(&rx);
            let _ = done_tx.send(warning);
        });
        match spawned {
            Ok(_) => Self { tx: Some(tx), done: Some(done), timeout },
            Err(_) => Self { tx: None, done: None, timeout },
        }
    }

    /// Follows run `run_id` (a new run, or a resumed one).
    pub fn follow(&self, run_id: &str, resumed: bool) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Run { run_id: run_id.to_owned(), resumed });
        }
    }

    /// Sends what is left and stops, waiting at most twice the request timeout (and a little).
    /// The warning to show, if the spans could not all be sent.
    pub fn finish(mut self) -> Option<String> {
        self.stop()
    }

    fn stop(&mut self) -> Option<String> {
        let tx = self.tx.take()?;
        let _ = tx.send(Msg::Finish);
        let done = self.done.take()?;
        // A send may be in flight when the end comes: its timeout, then the last one's.
        match done.recv_timeout(self.timeout * 2 + Duration::from_secs(1)) {
            Ok(warning) => warning,
            Err(_) => Some(format!(
                "traces: the last export did not finish within {} ms and was abandoned",
                (self.timeout * 2).as_millis()
            )),
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // An exit the caller did not plan for (an error): still flush, bounded.
        let _ = self.stop();
    }
}

/// The looker: follows the journal and queues the spans that ended.
struct Looker {
    endpoint: String,
    options: crate::map::Options,
    db: pev_store::Location,
    store: Option<Store>,
    follow: Option<Following>,
    /// Spans that start before this were sent by an earlier session of a resumed run.
    since_ms: u64,
    /// Spans queued (the sender owns them from there).
    sent: HashSet<SpanId>,
    /// Why the last look could not read the journal.
    failed: Option<String>,
    queue: Queue,
}

impl Looker {
    fn new(config: OtlpConfig, db: pev_store::Location) -> Self {
        Self {
            endpoint: config.endpoint.clone(),
            options: config.options.clone(),
            db,
            store: None,
            follow: None,
            since_ms: 0,
            sent: HashSet::new(),
            failed: None,
            queue: Queue::new(config),
        }
    }

    fn run(mut self, rx: &Receiver<Msg>) -> Option<String> {
        let mut rest = INTERVAL;
        loop {
            match rx.recv_timeout(rest) {
                Ok(Msg::Run { run_id, resumed }) => {
                    self.since_ms = if resumed { now_ms() } else { 0 };
                    if self.follow.as_ref().is_none_or(|f| f.run_id() != run_id) {
                        self.follow = Some(Following::new(&run_id));
                    }
                }
                Ok(Msg::Finish) | Err(RecvTimeoutError::Disconnected) => return self.finish(),
                Err(RecvTimeoutError::Timeout) => {
                    let started = Instant::now();
                    if let Some(spans) = self.look(false) {
                        let ids: Vec<SpanId> = spans.iter().map(|s| s.span_id).collect();
                        // A full queue: these stay unsent, and the next look takes them.
                        if self.queue.offer(spans) {
                            self.sent.extend(ids);
                        }
                    }
                    rest = INTERVAL.max(started.elapsed() * REST);
                }
            }
        }
    }

    fn finish(mut self) -> Option<String> {
        let last = self.look(true).unwrap_or_default();
        let unsent = self.queue.close(last);
        let why = self.failed.take().or(unsent)?;
        Some(format!(
            "traces were not sent to {}: {why}. The run is not affected; send it later with \
             `pev export RUN --otlp URL`",
            self.endpoint
        ))
    }

    /// The spans not yet queued: the ones that ended, or (`last`) all of them. `None` when the
    /// journal has nothing new.
    fn look(&mut self, last: bool) -> Option<Vec<Span>> {
        let follow = self.follow.as_mut()?;
        if self.store.is_none() {
            self.store = Store::open_existing(&self.db).ok();
        }
        let Some(store) = &self.store else {
            if last {
                self.failed = Some("cannot open the journal".to_owned());
            }
            return None;
        };
        match follow.update(store, last) {
            Ok(grew) if grew || last => {}
            Ok(_) => return None,
            Err(e) => {
                if last {
                    self.failed = Some(format!("cannot read the journal: {e}"));
                }
                return None;
            }
        }
        let spans: Vec<Span> = follow
            .runs()
            .iter()
            .flat_map(|run| run.spans(&self.options))
            .filter(|s| !self.sent.contains(&s.span_id))
            .filter(|s| last || !s.open)
            // The root goes at the end, with the outcome of this session.
            .filter(|s| s.parent.is_some() || last)
            .filter(|s| s.parent.is_none() || s.start_ms >= self.since_ms || s.open)
            .collect();
        Some(spans)
    }
}

/// One hand-over from the looker to the sender.
struct Batch {
    spans: Vec<Span>,
    /// The looker's last: send at once, and a failure is final.
    last: bool,
}

/// The bounded queue between the looker and the sender, and the sender's thread (started with
/// the first batch).
pub(crate) struct Queue {
    config: Option<OtlpConfig>,
    tx: Option<SyncSender<Batch>>,
    sender: Option<JoinHandle<Option<String>>>,
    /// Why there is no sender.
    broken: Option<String>,
    /// Batches a full queue turned away (their spans went with a later one).
    pub(crate) deferred: u64,
}

impl Queue {
    pub(crate) fn new(config: OtlpConfig) -> Self {
        Self { config: Some(config), tx: None, sender: None, broken: None, deferred: 0 }
    }

    /// Queues `spans` without waiting; `false` (and counted) when the queue is full or the
    /// sender is gone.
    pub(crate) fn offer(&mut self, spans: Vec<Span>) -> bool {
        if spans.is_empty() {
            return true;
        }
        let Some(tx) = self.sender_tx() else { return false };
        match tx.try_send(Batch { spans, last: false }) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.deferred += 1;
                false
            }
        }
    }

    /// Queues the last spans (waiting for room) and waits for the sender to send everything
    /// queued; why not everything was sent, if it was not.
    pub(crate) fn close(mut self, last: Vec<Span>) -> Option<String> {
        if self.sender.is_none() && last.is_empty() {
            // Nothing was ever queued: no client, no connection.
            return None;
        }
        let Some(tx) = self.sender_tx() else { return self.broken.take() };
        let queued = tx.send(Batch { spans: last, last: true });
        self.tx = None;
        let warning = self.sender.take().and_then(|s| s.join().ok()).flatten();
        match queued {
            Ok(()) => warning,
            Err(_) => warning.or_else(|| Some("the sender stopped".to_owned())),
        }
    }

    fn sender_tx(&mut self) -> Option<SyncSender<Batch>> {
        if let Some(config) = self.config.take() {
            let (tx, rx) = sync_channel(QUEUE);
            let spawned = std::thread::Builder::new()
                .name("pev-otlp-send".to_owned())
                .spawn(move || send_all(&config, &rx));
            match spawned {
                Ok(handle) => {
                    self.tx = Some(tx);
                    self.sender = Some(handle);
                }
                Err(e) => self.broken = Some(format!("cannot start the sender: {e}")),
            }
        }
        self.tx.clone()
    }
}

/// The sender's loop: each batch, with whatever else is queued, as one request. Why the spans
/// were not all sent, if they were not.
fn send_all(config: &OtlpConfig, rx: &Receiver<Batch>) -> Option<String> {
    let mut client = None;
    // What a failed send left, tried again with the next batch.
    let mut held: Vec<Span> = Vec::new();
    let mut misses = 0;
    let mut failed: Option<String> = None;
    while let Ok(batch) = rx.recv() {
        let mut last = batch.last;
        held.extend(batch.spans);
        while let Ok(more) = rx.try_recv() {
            last |= more.last;
            held.extend(more.spans);
        }
        if failed.is_some() || held.is_empty() {
            held.clear();
        } else {
            let connected = client.get_or_insert_with(|| connect(&config.endpoint));
            let sent = match connected {
                Ok((client, runtime)) => runtime.block_on(send(client, config, &held)),
                Err(e) => Err(e.clone()),
            };
            match sent {
                Ok(()) => {
                    misses = 0;
                    held.clear();
                }
                // The last send, or the third miss in a row: give up (one warning at the end).
                Err(e) if last || misses >= 2 || connected.is_err() => {
                    failed = Some(e);
                    held.clear();
                }
                Err(_) => misses += 1,
            }
        }
        if last {
            break;
        }
    }
    failed
}

/// The sender's client and runtime, built once, on its own thread.
fn connect(endpoint: &str) -> Result<(reqwest::Client, tokio::runtime::Runtime), String> {
    let client = client_for(endpoint).map_err(|e| format!("no HTTP client: {e}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime for the exporter: {e}"))?;
    Ok((client, runtime))
}

fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
