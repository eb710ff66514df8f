//! The journal's errors. Each one says which database file it is about (a user with two
//! workspaces must be able to tell which journal is broken) and what the store was doing.
//!
//! The writer thread's errors are sticky: the first failure is kept behind an `Arc` and every
//! later call on any handle of that journal returns it wrapped in [`StoreError::Stopped`], so a
//! record can never be lost silently after an earlier one failed.

use std::sync::Arc;

use crate::db::{DbError, Location};

/// Everything that can go wrong in the journal.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file could not be opened as a journal (not SQLite, unreadable, locked, …).
    #[error("cannot open journal {}: {source}", path)]
    Open { path: Location, source: DbError },
    /// The journal's directory could not be created.
    #[error("cannot create the directory of journal {}: {source}", path)]
    CreateDir { path: Location, source: std::io::Error },
    /// [`crate::Store::open_existing`] on a path that holds no file.
    #[error("cannot open journal {}: {} (no run has been journaled there)", path, missing(path))]
    Missing { path: Location },
    /// The file is an SQLite database, but not one pev wrote.
    #[error("cannot open journal {}: not a pev journal ({reason})", path)]
    NotAJournal { path: Location, reason: String },
    /// A newer pev wrote this journal; this one does not know its layout.
    #[error(
        "cannot open journal {}: its schema version is {found}, but this pev knows only up to \
         {known}; use a newer pev",
        path
    )]
    TooNew { path: Location, found: i64, known: i64 },
    /// An SQL statement failed.
    #[error("journal {}: {op}: {source}", path)]
    Db { path: Location, op: String, source: DbError },
    /// A JSON column could not be written or read back.
    #[error("journal {}: {op}: bad JSON: {source}", path)]
    Json { path: Location, op: String, source: serde_json::Error },
    /// A record contradicts the journal (the end of a tool call that never started, …).
    #[error("journal {}: {message}", path)]
    Invalid { path: Location, message: String },
    /// No run has this id, prefix or alias.
    #[error("{}", not_found_message(.0))]
    NotFound(String),
    /// A prefix matches several runs.
    #[error("{}", ambiguous_message(prefix, candidates))]
    Ambiguous { prefix: String, candidates: Vec<String> },
    /// The writer thread failed earlier; nothing after that failure is written.
    #[error("journal writer stopped: {0}")]
    Stopped(Arc<StoreError>),
    /// The journal key file exists but cannot be used (unreadable, wrong size, readable by
    /// others): never replaced by a new key silently.
    #[error(
        "journal key {}: {problem} (the key is {} or its default, \
         $XDG_CONFIG_HOME/pev/journal.key or ~/.config/pev/journal.key)",
        file.display(),
        crate::key::KEY_FILE_ENV
    )]
    Key { file: std::path::PathBuf, problem: String },
    /// A run's journal was changed outside pev (see [`crate::Store::require_intact`]).
    #[error(
        "run {run_id}'s journal was changed outside pev: {problem}; pev will not act on a \
         record that is not evidence"
    )]
    Tampered { run_id: String, problem: String },
    /// The writer thread is gone (it panicked or the journal was closed).
    #[error("journal {}: the writer thread is gone", path)]
    WriterGone { path: Location },
}

fn missing(at: &Location) -> &'static str {
    if at.is_shared() { "the database holds no pev journal" } else { "no such file" }
}

fn not_found_message(id: &str) -> String {
    match id {
        "last" | "latest" => "no run in the journal yet".to_owned(),
        _ => format!("no run matches {id:?} (`pev runs` lists them)"),
    }
}

/// How many candidates an ambiguity message names before it says "and N more".
const SHOWN_CANDIDATES: usize = 10;

fn ambiguous_message(prefix: &str, candidates: &[String]) -> String {
    let shown: Vec<&str> = candidates.iter().take(SHOWN_CANDIDATES).map(String::as_str).collect();
    let mut msg = format!(
        "run id prefix {prefix:?} is ambiguous: it matches {} runs: {}",
        candidates.len(),
        shown.join(", ")
    );
    if let Some(more) = candidates.len().checked_sub(SHOWN_CANDIDATES).filter(|n| *n > 0) {
        msg.push_str(&format!(" and {more} more"));
    }
    msg
}

/// Shorthand for wrapping a JSON error with the file and the operation.
pub(crate) fn json_err(path: &Location, op: &str, source: serde_json::Error) -> StoreError {
    StoreError::Json { path: path.clone(), op: op.to_owned(), source }
}

pub(crate) use crate::db::db_err;
