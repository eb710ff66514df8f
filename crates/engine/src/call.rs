//! One tool call's data, below everything that makes, checks or settles calls: the call as a
//! step makes it ([`Call`]), the files' states before it ([`Before`]), how it ended
//! ([`CallEnd`]), and what the journal says of an interrupted one ([`Recovery`]).

use std::collections::HashMap;

use pev_protocol::Step;
use pev_protocol::run::FileMutation;
use pev_protocol::tool::Effect;
use pev_store::ToolCallRecord;
use serde_json::Value;

use crate::digest::sha256_hex;
use crate::engine::Engine;

/// Files above this size are hashed but not kept for line counts and diffs.
const MAX_SNAPSHOT_BYTES: usize = 8 * 1024 * 1024;

/// The file a write-effect call changes (its `path` argument), if it names one.
pub(crate) fn target_path(effect: Effect, args: &Value) -> Option<String> {
    if effect != Effect::Write {
        return None;
    }
    args.get("path").and_then(Value::as_str).map(str::to_owned)
}

/// The paths whose state before and after the step is recorded: the file a write changes, the
/// step's `expected_outputs`, and the paths of its `content_changed` assertions.
pub(crate) fn watched_paths(step: &Step, target: Option<&str>) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    let mut add = |p: &str| {
        if !paths.iter().any(|q| q == p) {
            paths.push(p.to_owned());
        }
    };
    if let Some(t) = target {
        add(t);
    }
    for p in &step.expected_outputs {
        add(p);
    }
    for a in &step.assertions {
        if let pev_protocol::Assertion::ContentChanged { path, .. } = a {
            add(path);
        }
    }
    paths
}

/// A file's state: `Some(None)` absent, `Some(Some(bytes))` present, `None` unreadable (outside
/// the sandbox, a directory): not recorded.
pub(crate) fn snapshot(engine: &Engine, path: &str) -> Option<Option<Vec<u8>>> {
    match engine.ctx.workspace.read(path) {
        Ok(bytes) => Some(Some(bytes)),
        Err(pev_tools::SandboxError::NotFound { .. }) => Some(None),
        Err(_) => None,
    }
}

/// The files' states before a call: hashes of all watched paths, content of those small enough
/// to diff (`None` inside: the file did not exist).
pub(crate) struct Before {
    pub hashes: HashMap<String, Option<String>>,
    pub contents: HashMap<String, Option<Vec<u8>>>,
    /// For a command: the workspace's files before it (see `inventory.rs`).
    pub inventory: Option<crate::inventory::Taken>,
    /// The written file's lock (`write_locks`), held from this state to the checks of the
    /// call's result.
    pub lock: Option<crate::write_locks::Held>,
}

impl Before {
    pub(crate) fn take(engine: &Engine, paths: &[String]) -> Self {
        let mut hashes = HashMap::new();
        let mut contents = HashMap::new();
        for path in paths {
            let Some(state) = snapshot(engine, path) else { continue };
            hashes.insert(path.clone(), state.as_deref().map(sha256_hex));
            if state.as_ref().is_none_or(|c| c.len() <= MAX_SNAPSHOT_BYTES) {
                contents.insert(path.clone(), state);
            }
        }
        Self { hashes, contents, inventory: None, lock: None }
    }

    /// `path`'s content before a command, as its inventory kept it (`None`: not there, too
    /// large to keep, or no inventory).
    pub(crate) fn inventoried(&self, path: &str) -> Option<&[u8]> {
        match &self.inventory {
            Some(crate::inventory::Taken::Alone(inventory, _)) => {
                inventory.files.get(path)?.content.as_deref()
            }
            _ => None,
        }
    }
}

/// How a call ended.
pub(crate) struct CallEnd {
    pub output: Result<Value, String>,
    /// The call's end, still to be journaled: with the changes the call made, in one commit
    /// (`check::record_changes`), so a kill cannot leave the one without the other.
    pub journal: Vec<pev_store::Record>,
    /// The call's `tool.finished`, journaled after those records, in the same commit.
    pub event: Option<pev_protocol::event::EventBody>,
    /// The end and the changes are in the journal already (a call that had finished before
    /// the run was interrupted): its changes are not journaled or counted again.
    pub replayed: bool,
}

impl CallEnd {
    /// An end with nothing left to journal.
    pub(crate) fn new(output: Result<Value, String>) -> Self {
        Self { output, journal: Vec::new(), event: None, replayed: false }
    }
}

/// One tool call as the step will make it.
pub(crate) struct Call<'a> {
    pub step: &'a Step,
    pub tool: &'a str,
    pub effect: Effect,
    pub args: &'a Value,
    pub watched: &'a [String],
    pub target: Option<&'a str>,
}

impl Call<'_> {
    /// Whether the call's records are journaled without lingering for company
    /// (`Journal::record_all_now`): a command's or a request's. Its effect cannot be read back
    /// by a resume (what it printed or answered, the files a command changed), so no commit may
    /// wait into the time it runs, and its end is not held back; a write's end is settled from
    /// its file's hash and a read is redone.
    pub(crate) fn journals_at_once(&self) -> bool {
        matches!(self.effect, Effect::Exec | Effect::Network)
    }
}

/// What the journal says about a step's last tool call, with what was recorded before it.
#[derive(Debug, Clone)]
pub(crate) struct Recovery {
    pub call: ToolCallRecord,
    pub before_hashes: HashMap<String, Option<String>>,
    /// The write target's content before the call, from the journal's blobs.
    pub before_content: Option<Vec<u8>>,
}

/// A file mutation with the step that made it.
#[derive(Debug, Clone)]
pub(crate) struct StepMutation {
    pub step: String,
    pub mutation: FileMutation,
}

/// What a change did to a file, by whether it was there before and after it.
pub(crate) fn change_word(existed: bool, exists: bool) -> &'static str {
    match (existed, exists) {
        (false, _) => "created",
        (_, false) => "removed",
        _ => "changed",
    }
}

/// The evidence line of a file change a call made: `TOOL WHAT PATH: A -> B bytes, +N -M lines`
/// (`what`: [`change_word`]).
pub(crate) fn change_evidence(tool: &str, what: &str, m: &FileMutation) -> String {
    format!(
        "{tool} {what} {}: {} -> {} bytes, +{} -{} lines",
        m.path, m.bytes_before, m.bytes_after, m.lines_added, m.lines_removed
    )
}

/// The evidence line of a write's change of a file it targets (or watches): changed, or left
/// as it was.
pub(crate) fn write_evidence(tool: &str, m: &FileMutation) -> String {
    if m.no_op {
        format!("{tool} left {} unchanged ({} bytes)", m.path, m.bytes_after)
    } else {
        change_evidence(tool, "changed", m)
    }
}
