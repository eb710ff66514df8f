//! What `--cache` learns while a step runs ([`Trace`]: the step's key, the files it read, the
//! tools it called, why it may not be cached), kept in the step's report; the cache itself
//! (`cache.rs`) reads and writes entries from it.

use pev_protocol::assertion::AssertionResult;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A file (or a directory listing) the step read, and its hash then (`None`: it was absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileRead {
    pub path: String,
    pub sha256: Option<String>,
    /// Set for a `file.list` read: the hash is then of the listing made with these options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listing: Option<ListingRead>,
}

/// The options of a `file.list` call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ListingRead {
    pub recursive: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
}

/// What the cache learns while a step runs.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    /// The step's key, once it was looked up (the cache is on and the step may be cached).
    pub key: Option<String>,
    pub reads: Vec<FileRead>,
    pub tools: Vec<String>,
    /// Why the step's result must not be cached.
    pub uncacheable: Option<String>,
    /// How many of the step's warnings only say an attempt failed and another follows.
    pub retry_warnings: usize,
    /// The step's result came from the cache.
    pub reused: bool,
}

impl Trace {
    pub(crate) fn refuse(&mut self, why: String) {
        self.uncacheable.get_or_insert(why);
    }

    pub(crate) fn note_read(&mut self, read: FileRead) {
        // The first read of a path is what the step found; later ones follow its own changes.
        if !self.reads.iter().any(|r| r.path == read.path && r.listing == read.listing) {
            self.reads.push(read);
        }
    }
}

/// What a step's verified result is made of, and what must still hold for it to be reused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub key: String,
    pub run_id: String,
    pub step_id: String,
    pub output: Option<Value>,
    pub evidence: Vec<String>,
    pub assertions: Vec<AssertionResult>,
    pub reads: Vec<FileRead>,
    pub writes: Vec<FileWrite>,
    /// The tools the step called (checked against approval and the policy when reused).
    pub tools: Vec<String>,
    /// The step's calls counted as goal work (CONTRACTS.md §3).
    pub goal_action: bool,
    pub created_at: String,
}

/// A file the step changed, and its hash when the step ended (`None`: it was absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileWrite {
    pub path: String,
    pub sha256_after: Option<String>,
}
