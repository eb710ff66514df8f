//! What the workspace says about a cached step: the hashes of the files and listings its calls
//! read (taken as it runs), and whether an entry's reads are unchanged and its writes in place.

use pev_lint::policy::Glob;
use pev_protocol::tool::Effect;
use pev_tools::{ListOptions, SandboxError, Workspace};
use serde_json::Value;

use super::trace::{Entry, FileRead, ListingRead, Trace};
use crate::call::{Before, Call};
use crate::digest::sha256_hex;

/// Notes what a call the step made read, or why it makes the step uncacheable.
pub(crate) fn observe(
    ws: &Workspace,
    trace: &mut Trace,
    call: &Call<'_>,
    before: &Before,
    output: &Result<Value, String>,
) {
    if !trace.tools.iter().any(|t| t == call.tool) {
        trace.tools.push(call.tool.to_owned());
    }
    match call.effect {
        Effect::Exec | Effect::Network => trace
            .refuse(format!("it called {}, whose effects pev cannot check afterwards", call.tool)),
        Effect::Write => match call.target.map(|t| (t, before.hashes.get(t))) {
            Some((path, Some(sha))) => {
                trace.note_read(FileRead {
                    path: path.to_owned(),
                    sha256: sha.clone(),
                    listing: None,
                });
            }
            Some((path, None)) => trace.refuse(format!("it wrote {path}, which pev cannot hash")),
            None => trace.refuse(format!(
                "it called {} without a `path`, so pev cannot tell what it changed",
                call.tool
            )),
        },
        Effect::Read => observe_read(ws, trace, call, output),
    }
}

fn observe_read(
    ws: &Workspace,
    trace: &mut Trace,
    call: &Call<'_>,
    output: &Result<Value, String>,
) {
    let Some(path) = call.args.get("path").and_then(Value::as_str) else {
        trace.refuse(format!("it called {} without a `path`", call.tool));
        return;
    };
    let read = match call.tool {
        "file.read" => {
            // The hash of what the call read, when it says; else the file's state now.
            let said = output
                .as_ref()
                .ok()
                .and_then(|o| o.get("sha256"))
                .and_then(Value::as_str)
                .map(|s| Ok(Some(s.to_owned())));
            said.unwrap_or_else(|| file_sha(ws, path)).map(|sha256| FileRead {
                path: path.to_owned(),
                sha256,
                listing: None,
            })
        }
        "file.list" => {
            let listing = ListingRead {
                recursive: call.args.get("recursive").and_then(Value::as_bool).unwrap_or(false),
                glob: call.args.get("glob").and_then(Value::as_str).map(str::to_owned),
            };
            listing_sha(ws, path, &listing).map(|sha256| FileRead {
                path: path.to_owned(),
                sha256,
                listing: Some(listing),
            })
        }
        other => Err(format!("it called {other}, whose reads pev cannot track")),
    };
    match read {
        Ok(read) => trace.note_read(read),
        Err(why) => trace.refuse(why),
    }
}

pub(crate) fn file_sha(ws: &Workspace, path: &str) -> Result<Option<String>, String> {
    ws.sha256(path).map_err(|e| format!("{path} cannot be hashed: {e}"))
}

/// The hash of a listing made as `file.list` makes it; `None` when the directory is absent.
pub(crate) fn listing_sha(
    ws: &Workspace,
    path: &str,
    listing: &ListingRead,
) -> Result<Option<String>, String> {
    let options = ListOptions {
        recursive: listing.recursive,
        glob: listing.glob.as_deref(),
        max_entries: pev_tools::builtin::file_list::MAX_ENTRIES,
    };
    match ws.list(path, options) {
        Ok(found) => serde_json::to_vec(&found)
            .map(|bytes| Some(sha256_hex(&bytes)))
            .map_err(|e| format!("the listing of {path} cannot be hashed: {e}")),
        Err(SandboxError::NotFound { .. }) => Ok(None),
        Err(e) => Err(format!("{path} cannot be listed: {e}")),
    }
}

/// Whether the workspace still is as the entry needs it: reads unchanged, writes in place.
pub(crate) fn check_files(ws: &Workspace, entry: &Entry) -> Result<(), String> {
    for read in &entry.reads {
        let now = match &read.listing {
            Some(listing) => listing_sha(ws, &read.path, listing)?,
            None => file_sha(ws, &read.path)?,
        };
        if now != read.sha256 {
            return Err(format!("{} changed since run {}", read.path, entry.run_id));
        }
    }
    for write in &entry.writes {
        if file_sha(ws, &write.path)? != write.sha256_after {
            return Err(format!("{} is no longer as run {} left it", write.path, entry.run_id));
        }
    }
    Ok(())
}

/// Whether the tools the entry's step called may still run without a person: none needs
/// approval now, and each is in `allowed` (when that is not empty).
pub(crate) fn check_tools(
    entry: &Entry,
    approve: &[Glob],
    allowed: &[String],
) -> Result<(), String> {
    for tool in &entry.tools {
        if let Some(glob) = approve.iter().find(|g| g.matches(tool)) {
            return Err(format!("{tool} needs approval now (approve_tools `{}`)", glob.as_str()));
        }
        if !allowed.is_empty() && !allowed.contains(tool) {
            return Err(format!("the policy does not allow {tool} now"));
        }
    }
    Ok(())
}

/// The path as the sandbox resolves it, so that `./a.txt` and `a.txt` are one file.
pub(crate) fn normal(ws: &Workspace, path: &str) -> String {
    ws.resolve(path).map_or_else(|_| path.to_owned(), |p| p.to_string_lossy().into_owned())
}
