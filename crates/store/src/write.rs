//! Writing one [`Record`] into the journal's tables, inside a transaction the caller owns (the
//! writer thread's group commit, or a [`crate::Store`] method's own).
//!
//! On SQLite every statement goes through `prepare_cached`, so a batch of thousands of records
//! parses each SQL text once per connection; on Postgres the writes wait for the end of the
//! batch and go many rows to a statement (`write_pg.rs`). A record that contradicts the
//! journal (the end of a call that never started, a status for an unknown run) is an error,
//! not a silent no-op: the journal is what resume trusts.

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
use crate::write_pg::{FLUSH_BYTES, Fold, Pending, Shape, Update};
use crate::write_values::{
    APPROVALS, BLOBS, EVENTS, FILE_HASHES, MODEL_CALLS, MUTATIONS, PLAN_VERSIONS, STEP_STATES,
    TOOL_CALLS, WriteError, mac_of, opt_json, param_of, to_json, value_of, with_mac,
};

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
/// carried forward, the tool calls started in it (a call's end MACs the whole row, and on
/// Postgres may be written with its start), and the events, inserted many rows to a statement
/// by [`Batch::finish`]. The transaction is the runs' only writer while it lasts (SQLite's
/// write lock; the run rows the chain head's read locks on Postgres), so what was read stays
/// true.
pub(crate) struct Batch {
    /// This writer's key (see `key.rs`).
    keying: Keying,
    /// Each run's row as it stands in the transaction, and the key its rows are MACed with.
    runs: HashMap<String, RunState>,
    /// The columns of the tool calls started in this batch (keyed by run and call), for the
    /// MAC of their end (and, on Postgres, to write the end with its start).
    calls: HashMap<(String, String), Vec<Value>>,
    model_seq: HashMap<String, u64>,
    mutation_seq: HashMap<String, u64>,
    events: Vec<EventRow>,
    /// On Postgres, the writes themselves wait for [`Batch::finish`] too (or until they pass
    /// [`FLUSH_BYTES`]), and go in one round trip, each statement with its values inlined.
    pending: Pending,
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
            pending: Pending::default(),
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
        if self.pending.bytes() > FLUSH_BYTES {
            self.pending.flush(conn, path)?;
        }
        Ok(())
    }

    /// Inserts a row of `shape` now (SQLite) or queues it for [`Batch::finish`] (Postgres).
    pub(crate) fn insert(
        &mut self,
        conn: &mut Conn,
        shape: &'static Shape,
        params: &[Param<'_>],
    ) -> Result<(), DbError> {
        match conn.dialect() {
            crate::db::Dialect::Sqlite => conn.exec(shape.one(), params).map(|_| ()),
            crate::db::Dialect::Postgres => self.pending.row(shape, params, self.label.clone()),
        }
    }

    /// Runs `update` now (SQLite: the number of rows it changed) or, on Postgres, queues it for
    /// [`Batch::finish`] (`None`).
    pub(crate) fn update(
        &mut self,
        conn: &mut Conn,
        update: Update<'_>,
    ) -> Result<Option<u64>, DbError> {
        match conn.dialect() {
            crate::db::Dialect::Sqlite => conn.exec(update.sql, update.params).map(Some),
            crate::db::Dialect::Postgres => {
                self.pending.statement(update, self.label.clone())?;
                Ok(None)
            }
        }
    }

    /// Inserts the queued events, records each run's new chain head and (Postgres) sends the
    /// queued writes.
    pub(crate) fn finish(&mut self, conn: &mut Conn, path: &Location) -> Result<(), StoreError> {
        let events = std::mem::take(&mut self.events);
        if conn.dialect() == crate::db::Dialect::Postgres {
            // One row each: `write_pg.rs` puts them many to a statement.
            for e in &events {
                let op = || format!("write event of run {}", e.run_id);
                self.pending
                    .row(&EVENTS, &event_params(e), op())
                    .map_err(|err| db_err(path, &op(), err))?;
            }
        }
        let mut rest: &[EventRow] = match conn.dialect() {
            crate::db::Dialect::Sqlite => &events,
            crate::db::Dialect::Postgres => &[],
        };
        while !rest.is_empty() {
            let n = chunk_len(rest.len());
            let (chunk, tail) = rest.split_at(n);
            let op = || match n {
                1 => format!("write event of run {}", chunk[0].run_id),
                _ => {
                    format!("write event of run {} (one statement of {n} events)", chunk[0].run_id)
                }
            };
            let params: Vec<Param<'_>> = chunk.iter().flat_map(event_params).collect();
            conn.exec(&EVENTS.sql(n), &params).map_err(|err| db_err(path, &op(), err))?;
            rest = tail;
        }
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
            let update = Update {
                table: "runs",
                sql: "UPDATE runs SET status = ?1, updated_at = ?2, result = ?3, chain_head = ?4,
                     mac = ?5 WHERE run_id = ?6",
                params: params![
                    v(RUN_STATUS),
                    v(RUN_UPDATED),
                    v(RUN_RESULT),
                    v(RUN_HEAD),
                    &mac,
                    run
                ],
                must_change: None,
                fold: None,
            };
            self.update(conn, update).map_err(|err| db_err(path, &op, err))?;
        }
        self.pending.flush(conn, path)
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

/// An event's columns, in [`EVENTS`]' order.
fn event_params(e: &EventRow) -> [Param<'_>; 6] {
    [
        Param::from(&e.run_id),
        Param::from(e.seq),
        Param::from(&e.at),
        Param::from(e.kind),
        Param::from(&e.body),
        Param::from(&e.chain),
    ]
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
            batch.insert(conn, &BLOBS, params![sha256, content.as_ref(), encoding]).map_err(sql)?;
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
    b.insert(conn, &MODEL_CALLS, &with_mac(covered, &mac))?;
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
    b.insert(conn, &STEP_STATES, &with_mac(covered, &mac))?;
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
    if key.is_some() || conn.dialect() == crate::db::Dialect::Postgres {
        // Its end, if it comes in this batch, MACs the whole row again (and on Postgres may
        // be written in its place).
        b.calls
            .insert((s.run_id.clone(), s.call_id.clone()), covered.iter().map(value_of).collect());
    }
    b.insert(conn, &TOOL_CALLS, &with_mac(covered, &mac))?;
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
    // The whole row as the end leaves it, for its MAC (and to write it with its start): the
    // start's columns come from this batch, or (a keyed run) from the row, committed earlier
    // (durably for a call with an effect).
    let id = (e.run_id.clone(), e.call_id.clone());
    let started_here = b.calls.remove(&id);
    let here = started_here.is_some();
    let row = match (started_here, &key) {
        (Some(row), _) => Some(row),
        (None, None) => None,
        (None, Some(key)) => {
            let sql = format!(
                "SELECT {}, mac FROM tool_calls WHERE run_id = ?1 AND call_id = ?2",
                cover_columns("tool_calls")
            );
            let Some(r) = conn.query_opt(&sql, params![&e.run_id, &e.call_id])? else {
                return Ok(Some(0));
            };
            let mut row = r.0;
            let stored = row.pop().unwrap_or(Value::Null);
            // Changed since its start was journaled (by the very call it records): re-MACing
            // it would vouch for the change.
            if !crate::chain::still_matches(key, "tool_calls", &row, &stored) {
                return Err(WriteError::Key(format!(
                    "tool call {} of run {} was changed outside pev while it ran (it no longer \
                     matches its MAC): nothing more is written to the run",
                    e.call_id, e.run_id
                )));
            }
            Some(row)
        }
    };
    let mut mac = None;
    let row = match row {
        Some(mut row) => {
            if row.len() <= CALL_DURATION {
                return Ok(Some(0));
            }
            row[CALL_STATUS] = Value::Text(e.status.as_str().to_owned());
            row[CALL_OUTPUT] = output.clone().map_or(Value::Null, Value::Text);
            row[CALL_ERROR] = e.error.clone().map_or(Value::Null, Value::Text);
            row[CALL_ENDED] = Value::Text(e.ended_at.clone());
            row[CALL_DURATION] = value_of(&Param::from(e.duration_ms));
            mac = key.as_ref().map(|k| values_mac(k, "tool_calls", &row));
            Some(row)
        }
        None => None,
    };
    // A start in this batch may still wait to be sent (Postgres): the end is then its values.
    // A duration past BIGINT is not folded, so that the update refuses it as before.
    let whole: Vec<Param<'_>> = match &row {
        Some(row) if here && i64::try_from(e.duration_ms).is_ok() => {
            row.iter().map(param_of).chain([Param::from(&mac)]).collect()
        }
        _ => Vec::new(),
    };
    let fold = (!whole.is_empty()).then_some(Fold { shape: &TOOL_CALLS, row: &whole });
    let update = Update {
        table: "tool_calls",
        sql: "UPDATE tool_calls SET status = ?3, output = ?4, error = ?5, ended_at = ?6,
             duration_ms = ?7, mac = ?8
         WHERE run_id = ?1 AND call_id = ?2",
        params: params![
            &e.run_id,
            &e.call_id,
            e.status.as_str(),
            &output,
            &e.error,
            &e.ended_at,
            &e.duration_ms,
            &mac
        ],
        must_change: Some(never_started),
        fold,
    };
    let changed = b.update(conn, update)?;
    if let Some(row) = row {
        b.calls.insert(id, row);
    }
    Ok(changed)
}

fn file_hash(conn: &mut Conn, b: &mut Batch, h: &FileHashRecord) -> Result<(), WriteError> {
    let key = b.key_of(conn, &h.run_id)?;
    let covered =
        params![&h.run_id, &h.step_id, &h.path, h.phase.as_str(), &h.sha256, &h.bytes, &h.at];
    let mac = mac_of(key.as_ref(), "file_hashes", covered);
    b.insert(conn, &FILE_HASHES, &with_mac(covered, &mac))?;
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
    b.insert(conn, &MUTATIONS, &with_mac(covered, &mac))?;
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
    b.insert(conn, &PLAN_VERSIONS, &with_mac(covered, &mac))?;
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
    b.insert(conn, &APPROVALS, &with_mac(covered, &mac))?;
    Ok(())
}

/// Whether the run exists.
pub(crate) fn run_exists(conn: &mut Conn, run_id: &str) -> Result<bool, DbError> {
    Ok(conn.query_opt("SELECT 1 FROM runs WHERE run_id = ?1", params![run_id])?.is_some())
}
