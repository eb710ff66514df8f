//! Reading one run back into a [`RunRecord`]: the row of `runs`, its latest plan, and every
//! child table in the order it was written, all from one read transaction so a run being
//! written by a live journal is seen at one instant.
//!
//! A column that does not parse (bad JSON, an unknown status word) is an error naming the run,
//! never a default: `pev resume` decides what to re-execute from these values.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::db::{Begin, Conn, DbError, Location, Row, params};
use crate::error::{StoreError, db_err};
use crate::records::{
    ApprovalRecord, FileHashRecord, HashPhase, MutationRecord, RunRecord, StepState,
    ToolCallRecord, ToolCallStatus, parse_effect, parse_step_status,
};
use pev_protocol::run::FileMutation;

/// Loads everything about `run_id`; [`StoreError::NotFound`] if there is no such run.
pub(crate) fn load_run(
    conn: &mut Conn,
    path: &Location,
    run_id: &str,
) -> Result<RunRecord, StoreError> {
    let op = format!("load run {run_id}");
    let sql = |e| db_err(path, &op, e);
    // A read transaction: one snapshot across all the tables.
    let mut tx = conn.begin(Begin::Read).map_err(sql)?;
    let Some(row) = tx
        .query_opt(
            "SELECT run_id, goal, workspace, status, created_at, updated_at, options, result
             FROM runs WHERE run_id = ?1",
            params![run_id],
        )
        .map_err(sql)?
    else {
        return Err(StoreError::NotFound(run_id.to_owned()));
    };
    let mut rec = run_row(&row).map_err(sql)?;
    if let Some(row) = tx
        .query_opt(
            "SELECT version, plan FROM plan_versions WHERE run_id = ?1
             ORDER BY version DESC LIMIT 1",
            params![run_id],
        )
        .map_err(sql)?
    {
        rec.plan_version = row.get(0).map_err(sql)?;
        rec.plan = json_col(&row, 1).map_err(sql)?;
    }
    rec.steps = all(&mut tx, STEPS, run_id, step_row).map_err(sql)?;
    rec.tool_calls = all(&mut tx, TOOL_CALLS, run_id, tool_call_row).map_err(sql)?;
    rec.file_hashes = all(&mut tx, FILE_HASHES, run_id, file_hash_row).map_err(sql)?;
    rec.mutations = all(&mut tx, MUTATIONS, run_id, mutation_row).map_err(sql)?;
    rec.approvals = all(&mut tx, APPROVALS, run_id, approval_row).map_err(sql)?;
    let max_seq: Option<u64> = tx
        .query_value("SELECT MAX(seq) FROM events WHERE run_id = ?1", params![run_id])
        .map_err(sql)?;
    rec.next_seq = match max_seq {
        None => 0,
        Some(max) => max.checked_add(1).ok_or_else(|| StoreError::Invalid {
            path: path.clone(),
            message: format!("{op}: event sequence number {max} cannot be followed"),
        })?,
    };
    tx.commit().map_err(sql)?;
    Ok(rec)
}

const STEPS: &str = "SELECT run_id, step_id, status, attempts, output, error, started_at,
    ended_at, assertions, evidence FROM step_states WHERE run_id = ?1 ORDER BY rowid";
const TOOL_CALLS: &str = "SELECT run_id, call_id, step_id, attempt, tool, effect, arguments,
    path, pre_sha256, intended_sha256, started_at, status, output, error, ended_at, duration_ms
    FROM tool_calls WHERE run_id = ?1 ORDER BY started_at, rowid";
const FILE_HASHES: &str = "SELECT run_id, step_id, path, phase, sha256, bytes, at
    FROM file_hashes WHERE run_id = ?1 ORDER BY rowid";
const MUTATIONS: &str = "SELECT run_id, step_id, path, bytes_before, bytes_after, lines_added,
    lines_removed, no_op, before_sha256, after_sha256 FROM mutations WHERE run_id = ?1
    ORDER BY seq";
const APPROVALS: &str =
    "SELECT run_id, step_id, \"by\", at FROM approvals WHERE run_id = ?1 ORDER BY at, rowid";

fn all<T>(
    conn: &mut Conn,
    query: &str,
    run_id: &str,
    f: fn(&Row) -> Result<T, DbError>,
) -> Result<Vec<T>, DbError> {
    conn.query(query, params![run_id])?.iter().map(f).collect()
}

/// A column that failed to convert.
fn bad_column(idx: usize, message: String) -> DbError {
    DbError::Column { column: idx, message }
}

/// A JSON text column.
fn json_col<T: DeserializeOwned>(row: &Row, idx: usize) -> Result<T, DbError> {
    let text: String = row.get(idx)?;
    serde_json::from_str(&text).map_err(|e| bad_column(idx, format!("bad JSON: {e}")))
}

/// A nullable JSON text column.
fn opt_json_col<T: DeserializeOwned>(row: &Row, idx: usize) -> Result<Option<T>, DbError> {
    let text: Option<String> = row.get(idx)?;
    text.map(|t| serde_json::from_str(&t).map_err(|e| bad_column(idx, format!("bad JSON: {e}"))))
        .transpose()
}

/// A column holding one of an enumeration's words.
fn word<T>(row: &Row, idx: usize, what: &str, parse: fn(&str) -> Option<T>) -> Result<T, DbError> {
    let text: String = row.get(idx)?;
    parse(&text).ok_or_else(|| bad_column(idx, format!("unknown {what} {text:?}")))
}

/// The `runs` row; the plan and the child tables are filled in by the caller.
fn run_row(row: &Row) -> Result<RunRecord, DbError> {
    Ok(RunRecord {
        run_id: row.get(0)?,
        goal: row.get(1)?,
        workspace: row.get(2)?,
        status: row.get(3)?,
        created_at: row.get(4)?,
        updated_at: row.get(5)?,
        options: json_col(row, 6)?,
        plan: Value::Null,
        plan_version: 0,
        result: opt_json_col(row, 7)?,
        steps: Vec::new(),
        tool_calls: Vec::new(),
        file_hashes: Vec::new(),
        mutations: Vec::new(),
        approvals: Vec::new(),
        next_seq: 0,
    })
}

fn step_row(row: &Row) -> Result<StepState, DbError> {
    Ok(StepState {
        run_id: row.get(0)?,
        step_id: row.get(1)?,
        status: word(row, 2, "step status", parse_step_status)?,
        attempts: row.get(3)?,
        output: opt_json_col(row, 4)?,
        error: row.get(5)?,
        started_at: row.get(6)?,
        ended_at: row.get(7)?,
        assertions: json_col(row, 8)?,
        evidence: json_col(row, 9)?,
    })
}

fn tool_call_row(row: &Row) -> Result<ToolCallRecord, DbError> {
    Ok(ToolCallRecord {
        run_id: row.get(0)?,
        call_id: row.get(1)?,
        step_id: row.get(2)?,
        attempt: row.get(3)?,
        tool: row.get(4)?,
        effect: word(row, 5, "effect", parse_effect)?,
        arguments: json_col(row, 6)?,
        path: row.get(7)?,
        pre_sha256: row.get(8)?,
        intended_sha256: row.get(9)?,
        started_at: row.get(10)?,
        status: word(row, 11, "tool call status", ToolCallStatus::parse)?,
        output: opt_json_col(row, 12)?,
        error: row.get(13)?,
        ended_at: row.get(14)?,
        duration_ms: row.get(15)?,
    })
}

fn file_hash_row(row: &Row) -> Result<FileHashRecord, DbError> {
    Ok(FileHashRecord {
        run_id: row.get(0)?,
        step_id: row.get(1)?,
        path: row.get(2)?,
        phase: word(row, 3, "hash phase", HashPhase::parse)?,
        sha256: row.get(4)?,
        bytes: row.get(5)?,
        at: row.get(6)?,
    })
}

fn mutation_row(row: &Row) -> Result<MutationRecord, DbError> {
    Ok(MutationRecord {
        run_id: row.get(0)?,
        step_id: row.get(1)?,
        mutation: FileMutation {
            path: row.get(2)?,
            bytes_before: row.get(3)?,
            bytes_after: row.get(4)?,
            lines_added: row.get(5)?,
            lines_removed: row.get(6)?,
            no_op: row.get(7)?,
        },
        before_sha256: row.get(8)?,
        after_sha256: row.get(9)?,
    })
}

fn approval_row(row: &Row) -> Result<ApprovalRecord, DbError> {
    Ok(ApprovalRecord {
        run_id: row.get(0)?,
        step_id: row.get(1)?,
        by: row.get(2)?,
        at: row.get(3)?,
    })
}
