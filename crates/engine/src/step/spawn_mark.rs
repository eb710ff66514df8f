//! The durable mark of an exec call's start: `<workspace>/.pev/inflight/<run>/<call>`, written
//! "intent" after the call's intent is journaled and before the tool runs, and "started" once the
//! tool's child process exists (`pev_tools::spawn_mark`). On resume, a call the journal shows
//! started and never ended is one that never started when its mark still says "intent": it can
//! simply run. A mark saying "started", or no mark (another machine drove it, or the mark could
//! not be written), means it may have run. Marks live as long as the run's journal directory.

use std::io::Write;
use std::path::{Path, PathBuf};

/// What a resume can tell about an interrupted exec call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// The call's intent was marked and its process never spawned.
    NotStarted,
    /// Its process spawned, or nothing says it did not.
    MayHaveRun,
}

/// Where the mark of `call_id` in `run_id` lives under the workspace `root`.
pub(crate) fn path(root: &Path, run_id: &str, call_id: &str) -> PathBuf {
    let safe = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' })
            .collect()
    };
    root.join(".pev").join("inflight").join(safe(run_id)).join(safe(call_id))
}

/// Writes `state` to the mark at `path`, durably (the file and its directory synced).
pub(crate) fn write(path: &Path, state: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut file = std::fs::File::create(path)?;
    file.write_all(state.as_bytes())?;
    file.sync_all()?;
    std::fs::File::open(dir)?.sync_all()
}

/// What the mark of `call_id` says.
pub(crate) fn read(root: &Path, run_id: &str, call_id: &str) -> Mark {
    match std::fs::read_to_string(path(root, run_id, call_id)) {
        Ok(state) if state == "intent" => Mark::NotStarted,
        _ => Mark::MayHaveRun,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_says_not_started_only_while_it_says_intent() {
        let root = tempfile::tempdir().unwrap();
        let at = path(root.path(), "r/1", "step#1.0");
        assert!(at.starts_with(root.path().join(".pev/inflight")));
        assert_eq!(at.file_name().unwrap(), "step_1.0");
        assert_eq!(read(root.path(), "r/1", "step#1.0"), Mark::MayHaveRun, "no mark");
        write(&at, "intent").unwrap();
        assert_eq!(read(root.path(), "r/1", "step#1.0"), Mark::NotStarted);
        write(&at, "started").unwrap();
        assert_eq!(read(root.path(), "r/1", "step#1.0"), Mark::MayHaveRun);
    }
}
