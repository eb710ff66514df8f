//! Text recordings: a run and its child runs as one JSON object per line, what `pev eval
//! --record` keeps beside a scenario and `pev replay` reads back (issue 31). A recording is
//! reviewed in a diff, so its order is fixed (each run in the order its rows were made, the
//! blobs last in the order they are first named), and it is read by older and newer pev alike:
//!
//! - the first line is a [`Header`]: `{"format": "pev-recording", "version": 1, …}`, with the
//!   rules ([`VolatileRule`]) a replay masks tool results with before comparing them;
//! - every other line is one object with one key naming its kind (`run`, `event`,
//!   `model_call`, `step_state`, `tool_call_started`, `tool_call_finished`, `file_hash`,
//!   `mutation`, `approval`, `plan_version`, `run_status`, `blob`) holding the journal row;
//! - within a version, changes are additive: a reader ignores fields it does not know and
//!   skips (and counts) lines of a kind it does not know; a new `version` is a change an older
//!   reader cannot follow, and it refuses the file naming both versions.
//!
//! Reading one writes its rows into a [`Store`] (a scratch journal), so everything that reads
//! a journal reads a recording.

use std::collections::HashSet;
use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::records::{
    ApprovalRecord, FileHashRecord, ModelCallRecord, MutationRecord, NewRun, Record, StepState,
    ToolCallEnd, ToolCallStart, ToolCallStatus,
};
use crate::{RunRecord, Store};

/// The header's `format`.
pub const FORMAT: &str = "pev-recording";
/// The version this pev writes, and the newest it reads.
pub const VERSION: u32 = 1;

/// What a replay masks in a tool result before comparing it with the recorded one: every match
/// of `pattern` (a regular expression) is replaced by `with` (`${1}` keeps its first group).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolatileRule {
    pub pattern: String,
    pub with: String,
}

/// A recording's first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// The pev that wrote it (`CARGO_PKG_VERSION`).
    pub pev: String,
    /// The recorded run (its child runs follow it in the file).
    pub run_id: String,
    /// The rules the recording is matched with, in order.
    #[serde(default)]
    pub volatile: Vec<VolatileRule>,
}

/// One line after the header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Run(NewRun),
    PlanVersion { run_id: String, version: u32, plan: Value, reason: String, created_at: String },
    Event(pev_protocol::event::Event),
    ModelCall(Box<ModelCallRecord>),
    StepState(StepState),
    ToolCallStarted(ToolCallStart),
    ToolCallFinished(ToolCallEnd),
    FileHash(FileHashRecord),
    Mutation(MutationRecord),
    Approval(ApprovalRecord),
    RunStatus { run_id: String, status: String, result: Option<Value>, updated_at: String },
    Blob(BlobLine),
}

/// A blob as text when it is UTF-8 (most are: messages, JSON), else as hex.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct BlobLine {
    sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hex: Option<String>,
}

const KINDS: &[&str] = &[
    "run",
    "plan_version",
    "event",
    "model_call",
    "step_state",
    "tool_call_started",
    "tool_call_finished",
    "file_hash",
    "mutation",
    "approval",
    "run_status",
    "blob",
];

/// What reading a recording found besides its rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub header: Header,
    /// Lines of a kind this pev does not know (a newer pev's additions), skipped.
    pub skipped: usize,
}

/// Writes run `run_id` of `store` and its child runs (depth first, in the order they were
/// created) to `out` as a recording matched with `volatile`.
pub fn write(
    store: &Store,
    run_id: &str,
    volatile: &[VolatileRule],
    out: &mut dyn Write,
) -> Result<(), String> {
    let header = Header {
        format: FORMAT.to_owned(),
        version: VERSION,
        pev: env!("CARGO_PKG_VERSION").to_owned(),
        run_id: run_id.to_owned(),
        volatile: volatile.to_vec(),
    };
    let mut lines = vec![json_line(&header)?];
    let summaries = store.list_runs().map_err(|e| e.to_string())?;
    let mut runs = vec![run_id.to_owned()];
    let mut i = 0;
    while i < runs.len() {
        let parent = runs[i].clone();
        let mut children: Vec<_> =
            summaries.iter().filter(|s| s.parent.as_deref() == Some(parent.as_str())).collect();
        children.sort_by(|a, b| (&a.created_at, &a.run_id).cmp(&(&b.created_at, &b.run_id)));
        runs.extend(children.into_iter().map(|s| s.run_id.clone()));
        i += 1;
    }
    for run in &runs {
        run_lines(store, run, &mut lines)?;
    }
    // The blobs the rows name, in the order they are first named.
    let mut seen = HashSet::new();
    let mut named = Vec::new();
    for line in &lines {
        let mut found = HashSet::new();
        crate::gc::hashes_in(line, &mut found);
        let mut in_order: Vec<String> = found.into_iter().collect();
        in_order.sort_by_key(|h| line.find(h.as_str()));
        named.extend(in_order.into_iter().filter(|h| seen.insert(h.clone())));
    }
    for sha in named {
        let Some(content) = store.blob(&sha).map_err(|e| e.to_string())? else { continue };
        let blob = match String::from_utf8(content) {
            Ok(text) => BlobLine { sha256: sha, text: Some(text), hex: None },
            Err(e) => BlobLine { sha256: sha, text: None, hex: Some(to_hex(e.as_bytes())) },
        };
        lines.push(json_line(&Line::Blob(blob))?);
    }
    for line in lines {
        writeln!(out, "{line}").map_err(|e| format!("cannot write the recording: {e}"))?;
    }
    out.flush().map_err(|e| format!("cannot write the recording: {e}"))
}

fn run_lines(store: &Store, run_id: &str, lines: &mut Vec<String>) -> Result<(), String> {
    let record: RunRecord = store.load_run(run_id).map_err(|e| e.to_string())?;
    let versions = store.plan_versions(run_id).map_err(|e| e.to_string())?;
    let first = versions.first().map_or_else(|| record.plan.clone(), |v| v.1.clone());
    lines.push(json_line(&Line::Run(NewRun {
        run_id: record.run_id.clone(),
        goal: record.goal.clone(),
        workspace: record.workspace.clone(),
        plan: first,
        options: record.options.clone(),
        created_at: record.created_at.clone(),
    }))?);
    for (version, plan, reason, created_at) in versions.into_iter().skip(1) {
        let run_id = run_id.to_owned();
        lines.push(json_line(&Line::PlanVersion { run_id, version, plan, reason, created_at })?);
    }
    for event in store.events(run_id).map_err(|e| e.to_string())? {
        lines.push(json_line(&Line::Event(event))?);
    }
    for call in store.model_calls(run_id).map_err(|e| e.to_string())? {
        lines.push(json_line(&Line::ModelCall(Box::new(call)))?);
    }
    for step in record.steps {
        lines.push(json_line(&Line::StepState(step))?);
    }
    for call in record.tool_calls {
        lines.push(json_line(&Line::ToolCallStarted(ToolCallStart {
            run_id: call.run_id.clone(),
            call_id: call.call_id.clone(),
            step_id: call.step_id,
            attempt: call.attempt,
            tool: call.tool,
            effect: call.effect,
            arguments: call.arguments,
            path: call.path,
            pre_sha256: call.pre_sha256,
            intended_sha256: call.intended_sha256,
            started_at: call.started_at,
        }))?);
        if call.status != ToolCallStatus::Started {
            lines.push(json_line(&Line::ToolCallFinished(ToolCallEnd {
                run_id: call.run_id,
                call_id: call.call_id,
                status: call.status,
                output: call.output,
                error: call.error,
                ended_at: call.ended_at.unwrap_or_default(),
                duration_ms: call.duration_ms.unwrap_or_default(),
            }))?);
        }
    }
    for hash in record.file_hashes {
        lines.push(json_line(&Line::FileHash(hash))?);
    }
    for mutation in record.mutations {
        lines.push(json_line(&Line::Mutation(mutation))?);
    }
    for approval in record.approvals {
        lines.push(json_line(&Line::Approval(approval))?);
    }
    let result = record.result.map(|r| serde_json::to_value(r).unwrap_or(Value::Null));
    lines.push(json_line(&Line::RunStatus {
        run_id: run_id.to_owned(),
        status: record.status,
        result,
        updated_at: record.updated_at,
    })?);
    Ok(())
}

/// Reads the recording `input` (named `name` in errors) into `store`, a journal without these
/// runs (a scratch one).
pub fn read(input: &mut dyn BufRead, name: &str, store: &Store) -> Result<Read, String> {
    let mut lines = input.lines().enumerate();
    let at = |n: usize| format!("{name}:{}", n + 1);
    let header = match lines.next() {
        None => return Err(format!("{name}: empty, not a pev recording")),
        Some((n, line)) => {
            let line = line.map_err(|e| format!("{}: {e}", at(n)))?;
            header(&line).map_err(|e| format!("{}: {e}", at(n)))?
        }
    };
    let mut skipped = 0;
    for (n, line) in lines {
        let line = line.map_err(|e| format!("{}: {e}", at(n)))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(&line)
            .map_err(|e| format!("{}: not a JSON object: {e}", at(n)))?;
        let kind = value.as_object().filter(|o| o.len() == 1).and_then(|o| o.keys().next());
        match kind {
            Some(kind) if KINDS.contains(&kind.as_str()) => {}
            Some(_) => {
                skipped += 1;
                continue;
            }
            None => return Err(format!("{}: a line is an object with one key, its kind", at(n))),
        }
        let parsed: Line = serde_json::from_value(value).map_err(|e| format!("{}: {e}", at(n)))?;
        apply(store, parsed).map_err(|e| format!("{}: {e}", at(n)))?;
    }
    Ok(Read { header, skipped })
}

fn header(line: &str) -> Result<Header, String> {
    let value: Value = serde_json::from_str(line)
        .map_err(|e| format!("not a pev recording (its first line is not JSON: {e})"))?;
    if value.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return Err(format!(
            "not a pev recording (its first line has no \"format\": \"{FORMAT}\")"
        ));
    }
    let header: Header = serde_json::from_value(value)
        .map_err(|e| format!("the recording's header is not valid: {e}"))?;
    if header.version > VERSION {
        return Err(format!(
            "recorded by pev {} in recording format {}; this pev reads format {VERSION} and \
             older: use a newer pev",
            header.pev, header.version
        ));
    }
    Ok(header)
}

fn apply(store: &Store, line: Line) -> Result<(), String> {
    let record = match line {
        Line::Run(run) => return store.create_run(&run).map_err(|e| e.to_string()),
        Line::PlanVersion { run_id, version, plan, reason, created_at } => {
            Record::PlanVersion { run_id, version, plan, reason, created_at }
        }
        Line::Event(e) => Record::Event(e),
        Line::ModelCall(c) => Record::ModelCall(c),
        Line::StepState(s) => Record::StepState(s),
        Line::ToolCallStarted(s) => Record::ToolCallStarted(s),
        Line::ToolCallFinished(e) => Record::ToolCallFinished(e),
        Line::FileHash(h) => Record::FileHash(h),
        Line::Mutation(m) => Record::Mutation(m),
        Line::Approval(a) => Record::Approval(a),
        Line::RunStatus { run_id, status, result, updated_at } => {
            let result = match result {
                None | Some(Value::Null) => None,
                Some(v) => Some(Box::new(
                    serde_json::from_value(v).map_err(|e| format!("the run's result: {e}"))?,
                )),
            };
            Record::RunStatus { run_id, status, result, updated_at }
        }
        Line::Blob(b) => {
            let content = match (b.text, b.hex) {
                (Some(text), _) => text.into_bytes(),
                (None, Some(hex)) => from_hex(&hex).ok_or("a blob's hex is not hex")?,
                (None, None) => return Err("a blob has neither text nor hex".to_owned()),
            };
            Record::Blob { sha256: b.sha256, content }
        }
    };
    store.write(&record).map_err(|e| e.to_string())
}

fn json_line(value: &impl Serialize) -> Result<String, String> {
    serde_json::to_string(value).map_err(|e| format!("cannot write the recording: {e}"))
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_round_trips_and_odd_or_bad_hex_is_refused() {
        let bytes = [0u8, 1, 0x7f, 0x80, 0xff];
        assert_eq!(super::to_hex(&bytes), "00017f80ff");
        assert_eq!(super::from_hex("00017f80ff").as_deref(), Some(&bytes[..]));
        assert_eq!(super::from_hex("abc"), None);
        assert_eq!(super::from_hex("zz"), None);
    }
}
