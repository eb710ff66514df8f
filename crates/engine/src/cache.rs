//! `--cache`: a step whose definition, inputs and the workspace files it reads are unchanged
//! reuses the verified result of an earlier run instead of calling its tool or its model again.
//!
//! An entry is a JSON file `<workspace>/.pev/cache/<key>.json` (plans may not touch `.pev`; the
//! engine writes there directly, atomically: a temporary file, then a rename). The key is the
//! SHA-256 of a canonical JSON (object keys sorted) of the step's definition, the inputs it sees
//! and pev's version. A tool step sees its resolved arguments and the outputs of the steps its
//! assertions name; an instruction step sees the outputs of its dependencies (`job.inputs`).
//!
//! The entry keeps what the step read and what it left behind. Reads are the files read-effect
//! calls named: `file.read` (the hash of the file it read, or "absent"), `file.list` (the hash of
//! the listing with the same options, so an added, removed or resized entry counts as a change),
//! the state before each write (what the step decided on), and the files the step's assertions
//! check (as the step left them). Writes are the files the step changed, with their hash at the
//! end of the step. A file the step read and then changed is checked only as a write: the
//! workspace is expected to be in the state the step left it, not the one it found. Likewise a
//! listing of a directory the step wrote into is hashed as the step left it.
//!
//! An entry is used only if every read is unchanged, every write is still in place, and no tool
//! it called needs approval now (nor, for an instruction step, is refused by the policy now).
//! Never cached: a step that needs approval (approval is never skipped), a step that called an
//! exec or network tool, a write without a `path`, or a read tool other than `file.read` and
//! `file.list` (their effects or reads cannot be checked from outside), a step whose assertions
//! look outside the workspace (`command_succeeds`, `socket_open`, `http_status`), a step settled
//! after an interruption, a step that raised warnings other than "trying again" (reusing it
//! would hide the doubt), and a step whose write left a file unchanged (that no-op makes its run
//! `partial`; a reused result would hide it).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use pev_protocol::assertion::AssertionResult;
use pev_protocol::event::{EventBody, now_rfc3339};
use pev_protocol::run::StepStatus;
use pev_protocol::tool::Effect;
use pev_protocol::{Assertion, Step};
use pev_store::{Record, StoreError};
use pev_tools::Workspace;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub(crate) use self::files::{check_files, check_tools, observe};
use self::files::{file_sha, listing_sha, normal};
use crate::Engine;
use crate::cache_trace::{FileRead, ListingRead, Trace};
use crate::digest::sha256_hex;
use crate::step_context::{Shared, StepJob, StepReport};

/// Bumped when the key's document or the entry's meaning changes: old entries then miss.
const FORMAT: u32 = 1;

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

/// JSON with object keys sorted at every level, so that the key does not depend on the order a
/// plan wrote its fields in.
pub(crate) fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(k) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The inputs a step sees: for a tool step (`args` given) its resolved arguments and the outputs
/// of the other steps its assertions name; for an instruction step all of `inputs`.
pub(crate) fn seen_inputs(
    step: &Step,
    args: Option<&Value>,
    inputs: &HashMap<String, Value>,
) -> Value {
    match args {
        Some(args) => {
            let asserted: BTreeMap<&str, &Value> = step
                .assertions
                .iter()
                .filter_map(Assertion::step)
                .filter(|s| *s != &step.id)
                .filter_map(|s| inputs.get_key_value(s.as_str()))
                .map(|(k, v)| (k.as_str(), v))
                .collect();
            json!({ "arguments": args, "outputs": asserted })
        }
        None => {
            let sorted: BTreeMap<&String, &Value> = inputs.iter().collect();
            json!({ "inputs": sorted })
        }
    }
}

/// The cache key of `step` seeing `seen` (see [`seen_inputs`]).
pub(crate) fn key(step: &Step, seen: &Value) -> Option<String> {
    let definition = serde_json::to_value(step).ok()?;
    let document = json!({
        "format": FORMAT,
        "pev": env!("CARGO_PKG_VERSION"),
        "step": definition,
        "inputs": seen,
    });
    Some(sha256_hex(canonical(&document).as_bytes()))
}

/// Why a step is never cached, judging by its definition and its tool's effect.
pub(crate) fn never_cached(step: &Step, effect: Option<Effect>) -> Option<String> {
    if step.requires_approval {
        return Some("it requires approval, which is never skipped".to_owned());
    }
    if let Some(effect @ (Effect::Exec | Effect::Network)) = effect {
        return Some(format!(
            "its tool has a {effect:?} effect, which pev cannot check afterwards"
        ));
    }
    step.assertions
        .iter()
        .find(|a| {
            matches!(
                a,
                Assertion::CommandSucceeds { .. }
                    | Assertion::SocketOpen { .. }
                    | Assertion::HttpStatus { .. }
            )
        })
        .map(|a| format!("its {} assertion looks outside the workspace", a.kind()))
}

/// `<workspace>/.pev/cache`.
pub(crate) fn cache_dir(engine: &Engine) -> PathBuf {
    engine.ctx.workspace.root().join(".pev").join("cache")
}

/// The entry stored under `key`, if there is a readable one.
pub(crate) fn load(dir: &Path, key: &str) -> Option<Entry> {
    let text = std::fs::read(dir.join(format!("{key}.json"))).ok()?;
    serde_json::from_slice::<Entry>(&text).ok().filter(|e| e.key == key)
}

/// Writes `entry` atomically: readers see the old entry or the new one, never half of one.
pub(crate) fn store(dir: &Path, entry: &Entry) -> Result<(), String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let text = serde_json::to_vec_pretty(entry).map_err(|e| e.to_string())?;
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(".{}.json.tmp-{}-{n}", entry.key, std::process::id()));
    let target = dir.join(format!("{}.json", entry.key));
    std::fs::write(&temp, text).and_then(|()| std::fs::rename(&temp, &target)).map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!("cannot write {}: {e}", target.display())
    })
}

/// The entry for a step that ended done: its reads and the state it left its writes in.
pub(crate) fn build_entry(
    ws: &Workspace,
    key: String,
    run_id: &str,
    step: &Step,
    report: &StepReport,
) -> Result<Entry, String> {
    let mut writes: Vec<FileWrite> = Vec::new();
    for m in &report.mutations {
        let path = normal(ws, &m.mutation.path);
        if !writes.iter().any(|w| w.path == path) {
            let sha256_after = file_sha(ws, &path)?;
            writes.push(FileWrite { path, sha256_after });
        }
    }
    let written = |path: &str| writes.iter().any(|w| w.path == path);
    let under =
        |dir: &str| writes.iter().any(|w| dir.is_empty() || w.path.starts_with(&format!("{dir}/")));
    let mut reads: Vec<FileRead> = Vec::new();
    for read in &report.cache.reads {
        let path = normal(ws, &read.path);
        let read = match &read.listing {
            None if written(&path) => continue,
            // A listing the step's own writes changed is checked as the step left it.
            Some(listing) if under(&path) => {
                let sha256 = listing_sha(ws, &path, listing)?;
                FileRead { path, sha256, listing: Some(listing.clone()) }
            }
            _ => FileRead { path, ..read.clone() },
        };
        if !reads.iter().any(|r| r.path == read.path && r.listing == read.listing) {
            reads.push(read);
        }
    }
    for path in step.assertions.iter().filter_map(Assertion::path) {
        let path = normal(ws, path);
        if written(&path) || reads.iter().any(|r| r.path == path && r.listing.is_none()) {
            continue;
        }
        let sha256 = file_sha(ws, &path)?;
        reads.push(FileRead { path, sha256, listing: None });
    }
    Ok(Entry {
        key,
        run_id: run_id.to_owned(),
        step_id: step.id.as_str().to_owned(),
        output: report.slot.output.clone(),
        evidence: report.slot.evidence.clone(),
        assertions: report.slot.assertions.clone(),
        reads,
        writes,
        tools: report.cache.tools.clone(),
        goal_action: report.slot.goal_action,
        created_at: now_rfc3339(),
    })
}

/// The evidence line of a reused step.
pub(crate) fn reuse_note(entry: &Entry) -> String {
    let short: String = entry.key.chars().take(12).collect();
    let files = |n: usize| if n == 1 { "file" } else { "files" };
    let reads = entry.reads.len();
    let mut note = format!(
        "reused the verified result of run {} (cache key {short}): definition, inputs and the \
         {reads} {} it read are unchanged",
        entry.run_id,
        files(reads)
    );
    let writes = entry.writes.len();
    if writes > 0 {
        note.push_str(&format!(
            ", and the {writes} {} it changed {} as it left {}",
            files(writes),
            if writes == 1 { "is" } else { "are" },
            if writes == 1 { "it" } else { "them" }
        ));
    }
    note
}

/// Looks `step` up (when the cache is on and the step may be cached); on a valid entry, ends the
/// step done with the entry's result, without calling anything, and returns true. `args` are a
/// tool step's resolved arguments (`None` for an instruction step).
pub(crate) fn try_reuse(
    shared: &Shared,
    step: &Step,
    job: &StepJob,
    report: &mut StepReport,
    (args, effect, needs_approval): (Option<&Value>, Option<Effect>, bool),
) -> Result<bool, StoreError> {
    let engine = &shared.engine;
    if !engine.config.cache {
        return Ok(false);
    }
    if needs_approval {
        report.cache.refuse("it needs approval, which is never skipped".to_owned());
        return Ok(false);
    }
    if let Some(why) = never_cached(step, effect) {
        report.cache.refuse(why);
        return Ok(false);
    }
    let Some(key) = key(step, &seen_inputs(step, args, &job.inputs)) else {
        report.cache.refuse("its definition cannot be serialized".to_owned());
        return Ok(false);
    };
    report.cache.key = Some(key.clone());
    let Some(entry) = load(&cache_dir(engine), &key) else { return Ok(false) };
    let allowed: &[String] = match (&step.tool, &engine.config.models) {
        (None, Some(models)) => &models.allowed_tools,
        _ => &[],
    };
    let valid = check_tools(&entry, &shared.approve_globs, allowed)
        .and_then(|()| check_files(&engine.ctx.workspace, &entry));
    if valid.is_err() {
        return Ok(false);
    }
    let id = step.id.as_str();
    let slot = &mut report.slot;
    slot.attempts += 1;
    slot.status = StepStatus::InProgress;
    shared.recorder.record(Record::StepState(slot.to_stored(shared.recorder.run_id(), id)))?;
    shared.recorder.emit(EventBody::StepStarted { step: id.to_owned(), attempt: slot.attempts })?;
    let mut evidence = vec![reuse_note(&entry)];
    evidence.extend(entry.evidence);
    slot.status = StepStatus::Done;
    slot.error = None;
    slot.by_assertion = false;
    slot.output = entry.output;
    slot.assertions = entry.assertions;
    slot.evidence = evidence;
    // The recorded writes are in place (checked above), so the goal work the original did holds.
    slot.goal_action = entry.goal_action;
    slot.ended_at = Some(now_rfc3339());
    report.cache.reused = true;
    Ok(true)
}

/// Stores the result of a step that ended done, verified, and may be cached. A failure to store
/// is a warning, never the step's failure.
pub(crate) fn remember(
    shared: &Shared,
    step: &Step,
    report: &mut StepReport,
) -> Result<(), StoreError> {
    let engine = &shared.engine;
    if !engine.config.cache
        || report.cache.reused
        || report.cache.uncacheable.is_some()
        || report.slot.status != StepStatus::Done
        || report.warnings.len() > report.cache.retry_warnings
        // A write that changed nothing makes its run partial; reused, the no-op would vanish.
        || report.mutations.iter().any(|m| m.mutation.no_op)
    {
        return Ok(());
    }
    let Some(key) = report.cache.key.clone() else { return Ok(()) };
    // A tool that needed a person's yes (an executor's call under approve_tools) is asked again.
    if report.cache.tools.iter().any(|t| shared.approve_globs.iter().any(|g| g.matches(t))) {
        return Ok(());
    }
    let stored = build_entry(&engine.ctx.workspace, key, shared.recorder.run_id(), step, report)
        .and_then(|entry| store(&cache_dir(engine), &entry));
    if let Err(why) = stored {
        let id = step.id.as_str();
        let message = format!("step `{id}`: its verified result could not be cached: {why}");
        shared
            .recorder
            .emit(EventBody::Warning { step: Some(id.to_owned()), message: message.clone() })?;
        report.warnings.push(message);
    }
    Ok(())
}

#[path = "cache_files.rs"]
mod files;

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
