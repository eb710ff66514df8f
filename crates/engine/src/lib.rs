//! pev's scheduler: runs a plan's steps as a DAG over `depends_on` and references, calls tools in
//! the workspace sandbox, checks each step's assertions, journals everything, and resumes a
//! crashed run without repeating its side effects.

use pev_protocol::event::Event;
use serde_json::Value;

pub mod resolve;

/// Receives every event of a run, in `seq` order, as it is recorded. The CLI's live view and
/// its `--json` printer are observers.
pub trait Observer: Send + Sync {
    fn on_event(&self, event: &Event);
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct Silent;

impl Observer for Silent {
    fn on_event(&self, _event: &Event) {}
}

/// A step that needs a person's yes before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    pub step: String,
    pub title: String,
    pub tool: Option<String>,
    /// The resolved arguments the tool would be called with.
    pub arguments: Value,
    /// Why approval is needed: `requires_approval` or the policy's `approve_tools`.
    pub reason: String,
}

/// A person's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    Yes,
    No,
    /// Nobody can answer now (no TTY): the run stops `awaiting_approval`.
    Defer,
}

/// Asks for approval. Called from a blocking thread, one request at a time.
pub trait Approver: Send + Sync {
    fn decide(&self, request: &ApprovalRequest) -> Approval;
}
