//! `file.patch`: exact-text replacements in a file, all or nothing.
//!
//! Each edit's `old` text must occur exactly once (or, with `replace_all`, at least once) in the
//! content as the previous edits left it. If any edit does not apply, the file is not touched
//! and the error names the edit and what was found, so the model can correct that one edit.
//! An edit set that leaves the content as it was is reported (`changed: false`) and not written.

use pev_protocol::tool::Effect;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{blocking, output, parse_args, schema_for};
use crate::sandbox::hex;
use crate::{BoxFuture, Tool, ToolContext, ToolError, Workspace};

/// One replacement.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    /// The exact text to replace (whitespace included).
    pub old: String,
    /// The text to put in its place.
    pub new: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: Option<bool>,
}

/// Arguments of `file.patch`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilePatchArgs {
    /// The file, relative to the workspace root. It must exist and be UTF-8 text.
    pub path: String,
    /// Applied in order, each to the result of the previous ones.
    pub edits: Vec<Edit>,
}

/// What `file.patch` returns.
#[derive(Debug, Clone, Serialize)]
pub struct FilePatchOutput {
    /// The content differs from before.
    pub changed: bool,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Hex SHA-256 of the content after the patch.
    pub sha256: String,
    /// Occurrences replaced, over all edits.
    pub replacements: u64,
}

/// The `file.patch` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct FilePatch;

impl Tool for FilePatch {
    fn name(&self) -> &'static str {
        "file.patch"
    }

    fn effect(&self) -> Effect {
        Effect::Write
    }

    fn in_process(&self) -> bool {
        true
    }

    fn description(&self) -> &'static str {
        "Edit a text file in the workspace by exact replacement: each edit's `old` text must \
         occur exactly once (or set replace_all). Edits apply in order, all or nothing."
    }

    fn parameters_schema(&self) -> Value {
        schema_for::<FilePatchArgs>()
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let args: FilePatchArgs = parse_args(self.name(), args)?;
            let workspace = ctx.workspace.clone();
            let out = blocking(move || patch(&workspace, &args)).await?;
            output(&out)
        })
    }
}

fn patch(workspace: &Workspace, args: &FilePatchArgs) -> Result<FilePatchOutput, ToolError> {
    if args.edits.is_empty() {
        return Err(ToolError::RespondToModel(
            "file.patch: `edits` is empty; give at least one {old, new} edit".into(),
        ));
    }
    let bytes = workspace.read(&args.path)?;
    let bytes_before = bytes.len() as u64;
    let before = String::from_utf8(bytes).map_err(|_| {
        ToolError::RespondToModel(format!(
            "file.patch: `{}` is not UTF-8 text; use file.write to replace it",
            args.path
        ))
    })?;
    let (after, replacements) = apply(&before, &args.edits, &args.path)?;
    let changed = after != before;
    if changed {
        workspace.write(&args.path, after.as_bytes())?;
    }
    Ok(FilePatchOutput {
        changed,
        bytes_before,
        bytes_after: after.len() as u64,
        sha256: hex(&Sha256::digest(after.as_bytes())),
        replacements,
    })
}

/// Apply the edits in order to `text`: the new text and the number of replacements, or the
/// first edit that does not apply. Public so that resume can tell whether a patch it is about to
/// repeat was already applied, without touching the file.
pub fn apply(text: &str, edits: &[Edit], path: &str) -> Result<(String, u64), ToolError> {
    let mut current = text.to_owned();
    let mut replacements: u64 = 0;
    for (i, edit) in edits.iter().enumerate() {
        if edit.old.is_empty() {
            return Err(ToolError::RespondToModel(format!(
                "file.patch: edits[{i}].old is empty; give the exact text to replace"
            )));
        }
        let found = current.matches(edit.old.as_str()).count();
        let after_earlier = if i > 0 { " (after the earlier edits)" } else { "" };
        let replace_all = edit.replace_all.unwrap_or(false);
        match found {
            0 => {
                return Err(ToolError::RespondToModel(format!(
                    "file.patch: edits[{i}].old was not found in `{path}`{after_earlier}; \
                     no edit was applied"
                )));
            }
            1 => {}
            n if !replace_all => {
                return Err(ToolError::RespondToModel(format!(
                    "file.patch: edits[{i}].old occurs {n} times in `{path}`{after_earlier}; \
                     include more surrounding text to make it unique, or set replace_all; \
                     no edit was applied"
                )));
            }
            _ => {}
        }
        current = current.replace(edit.old.as_str(), &edit.new);
        replacements = replacements.saturating_add(found as u64);
    }
    Ok((current, replacements))
}

#[cfg(test)]
#[path = "file_patch_tests.rs"]
mod tests;
