//! `file.write`: replace or create a file with the given text, atomically.

use pev_protocol::tool::Effect;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{blocking, output, parse_args, schema_for};
use crate::sandbox::hex;
use crate::{BoxFuture, Tool, ToolContext, ToolError};

/// Arguments of `file.write`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileWriteArgs {
    /// The file, relative to the workspace root. Missing parent directories are created.
    pub path: String,
    /// The whole new content.
    pub content: String,
}

/// What `file.write` returns.
#[derive(Debug, Clone, Serialize)]
pub struct FileWriteOutput {
    /// Size written.
    pub bytes: u64,
    /// Hex SHA-256 of the content written.
    pub sha256: String,
    /// The file did not exist before.
    pub created: bool,
}

/// The `file.write` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileWrite;

impl Tool for FileWrite {
    fn name(&self) -> &'static str {
        "file.write"
    }

    fn effect(&self) -> Effect {
        Effect::Write
    }

    fn in_process(&self) -> bool {
        true
    }

    fn description(&self) -> &'static str {
        "Create or replace a file in the workspace with the given content (parent directories \
         are created). Prefer the patch tool to change part of an existing file."
    }

    fn parameters_schema(&self) -> Value {
        schema_for::<FileWriteArgs>()
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let args: FileWriteArgs = parse_args(self.name(), args)?;
            let workspace = ctx.workspace.clone();
            let out = blocking(move || {
                let report = workspace.write(&args.path, args.content.as_bytes())?;
                Ok(FileWriteOutput {
                    bytes: args.content.len() as u64,
                    sha256: hex(&Sha256::digest(args.content.as_bytes())),
                    created: report.created,
                })
            })
            .await?;
            output(&out)
        })
    }
}
