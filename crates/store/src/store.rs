//! [`Store`]: one connection to the journal for the CLI's reads (`pev runs`, `pev show`, resume's
//! replay) and its small writes (creating a run, `pev approve`), each in its own transaction.
//!
//! A `Store` may read while another process's [`crate::Journal`] writes: WAL gives the reader a
//! consistent snapshot, and the busy timeout covers the moments a write needs the lock.

use crate::chain::Integrity;
use std::path::{Path, PathBuf};

use pev_protocol::event::{Event, EventBody, now_rfc3339};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::{StoreError, db_err, json_err};
use crate::read;
use crate::records::{
    ApprovalRecord, ModelCallRecord, NewRun, Record, RunOptions, RunRecord, RunSummary,
};
use crate::schema::{self, Create};
use crate::write::{self, PlanRow};

/// See [`Store::append_guarded`]: the newest event of `kind` the caller read (`None`: none).
#[derive(Debug, Clone, Copy)]
pub struct Guard<'a> {
    pub kind: &'a str,
    pub last: Option<u64>,
}

/// A connection to one journal file.
pub struct Store {
    pub(crate) conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Store {
    /// Opens the journal at `db`, creating it (and its directory) if missing, and migrates it.
    pub fn open(db: &Path) -> Result<Store, StoreError> {
        Ok(Store { conn: schema::open(db, Create::Yes)?, path: db.to_path_buf() })
    }

    /// Opens an existing journal; a missing file is [`StoreError::Missing`]. For commands that
    /// only read (`pev runs`, `pev show`) and must not leave a `.pev/` behind.
    pub fn open_existing(db: &Path) -> Result<Store, StoreError> {
        Ok(Store { conn: schema::open(db, Create::No)?, path: db.to_path_buf() })
    }

    /// The journal's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records a new run: its `runs` row with status `running`, and plan version 1.
    pub fn create_run(&self, run: &NewRun) -> Result<(), StoreError> {
        let op = format!("create run {}", run.run_id);
        let plan = serde_json::to_string(&run.plan).map_err(|e| json_err(&self.path, &op, e))?;
        let options =
            serde_json::to_string(&run.options).map_err(|e| json_err(&self.path, &op, e))?;
        let sql = |e| db_err(&self.path, &op, e);
        let tx = self.conn.unchecked_transaction().map_err(sql)?;
        tx.prepare_cached(
            "INSERT INTO runs (run_id, goal, workspace, status, created_at, updated_at, options)
             VALUES (?1, ?2, ?3, 'running', ?4, ?4, ?5)",
        )
        .and_then(|mut st| {
            st.execute(params![run.run_id, run.goal, run.workspace, run.created_at, options])
        })
        .map_err(sql)?;
        let row = PlanRow {
            run_id: &run.run_id,
            version: 1,
            plan: &plan,
            reason: "initial plan",
            created_at: &run.created_at,
        };
        write::insert_plan_version(&tx, &row).map_err(sql)?;
        tx.commit().map_err(sql)
    }

    /// Writes one record in its own transaction (the [`crate::Journal`] batches; this does not).
    pub fn write(&self, rec: &Record) -> Result<(), StoreError> {
        let sql = |e| db_err(&self.path, "write record", e);
        let tx = self.conn.unchecked_transaction().map_err(sql)?;
        write::apply(&tx, &self.path, rec)?;
        tx.commit().map_err(sql)
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
        let op = format!("append events to run {run_id}");
        let sql = |e| db_err(&self.path, &op, e);
        // IMMEDIATE: the write lock is taken before the guard and the sequence are read.
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(sql)?;
        let written = (|| {
            if !self.run_exists(run_id)? {
                return Err(StoreError::NotFound(run_id.to_owned()));
            }
            if let Some(guard) = guard {
                let newest: Option<u64> = self
                    .conn
                    .prepare_cached("SELECT MAX(seq) FROM events WHERE run_id = ?1 AND kind = ?2")
                    .and_then(|mut st| st.query_row(params![run_id, guard.kind], |row| row.get(0)))
                    .map_err(sql)?;
                if newest > guard.last {
                    return Ok(None);
                }
            }
            for record in records {
                write::apply(&self.conn, &self.path, record)?;
            }
            let mut seq: u64 = self
                .conn
                .prepare_cached("SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE run_id = ?1")
                .and_then(|mut st| st.query_row([run_id], |row| row.get(0)))
                .map_err(sql)?;
            let mut events = Vec::with_capacity(bodies.len());
            for body in bodies {
                let event = Event { run_id: run_id.to_owned(), seq, at: now_rfc3339(), body };
                write::apply(&self.conn, &self.path, &Record::Event(event.clone()))?;
                events.push(event);
                seq = seq.saturating_add(1);
            }
            Ok(Some(events))
        })();
        match written {
            Ok(Some(events)) => {
                self.conn.execute_batch("COMMIT").map_err(sql)?;
                Ok(Some(events))
            }
            Ok(None) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Ok(None)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Every run's id, status, workspace and options (`pev run`'s and `pev agent`'s settings,
    /// `pev mcp`'s mode and session), newest first.
    pub fn run_options(&self) -> Result<Vec<RunOptions>, StoreError> {
        let op = "read run options";
        let rows: Vec<(String, String, String, String)> = self
            .conn
            .prepare_cached(
                "SELECT run_id, status, workspace, options FROM runs
                 ORDER BY created_at DESC, rowid DESC",
            )
            .and_then(|mut st| {
                st.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))?
                    .collect()
            })
            .map_err(|e| db_err(&self.path, op, e))?;
        rows.into_iter()
            .map(|(run_id, status, workspace, options)| {
                let options =
                    serde_json::from_str(&options).map_err(|e| json_err(&self.path, op, e))?;
                Ok(RunOptions { run_id, status, workspace, options })
            })
            .collect()
    }

    /// For a child run (a delegated step's), its parent run's id; `None` for a top-level run.
    pub fn parent_of(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        use rusqlite::OptionalExtension as _;
        self.conn
            .prepare_cached(
                "SELECT json_extract(options, '$.parent.run') FROM runs WHERE run_id = ?1",
            )
            .and_then(|mut st| {
                st.query_row([run_id], |row| row.get::<_, Option<String>>(0)).optional()
            })
            .map(|found| found.flatten())
            .map_err(|e| db_err(&self.path, "read the parent of a run", e))
    }

    /// The run `id` names: an exact id, `last`/`latest` (the newest run), or a unique prefix.
    pub fn resolve_run(&self, id: &str) -> Result<String, StoreError> {
        let sql = |e| db_err(&self.path, "resolve run id", e);
        if id.is_empty() {
            return Err(StoreError::NotFound(String::new()));
        }
        if write::run_exists(&self.conn, id).map_err(sql)? {
            return Ok(id.to_owned());
        }
        if id == "last" || id == "latest" {
            return self
                .conn
                .prepare_cached(
                    // The newest run a person started: a child run (a delegated step's) is
                    // reached through its parent.
                    "SELECT run_id FROM runs
                     WHERE json_extract(options, '$.parent.run') IS NULL
                     ORDER BY created_at DESC, rowid DESC LIMIT 1",
                )
                .and_then(|mut st| st.query_row([], |row| row.get(0)).optional())
                .map_err(sql)?
                .ok_or_else(|| StoreError::NotFound(id.to_owned()));
        }
        let mut candidates: Vec<String> = self
            .conn
            .prepare_cached(
                "SELECT run_id FROM runs WHERE substr(run_id, 1, length(?1)) = ?1
                 ORDER BY created_at DESC, rowid DESC",
            )
            .and_then(|mut st| st.query_map([id], |row| row.get(0))?.collect())
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
        // The plan's step count comes from SQLite's JSON functions, so listing does not parse
        // whole plans in Rust; step states can outnumber it if a revision dropped steps.
        self.conn
            .prepare_cached(
                "SELECT r.run_id, r.goal, r.status, r.created_at, r.updated_at,
                     (SELECT json_array_length(p.plan, '$.steps') FROM plan_versions p
                      WHERE p.run_id = r.run_id ORDER BY p.version DESC LIMIT 1),
                     (SELECT count(*) FROM step_states s WHERE s.run_id = r.run_id),
                     (SELECT count(*) FROM step_states s
                      WHERE s.run_id = r.run_id AND s.status = 'done'),
                     json_extract(r.options, '$.parent.run'),
                     json_extract(r.options, '$.parent.step')
                 FROM runs r ORDER BY r.created_at DESC, r.rowid DESC",
            )
            .and_then(|mut st| st.query_map([], summary)?.collect())
            .map_err(|e| db_err(&self.path, "list runs", e))
    }

    /// Everything recorded about `run_id`.
    pub fn load_run(&self, run_id: &str) -> Result<RunRecord, StoreError> {
        read::load_run(&self.conn, &self.path, run_id)
    }

    /// Every plan version of the run, oldest first: `(version, plan, reason, created_at)`.
    pub fn plan_versions(
        &self,
        run_id: &str,
    ) -> Result<Vec<(u32, serde_json::Value, String, String)>, StoreError> {
        let op = format!("read plan versions of run {run_id}");
        let rows: Vec<(u32, String, String, String)> = self
            .conn
            .prepare_cached(
                "SELECT version, plan, reason, created_at FROM plan_versions
                 WHERE run_id = ?1 ORDER BY version",
            )
            .and_then(|mut st| {
                st.query_map([run_id], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })?
                .collect()
            })
            .map_err(|e| db_err(&self.path, &op, e))?;
        rows.into_iter()
            .map(|(version, plan, reason, at)| {
                let plan = serde_json::from_str(&plan).map_err(|e| json_err(&self.path, &op, e))?;
                Ok((version, plan, reason, at))
            })
            .collect()
    }

    /// Whether the run's events are as pev wrote them (see [`Integrity`]).
    pub fn integrity(&self, run_id: &str) -> Result<Integrity, StoreError> {
        let op = format!("check the hash chain of run {run_id}");
        crate::chain::verify(&self.conn, run_id).map_err(|e| db_err(&self.path, &op, e))
    }

    /// The run's events in sequence order.
    pub fn events(&self, run_id: &str) -> Result<Vec<Event>, StoreError> {
        let op = format!("read events of run {run_id}");
        let bodies: Vec<String> = self
            .conn
            .prepare_cached("SELECT body FROM events WHERE run_id = ?1 ORDER BY seq")
            .and_then(|mut st| st.query_map([run_id], |row| row.get(0))?.collect())
            .map_err(|e| db_err(&self.path, &op, e))?;
        if bodies.is_empty() && !self.run_exists(run_id)? {
            return Err(StoreError::NotFound(run_id.to_owned()));
        }
        bodies
            .iter()
            .map(|b| serde_json::from_str(b).map_err(|e| json_err(&self.path, &op, e)))
            .collect()
    }

    /// The run's model calls in the order they were journaled.
    pub fn model_calls(&self, run_id: &str) -> Result<Vec<ModelCallRecord>, StoreError> {
        let op = format!("read model calls of run {run_id}");
        let bodies: Vec<String> = self
            .conn
            .prepare_cached("SELECT body FROM model_calls WHERE run_id = ?1 ORDER BY seq")
            .and_then(|mut st| st.query_map([run_id], |row| row.get(0))?.collect())
            .map_err(|e| db_err(&self.path, &op, e))?;
        bodies
            .iter()
            .map(|b| serde_json::from_str(b).map_err(|e| json_err(&self.path, &op, e)))
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
        write::approval(&self.conn, &rec)
            .map_err(|e| db_err(&self.path, &format!("approve step {step} of run {run_id}"), e))
    }

    /// Writes a consistent copy of the whole journal to `path` (which must not exist): what
    /// `pev eval --record` keeps beside a scenario. Safe while another process writes.
    pub fn copy_to(&self, path: &Path) -> Result<(), StoreError> {
        let target = path.to_str().ok_or_else(|| StoreError::Invalid {
            path: path.to_path_buf(),
            message: "the path is not UTF-8".to_owned(),
        })?;
        self.conn
            .execute("VACUUM INTO ?1", [target])
            .map(|_| ())
            .map_err(|e| db_err(&self.path, &format!("copy the journal to {target}"), e))
    }

    /// The bytes blob `sha256` takes in the journal (deflated or not), 0 when absent.
    pub fn stored_bytes(&self, sha256: &str) -> Result<usize, StoreError> {
        self.conn
            .prepare_cached("SELECT LENGTH(content) FROM blobs WHERE sha256 = ?1")
            .and_then(|mut st| st.query_row([sha256], |row| row.get::<_, i64>(0)).optional())
            .map(|n| n.map_or(0, |n| usize::try_from(n).unwrap_or(0)))
            .map_err(|e| db_err(&self.path, "read blob size", e))
    }

    /// The content stored under `sha256`, if any.
    pub fn blob(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let row: Option<(Vec<u8>, Option<String>)> = self
            .conn
            .prepare_cached("SELECT content, encoding FROM blobs WHERE sha256 = ?1")
            .and_then(|mut st| {
                st.query_row([sha256], |row| Ok((row.get(0)?, row.get(1)?))).optional()
            })
            .map_err(|e| db_err(&self.path, "read blob", e))?;
        row.map(|(content, encoding)| {
            crate::blob::decode(content, encoding.as_deref()).map_err(|message| {
                StoreError::Invalid {
                    path: self.path.clone(),
                    message: format!("blob {sha256}: {message}"),
                }
            })
        })
        .transpose()
    }

    /// SQLite's `PRAGMA integrity_check`: `"ok"` when intact, else its findings, one per line.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        let lines: Vec<String> = self
            .conn
            .prepare("PRAGMA integrity_check")
            .and_then(|mut st| st.query_map([], |row| row.get(0))?.collect())
            .map_err(|e| db_err(&self.path, "integrity check", e))?;
        Ok(lines.join("\n"))
    }

    fn run_exists(&self, run_id: &str) -> Result<bool, StoreError> {
        write::run_exists(&self.conn, run_id).map_err(|e| db_err(&self.path, "look up run", e))
    }
}

fn summary(row: &Row<'_>) -> rusqlite::Result<RunSummary> {
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
        parent: row.get::<_, Option<String>>(8)?.filter(|p| !p.is_empty()),
        parent_step: row.get::<_, Option<String>>(9)?.filter(|p| !p.is_empty()),
    })
}
