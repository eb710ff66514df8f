//! [`Store`]: one connection to the journal for the CLI's reads (`pev runs`, `pev show`, resume's
//! replay) and its small writes (creating a run, `pev approve`), each in its own transaction.
//!
//! A `Store` may read while another process's [`crate::Journal`] writes: WAL gives the reader a
//! consistent snapshot, and the busy timeout covers the moments a write needs the lock.

use std::cell::{RefCell, RefMut};
use std::path::Path;

use pev_protocol::event::{Event, EventBody, now_rfc3339};

use crate::chain::Integrity;
use crate::db::{Begin, Conn, Dialect, Location, Row, params};
use crate::error::{StoreError, db_err, json_err};
use crate::key::{CreateKey, Keying};
use crate::read;
use crate::records::{
    ApprovalRecord, ModelCallRecord, NewRun, Record, RunOptions, RunRecord, RunSummary,
};
use crate::schema::{self, Create};
use crate::write::{self, PlanRow};

/// How many events of one kind a run has, and the newest one's `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindCount {
    pub count: u64,
    pub newest: u64,
}

/// See [`Store::append_guarded`]: the newest event of `kind` the caller read (`None`: none).
#[derive(Debug, Clone, Copy)]
pub struct Guard<'a> {
    pub kind: &'a str,
    pub last: Option<u64>,
}

/// A connection to one journal.
pub struct Store {
    conn: RefCell<Option<Conn>>,
    path: Location,
    /// The journal key, loaded once when the store is opened.
    keying: Keying,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        #[cfg(feature = "postgres")]
        if let (Location::Postgres(target), Some(Conn::Postgres(conn))) =
            (&self.path, self.conn.get_mut().take())
        {
            target.give_back(*conn);
        }
    }
}

impl Store {
    /// Opens the journal at `db`, creating it (and its directory, or its Postgres schema) if
    /// missing, and migrates it.
    /// The journal key is the environment's (`key.rs`), created if missing.
    pub fn open(db: impl Into<Location>) -> Result<Store, StoreError> {
        Store::open_keyed(db, crate::key::load_key(CreateKey::Yes)?)
    }

    /// [`Store::open`] with the journal key given (tests, or a caller that loaded it already).
    pub fn open_keyed(db: impl Into<Location>, keying: Keying) -> Result<Store, StoreError> {
        let path = db.into();
        let conn = schema::connect(&path, Create::Yes, false)?;
        Ok(Store { conn: RefCell::new(Some(conn)), path, keying })
    }

    /// Opens an existing journal; a missing file is [`StoreError::Missing`]. For commands that
    /// only read (`pev runs`, `pev show`) and must not leave a `.pev/` behind (nor a journal
    /// key: a missing one is no key, and what was keyed reads as not verifiable).
    pub fn open_existing(db: impl Into<Location>) -> Result<Store, StoreError> {
        Store::open_existing_keyed(db, crate::key::load_key(CreateKey::No)?)
    }

    /// [`Store::open_existing`] with the journal key given.
    pub fn open_existing_keyed(
        db: impl Into<Location>,
        keying: Keying,
    ) -> Result<Store, StoreError> {
        let path = db.into();
        let conn = schema::connect(&path, Create::No, false)?;
        Ok(Store { conn: RefCell::new(Some(conn)), path, keying })
    }

    /// The journal key this store writes and checks with (or why there is none).
    pub fn keying(&self) -> &Keying {
        &self.keying
    }

    /// Where the journal is.
    pub fn location(&self) -> &Location {
        &self.path
    }

    /// The connection (a `Store` is used from one thread at a time; it is not `Sync`).
    pub(crate) fn conn(&self) -> RefMut<'_, Conn> {
        RefMut::map(self.conn.borrow_mut(), |c| match c {
            Some(c) => c,
            None => unreachable_conn(),
        })
    }

    /// Records a new run: its `runs` row with status `running`, and plan version 1.
    pub fn create_run(&self, run: &NewRun) -> Result<(), StoreError> {
        let run = run.clone();
        let keying = self.keying.clone();
        self.writing(move |conn, at| {
            let op = format!("create run {}", run.run_id);
            let plan = serde_json::to_string(&run.plan).map_err(|e| json_err(at, &op, e))?;
            let options = serde_json::to_string(&run.options).map_err(|e| json_err(at, &op, e))?;
            let sql = |e| db_err(at, &op, e);
            let mut tx = conn.begin(Begin::Write).map_err(sql)?;
            // `''`: journaled where no key could be made (not verifiable, but not from before
            // keys either).
            let key_id = keying.key().map_or("", |k| k.id());
            let covered = params![
                &run.run_id,
                &run.goal,
                &run.workspace,
                "running",
                &run.created_at,
                &run.created_at,
                &options,
                crate::db::Param::Null,
                crate::db::Param::Null,
                key_id
            ];
            let mac = keying.key().map(|k| crate::chain::row_mac(k, "runs", covered));
            tx.exec(
                "INSERT INTO runs (run_id, goal, workspace, status, created_at, updated_at, options,
                     key_id, mac)
                 VALUES (?1, ?2, ?3, 'running', ?4, ?4, ?5, ?6, ?7)",
                params![&run.run_id, &run.goal, &run.workspace, &run.created_at, &options, key_id, &mac],
            )
            .map_err(sql)?;
            let row = PlanRow {
                run_id: &run.run_id,
                version: 1,
                plan: &plan,
                reason: "initial plan",
                created_at: &run.created_at,
            };
            let mut batch = write::Batch::new(keying);
            write::insert_plan_version(&mut tx, &mut batch, &row)
                .map_err(|e| e.into_store(at, &op))?;
            batch.finish(&mut tx, at)?;
            tx.commit().map_err(sql)
        })
    }

    /// Runs a write on this process's leased journal writer when it holds a Postgres lease on
    /// this database (so a driver whose session was lost cannot write anything, not even a
    /// run's status), else on this store's own connection.
    pub(crate) fn writing<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Conn, &Location) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        #[cfg(feature = "postgres")]
        if let Location::Postgres(target) = &self.path
            && let Some(inner) = crate::lease::leased_writer(target)
        {
            let at = self.path.clone();
            return crate::Journal { inner }.on_writer(move |conn| f(conn, &at));
        }
        f(&mut self.conn(), &self.path)
    }

    /// Writes one record in its own transaction (the [`crate::Journal`] batches; this does not).
    pub fn write(&self, rec: &Record) -> Result<(), StoreError> {
        let rec = rec.clone();
        let keying = self.keying.clone();
        self.writing(move |conn, at| {
            let sql = |e| db_err(at, "write record", e);
            let mut tx = conn.begin(Begin::Write).map_err(sql)?;
            write::apply(&mut tx, at, &keying, &rec)?;
            tx.commit().map_err(sql)
        })
    }

    /// Appends an event to `run_id` with the next sequence number, taken inside the write
    /// transaction: for processes that add events to a run no engine is driving (`pev mcp`,
    /// `pev gate`), where two writers may race.
    pub fn append_event(&self, run_id: &str, body: EventBody) -> Result<Event, StoreError> {
        let events = self.append_guarded(run_id, None, &[], vec![body])?;
        events.and_then(|mut e| e.pop()).ok_or_else(|| StoreError::NotFound(run_id.to_owned()))
    }

    /// Writes `records` and appends `bodies` (numbered in order) to `run_id` in one transaction,
    /// unless `guard` says another writer got there first: when the run's newest event of
    /// `guard.kind` is later than `guard.last` (what the caller read before deciding), nothing
    /// is written and the answer is `None`. An optimistic lock for read-decide-write callers
    /// in separate processes.
    pub fn append_guarded(
        &self,
        run_id: &str,
        guard: Option<Guard<'_>>,
        records: &[Record],
        bodies: Vec<EventBody>,
    ) -> Result<Option<Vec<Event>>, StoreError> {
        let run_id = run_id.to_owned();
        let guard = guard.map(|g| (g.kind.to_owned(), g.last));
        let records = records.to_vec();
        let keying = self.keying.clone();
        self.writing(move |conn, at| {
            let op = format!("append events to run {run_id}");
            let sql = |e| db_err(at, &op, e);
            // The write lock (SQLite's file, Postgres's run row) is taken before the guard and
            // the sequence are read.
            let mut tx = conn.begin(Begin::Write).map_err(sql)?;
            let lock = format!("SELECT 1 FROM runs WHERE run_id = ?1{}", tx.dialect().for_update());
            if tx.query_opt(&lock, params![&run_id]).map_err(sql)?.is_none() {
                return Err(StoreError::NotFound(run_id));
            }
            if let Some((kind, last)) = &guard {
                let newest: Option<u64> = tx
                    .query_value(
                        "SELECT MAX(seq) FROM events WHERE run_id = ?1 AND kind = ?2",
                        params![&run_id, kind],
                    )
                    .map_err(sql)?;
                if newest > *last {
                    return Ok(None);
                }
            }
            for record in &records {
                write::apply(&mut tx, at, &keying, record)?;
            }
            let mut seq: u64 = tx
                .query_value(
                    "SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE run_id = ?1",
                    params![&run_id],
                )
                .map_err(sql)?;
            let mut events = Vec::with_capacity(bodies.len());
            for body in bodies {
                let event = Event { run_id: run_id.clone(), seq, at: now_rfc3339(), body };
                write::apply(&mut tx, at, &keying, &Record::Event(event.clone()))?;
                events.push(event);
                seq = seq.saturating_add(1);
            }
            if !events.is_empty() {
                crate::watch::notify(&mut tx, at, std::iter::once(run_id.as_str()))?;
            }
            tx.commit().map_err(sql)?;
            Ok(Some(events))
        })
    }

    /// Every run's id, status, workspace and options (`pev run`'s and `pev agent`'s settings,
    /// `pev mcp`'s mode and session), newest first.
    pub fn run_options(&self) -> Result<Vec<RunOptions>, StoreError> {
        let op = "read run options";
        let rows = self
            .conn()
            .query(
                "SELECT run_id, status, workspace, options FROM runs
                 ORDER BY created_at DESC, rowid DESC",
                &[],
            )
            .map_err(|e| db_err(&self.path, op, e))?;
        rows.iter()
            .map(|row| {
                let text = |i| row.get::<String>(i).map_err(|e| db_err(&self.path, op, e));
                let options =
                    serde_json::from_str(&text(3)?).map_err(|e| json_err(&self.path, op, e))?;
                Ok(RunOptions { run_id: text(0)?, status: text(1)?, workspace: text(2)?, options })
            })
            .collect()
    }

    /// For a child run (a delegated step's), its parent run's id; `None` for a top-level run.
    pub fn parent_of(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        let mut conn = self.conn();
        let sql = format!(
            "SELECT {} FROM runs WHERE run_id = ?1",
            conn.dialect().json_text("options", &["parent", "run"])
        );
        conn.query_value(&sql, params![run_id])
            .map_err(|e| db_err(&self.path, "read the parent of a run", e))
    }

    /// The run `id` names: an exact id, `last`/`latest` (the newest run), or a unique prefix.
    pub fn resolve_run(&self, id: &str) -> Result<String, StoreError> {
        let sql = |e| db_err(&self.path, "resolve run id", e);
        if id.is_empty() {
            return Err(StoreError::NotFound(String::new()));
        }
        let mut conn = self.conn();
        if write::run_exists(&mut conn, id).map_err(sql)? {
            return Ok(id.to_owned());
        }
        if id == "last" || id == "latest" {
            // The newest run a person started: a child run (a delegated step's) is reached
            // through its parent.
            let query = format!(
                "SELECT run_id FROM runs WHERE {} IS NULL ORDER BY created_at DESC, rowid DESC
                 LIMIT 1",
                conn.dialect().json_text("options", &["parent", "run"])
            );
            return conn
                .query_value::<Option<String>>(&query, &[])
                .map_err(sql)?
                .ok_or_else(|| StoreError::NotFound(id.to_owned()));
        }
        let mut candidates: Vec<String> = conn
            .query(
                "SELECT run_id FROM runs
                 WHERE substr(run_id, 1, length(CAST(?1 AS TEXT))) = CAST(?1 AS TEXT)
                 ORDER BY created_at DESC, rowid DESC",
                params![id],
            )
            .map_err(sql)?
            .iter()
            .map(|r| r.get(0))
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        if candidates.len() > 1 {
            // A parent's prefix also prefixes its children's ids (`PARENT.STEP.N`): the one
            // run that is not a child of another candidate is meant.
            let roots: Vec<&String> = candidates
                .iter()
                .filter(|c| !candidates.iter().any(|p| p != *c && c.starts_with(&format!("{p}."))))
                .collect();
            if roots.len() == 1 {
                return Ok(roots[0].clone());
            }
        }
        match candidates.len() {
            0 => Err(StoreError::NotFound(id.to_owned())),
            1 => Ok(candidates.swap_remove(0)),
            _ => Err(StoreError::Ambiguous { prefix: id.to_owned(), candidates }),
        }
    }

    /// Every run, newest first.
    pub fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        // The plan's step count comes from the database's JSON functions, so listing does not
        // parse whole plans in Rust; step states can outnumber it if a revision dropped steps.
        let mut conn = self.conn();
        let d = conn.dialect();
        let query = format!(
            "SELECT r.run_id, r.goal, r.status, r.created_at, r.updated_at,
                 (SELECT {} FROM plan_versions p
                  WHERE p.run_id = r.run_id ORDER BY p.version DESC LIMIT 1),
                 (SELECT count(*) FROM step_states s WHERE s.run_id = r.run_id),
                 (SELECT count(*) FROM step_states s
                  WHERE s.run_id = r.run_id AND s.status = 'done'),
                 {}, {}
             FROM runs r ORDER BY r.created_at DESC, r.rowid DESC",
            d.json_array_length("p.plan", "steps"),
            d.json_text("r.options", &["parent", "run"]),
            d.json_text("r.options", &["parent", "step"]),
        );
        let sql = |e| db_err(&self.path, "list runs", e);
        conn.query(&query, &[]).map_err(sql)?.iter().map(|r| summary(r).map_err(sql)).collect()
    }

    /// Everything recorded about `run_id`.
    pub fn load_run(&self, run_id: &str) -> Result<RunRecord, StoreError> {
        read::load_run(&mut self.conn(), &self.path, run_id)
    }

    /// Every plan version of the run, oldest first: `(version, plan, reason, created_at)`.
    pub fn plan_versions(
        &self,
        run_id: &str,
    ) -> Result<Vec<(u32, serde_json::Value, String, String)>, StoreError> {
        let op = format!("read plan versions of run {run_id}");
        let sql = |e| db_err(&self.path, &op, e);
        let rows = self
            .conn()
            .query(
                "SELECT version, plan, reason, created_at FROM plan_versions
                 WHERE run_id = ?1 ORDER BY version",
                params![run_id],
            )
            .map_err(sql)?;
        rows.iter()
            .map(|row| {
                let plan: String = row.get(1).map_err(sql)?;
                let plan = serde_json::from_str(&plan).map_err(|e| json_err(&self.path, &op, e))?;
                Ok((
                    row.get(0).map_err(sql)?,
                    plan,
                    row.get(2).map_err(sql)?,
                    row.get(3).map_err(sql)?,
                ))
            })
            .collect()
    }

    /// Whether the run's journal is as pev wrote it: its events, every row a verdict or a
    /// resume reads and the blobs it names, checked with this store's journal key (see
    /// [`Integrity`]; what is covered is in `chain.rs`).
    pub fn integrity(&self, run_id: &str) -> Result<Integrity, StoreError> {
        let op = format!("check the journal of run {run_id}");
        let mut conn = self.conn();
        let mut tx = conn.begin(Begin::Read).map_err(|e| db_err(&self.path, &op, e))?;
        let found = crate::verify::verify(&mut tx, &self.keying, run_id)
            .map_err(|e| db_err(&self.path, &op, e))?;
        tx.commit().map_err(|e| db_err(&self.path, &op, e))?;
        Ok(found)
    }

    /// [`Store::integrity`], as a gate for acting on a run (resume, a gate's verdict): a run
    /// changed outside pev is [`StoreError::Tampered`], naming the first bad row; otherwise
    /// the integrity, which may still be [`Integrity::Unverifiable`] or
    /// [`Integrity::Unchained`] (journaled without a key this machine can check): a caller
    /// that needs evidence checks [`Integrity::is_verified`].
    pub fn require_intact(&self, run_id: &str) -> Result<Integrity, StoreError> {
        match self.integrity(run_id)? {
            Integrity::Broken { problem, .. } => {
                Err(StoreError::Tampered { run_id: run_id.to_owned(), problem })
            }
            other => Ok(other),
        }
    }

    /// The run's events in sequence order.
    pub fn events(&self, run_id: &str) -> Result<Vec<Event>, StoreError> {
        self.events_after(run_id, None)
    }

    /// The run's events after sequence number `after` (all of them for `None`), in order.
    pub fn events_after(&self, run_id: &str, after: Option<u64>) -> Result<Vec<Event>, StoreError> {
        let op = format!("read events of run {run_id}");
        let first = after.map_or(0, |a| a.saturating_add(1));
        let bodies = self.bodies(
            "SELECT body FROM events WHERE run_id = ?1 AND seq >= ?2 ORDER BY seq",
            run_id,
            first,
            &op,
        )?;
        if bodies.is_empty() && !self.run_exists(run_id)? {
            return Err(StoreError::NotFound(run_id.to_owned()));
        }
        bodies
            .iter()
            .map(|b| serde_json::from_str(b).map_err(|e| json_err(&self.path, &op, e)))
            .collect()
    }

    /// How many events of each kind the run has, with the newest `seq` of each: what a caller
    /// that needs counts and positions reads instead of every event's body.
    pub fn event_kinds(
        &self,
        run_id: &str,
    ) -> Result<std::collections::BTreeMap<String, KindCount>, StoreError> {
        let op = format!("count events of run {run_id}");
        let err = |e| db_err(&self.path, &op, e);
        let rows = self
            .conn()
            .query(
                "SELECT kind, COUNT(*), MAX(seq) FROM events WHERE run_id = ?1 GROUP BY kind",
                params![run_id],
            )
            .map_err(err)?;
        rows.iter()
            .map(|r| {
                let kind: String = r.get(0).map_err(err)?;
                Ok((
                    kind,
                    KindCount { count: r.get(1).map_err(err)?, newest: r.get(2).map_err(err)? },
                ))
            })
            .collect()
    }

    /// The run's events of one kind (the `event` name: `client.tool`, …), in sequence order:
    /// only their bodies are read and parsed.
    pub fn events_of_kind(&self, run_id: &str, kind: &str) -> Result<Vec<Event>, StoreError> {
        let op = format!("read {kind} events of run {run_id}");
        let err = |e| db_err(&self.path, &op, e);
        let rows = self
            .conn()
            .query(
                "SELECT body FROM events WHERE run_id = ?1 AND kind = ?2 ORDER BY seq",
                params![run_id, kind],
            )
            .map_err(err)?;
        rows.into_iter()
            .map(|mut r| {
                let body = r.take_text(0).map_err(err)?.unwrap_or_default();
                serde_json::from_str(&body).map_err(|e| json_err(&self.path, &op, e))
            })
            .collect()
    }

    /// The newest event of `kind` that `pick` takes (`Some`), walking back from the newest a
    /// few rows at a time, so a long run's older bodies are neither read nor parsed.
    pub fn newest_of_kind<T>(
        &self,
        run_id: &str,
        kind: &str,
        mut pick: impl FnMut(Event) -> Option<T>,
    ) -> Result<Option<T>, StoreError> {
        const PAGE: u64 = 8;
        let op = format!("read {kind} events of run {run_id}");
        let err = |e| db_err(&self.path, &op, e);
        let mut before = u64::MAX >> 1;
        loop {
            let rows = self
                .conn()
                .query(
                    "SELECT seq, body FROM events WHERE run_id = ?1 AND kind = ?2 AND seq < ?3
                     ORDER BY seq DESC LIMIT ?4",
                    params![run_id, kind, before, PAGE],
                )
                .map_err(err)?;
            let full = rows.len() as u64 == PAGE;
            for mut row in rows {
                before = row.get(0).map_err(err)?;
                let body = row.take_text(1).map_err(err)?.unwrap_or_default();
                let event =
                    serde_json::from_str(&body).map_err(|e| json_err(&self.path, &op, e))?;
                if let Some(found) = pick(event) {
                    return Ok(Some(found));
                }
            }
            if !full {
                return Ok(None);
            }
        }
    }

    /// The run's model calls in the order they were journaled.
    pub fn model_calls(&self, run_id: &str) -> Result<Vec<ModelCallRecord>, StoreError> {
        self.model_calls_after(run_id, None)
    }

    /// The run's model calls after sequence number `after` (all of them for `None`), in the
    /// order they were journaled: what a reader following a run as it grows asks for.
    pub fn model_calls_after(
        &self,
        run_id: &str,
        after: Option<u64>,
    ) -> Result<Vec<ModelCallRecord>, StoreError> {
        let op = format!("read model calls of run {run_id}");
        let bodies = self.bodies(
            "SELECT body FROM model_calls WHERE run_id = ?1 AND seq >= ?2 ORDER BY seq",
            run_id,
            after.map_or(0, |a| a.saturating_add(1)),
            &op,
        )?;
        bodies
            .iter()
            .map(|b| serde_json::from_str(b).map_err(|e| json_err(&self.path, &op, e)))
            .collect()
    }

    fn bodies(
        &self,
        sql: &str,
        run_id: &str,
        from: u64,
        op: &str,
    ) -> Result<Vec<String>, StoreError> {
        let err = |e| db_err(&self.path, op, e);
        let rows = self.conn().query(sql, params![run_id, from]).map_err(err)?;
        rows.into_iter()
            .map(|mut r| r.take_text(0).map(Option::unwrap_or_default).map_err(err))
            .collect()
    }

    /// Records that `by` approved `step` of `run_id`, now. Approving twice keeps the first.
    pub fn approve(&self, run_id: &str, step: &str, by: &str) -> Result<(), StoreError> {
        if !self.run_exists(run_id)? {
            return Err(StoreError::NotFound(run_id.to_owned()));
        }
        let rec = ApprovalRecord {
            run_id: run_id.to_owned(),
            step_id: step.to_owned(),
            by: by.to_owned(),
            at: now_rfc3339(),
        };
        let keying = self.keying.clone();
        self.writing(move |conn, at| {
            let op = format!("approve step {} of run {}", rec.step_id, rec.run_id);
            let mut tx = conn.begin(Begin::Write).map_err(|e| db_err(at, &op, e))?;
            let mut batch = write::Batch::new(keying);
            write::approval(&mut tx, &mut batch, &rec).map_err(|e| e.into_store(at, &op))?;
            batch.finish(&mut tx, at)?;
            tx.commit().map_err(|e| db_err(at, &op, e))
        })
    }

    /// Writes a consistent copy of the whole journal to `path` (which must not exist): what
    /// `pev eval --record` keeps beside a scenario. Safe while another process writes. A
    /// SQLite journal only.
    pub fn copy_to(&self, path: &Path) -> Result<(), StoreError> {
        let target = path.to_str().ok_or_else(|| StoreError::Invalid {
            path: Location::from(path),
            message: "the path is not UTF-8".to_owned(),
        })?;
        let op = format!("copy the journal to {target}");
        match &mut *self.conn() {
            Conn::Sqlite(c) => c
                .execute("VACUUM INTO ?1", [target])
                .map(|_| ())
                .map_err(|e| db_err(&self.path, &op, e)),
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => Err(StoreError::Invalid {
                path: self.path.clone(),
                message: format!("{op}: a Postgres journal is copied with pg_dump, not pev"),
            }),
        }
    }

    /// The bytes blob `sha256` takes in the journal (deflated or not), 0 when absent.
    pub fn stored_bytes(&self, sha256: &str) -> Result<usize, StoreError> {
        self.conn()
            .query_value::<Option<u64>>(
                "SELECT LENGTH(content) FROM blobs WHERE sha256 = ?1",
                params![sha256],
            )
            .map(|n| n.map_or(0, |n| usize::try_from(n).unwrap_or(0)))
            .map_err(|e| db_err(&self.path, "read blob size", e))
    }

    /// The content stored under `sha256`, if any.
    pub fn blob(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let sql = |e| db_err(&self.path, "read blob", e);
        let row = self
            .conn()
            .query_opt("SELECT content, encoding FROM blobs WHERE sha256 = ?1", params![sha256])
            .map_err(sql)?;
        let Some(row) = row else { return Ok(None) };
        let content: Vec<u8> = row.get(0).map_err(sql)?;
        let encoding: Option<String> = row.get(1).map_err(sql)?;
        crate::blob::decode(content, encoding.as_deref()).map(Some).map_err(|message| {
            StoreError::Invalid {
                path: self.path.clone(),
                message: format!("blob {sha256}: {message}"),
            }
        })
    }

    /// The database's own consistency check: `"ok"` when intact, else its findings, one per
    /// line. SQLite's `PRAGMA integrity_check`; a Postgres server checks its pages itself, so
    /// there this checks that every row of a run belongs to one (the foreign keys hold).
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        let sql = |e| db_err(&self.path, "integrity check", e);
        let mut conn = self.conn();
        let query = match conn.dialect() {
            Dialect::Sqlite => "PRAGMA integrity_check",
            Dialect::Postgres => {
                "SELECT 'ok' WHERE NOT EXISTS (SELECT 1 FROM events e
                     WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = e.run_id))"
            }
        };
        let lines: Vec<String> = conn
            .query(query, &[])
            .map_err(sql)?
            .iter()
            .map(|r| r.get(0))
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        Ok(if lines.is_empty() { "events without a run".to_owned() } else { lines.join("\n") })
    }

    fn run_exists(&self, run_id: &str) -> Result<bool, StoreError> {
        write::run_exists(&mut self.conn(), run_id)
            .map_err(|e| db_err(&self.path, "look up run", e))
    }
}

fn unreachable_conn() -> ! {
    unreachable!("a Store's connection is taken only when the Store is dropped")
}

fn summary(row: &Row) -> Result<RunSummary, crate::db::DbError> {
    let plan_steps: Option<u64> = row.get(5)?;
    let states: u64 = row.get(6)?;
    Ok(RunSummary {
        run_id: row.get(0)?,
        goal: row.get(1)?,
        status: row.get(2)?,
        created_at: row.get(3)?,
        updated_at: row.get(4)?,
        steps_total: plan_steps.unwrap_or(0).max(states),
        steps_done: row.get(7)?,
        parent: row.get::<Option<String>>(8)?.filter(|p| !p.is_empty()),
        parent_step: row.get::<Option<String>>(9)?.filter(|p| !p.is_empty()),
    })
}
