//! Retention (`pev gc --older-than …`): the runs last updated before a cutoff are deleted with
//! everything recorded about them (events, plans, step states, tool and model calls, hashes,
//! mutations, approvals) and their child runs, in one transaction; then the blobs those runs
//! referred to that nothing left refers to.
//!
//! Kept whatever their age: a run still `running` (under way, or crashed and resumable), one a
//! resume may still finish (stopped by a person, by its budget, or waiting for an approval), a
//! run the caller names (another process holds it), and a child whose parent stays. What refers
//! to a blob is found conservatively: its hash anywhere in a remaining row (a mutation's or a
//! call's hash column, a model call's request, an event's workspace snapshot). A journal writer
//! commits a blob in the transaction of the row that names it (`journal.rs`), so a blob no
//! committed row names is nobody's, whatever is being driven meanwhile: collection needs no
//! quiet journal, only that no writer adds or re-adds a blob while it decides (SQLite's write
//! lock; on Postgres a lock on the blob table, which a writer's insert of a blob waits for, and
//! re-inserts a blob gc took after it). A dry run only reads.

use std::collections::HashSet;

use crate::Store;
use crate::db::{Begin, Conn, DbError, Dialect, Location, params};
use crate::error::{StoreError, db_err};

/// What a collection removed (or, dry, would remove).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GcReport {
    /// The runs deleted, children included, oldest first.
    pub runs: Vec<String>,
    /// Blobs of those runs no remaining row refers to.
    pub blobs: u64,
    /// Their stored bytes.
    pub blob_bytes: u64,
    /// Runs older than the cutoff kept: a resume may still finish them, or one is under way.
    pub kept: Vec<String>,
    /// Why no blob was collected, when none was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blobs_skipped: Option<String>,
}

/// What [`Store::gc`] may do.
#[derive(Debug, Clone, Copy, Default)]
pub struct GcOptions<'a> {
    /// Say what would go; change nothing.
    pub dry_run: bool,
    /// Runs to keep whatever their age (another process holds them).
    pub keep: &'a [String],
    /// Delete the blobs the deleted runs leave unreferenced (safe while runs are being
    /// written: a journal commits a blob with the row that names it).
    pub collect_blobs: bool,
}

/// The tables that hold rows of a run.
const RUN_TABLES: [&str; 9] = [
    "events",
    "plan_versions",
    "step_states",
    "tool_calls",
    "file_hashes",
    "mutations",
    "approvals",
    "model_calls",
    "runs",
];

/// Where a run's rows can name a blob: (table, column), every table keyed by `run_id`.
const REFERRING: [(&str, &str); 12] = [
    ("mutations", "before_sha256"),
    ("mutations", "after_sha256"),
    ("tool_calls", "pre_sha256"),
    ("tool_calls", "intended_sha256"),
    ("tool_calls", "output"),
    ("file_hashes", "sha256"),
    ("model_calls", "body"),
    ("events", "body"),
    ("step_states", "output"),
    ("runs", "result"),
    ("runs", "options"),
    ("plan_versions", "plan"),
];

const SKIPPED: &str = "a run older than the cutoff is still being driven";

/// Every 64-hex-digit run of `text` (what a SHA-256 looks like), lower-cased.
pub(crate) fn hashes_in(text: &str, out: &mut HashSet<String>) {
    let bytes = text.as_bytes();
    let mut start = None;
    for (i, b) in bytes.iter().enumerate().chain(std::iter::once((bytes.len(), &b' '))) {
        if b.is_ascii_hexdigit() {
            start.get_or_insert(i);
        } else if let Some(s) = start.take()
            && i - s == 64
        {
            out.insert(text[s..i].to_ascii_lowercase());
        }
    }
}

/// Whether a run a resume may still finish: running (or crashed), waiting for a person,
/// stopped by a person or by its budget.
fn resumable(status: &str, result: Option<&str>) -> bool {
    status == "running"
        || status == "awaiting_approval"
        || result.is_some_and(|r| {
            ["cancelled", "budget_exhausted", "approval_pending"]
                .iter()
                .any(|code| r.contains(&format!("\"code\":\"{code}\"")))
        })
}

impl Store {
    /// Deletes the runs last updated before `cutoff` (RFC 3339, UTC, as the journal writes
    /// times) that no resume may still finish, their child runs, and (with
    /// `collect_blobs`) the blobs they leave unreferenced. Dry, says what would go.
    pub fn gc(&self, cutoff: &str, options: GcOptions<'_>) -> Result<GcReport, StoreError> {
        let job = Job {
            cutoff: cutoff.to_owned(),
            dry_run: options.dry_run,
            keep: options.keep.to_vec(),
            collect_blobs: options.collect_blobs,
        };
        if options.dry_run {
            return collect(&mut self.conn(), self.location(), &job);
        }
        self.writing(move |conn, at| collect(conn, at, &job))
    }
}

/// [`GcOptions`], owned (a collection may run on the journal writer's thread).
struct Job {
    cutoff: String,
    dry_run: bool,
    keep: Vec<String>,
    collect_blobs: bool,
}

fn collect(conn: &mut Conn, at: &Location, options: &Job) -> Result<GcReport, StoreError> {
    let cutoff = options.cutoff.as_str();
    {
        let sql = |e| db_err(at, "collect old runs", e);
        // A real collection takes the write lock at once (no snapshot to lose to a writer
        // between its reads and its deletes); a dry one only reads.
        let mut tx =
            conn.begin(if options.dry_run { Begin::Read } else { Begin::Write }).map_err(sql)?;
        // Postgres does not lock up front: no blob may be added (nor found already there by a
        // writer about to name it) until the collection commits. A writer's transaction that
        // adds a blob and the row naming it either committed before this lock (its row is
        // read below: each statement here sees what committed before it) or waits for it
        // and then re-inserts a blob this took. Leases elsewhere do not matter.
        let collect_blobs = options.collect_blobs;
        if tx.dialect() == Dialect::Postgres && !options.dry_run && collect_blobs {
            tx.batch("LOCK TABLE blobs IN SHARE ROW EXCLUSIVE MODE").map_err(sql)?;
        }
        let query = format!(
            "SELECT run_id, status, result FROM runs
             WHERE updated_at < ?1 AND {} IS NULL
             ORDER BY created_at, rowid",
            tx.dialect().json_text("options", &["parent", "run"])
        );
        let old: Vec<(String, String, Option<String>)> = tx
            .query(&query, params![cutoff])
            .map_err(sql)?
            .iter()
            .map(|r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .collect::<Result<_, DbError>>()
            .map_err(sql)?;
        let all: Vec<String> = tx
            .query("SELECT run_id FROM runs ORDER BY created_at, rowid", &[])
            .map_err(sql)?
            .iter()
            .map(|r| r.get(0))
            .collect::<Result<_, DbError>>()
            .map_err(sql)?;
        let mut report = GcReport::default();
        for (run, status, result) in old {
            if resumable(&status, result.as_deref()) || options.keep.contains(&run) {
                report.kept.push(run);
                continue;
            }
            // The run and its tree (children's ids extend their parent's).
            let prefix = format!("{run}.");
            report
                .runs
                .extend(all.iter().filter(|id| **id == run || id.starts_with(&prefix)).cloned());
        }
        // Only the blobs the deleted runs refer to may go; of those, what a kept row names
        // stays.
        let doomed: HashSet<&str> = report.runs.iter().map(String::as_str).collect();
        let mut candidates: HashSet<String> = HashSet::new();
        let mut referenced: HashSet<String> = HashSet::new();
        if collect_blobs && !doomed.is_empty() {
            for (table, column) in REFERRING {
                let query = format!("SELECT run_id, {column} FROM {table}");
                for mut row in tx.query(&query, &[]).map_err(sql)? {
                    let run: String = row.get(0).map_err(sql)?;
                    if let Some(text) = row.take_text(1).map_err(sql)? {
                        let into = if doomed.contains(run.as_str()) {
                            &mut candidates
                        } else {
                            &mut referenced
                        };
                        hashes_in(&text, into);
                    }
                }
            }
        }
        if !collect_blobs {
            report.blobs_skipped = Some(SKIPPED.to_owned());
        }
        let mut gone: Vec<String> = Vec::new();
        for sha in candidates.difference(&referenced) {
            let bytes: Option<i64> = tx
                .query_value(
                    "SELECT length(content) FROM blobs WHERE lower(sha256) = ?1",
                    params![sha],
                )
                .map_err(sql)?;
            if let Some(bytes) = bytes {
                report.blobs += 1;
                report.blob_bytes += u64::try_from(bytes).unwrap_or(0);
                gone.push(sha.clone());
            }
        }
        if options.dry_run {
            drop(tx);
            return Ok(report);
        }
        for run in &report.runs {
            for table in RUN_TABLES {
                tx.exec(&format!("DELETE FROM {table} WHERE run_id = ?1"), params![run])
                    .map_err(sql)?;
            }
        }
        for sha in &gone {
            tx.exec("DELETE FROM blobs WHERE lower(sha256) = ?1", params![sha]).map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        report.runs.sort_by_key(|r| all.iter().position(|a| a == r));
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_sha256_runs_are_hashes() {
        let a = "a".repeat(64);
        let mut out = HashSet::new();
        hashes_in(&format!("x{a} {} {a}0 \"{}\"", "b".repeat(63), "C".repeat(64)), &mut out);
        assert!(out.contains(&a));
        assert!(out.contains(&"c".repeat(64)));
        assert_eq!(out.len(), 2, "{out:?}");
    }

    #[test]
    fn what_a_resume_may_finish_is_resumable() {
        assert!(resumable("running", None));
        assert!(resumable("awaiting_approval", None));
        assert!(resumable("partial", Some(r#"{"reasons":[{"code":"budget_exhausted"}]}"#)));
        assert!(resumable("partial", Some(r#"{"reasons":[{"code":"cancelled"}]}"#)));
        assert!(!resumable("partial", Some(r#"{"reasons":[{"code":"step_failed"}]}"#)));
        assert!(!resumable("success", None));
    }
}
