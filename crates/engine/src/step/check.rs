//! After a tool call: what changed on disk, what the output hides, and whether the step's
//! assertions hold. This decides the step's status for the attempt.

use std::collections::HashMap;

use pev_protocol::event::{EventBody, now_rfc3339};
use pev_protocol::run::StepStatus;
use pev_store::{FileHashRecord, HashPhase, MutationRecord, Record, StoreError};
use pev_verify::CheckEnv;
use serde_json::Value;

use crate::call::StepMutation;
use crate::call::{Before, Call, CallEnd, snapshot};
use crate::digest::sha256_hex;
use crate::state::step::{Shared, StepReport};

/// Hashes the watched files after a call, and records a mutation for each that changed (and for
/// the target of a write that succeeded, changed or not: that is a no-op). The call's end
/// (`end.journal`) and all of this are journaled in one commit. A call whose end and changes
/// are in the journal already (`end.replayed`) has its changes worked out for this attempt's
/// checks only: not journaled, and not counted in the run's changes again.
pub(crate) fn record_changes(
    shared: &Shared,
    call: &Call<'_>,
    before: &Before,
    end: &mut CallEnd,
    report: &mut StepReport,
) -> Result<(), StoreError> {
    let mut out = std::mem::take(&mut end.journal);
    let replayed = end.replayed;
    let call_ok = end.output.is_ok();
    watched_changes(shared, call, (before, call_ok), (&mut out, replayed), report);
    command_changes(shared, call, before, (&mut out, replayed), report);
    if replayed {
        return Ok(());
    }
    shared.recorder.record_all(out, end.event.take(), call.journals_at_once())
}

/// The watched files' changes (see [`record_changes`]), their records added to `out`.
fn watched_changes(
    shared: &Shared,
    call: &Call<'_>,
    (before, call_ok): (&Before, bool),
    (out, replayed): (&mut Vec<Record>, bool),
    report: &mut StepReport,
) {
    let engine = &shared.engine;
    let run_id = shared.recorder.run_id().to_owned();
    let id = call.step.id.as_str();
    let slot = &mut report.slot;
    let now = now_rfc3339();

    // What the watched files look like now.
    for path in call.watched {
        let Some(after) = snapshot(engine, path) else { continue };
        let after_sha = after.as_deref().map(sha256_hex);
        out.push(Record::FileHash(FileHashRecord {
            run_id: run_id.clone(),
            step_id: id.to_owned(),
            path: path.clone(),
            phase: HashPhase::After,
            sha256: after_sha.clone(),
            bytes: after.as_ref().map(|c| c.len() as u64),
            at: now.clone(),
        }));
        let Some(before_sha) = before.hashes.get(path) else { continue };
        if before_sha.is_none() && after_sha.is_none() {
            // Absent before and after: nothing was written there.
            continue;
        }
        let is_target = call.target == Some(path.as_str());
        // A write or patch is a mutation even when it changed nothing (that is the no-op this
        // records); another watched file only when it changed.
        if !(is_target && call_ok) && *before_sha == after_sha {
            continue;
        }
        let before_content = before.contents.get(path).and_then(Option::as_deref);
        let mutation = pev_verify::mutation(path, before_content, after.as_deref());
        if let Some(content) = &after {
            out.push(Record::Blob {
                sha256: after_sha.clone().unwrap_or_default(),
                content: content.clone(),
            });
        }
        if let (Some(content), Some(sha)) = (before_content, before_sha) {
            out.push(Record::Blob { sha256: sha.clone(), content: content.to_vec() });
        }
        out.push(Record::Mutation(MutationRecord {
            run_id: run_id.clone(),
            step_id: id.to_owned(),
            mutation: mutation.clone(),
            before_sha256: before_sha.clone(),
            after_sha256: after_sha,
        }));
        slot.evidence.push(crate::call::write_evidence(call.tool, &mutation));
        if replayed {
            report.already_counted.push(report.mutations.len());
        }
        report.mutations.push(StepMutation { step: id.to_owned(), mutation });
    }
}

/// The files a command created, changed or removed, found by comparing the workspace's
/// inventory before and after it (see `inventory.rs`), recorded as mutations like a write's;
/// only when its step ran alone. Files the step watches were recorded above.
fn command_changes(
    shared: &Shared,
    call: &Call<'_>,
    before: &Before,
    (out, replayed): (&mut Vec<Record>, bool),
    report: &mut StepReport,
) {
    use crate::inventory::{FileState, Taken};
    let Some(taken) = &before.inventory else { return };
    let not_listed = |why: &str| format!("the files {} changed are not listed: {why}", call.tool);
    let after = match taken {
        Taken::Alone(inventory, mark) if shared.activity.still_alone(*mark) => {
            crate::inventory::take(&shared.engine.ctx.workspace, Some(inventory))
                .map(|after| (inventory, after))
        }
        Taken::Alone(..) | Taken::NotAlone => {
            report.slot.evidence.push(not_listed(
                "other steps ran at the same time, and their writes cannot be told apart",
            ));
            return;
        }
        Taken::TooLarge => None,
    };
    let Some((inventory, after)) = after else {
        report.slot.evidence.push(not_listed(&format!(
            "the workspace has more than {} files",
            crate::inventory::MAX_FILES
        )));
        return;
    };
    let id = call.step.id.as_str();
    let run_id = shared.recorder.run_id().to_owned();
    let products = pev_verify::oracle::BuildProducts::new(shared.engine.ctx.workspace.root());
    for change in crate::inventory::changes(inventory, &after) {
        if call.watched.contains(&change.path) {
            continue;
        }
        // Build products (`__pycache__`, what .gitignore ignores) are not the step's work.
        if products.is_product(&change.path) {
            continue;
        }
        let path = &change.path;
        let content = |s: &Option<FileState>| s.as_ref().map(|f| f.content.clone());
        let (mutation, before_sha, after_sha) =
            match (content(&change.before), content(&change.after)) {
                // A file too large to keep: its sizes, without a line count.
                (Some(None), _) | (_, Some(None)) => {
                    let size = |s: &Option<FileState>| s.as_ref().map_or(0, |f| f.bytes);
                    let mutation = pev_protocol::run::FileMutation {
                        path: path.clone(),
                        bytes_before: size(&change.before),
                        bytes_after: size(&change.after),
                        lines_added: 0,
                        lines_removed: 0,
                        no_op: false,
                    };
                    (mutation, None, None)
                }
                (b, a) => {
                    let (b, a) = (b.flatten(), a.flatten());
                    let mutation = pev_verify::mutation(path, b.as_deref(), a.as_deref());
                    let shas = (b.as_deref().map(sha256_hex), a.as_deref().map(sha256_hex));
                    for (content, sha) in [(b, &shas.0), (a, &shas.1)] {
                        if let (Some(content), Some(sha)) = (content, sha) {
                            out.push(Record::Blob { sha256: sha.clone(), content });
                        }
                    }
                    (mutation, shas.0, shas.1)
                }
            };
        out.push(Record::Mutation(MutationRecord {
            run_id: run_id.clone(),
            step_id: id.to_owned(),
            mutation: mutation.clone(),
            before_sha256: before_sha,
            after_sha256: after_sha,
        }));
        let what = crate::call::change_word(change.before.is_some(), change.after.is_some());
        report.slot.evidence.push(crate::call::change_evidence(call.tool, what, &mutation));
        if replayed {
            report.already_counted.push(report.mutations.len());
        }
        report.mutations.push(StepMutation { step: id.to_owned(), mutation });
    }
}

/// The call's output: silent failures, the step's assertions, the process's exit; sets the
/// attempt's status.
pub(crate) async fn check_output(
    shared: &Shared,
    call: &Call<'_>,
    (before, end): (&Before, CallEnd),
    inputs: &HashMap<String, Value>,
    report: &mut StepReport,
) -> Result<(), StoreError> {
    let engine = &shared.engine;
    let id = call.step.id.as_str();
    let slot = &mut report.slot;
    let output = match end.output {
        Ok(output) => output,
        Err(error) => {
            slot.status = StepStatus::Failed;
            slot.error = Some(format!("{} failed: {error}", call.tool));
            slot.output = None;
            slot.ended_at = Some(now_rfc3339());
            return Ok(());
        }
    };

    for warning in pev_verify::silent_failures(call.tool, &output) {
        let message = format!("step `{id}`: {warning}");
        shared
            .recorder
            .emit(EventBody::Warning { step: Some(id.to_owned()), message: message.clone() })?;
        report.warnings.push(message);
    }

    let mut outputs = inputs.clone();
    outputs.insert(id.to_owned(), output.clone());
    // `content_changed` asks whether the step changed the file: against the hash from before its
    // first attempt (an earlier attempt's change, or one made before a stop or a crash and a
    // resume, is the step's own), else from before this attempt.
    let mut since = before.hashes.clone();
    since.extend(slot.baseline.iter().map(|(path, sha)| (path.clone(), sha.clone())));
    let env = CheckEnv { ctx: &engine.ctx, step: Some(id), outputs: &outputs, before: &since };
    let mut results = Vec::with_capacity(call.step.assertions.len());
    for assertion in &call.step.assertions {
        let result = pev_verify::check(assertion, &env).await;
        shared.recorder.emit(EventBody::AssertionChecked {
            step: Some(id.to_owned()),
            postcondition: None,
            result: result.clone(),
        })?;
        results.push(result);
    }
    // The first attempt's before-hashes are the step's baseline: the final re-check asks whether
    // the file still differs from what it was before the step touched it.
    for assertion in &call.step.assertions {
        if let pev_protocol::Assertion::ContentChanged { path, .. } = assertion
            && let Some(sha) = before.hashes.get(path)
        {
            slot.baseline.entry(path.clone()).or_insert_with(|| sha.clone());
        }
    }
    let failed = results.iter().find(|r| !r.passed);
    for r in results.iter().filter(|r| r.passed) {
        slot.evidence.push(format!("{}: {}", r.kind, r.detail));
    }
    if let Some(problem) = process_failure(call.step, &output) {
        slot.status = StepStatus::Failed;
        slot.by_assertion = false;
        slot.error = Some(format!("{} {problem}", call.tool));
    } else if let Some(f) = failed {
        slot.status = StepStatus::Failed;
        slot.by_assertion = true;
        slot.error = Some(format!("assertion {} failed: {}", f.kind, f.detail));
    } else {
        slot.status = StepStatus::Done;
        slot.by_assertion = false;
        slot.goal_action |= pev_verify::is_goal_action(call.tool, call.effect, call.args);
        if results.is_empty() && slot.evidence.is_empty() {
            slot.evidence.push(format!("{} returned without error", call.tool));
        }
    }
    slot.assertions = results;
    slot.output = Some(output);
    slot.ended_at = Some(now_rfc3339());
    Ok(())
}

/// Why a process the tool ran did not succeed, if it did not: it timed out, was killed by a
/// signal, or exited non-zero. A non-zero exit is what the step expects when it asserts that
/// exit code itself (`exit_code_eq` on this step), and is then left to that assertion.
fn process_failure(step: &pev_protocol::Step, output: &Value) -> Option<String> {
    if output.get("timed_out").and_then(Value::as_bool) == Some(true) {
        return Some("timed out; its process group was killed".to_owned());
    }
    let code = output.get("exit_code")?;
    if code.is_null() {
        return output
            .get("signal")
            .and_then(Value::as_i64)
            .map(|signal| format!("was killed by signal {signal}"));
    }
    let code = code.as_i64()?;
    if code == 0 {
        return None;
    }
    let expected = step.assertions.iter().any(|a| {
        matches!(a, pev_protocol::Assertion::ExitCodeEq { step: None, .. })
            || matches!(a, pev_protocol::Assertion::ExitCodeEq { step: Some(s), .. } if *s == step.id)
    });
    if expected {
        return None;
    }
    let stderr = output.get("stderr").and_then(Value::as_str).unwrap_or("");
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let last: String = last.chars().take(200).collect();
    Some(if last.is_empty() {
        format!("exited with code {code}")
    } else {
        format!("exited with code {code}: {last}")
    })
}
