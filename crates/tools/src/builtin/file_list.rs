//! `file.list`: the entries of a workspace directory, sorted, optionally recursive and filtered
//! by a glob, capped so that listing a huge tree cannot flood a model's context.

use pev_protocol::tool::Effect;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{blocking, output, parse_args, schema_for};
use crate::listing::ListOptions;
use crate::{BoxFuture, Tool, ToolContext, ToolError};

/// The most entries one call returns; past it the output says `truncated: true`.
pub const MAX_ENTRIES: usize = 10_000;

/// Arguments of `file.list`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileListArgs {
    /// The directory, relative to the workspace root (`.` for the root).
    pub path: String,
    /// Descend into subdirectories (symlinks are listed, never followed).
    #[serde(default)]
    pub recursive: Option<bool>,
    /// Keep entries matching this glob: against the file name (`*.css`), or, when it contains
    /// `/`, against the path below the listed directory (`**/*.rs`).
    #[serde(default)]
    pub glob: Option<String>,
}

/// The `file.list` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileList;

impl Tool for FileList {
    fn name(&self) -> &'static str {
        "file.list"
    }

    fn effect(&self) -> Effect {
        Effect::Read
    }

    fn in_process(&self) -> bool {
        true
    }

    fn description(&self) -> &'static str {
        "List a directory in the workspace: entries with their path (relative to the workspace \
         root), kind (file, dir, symlink, other) and size, sorted by path."
    }

    fn parameters_schema(&self) -> Value {
        schema_for::<FileListArgs>()
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let args: FileListArgs = parse_args(self.name(), args)?;
            let workspace = ctx.workspace.clone();
            let listing = blocking(move || {
                let options = ListOptions {
                    recursive: args.recursive.unwrap_or(false),
                    glob: args.glob.as_deref(),
                    max_entries: MAX_ENTRIES,
                };
                Ok(workspace.list(&args.path, options)?)
            })
            .await?;
            output(&listing)
        })
    }
}
