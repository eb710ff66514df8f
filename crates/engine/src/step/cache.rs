//! `--cache` in a step's life: look the step up before it runs (and end it with the entry's
//! result when every read is unchanged), and store the result of a step that ended done.

use crate::cache::files::{check_files, check_tools};
use crate::cache::files::{file_sha, listing_sha, normal};
use crate::cache::trace::FileRead;
use crate::cache::trace::{Entry, FileWrite};
use crate::cache::{cache_dir, key, load, never_cached, reuse_note, seen_inputs, store};
use crate::state::step::{Shared, StepJob, StepReport};
use pev_protocol::event::{EventBody, now_rfc3339};
use pev_protocol::run::StepStatus;
use pev_protocol::tool::Effect;
use pev_protocol::{Assertion, Step};
use pev_store::{Record, StoreError};
use pev_tools::Workspace;
use serde_json::Value;

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
