//! [`Journal`]: the write side of a running engine. A background thread owns its own connection
//! and commits records in groups: it blocks for one message, drains everything queued behind it
//! (up to [`MAX_BATCH`]), writes the lot in ONE transaction, and then acknowledges every caller
//! waiting on a record of that commit. Ten thousand cheap steps therefore cost a few hundred
//! fsyncs, not fifty thousand, while a caller that needs a record on disk before it acts (the
//! start of a write, before the write) still gets exactly that from [`Journal::record_durable`].
//!
//! A journal told to [`Journal::linger`] keeps a group no caller waits on open a moment for
//! more, so records queued without waiting ride on the next durable one's commit (a step's end
//! on the next step's intent), unless one of them was queued with [`Journal::record_all_now`]:
//! the start and the end of a command, so that no commit waits into the time it runs and its
//! end (which a resume could not rebuild from the workspace) is not held back.
//!
//! One file, one writer: [`Journal::start`] on a SQLite file this process already has a live
//! writer for hands out another handle to that writer, so every record the process journals
//! there is committed in the order it was queued, whoever queued it. An agent's model calls are
//! journaled by the call log's handle and made durable one by one; a step's start queued by the
//! engine just before it made that call is therefore on disk with the call or before it, never
//! after (with two writers, a kill between their commits left an answered call with no started
//! step to belong to, and `pev resume` asked the model again). That is also what keeps a
//! lingering group from landing after a model call that followed it.
//!
//! A blob is committed with the record queued after it, never alone before it: the engine
//! records a blob just before the row that names it (a mutation, the start of a write, a model
//! call, an event), so a blob and the row naming it land in one transaction even when a group
//! ends between them. That is what lets `gc.rs` collect blobs while runs are being written.
//! Blobs that end a group are held for the next one, unless a caller waits on this commit (a
//! durable record, a flush, a lease, a job) or the journal closes.
//!
//! Errors are sticky. If any record of a batch fails, the whole transaction is rolled back, the
//! error is kept, every waiter of that batch gets it, and every later call on any handle returns
//! it: a journal never silently drops a record after an earlier one failed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::db::{Begin, Conn, Location};
use crate::error::StoreError;
use crate::key::{CreateKey, Keying};
use crate::records::Record;
use crate::schema::{self, Create};
use crate::write;

/// The most records one transaction holds; a longer queue is committed in several.
pub const MAX_BATCH: usize = 4096;

/// How long a lingering journal ([`Journal::linger`]) keeps a group no caller waits on open for
/// more records. A record queued without waiting was never promised to be on disk before a
/// flush; holding it this long lets a step's end ride on the next step's durable intent, one
/// fsync for both (issue 32), and delays what a reader of the journal sees by at most this.
pub const LINGER: Duration = Duration::from_millis(2);

/// A test failpoint, not a user setting: with `PEV_FAULT_ABORT_AFTER_COMMITS=N` the process
/// aborts (`std::process::abort`, no destructors, no flush: a `kill -9` landing just after a
/// durable write) right after its Nth journal group commit, counted over every journal of the
/// process. The kill-point tests (`crates/cli/tests/suite/kill_points.rs`) run a run once per N
/// and resume it. Read once; unset (the normal case) costs one load per commit.
pub const FAULT_ABORT_AFTER_COMMITS_ENV: &str = "PEV_FAULT_ABORT_AFTER_COMMITS";

/// [`FAULT_ABORT_AFTER_COMMITS_ENV`], parsed once (`None` when unset or not a number).
static FAULT_ABORT_AFTER: LazyLock<Option<u64>> = LazyLock::new(|| {
    std::env::var(FAULT_ABORT_AFTER_COMMITS_ENV).ok().and_then(|v| v.trim().parse().ok())
});

/// The live writers of this process, by the canonical path of their SQLite file: what
/// [`Journal::start`] shares. Entries whose writer is gone are dropped on the next start.
static WRITERS: Mutex<Vec<(PathBuf, Weak<Inner>)>> = Mutex::new(Vec::new());

/// The process's group commits so far, counted only while the failpoint is set.
static FAULT_COMMITS: AtomicU64 = AtomicU64::new(0);

/// Called after each committed group: aborts the process at the failpoint's commit.
fn fault_after_commit() {
    if let Some(n) = *FAULT_ABORT_AFTER
        && FAULT_COMMITS.fetch_add(1, Ordering::Relaxed) + 1 == n
    {
        std::process::abort();
    }
}

/// What a waiter hears back: the commit holding its record succeeded, or the sticky error.
type Ack = Result<(), Arc<StoreError>>;

enum Msg {
    Record(Record),
    /// Records committed together: a group never ends among them. `true`: committed without
    /// lingering ([`Journal::record_all_now`]).
    Records(Vec<Record>, bool),
    Durable(Record, SyncSender<Ack>),
    Flush(SyncSender<Ack>),
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    /// Take (`true`) or give back a session advisory lock on the writer's own connection, once
    /// everything queued before it is committed: the answer is whether it is held.
    Lease(i64, bool, SyncSender<Result<bool, Arc<StoreError>>>),
    /// Run a write of a `Store` on the writer's connection, once everything queued before it is
    /// committed (see [`Journal::on_writer`]).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Job(Job, SyncSender<Ack>),
}

/// A write run on the writer's connection; it hands its own result back through a channel.
type Job = Box<dyn FnOnce(&mut Conn) + Send>;

/// State the handles and the writer thread share.
struct Shared {
    path: Location,
    /// How long a group no caller waits on stays open ([`Journal::linger`]), in microseconds;
    /// 0, the default, commits it at once.
    linger_us: AtomicU64,
    /// The first error; set once, never cleared.
    sticky: OnceLock<Arc<StoreError>>,
    /// Committed transactions, for tests and benches.
    commits: AtomicU64,
}

impl Shared {
    fn check(&self) -> Result<(), StoreError> {
        match self.sticky.get() {
            Some(e) => Err(StoreError::Stopped(Arc::clone(e))),
            None => Ok(()),
        }
    }

    /// The error a caller sees when the channel to the thread is broken.
    fn gone(&self) -> StoreError {
        match self.sticky.get() {
            Some(e) => StoreError::Stopped(Arc::clone(e)),
            None => StoreError::WriterGone { path: self.path.clone() },
        }
    }
}

/// The sender and thread; dropping the last handle closes the channel and joins the thread,
/// which commits whatever was still queued first.
pub(crate) struct Inner {
    tx: Option<Sender<Msg>>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(thread) = self.thread.take() {
            // A panicked writer has nothing left to report beyond what the handles saw.
            let _ = thread.join();
        }
    }
}

/// A handle to the journal's writer thread; clones share the thread.
#[derive(Clone)]
pub struct Journal {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").field("path", &self.inner.shared.path).finish_non_exhaustive()
    }
}

impl Journal {
    /// Opens `db` (creating and migrating it if needed) and starts the writer thread. Opening
    /// happens here, so a bad file is reported to the caller, not to a later record.
    ///
    /// On a Postgres journal where this process holds a run's lease, the journal is the lease's
    /// writer (a clone of it): every commit goes through the session that holds the lease, so a
    /// process whose session was lost (its lease with it) can commit nothing more.
    ///
    /// On a SQLite file this process already has a live writer for (one that has not failed),
    /// the handle is that writer's: records queued through any handle are committed in the
    /// order they were queued (the module's doc says why).
    ///
    /// The journal key is the environment's (`key.rs`), created if missing, loaded once here.
    pub fn start(db: impl Into<Location>) -> Result<Journal, StoreError> {
        let db = db.into();
        #[cfg(feature = "postgres")]
        if let Location::Postgres(target) = &db
            && let Some(inner) = crate::lease::leased_writer(target)
        {
            return Ok(Journal { inner });
        }
        #[cfg_attr(not(feature = "postgres"), allow(irrefutable_let_patterns))]
        let Location::File(path) = &db else {
            return Journal::start_new(&db, crate::key::load_key(CreateKey::Yes)?);
        };
        // Held while a new writer opens, so two threads starting at once share one.
        let mut writers = WRITERS.lock().unwrap_or_else(PoisonError::into_inner);
        writers.retain(|(_, w)| w.strong_count() > 0);
        if let Ok(canonical) = std::fs::canonicalize(path) {
            let live =
                writers.iter().filter(|(p, _)| *p == canonical).find_map(|(_, w)| w.upgrade());
            if let Some(inner) = live.filter(|i| i.shared.sticky.get().is_none()) {
                return Ok(Journal { inner });
            }
        }
        let journal = Journal::start_new(&db, crate::key::load_key(CreateKey::Yes)?)?;
        // The file exists now (the writer created it).
        if let Ok(canonical) = std::fs::canonicalize(path) {
            writers.push((canonical, Arc::downgrade(&journal.inner)));
        }
        Ok(journal)
    }

    /// [`Journal::start`] with the journal key given (tests, benches).
    pub fn start_keyed(db: impl Into<Location>, keying: Keying) -> Result<Journal, StoreError> {
        let db = db.into();
        #[cfg(feature = "postgres")]
        if let Location::Postgres(target) = &db
            && let Some(inner) = crate::lease::leased_writer(target)
        {
            return Ok(Journal { inner });
        }
        Journal::start_new(&db, keying)
    }

    /// A writer thread with a connection of its own.
    pub(crate) fn start_new(db: &Location, keying: Keying) -> Result<Journal, StoreError> {
        let conn = schema::connect(db, Create::Yes, true)?;
        let shared = Arc::new(Shared {
            path: db.clone(),
            sticky: OnceLock::new(),
            commits: AtomicU64::new(0),
            linger_us: AtomicU64::new(0),
        });
        let (tx, rx) = channel();
        let writer = Writer { conn, keying, shared: Arc::clone(&shared) };
        let thread = std::thread::Builder::new()
            .name("pev-journal".to_owned())
            .spawn(move || writer.run(&rx))
            .map_err(|e| StoreError::Invalid {
                path: db.clone(),
                message: format!("cannot start the journal writer thread: {e}"),
            })?;
        Ok(Journal { inner: Arc::new(Inner { tx: Some(tx), thread: Some(thread), shared }) })
    }

    /// Where the journal is.
    pub fn location(&self) -> &Location {
        &self.inner.shared.path
    }

    /// Takes (`take`) or gives back the session advisory lock `key` on the writer's connection
    /// once everything queued before is committed; whether it is held afterwards.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn advisory_lock(&self, key: i64, take: bool) -> Result<bool, StoreError> {
        // Giving a lock back is tried even after an error: the session may still hold it.
        if take {
            self.inner.shared.check()?;
        }
        let (ack_tx, ack_rx) = sync_channel(1);
        self.send(Msg::Lease(key, take, ack_tx))?;
        match ack_rx.recv() {
            Ok(Ok(held)) => Ok(held),
            Ok(Err(e)) => Err(StoreError::Stopped(e)),
            Err(_) => Err(self.inner.shared.gone()),
        }
    }

    /// Queues `rec` and returns at once; it is committed with the next group.
    pub fn record(&self, rec: Record) -> Result<(), StoreError> {
        self.inner.shared.check()?;
        self.send(Msg::Record(rec))
    }

    /// Queues `recs` to be committed in one transaction: none of them is ever on disk without
    /// the others (a tool call's end and the changes it made, so a kill between them cannot
    /// leave one without the other).
    pub fn record_all(&self, recs: Vec<Record>) -> Result<(), StoreError> {
        self.inner.shared.check()?;
        if recs.is_empty() {
            return Ok(());
        }
        self.send(Msg::Records(recs, false))
    }

    /// From now on a group no caller waits on stays open up to `linger` for more records (see
    /// the module's doc: only for a journal that is the only one writing its run); zero commits
    /// it at once, the default. Shared by every handle of this journal.
    pub fn linger(&self, linger: Duration) {
        let us = u64::try_from(linger.as_micros()).unwrap_or(u64::MAX);
        self.inner.shared.linger_us.store(us, Ordering::Relaxed);
    }

    /// [`Journal::record_all`], for records a resume could not rebuild if a kill lost them:
    /// their group is committed as soon as the writer has them, without [`LINGER`]ing for
    /// more. The caller still does not wait. The end of a command is one: its output and the
    /// files it changed are known only now (a rerun may change nothing and print something
    /// else), where a write's end can be settled from its file's hash and a read's redone.
    pub fn record_all_now(&self, recs: Vec<Record>) -> Result<(), StoreError> {
        self.inner.shared.check()?;
        if recs.is_empty() {
            return Ok(());
        }
        self.send(Msg::Records(recs, true))
    }

    /// Queues `rec` and returns once the commit holding it (and everything queued before it)
    /// is on disk.
    pub fn record_durable(&self, rec: Record) -> Result<(), StoreError> {
        self.inner.shared.check()?;
        let (ack_tx, ack_rx) = sync_channel(1);
        self.send(Msg::Durable(rec, ack_tx))?;
        self.wait(&ack_rx)
    }

    /// Returns once everything queued so far is on disk.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.inner.shared.check()?;
        let (ack_tx, ack_rx) = sync_channel(1);
        self.send(Msg::Flush(ack_tx))?;
        self.wait(&ack_rx)
    }

    /// Flushes; if this is the last handle, also stops and joins the writer thread.
    pub fn close(self) -> Result<(), StoreError> {
        self.flush()?;
        let shared = Arc::clone(&self.inner.shared);
        // Dropping the last `Inner` joins the thread; other handles keep it running.
        drop(self);
        shared.check()
    }

    /// Runs `f` on the writer's own connection, after everything queued before it is committed,
    /// and returns its result. A process holding a Postgres lease writes through the session
    /// that holds it, so once that session is lost nothing it writes lands (a `Store`'s writes
    /// come here too; see `Store::writing`).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn on_writer<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.inner.shared.check()?;
        let (result_tx, result_rx) = sync_channel(1);
        let (ack_tx, ack_rx) = sync_channel(1);
        let job: Job = Box::new(move |conn| {
            let _ = result_tx.send(f(conn));
        });
        self.send(Msg::Job(job, ack_tx))?;
        self.wait(&ack_rx)?;
        result_rx.recv().map_err(|_| self.inner.shared.gone())?
    }

    /// How many transactions the writer has committed (for tests and benches).
    #[doc(hidden)]
    pub fn commits(&self) -> u64 {
        self.inner.shared.commits.load(Ordering::Relaxed)
    }

    fn send(&self, msg: Msg) -> Result<(), StoreError> {
        let tx = self.inner.tx.as_ref().ok_or_else(|| self.inner.shared.gone())?;
        tx.send(msg).map_err(|_| self.inner.shared.gone())
    }

    fn wait(&self, ack: &Receiver<Ack>) -> Result<(), StoreError> {
        match ack.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(StoreError::Stopped(e)),
            Err(_) => Err(self.inner.shared.gone()),
        }
    }
}

/// The writer thread's state.
struct Writer {
    conn: Conn,
    /// The journal key, loaded once when the journal started.
    keying: Keying,
    shared: Arc<Shared>,
}

impl Writer {
    /// Commits groups until every handle is gone (the channel closes after the last queued
    /// message has been received, so nothing queued is lost on close).
    fn run(mut self, rx: &Receiver<Msg>) {
        // What a group commits; between groups, the blobs that ended the last one.
        let mut batch: Vec<Record> = Vec::with_capacity(256);
        let mut waiters: Vec<SyncSender<Ack>> = Vec::new();
        while let Ok(first) = rx.recv() {
            let mut taken = 1;
            let mut now = false;
            let mut after = take(first, &mut batch, &mut waiters, &mut now);
            while taken < MAX_BATCH && after.is_none() {
                match rx.try_recv() {
                    Ok(msg) => after = take(msg, &mut batch, &mut waiters, &mut now),
                    Err(_) => break,
                }
                taken += 1;
            }
            // Nobody waits on this group: it lingers a moment for more, so the end of one step
            // shares the commit (and the fsync) of the next one's durable intent.
            let linger = Duration::from_micros(self.shared.linger_us.load(Ordering::Relaxed));
            let deadline = Instant::now() + linger;
            while !linger.is_zero()
                && taken < MAX_BATCH
                && after.is_none()
                && waiters.is_empty()
                && !now
            {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(msg) => after = take(msg, &mut batch, &mut waiters, &mut now),
                    // Time is up, or every handle is gone (the outer loop then ends).
                    Err(_) => break,
                }
                taken += 1;
            }
            let held =
                if waiters.is_empty() && after.is_none() { trailing_blobs(&batch) } else { 0 };
            let outcome = self.commit(&batch[..batch.len() - held]);
            batch.drain(..batch.len() - held);
            for waiter in waiters.drain(..) {
                // A waiter that gave up (its thread ended) needs no answer.
                let _ = waiter.send(outcome.clone());
            }
            match after {
                Some(After::Lease(key, true, ack)) => {
                    let _ = ack.send(outcome.and_then(|()| self.lease(key, true)));
                }
                Some(After::Lease(key, false, ack)) => {
                    let _ = ack.send(self.lease(key, false));
                }
                Some(After::Job(job, ack)) => {
                    if outcome.is_ok() {
                        job(&mut self.conn);
                    }
                    let _ = ack.send(outcome);
                }
                None => {}
            }
        }
        // The last handle is gone: blobs still held are committed on their own.
        let _ = self.commit(&batch);
    }

    /// Takes or gives back an advisory lock on this connection (Postgres only). A failure is
    /// sticky like a commit's: a writer that cannot tell whether it holds its lease stops.
    fn lease(&mut self, key: i64, take: bool) -> Result<bool, Arc<StoreError>> {
        let sql = if take {
            "SELECT pg_try_advisory_lock(?1)"
        } else {
            "SELECT NOT pg_advisory_unlock(?1)"
        };
        let outcome = match self.conn.dialect() {
            crate::db::Dialect::Postgres => self
                .conn
                .query_value::<bool>(sql, crate::db::params![key])
                .map_err(|e| crate::db::db_err(&self.shared.path, "take the run's lease", e)),
            crate::db::Dialect::Sqlite => Err(StoreError::Invalid {
                path: self.shared.path.clone(),
                message: "a SQLite journal's runs are leased with file locks".to_owned(),
            }),
        };
        outcome.map_err(|e| {
            let e = Arc::new(e);
            if take {
                let _ = self.shared.sticky.set(Arc::clone(&e));
            }
            e
        })
    }

    /// Writes `batch` in one transaction, unless an earlier batch failed.
    fn commit(&mut self, batch: &[Record]) -> Ack {
        if let Some(e) = self.shared.sticky.get() {
            return Err(Arc::clone(e));
        }
        if batch.is_empty() {
            return Ok(());
        }
        match write_batch(&mut self.conn, &self.shared.path, &self.keying, batch) {
            Ok(()) => {
                self.shared.commits.fetch_add(1, Ordering::Relaxed);
                fault_after_commit();
                Ok(())
            }
            Err(e) => {
                let e = Arc::new(e);
                // Only this thread sets it, so the set cannot lose a race.
                let _ = self.shared.sticky.set(Arc::clone(&e));
                Err(e)
            }
        }
    }
}

/// How many blobs end `batch` and may wait for the next group (the rows naming them come
/// after them); none when they alone make a group's worth.
fn trailing_blobs(batch: &[Record]) -> usize {
    let n = batch.iter().rev().take_while(|r| matches!(r, Record::Blob { .. })).count();
    if n >= MAX_BATCH { 0 } else { n }
}

/// What waits for the batch before it to be committed.
enum After {
    Lease(i64, bool, SyncSender<Result<bool, Arc<StoreError>>>),
    Job(Job, SyncSender<Ack>),
}

/// Adds `msg` to the group; `now` is set when the group must not linger.
fn take(
    msg: Msg,
    batch: &mut Vec<Record>,
    waiters: &mut Vec<SyncSender<Ack>>,
    now: &mut bool,
) -> Option<After> {
    match msg {
        Msg::Record(rec) => batch.push(rec),
        Msg::Records(recs, at_once) => {
            *now |= at_once;
            batch.extend(recs);
        }
        Msg::Durable(rec, ack) => {
            batch.push(rec);
            waiters.push(ack);
        }
        Msg::Flush(ack) => waiters.push(ack),
        Msg::Lease(key, take, ack) => return Some(After::Lease(key, take, ack)),
        Msg::Job(job, ack) => return Some(After::Job(job, ack)),
    }
    None
}

/// One transaction for the whole batch; any failure rolls it all back (on drop).
fn write_batch(
    conn: &mut Conn,
    path: &Location,
    keying: &Keying,
    batch: &[Record],
) -> Result<(), StoreError> {
    // SQLite's write transaction takes the file's lock up front, so a concurrent writer
    // (`pev approve`) makes this wait on the busy timeout instead of failing midway.
    let mut tx = conn
        .begin(Begin::Write)
        .map_err(|e| crate::db::db_err(path, "begin journal transaction", e))?;
    let mut written = write::Batch::new(keying.clone());
    for rec in batch {
        written.apply(&mut tx, path, rec)?;
    }
    written.finish(&mut tx, path)?;
    crate::watch::notify(
        &mut tx,
        path,
        batch.iter().filter_map(|r| match r {
            Record::Event(e) => Some(e.run_id.as_str()),
            _ => None,
        }),
    )?;
    tx.commit().map_err(|e| crate::db::db_err(path, "commit journal transaction", e))
}
