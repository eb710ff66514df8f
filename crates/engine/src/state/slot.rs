//! What the scheduler knows about each step, and how that is rebuilt from the journal on resume.

use std::collections::HashMap;

use pev_protocol::assertion::AssertionResult;
use pev_protocol::run::{StepResult, StepStatus};
use pev_store::StepState;
use serde_json::Value;

/// One step's state during a run.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub status: StepStatus,
    pub attempts: u32,
    pub output: Option<Value>,
    pub error: Option<String>,
    /// The step failed because an assertion failed (not the tool).
    pub by_assertion: bool,
    pub assertions: Vec<AssertionResult>,
    pub evidence: Vec<String>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    /// The step waits for a person's approval.
    pub awaiting_approval: bool,
    /// The step ran a tool call that counts as goal work (CONTRACTS.md §3).
    pub goal_action: bool,
    /// The step failed because a judge model said no with confidence.
    pub judge_rejected: bool,
    /// The step failed because it changed none of the files it named (plan-execution mismatch).
    pub mismatched: bool,
    /// Path → sha256 (`None`: absent) before the step first ran, for the paths its
    /// `content_changed` assertions compare: the final re-check compares against these.
    pub baseline: HashMap<String, Option<String>>,
}

impl Default for Slot {
    fn default() -> Self {
        Self {
            status: StepStatus::Pending,
            attempts: 0,
            output: None,
            error: None,
            by_assertion: false,
            assertions: Vec::new(),
            evidence: Vec::new(),
            started_at: None,
            ended_at: None,
            awaiting_approval: false,
            goal_action: false,
            judge_rejected: false,
            mismatched: false,
            baseline: HashMap::new(),
        }
    }
}

impl Slot {
    /// A step that will not change state again in this run.
    pub fn is_settled(&self) -> bool {
        matches!(self.status, StepStatus::Done | StepStatus::Failed | StepStatus::Skipped)
    }

    pub fn from_stored(state: &StepState) -> Self {
        Self {
            status: state.status,
            attempts: state.attempts,
            output: state.output.clone(),
            error: state.error.clone(),
            by_assertion: state.assertions.iter().any(|a| !a.passed),
            assertions: state.assertions.clone(),
            evidence: state.evidence.clone(),
            started_at: state.started_at.clone(),
            ended_at: state.ended_at.clone(),
            awaiting_approval: false,
            goal_action: false,
            judge_rejected: false,
            // The rule's message is the harness's own, so a resumed run still knows it.
            mismatched: state.status == StepStatus::Failed
                && state.error.as_deref().is_some_and(|e| e.starts_with(pev_verify::MISMATCH)),
            baseline: HashMap::new(),
        }
    }

    pub fn to_stored(&self, run_id: &str, step_id: &str) -> StepState {
        StepState {
            run_id: run_id.to_owned(),
            step_id: step_id.to_owned(),
            status: self.status,
            attempts: self.attempts,
            output: self.output.clone(),
            error: self.error.clone(),
            started_at: self.started_at.clone(),
            ended_at: self.ended_at.clone(),
            assertions: self.assertions.clone(),
            evidence: self.evidence.clone(),
        }
    }

    pub fn to_result(&self, id: &str) -> StepResult {
        StepResult {
            id: id.to_owned(),
            status: self.status,
            attempts: self.attempts,
            evidence: self.evidence.clone(),
            assertions: self.assertions.clone(),
            output: self.output.clone(),
            error: self.error.clone(),
            started_at: self.started_at.clone(),
            ended_at: self.ended_at.clone(),
        }
    }
}
