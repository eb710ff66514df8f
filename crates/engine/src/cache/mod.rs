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

use pev_protocol::tool::Effect;
use pev_protocol::{Assertion, Step};
use serde_json::{Value, json};

pub(crate) use self::files::observe;
use crate::cache::trace::Entry;
use crate::digest::sha256_hex;
use crate::engine::Engine;

/// Bumped when the key's document or the entry's meaning changes: old entries then miss.
const FORMAT: u32 = 1;

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
        .find(|a| a.looks_outside())
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

pub(crate) mod files;
pub(crate) mod trace;

#[cfg(test)]
mod tests;
