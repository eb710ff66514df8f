//! The durable path of one tool call, for tool steps and executor calls alike: the files'
//! state before, the intent journaled (durably unless the call only reads) with the hash a write
//! or patch will leave, the tool, the end record, and what the cache learns.

use std::time::Instant;

use pev_protocol::event::{EventBody, now_rfc3339};
use pev_protocol::tool::Effect;
use pev_store::{
    FileHashRecord, HashPhase, Record, StoreError, ToolCallEnd, ToolCallStart, ToolCallStatus,
};
use pev_tools::builtin::file_patch::{Edit, apply};
use serde_json::Value;

use crate::call::{Before, Call, CallEnd};
use crate::digest::sha256_hex;
use crate::state::step::{Shared, StepReport};

/// The hash a write or patch will leave, computed before it runs; `None` when it cannot be known.
fn intended_sha256(tool: &str, args: &Value, before: Option<&[u8]>, path: &str) -> Option<String> {
    match tool {
        "file.write" => {
            args.get("content").and_then(Value::as_str).map(|c| sha256_hex(c.as_bytes()))
        }
        "file.patch" => {
            let text = std::str::from_utf8(before?).ok()?;
            let edits: Vec<Edit> = serde_json::from_value(args.get("edits")?.clone()).ok()?;
            let (new, _) = apply(text, &edits, path).ok()?;
            Some(sha256_hex(new.as_bytes()))
        }
        _ => None,
    }
}

/// Makes the call: state before, the durable intent, the tool, the end record.
pub(crate) async fn invoke(
    shared: &Shared,
    call: &Call<'_>,
    tool: &dyn pev_tools::Tool,
    report: &mut StepReport,
    call_no: Option<u32>,
) -> Result<(Before, CallEnd), StoreError> {
    let engine = &shared.engine;
    let run_id = shared.recorder.run_id().to_owned();
    let id = call.step.id.as_str();
    // A write holds its file from the state recorded here to the checks of its result.
    let lock = shared.write_lock(call.target, call.effect).await;
    let mut before = Before::take(engine, call.watched);
    before.lock = lock;
    if call.tool == "shell.exec" {
        before.inventory = Some(crate::inventory::before(&engine.ctx.workspace, &shared.activity));
    }
    let call_id = match call_no {
        // An executor's calls within one attempt.
        Some(n) => format!("{id}#{}.{}.{n}", report.slot.attempts, shared.session),
        None => format!("{id}#{}.{}", report.slot.attempts, shared.session),
    };
    let target_content =
        call.target.and_then(|t| before.contents.get(t)).and_then(Option::as_deref);
    let intended =
        call.target.and_then(|path| intended_sha256(call.tool, call.args, target_content, path));
    let now = now_rfc3339();
    let mut records = Vec::with_capacity(call.watched.len() + 2);
    for (path, sha) in &before.hashes {
        records.push(Record::FileHash(FileHashRecord {
            run_id: run_id.clone(),
            step_id: id.to_owned(),
            path: path.clone(),
            phase: HashPhase::Before,
            sha256: sha.clone(),
            bytes: None,
            at: now.clone(),
        }));
    }
    // The content before a write goes with the intent, so a resumed run can still show the diff.
    if let Some(content) = target_content {
        records.push(Record::Blob { sha256: sha256_hex(content), content: content.to_vec() });
    }
    records.push(Record::ToolCallStarted(ToolCallStart {
        run_id: run_id.clone(),
        call_id: call_id.clone(),
        step_id: id.to_owned(),
        attempt: report.slot.attempts,
        tool: call.tool.to_owned(),
        effect: call.effect,
        arguments: call.args.clone(),
        path: call.target.map(str::to_owned),
        pre_sha256: call.target.and_then(|t| before.hashes.get(t).cloned().flatten()),
        intended_sha256: intended,
        started_at: now,
    }));
    // An effect must not happen unless its intent is on disk: that is what makes resume safe.
    if call.effect == Effect::Read {
        for r in records {
            shared.recorder.record(r)?;
        }
    } else {
        shared.recorder.durable(records).await?;
    }
    let called = EventBody::ToolCalled {
        step: id.to_owned(),
        call_id: call_id.clone(),
        tool: call.tool.to_owned(),
        effect: call.effect,
        arguments: call.args.clone(),
    };
    // No journal commit may linger into the time a command runs (`Call::journals_at_once`).
    if call.journals_at_once() {
        shared.recorder.emit_at_once(called)?;
    } else {
        shared.recorder.emit(called)?;
    }
    report.tool_calls += 1;
    let started = Instant::now();
    // An exec call leaves a durable mark of whether its process spawned (`spawn_mark`), so a
    // resume can tell a command that never started from one that may have run. A mark that
    // cannot be written is no mark: the command then counts as one that may have run.
    // Only a tool that reports its spawns (pev's own command runners) gets a mark: any other
    // (an MCP server's tool) never says "started", and no mark means "may have run".
    let mark = (call.effect == Effect::Exec && call.tool == "shell.exec")
        .then(|| crate::step::spawn_mark::path(engine.ctx.workspace.root(), &run_id, &call_id))
        .filter(|at| crate::step::spawn_mark::write(at, "intent").is_ok());
    let result = match mark {
        Some(at) => {
            // "started" is written before the process is spawned; a mark that cannot be written
            // refuses the spawn, so a mark left saying "intent" is always true.
            let hook: pev_tools::spawn_mark::Hook =
                std::sync::Arc::new(move || crate::step::spawn_mark::write(&at, "started").is_ok());
            pev_tools::spawn_mark::scope(hook, tool.call(&engine.ctx, call.args.clone())).await
        }
        None => tool.call(&engine.ctx, call.args.clone()).await,
    };
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (ok, output, error) = match result {
        Ok(v) => (true, Some(v), None),
        Err(e) => (false, None, Some(e.to_string())),
    };
    // Journaled with the changes the call made (`check::record_changes`), in one commit.
    let finished = Record::ToolCallFinished(ToolCallEnd {
        run_id,
        call_id: call_id.clone(),
        status: if ok { ToolCallStatus::Finished } else { ToolCallStatus::Failed },
        output: output.clone(),
        error: error.clone(),
        ended_at: now_rfc3339(),
        duration_ms,
    });
    let event = EventBody::ToolFinished {
        step: id.to_owned(),
        call_id,
        tool: call.tool.to_owned(),
        ok,
        output: output.clone(),
        error: error.clone(),
        duration_ms,
        recovered: false,
    };
    let end = CallEnd {
        output: output.ok_or_else(|| error.unwrap_or_default()),
        journal: vec![finished],
        event: Some(event),
        replayed: false,
    };
    if engine.config.cache {
        crate::cache::observe(&engine.ctx.workspace, &mut report.cache, call, &before, &end.output);
    }
    Ok((before, end))
}
