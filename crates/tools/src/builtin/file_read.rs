//! `file.read`: a file's content (or a range of its lines), its size and its SHA-256.
//!
//! The file is streamed once: every byte goes through the hash, and only the requested lines,
//! up to the policy's output cap, are kept. `bytes` and `sha256` always describe the whole file,
//! so the hash can be compared with what the verifier or a later step sees, whatever range was
//! shown.

use std::io::Read;

use pev_protocol::tool::Effect;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{blocking, output, parse_args, schema_for};
use crate::error::SandboxError;
use crate::sandbox::{READ_CHUNK, hex};
use crate::text::decode;
use crate::{BoxFuture, Tool, ToolContext, ToolError};

/// Arguments of `file.read`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileReadArgs {
    /// The file, relative to the workspace root.
    pub path: String,
    /// Number of lines to skip before the returned content (0 = from the first line).
    #[serde(default)]
    pub offset: Option<u64>,
    /// The most lines to return (default: all, up to the output cap).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// What `file.read` returns.
#[derive(Debug, Clone, Serialize)]
pub struct FileReadOutput {
    /// The requested lines, as text.
    pub content: String,
    /// Size of the whole file in bytes.
    pub bytes: u64,
    /// Hex SHA-256 of the whole file.
    pub sha256: String,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// The content was cut at the output cap.
    pub truncated: bool,
    /// The file is not valid UTF-8; invalid bytes were replaced by U+FFFD.
    pub lossy: bool,
}

/// The `file.read` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileRead;

impl Tool for FileRead {
    fn name(&self) -> &'static str {
        "file.read"
    }

    fn effect(&self) -> Effect {
        Effect::Read
    }

    fn in_process(&self) -> bool {
        true
    }

    fn description(&self) -> &'static str {
        "Read a text file in the workspace, optionally a range of lines (offset = lines to skip, \
         limit = lines to return). Returns the content, the file's size and its SHA-256."
    }

    fn parameters_schema(&self) -> Value {
        schema_for::<FileReadArgs>()
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let args: FileReadArgs = parse_args(self.name(), args)?;
            let workspace = ctx.workspace.clone();
            let cap = ctx.policy.max_output_bytes;
            let out = blocking(move || read(&workspace, &args, cap)).await?;
            output(&out)
        })
    }
}

fn read(
    workspace: &crate::Workspace,
    args: &FileReadArgs,
    cap: usize,
) -> Result<FileReadOutput, ToolError> {
    let mut file = workspace.open_read(&args.path)?;
    let first = args.offset.unwrap_or(0);
    let end = args.limit.map_or(u64::MAX, |limit| first.saturating_add(limit));

    let mut hasher = Sha256::new();
    let mut content = Vec::new();
    let mut truncated = false;
    let mut total: u64 = 0;
    // Index of the line the next byte belongs to, and whether the last byte seen was a newline.
    let mut line: u64 = 0;
    let mut last_was_newline = false;
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let n = file.read(&mut buf).map_err(|e| SandboxError::from_io("read", &args.path, e))?;
        let chunk = buf.get(..n).unwrap_or_default();
        if chunk.is_empty() {
            break;
        }
        hasher.update(chunk);
        total = total.saturating_add(n as u64);
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            if (first..end).contains(&line) && !truncated {
                let room = cap.saturating_sub(content.len());
                let take = piece.len().min(room);
                content.extend_from_slice(piece.get(..take).unwrap_or_default());
                truncated = take < piece.len();
            }
            last_was_newline = piece.last() == Some(&b'\n');
            if last_was_newline {
                line = line.saturating_add(1);
            }
        }
    }
    // A last line without a newline still counts.
    let total_lines = if total > 0 && !last_was_newline { line.saturating_add(1) } else { line };
    let decoded = decode(content, truncated);
    Ok(FileReadOutput {
        content: decoded.text,
        bytes: total,
        sha256: hex(&hasher.finalize()),
        total_lines,
        truncated,
        lossy: decoded.lossy,
    })
}
