//! pev's tools: the [`Tool`] trait, the [`Registry`] that later crates (model tool use, MCP)
//! extend, the six built-in tools of CONTRACTS.md §3, the workspace sandbox they all go
//! through, and [`ToolNames`], the one mapping between a tool's plan name (`file.read`) and the
//! wire name a model is offered and calls (`file_read`).
//!
//! A tool takes JSON arguments, deserialises them into its typed argument struct (whose JSON
//! Schema is what a model is shown, so the two cannot drift), and returns JSON or a
//! [`ToolError`] that says where the failure goes: back to the model, or the end of the step.
//! Every file access goes through [`Workspace`]; every process runs in the workspace with a
//! scrubbed environment, a timeout that kills its whole process group, and capped output; every
//! HTTP request is limited to loopback and the policy's hosts.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use pev_protocol::tool::Effect;
use serde_json::Value;

pub mod builtin;
mod error;
mod listing;
pub mod names;
pub mod net;
mod registry;
mod sandbox;
pub mod spawn_mark;
mod text;

pub use builtin::http::{build_client, chain as error_chain};
pub use builtin::shell::{CommandOutput, CommandSpec, Program, run_command};
pub use error::{SandboxError, ToolError};
pub use listing::{Entry, ListOptions, Listing};
pub use names::{ToolNames, WireName, is_wire_name};
pub use pev_sandbox::{Mode as SandboxMode, Sandbox};
pub use registry::{Registry, RegistryError, ToolDefinition};
pub use sandbox::{EntryKind, FileInfo, Workspace, WriteReport};

/// A boxed future that can cross threads: what [`Tool::call`] returns, so that tools stay
/// object-safe without an extra crate.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool the executor can call.
pub trait Tool: Send + Sync {
    /// The plan name (`file.read`), what plans and the journal use; a model is offered its
    /// wire name instead (see [`names`]).
    fn name(&self) -> &'static str;
    /// What calling it can do to the world.
    fn effect(&self) -> Effect;
    /// Whether a call does all its work in pev itself, briefly: it reads or writes workspace
    /// files and starts no process and no request (the built-in `file.*` tools). The scheduler
    /// lets more such steps run together than `--jobs` allows for commands (see pev-engine's
    /// `lanes`). `false` unless a tool says so.
    fn in_process(&self) -> bool {
        false
    }
    /// One or two sentences for the model.
    fn description(&self) -> &'static str;
    /// The JSON Schema of the arguments, derived from the typed argument struct.
    fn parameters_schema(&self) -> Value;
    /// Run the tool on `args` (a JSON object) in `ctx`.
    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
}

/// Limits every tool call runs under.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolPolicy {
    /// Hosts `http.request` may reach besides loopback: exact names or `*.example.com`.
    pub allow_hosts: Vec<String>,
    /// The most bytes kept of any one output (a stream of `shell.exec`, an HTTP body, the content
    /// of `file.read`).
    pub max_output_bytes: usize,
    /// The timeout of `shell.exec` and `http.request` when the call gives none.
    pub default_timeout: Duration,
    /// Names of environment variables passed to `shell.exec` besides the fixed allow-list
    /// (`PATH`, `LANG`, `LC_ALL`, `TERM`, `TZ`).
    pub env_allow: Vec<String>,
}

/// 1 MiB: enough for any output a model should read, small enough to keep in memory per step.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// Two minutes: a build or a test run fits, a hung command does not hold a run for long.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

impl Default for ToolPolicy {
    fn default() -> Self {
        Self {
            allow_hosts: Vec::new(),
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            default_timeout: DEFAULT_TIMEOUT,
            env_allow: Vec::new(),
        }
    }
}

/// Everything a tool call may touch.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub workspace: Workspace,
    pub policy: ToolPolicy,
    /// The kernel sandbox every command runs in (shared by the run's tool calls; background
    /// processes it holds end when the last clone is dropped or at [`Sandbox::shutdown`]).
    pub sandbox: Arc<Sandbox>,
}

impl ToolContext {
    /// A context with the default policy and the sandbox off (an embedder that wants commands
    /// confined builds a [`Sandbox`] with a helper binary and sets it).
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace, policy: ToolPolicy::default(), sandbox: Arc::new(Sandbox::off()) }
    }
}
