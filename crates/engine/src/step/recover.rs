//! Resume: what an interrupted step already did.
//!
//! A step the journal shows as started but not finished had its tool call's intent recorded
//! durably before the call ran. Three cases:
//! - the call finished and its end was journaled: its output is reused, not produced again;
//! - a write or patch was interrupted: the file is hashed. The hash the call would produce means
//!   it was applied (recorded as recovered, not applied twice); the hash from before means it was
//!   not (it runs now); anything else means someone else changed the file, and the step fails
//!   rather than guess;
//! - any other interrupted call runs again: reads are harmless, and an exec or network effect
//!   cannot be checked from outside, which a warning says.

use std::collections::HashMap;

use crate::call::Recovery;

use pev_protocol::event::{EventBody, now_rfc3339};
use pev_protocol::tool::Effect;
use pev_store::{Record, StoreError, ToolCallEnd, ToolCallStatus};
use serde_json::{Value, json};

use crate::call::{Before, Call, CallEnd, snapshot};
use crate::digest::sha256_hex;
use crate::state::step::{Shared, StepReport};

/// The end `settle` journals for an interrupted call that runs again, as its last word: an
/// exec, network or read call (whose effect cannot be checked), and a write the file shows was
/// not applied. A resume cut off after this end and before the call's new intent leaves it
/// as it is; the next resume settles that call again ([`reopened`]) rather than take the end
/// for the tool's failure.
pub(crate) const CRASHED: &str = "interrupted by a crash; run again on resume";
/// See [`CRASHED`].
pub(crate) const NOT_APPLIED: &str = "interrupted before it took effect; run again on resume";

/// `call` as a resume must settle it. A call an earlier resume ended with a run-again end
/// ([`CRASHED`], [`NOT_APPLIED`]) and was cut off before running again is still interrupted:
/// settled again as then (its file hashed, its process's mark read, a step not repeatable
/// held as then), not failed with a message meant for the journal.
pub(crate) fn reopened(call: &pev_store::ToolCallRecord) -> pev_store::ToolCallRecord {
    let mut call = call.clone();
    let run_again = call.error.as_deref().is_some_and(|e| e == CRASHED || e == NOT_APPLIED);
    if call.status == ToolCallStatus::Failed && run_again {
        call.status = ToolCallStatus::Started;
        call.error = None;
        call.output = None;
        call.ended_at = None;
        call.duration_ms = None;
    }
    call
}

/// Whether an interrupted call's effect may have happened and cannot be checked from outside: an
/// exec or network call the journal shows started and never ended, unless its mark under `root`
/// says its process never spawned (`spawn_mark`). (A write is settled by its file's hash; a
/// read has no effect.)
pub(crate) fn may_have_run(root: &std::path::Path, call: &pev_store::ToolCallRecord) -> bool {
    call.status == ToolCallStatus::Started
        && matches!(call.effect, Effect::Exec | Effect::Network)
        && crate::step::spawn_mark::read(root, &call.run_id, &call.call_id)
            == crate::step::spawn_mark::Mark::MayHaveRun
}

/// `Some` when the interrupted attempt's outcome is known (reused or recovered); `None` when the
/// call must run again.
pub(crate) async fn settle(
    shared: &Shared,
    call: &Call<'_>,
    recovery: Recovery,
    report: &mut StepReport,
) -> Result<Option<(Before, CallEnd)>, StoreError> {
    let Recovery { call: record, before_hashes, before_content } = recovery;
    let id = call.step.id.as_str();
    let mut contents = HashMap::new();
    if let (Some(path), Some(content)) = (&record.path, before_content) {
        contents.insert(path.clone(), Some(content));
    } else if let Some(path) = &record.path
        && record.pre_sha256.is_none()
    {
        // The file did not exist before the call.
        contents.insert(path.clone(), None);
    }
    // Settled as no other write of the file runs (a write of another step may be under way).
    let lock = shared.write_lock(record.path.as_deref(), call.effect).await;
    let before = Before { hashes: before_hashes, contents, inventory: None, lock };

    match record.status {
        ToolCallStatus::Finished | ToolCallStatus::Recovered => {
            report.slot.evidence.push(format!(
                "{} finished before the interruption; its journaled output is used",
                record.tool
            ));
            let output = record.output.unwrap_or(Value::Null);
            let end =
                CallEnd { output: Ok(output), journal: Vec::new(), event: None, replayed: true };
            return Ok(Some((before, end)));
        }
        ToolCallStatus::Failed => {
            let error = record.error.unwrap_or_else(|| "failed".to_owned());
            let end =
                CallEnd { output: Err(error), journal: Vec::new(), event: None, replayed: true };
            return Ok(Some((before, end)));
        }
        ToolCallStatus::Started => {}
    }

    let end = |status: ToolCallStatus, output: Option<Value>, error: Option<String>| {
        Record::ToolCallFinished(ToolCallEnd {
            run_id: record.run_id.clone(),
            call_id: record.call_id.clone(),
            status,
            output,
            error,
            ended_at: now_rfc3339(),
            duration_ms: 0,
        })
    };

    if record.effect != Effect::Write || record.path.is_none() {
        shared.recorder.record(end(ToolCallStatus::Failed, None, Some(CRASHED.to_owned())))?;
        let root = shared.engine.ctx.workspace.root();
        if record.effect == Effect::Exec && !may_have_run(root, &record) {
            report.slot.evidence.push(format!(
                "{} had not started when the run stopped (its process never spawned); it runs now",
                record.tool
            ));
        } else if record.effect != Effect::Read {
            let kind = match record.effect {
                Effect::Exec => "an exec",
                Effect::Network => "a network",
                _ => "a write without a path",
            };
            let message = format!(
                "step `{id}` was interrupted during {}; {kind} effect cannot be checked from \
                 outside, so it runs again",
                record.tool,
            );
            shared
                .recorder
                .emit(EventBody::Warning { step: Some(id.to_owned()), message: message.clone() })?;
            report.warnings.push(message);
        }
        return Ok(None);
    }

    let path = record.path.clone().unwrap_or_default();
    // A write killed between creating its temporary file and renaming it leaves that file
    // beside the target; it is litter either way, so it goes before anything else.
    match shared.engine.ctx.workspace.remove_stale_temps(&path) {
        Ok(0) => {}
        Ok(n) => report.slot.evidence.push(format!(
            "removed {n} temporary file{} the interrupted {} left beside {path}",
            if n == 1 { "" } else { "s" },
            record.tool
        )),
        Err(e) => {
            let message = format!("step `{id}`: could not remove a stale temporary file: {e}");
            shared
                .recorder
                .emit(EventBody::Warning { step: Some(id.to_owned()), message: message.clone() })?;
            report.warnings.push(message);
        }
    }
    let now = snapshot(&shared.engine, &path);
    let now_sha = now.as_ref().map(|c| c.as_deref().map(sha256_hex));
    let applied = record.intended_sha256.is_some()
        && now_sha.as_ref().is_some_and(|s| *s == record.intended_sha256);
    if applied {
        let content = now.flatten().unwrap_or_default();
        let sha = sha256_hex(&content);
        let bytes_before =
            before.contents.get(&path).map_or(0, |c| c.as_ref().map_or(0, |c| c.len() as u64));
        // What the tool itself would have answered, field for field: a continued attempt hands
        // it to the model, whose next request must be the one the interrupted session would
        // have made (a replay compares them; a resumed conversation is answered from the
        // journal only while they match). That it was recovered is in the call's status.
        let replacements = (record.tool == "file.patch")
            .then(|| patch_replacements(&record.arguments, before.contents.get(&path)))
            .flatten();
        let output = match record.tool.as_str() {
            "file.patch" => json!({
                "changed": record.pre_sha256.as_deref() != Some(sha.as_str()),
                "bytes_before": bytes_before,
                "bytes_after": content.len(),
                "sha256": sha,
                "replacements": replacements.unwrap_or(0),
            }),
            _ => json!({
                "bytes": content.len(),
                "sha256": sha,
                "created": record.pre_sha256.is_none(),
            }),
        };
        let recovered = end(ToolCallStatus::Recovered, Some(output.clone()), None);
        let event = EventBody::ToolFinished {
            step: id.to_owned(),
            call_id: record.call_id.clone(),
            tool: record.tool.clone(),
            ok: true,
            output: Some(output.clone()),
            error: None,
            duration_ms: 0,
            recovered: true,
        };
        report.slot.evidence.push(format!(
            "{} on {path} had been applied before the interruption (content hash matches); not \
             applied again",
            record.tool
        ));
        let end = CallEnd {
            output: Ok(output),
            journal: vec![recovered],
            event: Some(event),
            replayed: false,
        };
        return Ok(Some((before, end)));
    }
    if now_sha.as_ref().is_some_and(|s| *s == record.pre_sha256) {
        shared.recorder.record(end(ToolCallStatus::Failed, None, Some(NOT_APPLIED.to_owned())))?;
        return Ok(None);
    }
    let error = format!(
        "{path} changed since the interrupted {} (its content is neither the state before the \
         call nor the state the call would leave); not applied again",
        record.tool
    );
    shared.recorder.record(end(ToolCallStatus::Failed, None, Some(error.clone())))?;
    Ok(Some((before, CallEnd::new(Err(error)))))
}

/// How many replacements the patch `arguments` made in `before` (what `file.patch` reported),
/// from the content journaled with its intent; `None` when that is not known.
fn patch_replacements(arguments: &Value, before: Option<&Option<Vec<u8>>>) -> Option<u64> {
    let args: pev_tools::builtin::file_patch::FilePatchArgs =
        serde_json::from_value(arguments.clone()).ok()?;
    let text = String::from_utf8(before?.clone()?).ok()?;
    pev_tools::builtin::file_patch::apply(&text, &args.edits, &args.path).ok().map(|(_, n)| n)
}
