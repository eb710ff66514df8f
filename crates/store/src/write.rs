//! Writing one [`Record`] into the journal's tables, inside a transaction the caller owns (the
//! writer thread's group commit, or a [`crate::Store`] method's own).
//!
//! Every statement goes through `prepare_cached`, so a batch of thousands of records parses
//! each SQL text once per connection. A record that contradicts the journal (the end of a call
//! that never started, a status for an unknown run) is an error, not a silent no-op: the
//! journal is what resume trusts.

use std::collections::HashMap;
use std::sync::Arc;

use crate::chain::{cover_columns, values_mac};
use crate::db::{Conn, DbError, Location, Param, Value, params};
use crate::error::{StoreError, db_err, json_err};
use crate::key::{JournalKey, Keying};
use crate::records::{
    ApprovalRecord, FileHashRecord, ModelCallRecord, MutationRecord, Record, StepState,
    ToolCallEnd, ToolCallStart, effect_str, step_status_str,
};
use crate::write_values::{WriteError, mac_of, opt_json, param_of, to_json, value_of, with_mac};

/// Writes `rec` (on its own: see [`Batch`] for many in one transaction).
pub(crate) fn apply(
    conn: &mut Conn,
    path: &Location,
    keying: &Keying,
    rec: &Record,
) -> Result<(), StoreError> {
    let mut batch = Batch::new(keying.clone());
    batch.apply(conn, path, rec)?;
    batch.finish(conn, path)
}

/// What a transaction writing many records keeps between them, so that each costs as few
/// statements as it can (a round trip each on a server): each run's row (its chain head, its
/// key id, what its MAC covers) and next model call and mutation numbers, read once and then
/// carried forward, the tool calls started in it (a call's end MACs the whole row), and the
/// events,
/// inserted many rows to a statement by [`Batch::finish`]. The transaction is the runs'
/// only writer while it lasts (SQLite's write lock; the run rows the chain head's read locks on
/// Postgres), so what was read stays true.
pub(crate) struct Batch {
    /// This writer's key (see `key.rs`).
    keying: Keying,
    /// Each run's row as it stands in the transaction, and the key its rows are MACed with.
    runs: HashMap<String, RunState>,
    /// The columns of the tool calls started in this batch (keyed by run and call), for the
    /// MAC of their end.
    calls: HashMap<(String, String), Vec<Value>>,
    model_seq: HashMap<String, u64>,
    mutation_seq: HashMap<String, u64>,
    events: Vec<EventRow>,
    /// On Postgres, the writes themselves wait for [`Batch::finish`] too (or until they pass
    /// [`FLUSH_BYTES`]), and go in one round trip, each statement with its values inlined.
    deferred: Vec<Deferred>,
    deferred_bytes: usize,
    /// What the record being applied is, for the errors of its deferred statements.
    label: String,
}

/// A run's row during a batch.
struct RunState {
    /// The columns `runs.mac` covers, in `chain::COVER`'s order (empty: no such run).
    values: Vec<Value>,
    /// The key its rows are MACed with; `None` for a run journaled without one.
    key: Option<Arc<JournalKey>>,
    /// Whether the row changed (its head or status) and is written at the end.
    dirty: bool,
}

/// Indexes into `RunState::values`.
const RUN_STATUS: usize = 3;
const RUN_UPDATED: usize = 5;
const RUN_RESULT: usize = 7;
const RUN_HEAD: usize = 8;
const RUN_KEY_ID: usize = 9;

/// A statement waiting to be sent.
struct Deferred {
    sql: String,
    /// The error when it changes no row (an UPDATE of something that must exist).
    must_change: Option<String>,
    /// The record it writes ("write step_state of run R"), for an error.
    label: String,
}

/// Deferred statements are sent once they hold this much text, in the same transaction: a
/// batch of large file snapshots must not become one message of hundreds of megabytes.
const FLUSH_BYTES: usize = 8 << 20;

/// An event ready to insert.
struct EventRow {
    run_id: String,
    seq: u64,
    at: String,
    kind: &'static str,
    body: String,
    chain: String,
}

/// The most events one INSERT holds; a batch's events go in chunks of 64, 32, …, 1 rows, so
/// a connection prepares at most seven shapes of the statement.
const EVENT_CHUNK: usize = 64;

impl Batch {
    pub(crate) fn new(keying: Keying) -> Batch {
        Batch {
            keying,
            runs: HashMap::new(),
            calls: HashMap::new(),
            model_seq: HashMap::new(),
            mutation_seq: HashMap::new(),
            events: Vec::new(),
            deferred: Vec::new(),
            deferred_bytes: 0,
            label: String::new(),
        }
    }

    /// The run's row and key, read at its first record of the batch (and locked until the
    /// transaction ends, on Postgres). A run journaled with a key other than this writer's is
    /// refused: rows MACed with another key would read as forged.
    fn run(&mut self, conn: &mut Conn, run_id: &str) -> Result<&mut RunState, WriteError> {
        if !self.runs.contains_key(run_id) {
            let (values, mac) =
                crate::chain::read_run(conn, run_id)?.unwrap_or((Vec::new(), Value::Null));
            let key = match values.get(RUN_KEY_ID) {
                None | Some(Value::Null) => None,
                Some(Value::Text(id)) if id.is_empty() => None,
                Some(Value::Text(id)) => match &self.keying {
                    Keying::Keyed(k) if k.id() == id => Some(Arc::clone(k)),
                    Keying::Keyed(k) => {
                        return Err(WriteError::Key(format!(
                            "run {run_id} was journaled with another journal key (id {id}); \
                             this machine's key is {} ({}): set {} to the key it was \
                             journaled with",
                            k.id(),
                            k.file().display(),
                            crate::key::KEY_FILE_ENV
                        )));
                    }
                    Keying::Unkeyed { why } => {
                        return Err(WriteError::Key(format!(
                            "run {run_id} was journaled with journal key id {id}, and here \
                             there is {why}: set {} to the key it was journaled with",
                            crate::key::KEY_FILE_ENV
                        )));
                    }
                },
                Some(other) => {
                    return Err(WriteError::Key(format!(
                        "run {run_id}'s key id is not text: {other:?}"
                    )));
                }
            };
            if let Some(k) = &key
                && !crate::chain::still_matches(k, "runs", &values, &mac)
            {
                return Err(WriteError::Key(format!(
                    "run {run_id}'s row was changed outside pev (it no longer matches its MAC): \
                     nothing more is written to it; `pev show {run_id}` names what changed"
                )));
            }
            self.runs.insert(run_id.to_owned(), RunState { values, key, dirty: false });
        }
        match self.runs.get_mut(run_id) {
            Some(state) => Ok(state),
            None => unreachable!("inserted above"),
        }
    }

    /// The key `run_id`'s rows are MACed with (`None`: written without MACs).
    fn key_of(
        &mut self,
        conn: &mut Conn,
        run_id: &str,
    ) -> Result<Option<Arc<JournalKey>>, WriteError> {
        Ok(self.run(conn, run_id)?.key.clone())
    }

    /// Writes `rec`, or (an event) queues it for [`Batch::finish`]. Errors name the record's
    /// kind and run.
    pub(crate) fn apply(
        &mut self,
        conn: &mut Conn,
        path: &Location,
        rec: &Record,
    ) -> Result<(), StoreError> {
        if let Record::Event(e) = rec {
            let op = || format!("write {} of run {}", rec.kind(), e.run_id);
            let body = serde_json::to_string(e).map_err(|err| json_err(path, &op(), err))?;
            let state = self.run(conn, &e.run_id).map_err(|err| err.into_store(path, &op()))?;
            let prev = match state.values.get(RUN_HEAD) {
                Some(Value::Text(head)) => head.as_str(),
                _ => "",
            };
            let key = state.key.as_deref();
            let cols =
                crate::chain::EventCols { seq: e.seq, at: &e.at, kind: e.body.name(), body: &body };
            let chain = crate::chain::link(key, &e.run_id, prev, &cols);
            if let Some(head) = state.values.get_mut(RUN_HEAD) {
                *head = Value::Text(chain.clone());
                state.dirty = true;
            }
            self.events.push(EventRow {
                run_id: e.run_id.clone(),
                seq: e.seq,
                at: e.at.clone(),
                kind: e.body.name(),
                body,
                chain,
            });
            return Ok(());
        }
        self.label = match rec.run_id() {
            Some(run) => format!("write {} of run {run}", rec.kind()),
            None => format!("write {}", rec.kind()),
        };
        apply_one(conn, path, rec, self)?;
        if self.deferred_bytes > FLUSH_BYTES {
            self.flush(conn, path)?;
        }
        Ok(())
    }

    /// Runs a write now (SQLite: the number of rows it changed) or, on Postgres, queues it for
    /// [`Batch::finish`] (`None`). `must_change`: the error when it changes no row.
    pub(crate) fn exec(
        &mut self,
        conn: &mut Conn,
        sql: &str,
        params: &[Param<'_>],
        must_change: Option<String>,
    ) -> Result<Option<u64>, DbError> {
        match conn.dialect() {
            crate::db::Dialect::Sqlite => conn.exec(sql, params).map(Some),
            crate::db::Dialect::Postgres => {
                let sql = crate::db::inline(sql, params)?;
                self.deferred_bytes += sql.len();
                self.deferred.push(Deferred { sql, must_change, label: self.label.clone() });
                Ok(None)
            }
        }
    }

    /// Inserts the queued events, records each run's new chain head and (Postgres) sends the
    /// queued writes.
    pub(crate) fn finish(&mut self, conn: &mut Conn, path: &Location) -> Result<(), StoreError> {
        let mut rest: &[EventRow] = &self.events;
        while !rest.is_empty() {
            let n = chunk_len(rest.len());
            let (chunk, tail) = rest.split_at(n);
            let op = || match n {
                1 => format!("write event of run {}", chunk[0].run_id),
                _ => {
                    format!("write event of run {} (one statement of {n} events)", chunk[0].run_id)
                }
            };
            let mut params = Vec::with_capacity(n * 6);
            for e in chunk {
                params.extend([
                    Param::from(&e.run_id),
                    Param::from(e.seq),
                    Param::from(&e.at),
                    Param::from(e.kind),
                    Param::from(&e.body),
                    Param::from(&e.chain),
                ]);
            }
            let sql = events_insert(n);
            let queued = match conn.dialect() {
                crate::db::Dialect::Sqlite => conn.exec(&sql, &params).map(|_| ()),
                crate::db::Dialect::Postgres => crate::db::inline(&sql, &params).map(|sql| {
                    self.deferred.push(Deferred { sql, must_change: None, label: op() })
                }),
            };
            queued.map_err(|err| db_err(path, &op(), err))?;
            rest = tail;
        }
        self.events.clear();
        // Each changed run's row once: its head and status, and its MAC over all of it.
        let mut runs: Vec<(String, RunState)> =
            self.runs.drain().filter(|(_, r)| r.dirty && !r.values.is_empty()).collect();
        runs.sort_by(|a, b| a.0.cmp(&b.0));
        self.calls.clear();
        for (run, state) in &runs {
            let op = format!("write the row of run {run}");
            self.label = op.clone();
            let mac = state.key.as_ref().map(|k| values_mac(k, "runs", &state.values));
            let v = |i: usize| state.values.get(i).map_or(Param::Null, param_of);
            self.exec(
                conn,
                "UPDATE runs SET status = ?1, updated_at = ?2, result = ?3, chain_head = ?4,
                     mac = ?5 WHERE run_id = ?6",
                params![v(RUN_STATUS), v(RUN_UPDATED), v(RUN_RESULT), v(RUN_HEAD), &mac, run],
                None,
            )
            .map_err(|err| db_err(path, &op, err))?;
        }
        self.flush(conn, path)
    }

    /// Sends the deferred statements (Postgres) in one round trip, behind a savepoint: if one
    /// fails, they are run again one at a time to name the record whose statement failed (the
    /// transaction fails either way). Always inside the caller's transaction.
    fn flush(&mut self, conn: &mut Conn, path: &Location) -> Result<(), StoreError> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        let deferred = std::mem::take(&mut self.deferred);
        self.deferred_bytes = 0;
        let mut script = String::from("SAVEPOINT pev_batch");
        for d in &deferred {
            script.push_str(";\n");
            script.push_str(&d.sql);
        }
        let counts = match conn.exec_script(&script) {
            Ok(counts) => counts,
            Err(first) => {
                if conn.batch("ROLLBACK TO SAVEPOINT pev_batch").is_ok() {
                    for d in &deferred {
                        conn.batch(&d.sql).map_err(|e| db_err(path, &d.label, e))?;
                    }
                }
                return Err(db_err(path, &format!("write {} records", deferred.len()), first));
            }
        };
        // The savepoint's own answer comes first.
        let counts = counts.get(1..).unwrap_or_default();
        if counts.len() != deferred.len() {
            return Err(StoreError::Invalid {
                path: path.clone(),
                message: format!(
                    "the server answered {} of {} statements of a journal write",
                    counts.len(),
                    deferred.len()
                ),
            });
        }
        for (d, count) in deferred.iter().zip(counts) {
            if let Some(message) = &d.must_change
                && *count == 0
            {
                return Err(StoreError::Invalid { path: path.clone(), message: message.clone() });
            }
        }
        Ok(())
    }
}

/// The largest power of two not above `left`, at most [`EVENT_CHUNK`].
fn chunk_len(left: usize) -> usize {
    let mut n = EVENT_CHUNK;
    while n > left {
        n /= 2;
    }
    n
}

/// `INSERT INTO events … VALUES (…), (…)` for `rows` rows.
fn events_insert(rows: usize) -> String {
    let mut sql = String::from("INSERT INTO events (run_id, seq, at, kind, body, chain) VALUES ");
    for r in 0..rows {
        let b = r * 6;
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!(
            "(?{}, ?{}, ?{}, ?{}, ?{}, ?{})",
            b + 1,
            b + 2,
            b + 3,
            b + 4,
            b + 5,
            b + 6
        ));
    }
    sql
}

/// Writes a record other than an event.
fn apply_one(
    conn: &mut Conn,
    path: &Location,
    rec: &Record,
    batch: &mut Batch,
) -> Result<(), StoreError> {
    let op = || match rec.run_id() {
        Some(run) => format!("write {} of run {run}", rec.kind()),
        None => format!("write {}", rec.kind()),
    };
    let sql = |e: DbError| db_err(path, &op(), e);
    let json = |e: serde_json::Error| json_err(path, &op(), e);
    match rec {
        Record::Event(_) => return batch.apply(conn, path, rec),
        Record::StepState(s) => {
            step_state(conn, batch, s).map_err(|e| e.into_store(path, &op()))?
        }
        Record::ToolCallStarted(s) => {
            tool_call_start(conn, batch, s).map_err(|e| e.into_store(path, &op()))?
        }
        Record::ToolCallFinished(e) => {
            let message = format!(
                "{}: tool call {:?} of run {} was never recorded as started",
                op(),
                e.call_id,
                e.run_id
            );
            let changed = tool_call_end(conn, batch, e, message.clone())
                .map_err(|e| e.into_store(path, &op()))?;
            if changed == Some(0) {
                return Err(StoreError::Invalid { path: path.clone(), message });
            }
        }
        Record::FileHash(h) => file_hash(conn, batch, h).map_err(|e| e.into_store(path, &op()))?,
        Record::Blob { sha256, content } => {
            let (content, encoding) = crate::blob::encode(content);
            batch
                .exec(
                    conn,
                    "INSERT INTO blobs (sha256, content, encoding) VALUES (?1, ?2, ?3)
                     ON CONFLICT (sha256) DO NOTHING",
                    params![sha256, content.as_ref(), encoding],
                    None,
                )
                .map_err(sql)?;
        }
        Record::Mutation(m) => mutation(conn, batch, m).map_err(|e| e.into_store(path, &op()))?,
        Record::RunStatus { run_id, status, result, updated_at } => {
            let result = result.as_ref().map(serde_json::to_string).transpose().map_err(json)?;
            // Written with the run's MAC when the batch ends.
            let state = batch.run(conn, run_id).map_err(|e| e.into_store(path, &op()))?;
            if state.values.is_empty() {
                let message = format!("{}: no run {run_id:?}", op());
                return Err(StoreError::Invalid { path: path.clone(), message });
            }
            state.values[RUN_STATUS] = Value::Text(status.clone());
            state.values[RUN_UPDATED] = Value::Text(updated_at.clone());
            state.values[RUN_RESULT] = result.map_or(Value::Null, Value::Text);
            state.dirty = true;
        }
        Record::PlanVersion { run_id, version, plan, reason, created_at } => {
            let plan = serde_json::to_string(plan).map_err(json)?;
            let row = PlanRow { run_id, version: *version, plan: &plan, reason, created_at };
            insert_plan_version(conn, batch, &row).map_err(|e| e.into_store(path, &op()))?;
        }
        Record::Approval(a) => approval(conn, batch, a).map_err(|e| e.into_store(path, &op()))?,
        Record::ModelCall(m) => {
            model_call(conn, batch, m).map_err(|e| e.into_store(path, &op()))?
        }
    }
    Ok(())
}

/// Numbers the call after the run's last one unless it comes numbered: the writer is the run's
/// only writer, so the read and the insert cannot race within one transaction.
fn model_call(conn: &mut Conn, b: &mut Batch, m: &ModelCallRecord) -> Result<(), WriteError> {
    let key = b.key_of(conn, &m.run_id)?;
    // The run's next number is read at its first call of the batch (before any of the batch's
    // inserts, which may wait for the end of it) and carried forward past every call.
    let next = match b.model_seq.get(&m.run_id) {
        Some(n) => *n,
        None => conn.query_value(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM model_calls WHERE run_id = ?1",
            params![&m.run_id],
        )?,
    };
    let seq: u64 = if m.seq > 0 { m.seq } else { next };
    b.model_seq.insert(m.run_id.clone(), next.max(seq.saturating_add(1)));
    let mut numbered = m.clone();
    numbered.seq = seq;
    let body = to_json(&numbered)?;
    let covered = params![&m.run_id, seq, &m.role, &m.step_id, &m.started_at, &body];
    let mac = mac_of(key.as_ref(), "model_calls", covered);
    b.exec(
        conn,
        "INSERT INTO model_calls (run_id, seq, role, step_id, started_at, body, mac)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        &with_mac(covered, &mac),
        None,
    )?;
    Ok(())
}

fn step_state(conn: &mut Conn, b: &mut Batch, s: &StepState) -> Result<(), WriteError> {
    let key = b.key_of(conn, &s.run_id)?;
    let output = opt_json(s.output.as_ref())?;
    let assertions = to_json(&s.assertions)?;
    let evidence = to_json(&s.evidence)?;
    let covered = params![
        &s.run_id,
        &s.step_id,
        step_status_str(s.status),
        s.attempts,
        &output,
        &s.error,
        &s.started_at,
        &s.ended_at,
        &assertions,
        &evidence
    ];
    let mac = mac_of(key.as_ref(), "step_states", covered);
    // An upsert keeps the row (and its rowid, which orders `RunRecord::steps`).
    b.exec(
        conn,
        "INSERT INTO step_states (run_id, step_id, status, attempts, output, error, started_at,
             ended_at, assertions, evidence, mac)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT (run_id, step_id) DO UPDATE SET status = excluded.status,
             attempts = excluded.attempts, output = excluded.output, error = excluded.error,
             started_at = excluded.started_at, ended_at = excluded.ended_at,
             assertions = excluded.assertions, evidence = excluded.evidence, mac = excluded.mac",
        &with_mac(covered, &mac),
        None,
    )?;
    Ok(())
}

/// Indexes into a tool call's covered columns (`chain::COVER`).
const CALL_STATUS: usize = 10;
const CALL_OUTPUT: usize = 11;
const CALL_ERROR: usize = 12;
const CALL_ENDED: usize = 14;
const CALL_DURATION: usize = 15;

fn tool_call_start(conn: &mut Conn, b: &mut Batch, s: &ToolCallStart) -> Result<(), WriteError> {
    let key = b.key_of(conn, &s.run_id)?;
    let arguments = to_json(&s.arguments)?;
    let covered = params![
        &s.run_id,
        &s.call_id,
        &s.step_id,
        s.attempt,
        &s.tool,
        effect_str(s.effect),
        &arguments,
        &s.path,
        &s.pre_sha256,
        &s.intended_sha256,
        "started",
        Param::Null,
        Param::Null,
        &s.started_at,
        Param::Null,
        Param::Null
    ];
    let mac = mac_of(key.as_ref(), "tool_calls", covered);
    if key.is_some() {
        // Its end, if it comes in this batch, MACs the whole row again.
        b.calls
            .insert((s.run_id.clone(), s.call_id.clone()), covered.iter().map(value_of).collect());
    }
    b.exec(
        conn,
        "INSERT INTO tool_calls (run_id, call_id, step_id, attempt, tool, effect, arguments, path,
             pre_sha256, intended_sha256, status, started_at, mac)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'started', ?11, ?12)",
        params![
            &s.run_id,
            &s.call_id,
            &s.step_id,
            s.attempt,
            &s.tool,
            effect_str(s.effect),
            &arguments,
            &s.path,
            &s.pre_sha256,
            &s.intended_sha256,
            &s.started_at,
            &mac
        ],
        None,
    )?;
    Ok(())
}

/// Returns how many rows changed (0: the call was never started).
fn tool_call_end(
    conn: &mut Conn,
    b: &mut Batch,
    e: &ToolCallEnd,
    never_started: String,
) -> Result<Option<u64>, WriteError> {
    let key = b.key_of(conn, &e.run_id)?;
    let output = opt_json(e.output.as_ref())?;
    let mac = match &key {
        None => None,
        Some(key) => {
            // The MAC covers the whole row: the start's columns come from this batch, or from
            // the row (committed earlier, durably for a call with an effect).
            let id = (e.run_id.clone(), e.call_id.clone());
            let mut row = match b.calls.remove(&id) {
                Some(row) => row,
                None => {
                    let sql = format!(
                        "SELECT {}, mac FROM tool_calls WHERE run_id = ?1 AND call_id = ?2",
                        cover_columns("tool_calls")
                    );
                    let Some(r) = conn.query_opt(&sql, params![&e.run_id, &e.call_id])? else {
                        return Ok(Some(0));
                    };
                    let mut row = r.0;
                    let stored = row.pop().unwrap_or(Value::Null);
                    // Changed since its start was journaled (by the very call it records):
                    // re-MACing it would vouch for the change.
                    if !crate::chain::still_matches(key, "tool_calls", &row, &stored) {
                        return Err(WriteError::Key(format!(
                            "tool call {} of run {} was changed outside pev while it ran (it \
                             no longer matches its MAC): nothing more is written to the run",
                            e.call_id, e.run_id
                        )));
                    }
                    row
                }
            };
            if row.len() <= CALL_DURATION {
                return Ok(Some(0));
            }
            row[CALL_STATUS] = Value::Text(e.status.as_str().to_owned());
            row[CALL_OUTPUT] = output.clone().map_or(Value::Null, Value::Text);
            row[CALL_ERROR] = e.error.clone().map_or(Value::Null, Value::Text);
            row[CALL_ENDED] = Value::Text(e.ended_at.clone());
            row[CALL_DURATION] = value_of(&Param::from(e.duration_ms));
            let mac = values_mac(key, "tool_calls", &row);
            b.calls.insert(id, row);
            Some(mac)
        }
    };
    Ok(b.exec(
        conn,
        "UPDATE tool_calls SET status = ?3, output = ?4, error = ?5, ended_at = ?6,
             duration_ms = ?7, mac = ?8
         WHERE run_id = ?1 AND call_id = ?2",
        params![
            &e.run_id,
            &e.call_id,
            e.status.as_str(),
            &output,
            &e.error,
            &e.ended_at,
            &e.duration_ms,
            &mac
        ],
        Some(never_started),
    )?)
}

fn file_hash(conn: &mut Conn, b: &mut Batch, h: &FileHashRecord) -> Result<(), WriteError> {
    let key = b.key_of(conn, &h.run_id)?;
    let covered =
        params![&h.run_id, &h.step_id, &h.path, h.phase.as_str(), &h.sha256, &h.bytes, &h.at];
    let mac = mac_of(key.as_ref(), "file_hashes", covered);
    b.exec(
        conn,
        "INSERT INTO file_hashes (run_id, step_id, path, phase, sha256, bytes, at, mac)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        &with_mac(covered, &mac),
        None,
    )?;
    Ok(())
}

fn mutation(conn: &mut Conn, b: &mut Batch, m: &MutationRecord) -> Result<(), WriteError> {
    let key = b.key_of(conn, &m.run_id)?;
    // The sequence number orders a run's mutations; the primary key index makes MAX cheap, and
    // a batch reads it once per run.
    let next: u64 = match b.mutation_seq.get(&m.run_id) {
        Some(n) => *n,
        None => conn.query_value(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM mutations WHERE run_id = ?1",
            params![&m.run_id],
        )?,
    };
    b.mutation_seq.insert(m.run_id.clone(), next + 1);
    let f = &m.mutation;
    let covered = params![
        &m.run_id,
        next,
        &m.step_id,
        &f.path,
        f.bytes_before,
        f.bytes_after,
        f.lines_added,
        f.lines_removed,
        f.no_op,
        &m.before_sha256,
        &m.after_sha256
    ];
    let mac = mac_of(key.as_ref(), "mutations", covered);
    b.exec(
        conn,
        "INSERT INTO mutations (run_id, seq, step_id, path, bytes_before, bytes_after,
             lines_added, lines_removed, no_op, before_sha256, after_sha256, mac)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        &with_mac(covered, &mac),
        None,
    )?;
    Ok(())
}

/// A `plan_versions` row, with the plan already serialized.
pub(crate) struct PlanRow<'a> {
    pub run_id: &'a str,
    pub version: u32,
    pub plan: &'a str,
    pub reason: &'a str,
    pub created_at: &'a str,
}

pub(crate) fn insert_plan_version(
    conn: &mut Conn,
    b: &mut Batch,
    r: &PlanRow<'_>,
) -> Result<(), WriteError> {
    let key = b.key_of(conn, r.run_id)?;
    let covered = params![r.run_id, r.version, r.plan, r.reason, r.created_at];
    let mac = mac_of(key.as_ref(), "plan_versions", covered);
    b.exec(
        conn,
        "INSERT INTO plan_versions (run_id, version, plan, reason, created_at, mac)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        &with_mac(covered, &mac),
        None,
    )?;
    Ok(())
}

/// Inserts an approval; a step approved already keeps its first approval.
pub(crate) fn approval(
    conn: &mut Conn,
    b: &mut Batch,
    a: &ApprovalRecord,
) -> Result<(), WriteError> {
    let key = b.key_of(conn, &a.run_id)?;
    let covered = params![&a.run_id, &a.step_id, &a.by, &a.at];
    let mac = mac_of(key.as_ref(), "approvals", covered);
    b.exec(
        conn,
        "INSERT INTO approvals (run_id, step_id, \"by\", at, mac) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (run_id, step_id) DO NOTHING",
        &with_mac(covered, &mac),
        None,
    )?;
    Ok(())
}

/// Whether the run exists.
pub(crate) fn run_exists(conn: &mut Conn, run_id: &str) -> Result<bool, DbError> {
    Ok(conn.query_opt("SELECT 1 FROM runs WHERE run_id = ?1", params![run_id])?.is_some())
}
