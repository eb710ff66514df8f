//! Retention (`pev gc --older-than …`): the runs last updated before a cutoff are deleted with
//! everything recorded about them (events, plans, step states, tool and model calls, hashes,
//! mutations, approvals) and their child runs, in one transaction; then every blob nothing left
//! refers to. A run still `running` is never deleted (it may be under way, or resumable), nor a
//! child whose parent stays. What refers to a blob is found conservatively: its hash anywhere
//! in a remaining row (a mutation's or a call's hash column, a model call's request, an
//! event's workspace snapshot), so no blob a reader could still ask for is lost.

use std::collections::HashSet;

use rusqlite::params;

use crate::Store;
use crate::error::{StoreError, db_err};

/// What a collection removed (or, dry, would remove).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GcReport {
    /// The runs deleted, children included, oldest first.
    pub runs: Vec<String>,
    /// Blobs no remaining row refers to.
    pub blobs: u64,
    /// Their stored bytes.
    pub blob_bytes: u64,
    /// Runs older than the cutoff kept because they are still `running`.
    pub kept_running: Vec<String>,
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

/// Every 64-hex-digit run of `text` (what a SHA-256 looks like).
fn hashes_in(text: &str, out: &mut HashSet<String>) {
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

impl Store {
    /// Deletes the runs last updated before `cutoff` (RFC 3339, UTC, as the journal writes
    /// times) that are not `running`, their child runs, and the blobs then unreferenced. With
    /// `dry_run`, says what would go and changes nothing.
    pub fn gc(&self, cutoff: &str, dry_run: bool) -> Result<GcReport, StoreError> {
        let sql = |e| db_err(self.path(), "collect old runs", e);
        let tx = self.conn.unchecked_transaction().map_err(sql)?;
        let old: Vec<(String, String)> = tx
            .prepare(
                "SELECT run_id, status FROM runs
                 WHERE updated_at < ?1 AND json_extract(options, '$.parent.run') IS NULL
                 ORDER BY created_at, rowid",
            )
            .and_then(|mut st| st.query_map([cutoff], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .map_err(sql)?;
        let mut report = GcReport::default();
        let all: Vec<String> = tx
            .prepare("SELECT run_id FROM runs ORDER BY created_at, rowid")
            .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
            .map_err(sql)?;
        for (run, status) in old {
            if status == "running" {
                report.kept_running.push(run);
                continue;
            }
            // The run and its tree (children's ids extend their parent's).
            let prefix = format!("{run}.");
            report
                .runs
                .extend(all.iter().filter(|id| **id == run || id.starts_with(&prefix)).cloned());
        }
        for run in &report.runs {
            for table in RUN_TABLES {
                tx.execute(&format!("DELETE FROM {table} WHERE run_id = ?1"), params![run])
                    .map_err(sql)?;
            }
        }
        // What the remaining rows refer to.
        let mut referenced: HashSet<String> = HashSet::new();
        let texts = [
            "SELECT before_sha256 FROM mutations UNION ALL SELECT after_sha256 FROM mutations",
            "SELECT pre_sha256 FROM tool_calls UNION ALL SELECT intended_sha256 FROM tool_calls",
            "SELECT sha256 FROM file_hashes",
            "SELECT body FROM model_calls",
            "SELECT body FROM events",
            "SELECT output FROM tool_calls",
            "SELECT output FROM step_states",
            "SELECT result FROM runs",
            "SELECT options FROM runs",
            "SELECT plan FROM plan_versions",
        ];
        for query in texts {
            let mut st = tx.prepare(query).map_err(sql)?;
            let mut rows = st.query([]).map_err(sql)?;
            while let Some(row) = rows.next().map_err(sql)? {
                if let Some(text) = row.get::<_, Option<String>>(0).map_err(sql)? {
                    hashes_in(&text, &mut referenced);
                }
            }
        }
        let blobs: Vec<(String, i64)> = tx
            .prepare("SELECT sha256, length(content) FROM blobs")
            .and_then(|mut st| st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .map_err(sql)?;
        for (sha, bytes) in blobs {
            if referenced.contains(&sha.to_ascii_lowercase()) {
                continue;
            }
            report.blobs += 1;
            report.blob_bytes += u64::try_from(bytes).unwrap_or(0);
            tx.execute("DELETE FROM blobs WHERE sha256 = ?1", params![sha]).map_err(sql)?;
        }
        if dry_run {
            tx.rollback().map_err(sql)?;
        } else {
            tx.commit().map_err(sql)?;
        }
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
}
