//! Durable marks of model calls in flight under a dollar or token ceiling (issue 31): a call's
//! worst case, written to `<workspace>/.pev/inflight/<run>/model-call-<pid>-<n>.json` (synced)
//! before the call is sent and removed once it is settled. A process killed while a call is in
//! flight leaves its mark; the provider may have billed that call, and nothing else says so (a
//! call is journaled when it is answered). `pev resume` turns each mark left into a journaled
//! call that failed `cut_off` and is charged its worst case ([`settle_left`]), so a ceiling holds
//! over any number of kills and resumes: the run's spend is the sum of its journaled calls.
//!
//! Marks are local files: a run driven from another machine (a shared journal) leaves its marks
//! there.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use pev_store::{ModelCallRecord, Record, Store};
use serde::{Deserialize, Serialize};

/// The name every mark of a model call starts with (the rest of the run's directory holds the
/// start marks of commands, `step::spawn_mark`).
const PREFIX: &str = "model-call-";

/// The worst case of one call in flight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallMark {
    pub role: String,
    pub model: String,
    #[serde(default)]
    pub step: Option<String>,
    #[serde(default)]
    pub attempt: Option<u32>,
    /// The run the call was made for (a child run's call is marked in its root run's directory).
    #[serde(default)]
    pub run_id: Option<String>,
    pub input_tokens: u64,
    pub max_output: u64,
    pub usd: f64,
    pub at: String,
}

/// Where a run's calls in flight are marked.
#[derive(Debug)]
pub struct CallMarks {
    dir: PathBuf,
    next: AtomicU64,
}

impl CallMarks {
    /// The marks of run `run_id` in the workspace `root`.
    pub fn new(root: &Path, run_id: &str) -> Self {
        Self { dir: dir(root, run_id), next: AtomicU64::new(0) }
    }

    /// Marks `mark` durably (the file and its directory synced); the mark's path, to remove it.
    pub fn put(&self, mark: &CallMark) -> std::io::Result<PathBuf> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{PREFIX}{}-{n}.json", std::process::id()));
        std::fs::create_dir_all(&self.dir)?;
        let mut file = std::fs::File::create(&path)?;
        file.write_all(&serde_json::to_vec(mark).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        std::fs::File::open(&self.dir)?.sync_all()?;
        Ok(path)
    }
}

fn dir(root: &Path, run_id: &str) -> PathBuf {
    let any = crate::step::spawn_mark::path(root, run_id, "x");
    any.parent().map_or_else(|| root.to_path_buf(), Path::to_path_buf)
}

/// Journals each mark a killed session left in run `run_id`'s directory as a call of the run
/// that failed `cut_off`, charged its worst case, then removes the mark. A mark already
/// journaled (a resume killed between the two) is only removed. Returns how many were settled.
pub fn settle_left(root: &Path, store: &Store, run_id: &str) -> Result<usize, String> {
    let dir = dir(root, run_id);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(0) };
    let mut left: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(PREFIX).then(|| (name, e.path()))
        })
        .collect();
    left.sort();
    let mut settled = 0;
    for (name, path) in left {
        let mark: Option<CallMark> =
            std::fs::read(&path).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok());
        // A mark cut off while it was being written: its call was never sent.
        let Some(mark) = mark else {
            let _ = std::fs::remove_file(&path);
            continue;
        };
        let run = mark.run_id.clone().unwrap_or_else(|| run_id.to_owned());
        let journaled = store.model_calls(&run).map_err(|e| e.to_string())?.iter().any(|c| {
            c.error_type.as_deref() == Some("cut_off") && c.response_id.as_deref() == Some(&name)
        });
        if !journaled {
            store
                .write(&Record::ModelCall(Box::new(record(&run, &name, &mark))))
                .map_err(|e| e.to_string())?;
            settled += 1;
        }
        std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(settled)
}

/// The journal's record of a call cut off by a kill: its worst case as its usage.
fn record(run_id: &str, name: &str, mark: &CallMark) -> ModelCallRecord {
    ModelCallRecord {
        run_id: run_id.to_owned(),
        role: mark.role.clone(),
        step_id: mark.step.clone(),
        attempt: mark.attempt,
        provider: "unknown".to_owned(),
        request_model: mark.model.clone(),
        // The mark's name: what tells a journaled mark from one still to journal.
        response_id: Some(name.to_owned()),
        input_tokens: mark.input_tokens,
        output_tokens: mark.max_output,
        cost_usd: Some(mark.usd),
        started_at: mark.at.clone(),
        error_type: Some("cut_off".to_owned()),
        error: Some(
            "pev was stopped while this call was in flight; the provider may have billed it, so \
             it is charged its worst case"
                .to_owned(),
        ),
        ..ModelCallRecord::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(usd: f64) -> CallMark {
        CallMark {
            role: "executor".into(),
            model: "m".into(),
            step: Some("s".into()),
            attempt: Some(1),
            run_id: None,
            input_tokens: 100,
            max_output: 50,
            usd,
            at: "2026-11-27T00:00:00Z".into(),
        }
    }

    #[test]
    fn a_mark_left_is_journaled_once_at_its_worst_case_and_removed() {
        let root = tempfile::tempdir().unwrap();
        let (_, store) = crate::agent::test_clients::journal_with_run(root.path());
        let marks = CallMarks::new(root.path(), "r1");
        let settled_path = marks.put(&mark(0.02)).unwrap();
        marks.put(&mark(0.01)).unwrap();
        // Not a model call's mark: a command's start mark stays.
        crate::step::spawn_mark::write(
            &crate::step::spawn_mark::path(root.path(), "r1", "c1"),
            "started",
        )
        .unwrap();
        // Settled by an earlier resume that was killed before it removed the mark.
        let name = settled_path.file_name().unwrap().to_string_lossy().into_owned();
        store.write(&Record::ModelCall(Box::new(record("r1", &name, &mark(0.02))))).unwrap();

        assert_eq!(settle_left(root.path(), &store, "r1").unwrap(), 1);
        let calls = store.model_calls("r1").unwrap();
        let cost: f64 = calls.iter().filter_map(|c| c.cost_usd).sum();
        assert_eq!((calls.len(), (cost * 100.0).round()), (2, 3.0), "{calls:?}");
        assert!(
            calls
                .iter()
                .all(|c| c.error_type.as_deref() == Some("cut_off") && c.output_tokens == 50)
        );
        assert_eq!(settle_left(root.path(), &store, "r1").unwrap(), 0, "nothing left to settle");
        let left: Vec<_> = std::fs::read_dir(dir(root.path(), "r1"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("c1")]);
    }
}
