//! pev's journal: a SQLite file (`.pev/pev.db` in the workspace) holding every run's plan
//! versions, append-only events, step states, tool calls with their outputs, file hashes, the
//! blobs diffs are drawn from, mutations and approvals. It is what `pev runs` and `pev show`
//! print and what `pev resume` replays after a crash.
//!
//! Two sides: [`Store`], one connection for the CLI's reads and small writes, and [`Journal`], a
//! writer thread a running engine feeds with [`Record`]s and that commits them in groups. The
//! file is in WAL mode with `synchronous=FULL`, so a `Store` in another process can read while a
//! `Journal` writes, and a committed record survives `kill -9` and power loss alike.

mod blob;
mod chain;
mod db;
mod error;
mod gc;
mod journal;
mod key;
mod lease;
#[cfg(feature = "postgres")]
mod pg;
#[cfg(feature = "postgres")]
mod pg_tls;
#[cfg(feature = "postgres")]
mod pg_tls_conn;
mod read;
pub mod recording;
mod records;
mod schema;
mod store;
mod verify;
mod watch;
mod write;
mod write_pg;
mod write_values;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub use chain::Integrity;
pub use db::{DbError, Location};
pub use error::StoreError;
pub use gc::{GcOptions, GcReport};
pub use journal::{FAULT_ABORT_AFTER_COMMITS_ENV, Journal, LINGER, MAX_BATCH};
pub use key::{CreateKey, JournalKey, KEY_FILE_ENV, Keying, key_file, load_key};
pub use lease::{Lease, LeaseError};
pub use records::{
    ApprovalRecord, FileHashRecord, HashPhase, ModelCallRecord, MutationRecord, NewRun, Record,
    RequestRef, RunOptions, RunRecord, RunSummary, StepState, ToolCallEnd, ToolCallRecord,
    ToolCallStart, ToolCallStatus, rerun_approval_key, step_status_str,
};
pub use store::{Guard, KindCount, Store};
pub use watch::Watch;

/// The journal's default place: `workspace/.pev/pev.db`.
pub fn default_path(workspace: &Path) -> PathBuf {
    workspace.join(".pev").join("pev.db")
}

/// A new run id: the UTC time to the second and six random hex digits,
/// `20261121-142233-3fa9c1`. Ids sort by creation time to the second.
pub fn new_run_id() -> String {
    let now = SystemTime::now();
    let stamp = pev_protocol::event::rfc3339(now);
    // `2026-11-21T14:22:33.123Z` -> digits `20261121142233123`.
    let digits: String = stamp.chars().filter(char::is_ascii_digit).collect();
    let date = digits.get(0..8).unwrap_or("00000000");
    let time = digits.get(8..14).unwrap_or("000000");
    format!("{date}-{time}-{:06x}", random24(now))
}

/// 24 random bits. `RandomState` is seeded from the OS once per process; the clock, the process
/// id and a counter make two ids of one process (or of two processes started together) differ.
fn random24(now: SystemTime) -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u128(now.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish() & 0x00ff_ffff
}

#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;
