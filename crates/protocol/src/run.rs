//! The run result and its parts (CONTRACTS.md §4): what `pev run --json`, `pev agent --json` and
//! `pev show RUN --format json` print as their last line.
//!
//! These are plain data. The rule that decides `status` from them lives in the verifier; this
//! module only fixes the shape users and scripts rely on.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::assertion::AssertionResult;

/// The outcome of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Success,
    Partial,
    Failed,
    AwaitingApproval,
}

/// Why a run is not `success`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    StepFailed,
    StepsNotRun,
    AssertionFailed,
    PostconditionUnverified,
    /// The goal asks for a change, but no effect ran.
    NoEffects,
    NoOpMutation,
    BudgetExhausted,
    JudgeRejected,
    Stagnation,
    Cancelled,
    ApprovalPending,
}

/// One reason, with the step it is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Reason {
    pub code: ReasonCode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    pub message: String,
}

/// A step's state. The model may propose one; only the verifier sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    InProgress,
    Done,
    Failed,
    Blocked,
    Skipped,
}

/// What happened to one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepResult {
    pub id: String,
    pub status: StepStatus,
    pub attempts: u32,
    #[serde(default)]
    pub evidence: Vec<String>,
    #[serde(default)]
    pub assertions: Vec<AssertionResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Why the step failed or was skipped (the tool's error, the reference that did not
    /// resolve, the assertion that failed). An addition to CONTRACTS.md §4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
}

/// Whether a postcondition holds, and what shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PostconditionResult {
    pub description: String,
    pub satisfied: bool,
    pub evidence: String,
}

/// A file the run changed (or tried to change without effect).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FileMutation {
    pub path: String,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub lines_added: u64,
    pub lines_removed: u64,
    /// A write or patch that left the file exactly as it was.
    pub no_op: bool,
}

/// What the run consumed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    pub llm_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub tool_calls: u64,
}

/// The whole result of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunResult {
    pub run_id: String,
    pub goal: String,
    pub status: RunStatus,
    /// Empty only for success.
    pub reasons: Vec<Reason>,
    /// At least one write or exec step, or a non-GET http.request, finished successfully.
    pub goal_actions_executed: bool,
    pub steps: Vec<StepResult>,
    pub postconditions: Vec<PostconditionResult>,
    pub file_mutations: Vec<FileMutation>,
    pub warnings: Vec<String>,
    pub usage: Usage,
    pub duration_ms: u64,
}
