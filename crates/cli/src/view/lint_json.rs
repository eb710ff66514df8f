//! `pev lint --format json`: the lint result as `serde_json::to_writer_pretty` writes it, byte
//! for byte, with a large result's findings written on two threads.
//!
//! A 100,000-step plan's report is 28 MB of findings, and writing it was the last tenth of the
//! run, on one thread (BENCHMARKS.md, issue 32). The findings are written in chunks, the even
//! ones here and the odd ones on a helper thread, and put out in order as they are done, so no
//! more than a few chunks are held at a time. A chunk is pretty-printed as the array of an
//! object's only field, `{"x": [...]}`, which puts its elements at the depth and indent they
//! have in the report; what lies between the brackets is then the report's text.

use std::io::{self, Write};
use std::sync::mpsc;

use pev_protocol::{Finding, LintResult};
use serde::Serialize;

/// Fewer findings than this are written on one thread.
const PARALLEL_FINDINGS: usize = 4096;
/// Findings per chunk: some 400 KB of text.
const CHUNK: usize = 1024;
/// What a chunk's text starts and ends with around its elements.
const PREFIX: &[u8] = b"{\n  \"x\": [";
const SUFFIX: &[u8] = b"\n  ]\n}";

/// Writes `result` as `serde_json::to_writer_pretty` would.
pub fn write(result: &LintResult, out: &mut dyn Write) -> io::Result<()> {
    let findings = result.errors.len() + result.warnings.len();
    let threads = findings >= PARALLEL_FINDINGS
        && std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    if !threads {
        // Through a buffer of a known type: serde_json writes token by token, and each write
        // through `&mut dyn Write` was a call through the vtable.
        let mut buffered = io::BufWriter::with_capacity(64 * 1024, &mut *out);
        serde_json::to_writer_pretty(&mut buffered, result).map_err(io::Error::other)?;
        return buffered.into_inner().map_err(|e| io::Error::other(e.into_error())).map(drop);
    }
    let status = serde_json::to_string(&result.status).map_err(io::Error::other)?;
    let risk = serde_json::to_string(&result.risk_score).map_err(io::Error::other)?;
    write!(out, "{{\n  \"status\": {status},\n  \"risk_score\": {risk},\n  \"errors\": ")?;
    write_array(&result.errors, out)?;
    out.write_all(b",\n  \"warnings\": ")?;
    write_array(&result.warnings, out)?;
    out.write_all(b"\n}")
}

/// One of the top level's arrays of findings, its odd chunks written on a helper thread.
fn write_array(findings: &[Finding], out: &mut dyn Write) -> io::Result<()> {
    if findings.is_empty() {
        return out.write_all(b"[]");
    }
    let chunks: Vec<&[Finding]> = findings.chunks(CHUNK).collect();
    out.write_all(b"[")?;
    std::thread::scope(|scope| {
        let (send, receive) = mpsc::sync_channel::<io::Result<Vec<u8>>>(2);
        let helper = std::thread::Builder::new().name("pev-report".into());
        let theirs = &chunks;
        let helper = helper.spawn_scoped(scope, move || {
            for chunk in theirs.iter().skip(1).step_by(2) {
                let mut buffer = Vec::new();
                let done = pretty(chunk, &mut buffer).map(|()| buffer);
                if send.send(done).is_err() {
                    return;
                }
            }
        });
        let helper = helper.is_ok();
        let mut mine = Vec::new();
        for (k, chunk) in chunks.iter().enumerate() {
            if k > 0 {
                out.write_all(b",")?;
            }
            if k % 2 == 0 || !helper {
                pretty(chunk, &mut mine)?;
                out.write_all(elements(&mine))?;
            } else {
                let theirs = receive.recv().map_err(io::Error::other)??;
                out.write_all(elements(&theirs))?;
            }
        }
        Ok::<(), io::Error>(())
    })?;
    out.write_all(b"\n  ]")
}

/// The findings pretty-printed as `{"x": [...]}`, into `buffer` (emptied first).
fn pretty(findings: &[Finding], buffer: &mut Vec<u8>) -> io::Result<()> {
    #[derive(Serialize)]
    struct Chunk<'f> {
        x: &'f [Finding],
    }
    buffer.clear();
    serde_json::to_writer_pretty(&mut *buffer, &Chunk { x: findings }).map_err(io::Error::other)
}

/// What lies between a chunk's brackets: `\n    {…},\n    {…}`.
fn elements(text: &[u8]) -> &[u8] {
    text.strip_prefix(PREFIX).and_then(|t| t.strip_suffix(SUFFIX)).unwrap_or_default()
}

#[cfg(test)]
#[path = "lint_json_tests.rs"]
mod tests;
