//! pev inside the agents people already run. `pev mcp` offers pev's plan tools to any MCP client
//! (Claude Code, Codex, an SDK): the same rules as loop mode (evidence required, assertions run by
//! pev when a step is marked done, at most one step in progress), with the run's state kept in the
//! journal, so `pev show` and the gate see what the client did. Because the client edits files
//! with its own tools, which pev never sees, the workspace is snapshotted (content hashes, git
//! HEAD and status) when the plan is created, and what changed is computed from the workspace,
//! never taken from the model's word. `pev gate` is the client's Stop hook: it re-checks the run
//! against the workspace as it is now and refuses the stop, with the reasons, until the evidence
//! holds, up to a cap after which the client stops and the run is recorded unfinished.
//!
//! - `rpc`: JSON-RPC 2.0 and both MCP eras (`initialize`, and the stateless `server/discover` of
//!   2026-07-28), answered by one pure function of a request.
//! - `catalogue`: the tools as clients are offered them (schemas, annotations, `alwaysLoad`),
//!   and the coercion of arguments models send with the wrong JSON type.
//! - `session`: one client's run: found or created, its state loaded from and saved to the
//!   journal around each call.
//! - `snapshot`: the workspace's files when the plan was made, and what changed since.
//! - `verdict`: the run's outcome from the journal and the workspace now.
//! - `gate`: the Stop / SubagentStop / SessionStart / PostToolUse hook command.
//! - `transcript`: a checklist from a client's own todo tools, for a session without a pev plan.
//! - `integrate`: the files that wire pev into Claude Code or Codex.
//! - `stdio`: the stdio transport; `http`: the loopback HTTP one (stateless).
//! - `client`: the other direction, `pev agent` using the tools of MCP servers listed in the
//!   user's `pev.toml`.

pub mod catalogue;
pub mod client;
pub mod client_process;
pub mod gate;
pub mod http;
pub mod integrate;
mod oracle;
pub mod rpc;
pub mod session;
pub mod snapshot;
pub mod stdio;
pub mod transcript;
pub mod unplanned;
pub mod verdict;

pub use rpc::Server;
pub use session::{SessionSource, Sessions};

/// What went wrong outside the model's control: the journal, the workspace. A model's mistake
/// is a tool result with `isError`, never this.
#[derive(Debug)]
pub struct McpError(pub String);

impl std::fmt::Display for McpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for McpError {}

impl From<pev_store::StoreError> for McpError {
    fn from(e: pev_store::StoreError) -> Self {
        Self(e.to_string())
    }
}
