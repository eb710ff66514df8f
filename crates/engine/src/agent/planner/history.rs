//! What a replan is told about the run so far: the steps that are done and the one that failed.

use pev_protocol::StepId;

/// A step that is done, as a replan shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoneStep {
    pub id: StepId,
    pub title: String,
    /// A short account of its output (the caller caps it; the prompt caps it again).
    pub output_summary: String,
}

/// The step that could not be made to pass, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub step: StepId,
    pub error: String,
    /// What the harness saw: failed assertions, the judge's feedback, tool errors.
    pub evidence: Vec<String>,
    pub attempts: u32,
}
