//! The six built-in tools of CONTRACTS.md §3 and the plumbing they share: argument parsing into
//! a typed struct, schema derivation from that struct, and running blocking file I/O off the
//! async workers.

use std::sync::Arc;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Tool, ToolError};

mod confined;
pub mod file_list;
pub mod file_patch;
pub mod file_read;
pub mod file_write;
pub mod http;
pub mod shell;

/// One instance of each built-in tool.
pub(crate) fn all() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(file_read::FileRead),
        Arc::new(file_list::FileList),
        Arc::new(file_write::FileWrite),
        Arc::new(file_patch::FilePatch),
        Arc::new(shell::ShellExec),
        Arc::new(http::HttpRequest::default()),
    ]
}

/// Deserialise a tool's arguments; a mismatch goes back to the model with serde's message, which
/// names the field (`unknown field `patth`, expected one of ...`).
pub(crate) fn parse_args<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args)
        .map_err(|e| ToolError::RespondToModel(format!("invalid arguments for {tool}: {e}")))
}

/// The JSON Schema of an argument struct, self-contained (sub-schemas inlined, no `$schema`
/// key), which is the form model APIs accept.
pub(crate) fn schema_for<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

/// Serialise a tool's output struct.
pub(crate) fn output<T: Serialize>(value: &T) -> Result<Value, ToolError> {
    serde_json::to_value(value)
        .map_err(|e| ToolError::Fatal(format!("cannot serialise the tool output: {e}")))
}

/// Run blocking file-system work on tokio's blocking pool, so that a big read does not stall
/// the steps running beside it.
pub(crate) async fn blocking<T, F>(work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::Fatal(format!("the tool's worker failed: {e}")))?
}

/// A timeout given in seconds by a plan or a model, checked.
pub(crate) fn timeout_from_secs(
    tool: &str,
    secs: Option<f64>,
    default: std::time::Duration,
) -> Result<std::time::Duration, ToolError> {
    match secs {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 => std::time::Duration::try_from_secs_f64(s)
            .map_err(|e| ToolError::RespondToModel(format!("{tool}: timeout_s {s}: {e}"))),
        Some(s) => Err(ToolError::RespondToModel(format!(
            "{tool}: timeout_s must be a positive number of seconds, got {s}"
        ))),
    }
}
