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
    /// Evidence that held when it was gathered fails against the workspace the run left (a pev
    /// extension, docs/reference.md#4-run-result: a later step or call undid what a step had
    /// verified).
    EvidenceRegressed,
    /// A step that was to change files named in its description, `expected_outputs` or
    /// parameters changed none of them (it changed other files, or nothing): the plan said one
    /// thing and the execution did another. Decided by the harness, whatever a judge says (a pev
    /// extension, docs/reference.md#4-run-result).
    PlanExecutionMismatch,
    /// A file the run's checks judge it by (a test, test configuration, a protected file) was
    /// changed or deleted without permission: a passing check proves nothing when the run could
    /// change what it checks (a pev extension, docs/reference.md#4-run-result). Never `success`.
    OracleChanged,
    /// A hidden check (one the models never saw, run by pev when it decides the verdict) failed
    /// on the final workspace (a pev extension).
    HiddenCheckFailed,
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
    /// resolve, the assertion that failed). A pev extension, docs/reference.md#4-run-result.
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
    /// What the verifier model answered, when a postcondition without assertions was put to it
    /// (a pev extension, docs/reference.md#4-run-result). Absent when no judge was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<PostconditionJudgment>,
}

/// A verifier model's answer about one postcondition: the decomposed questions with their
/// answers, and the verdict the harness drew from them (a confident "no" to any question
/// outweighs the model's overall "holds").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PostconditionJudgment {
    /// The verifier's model.
    pub model: String,
    /// The verdict after the confidence rule: the postcondition holds.
    pub holds: bool,
    /// 0..1: how sure the verdict is.
    pub confidence: f64,
    pub answers: Vec<JudgeAnswer>,
    /// The judge's words: what shows it holds, or what is missing.
    #[serde(default)]
    pub explanation: String,
}

/// One decomposed yes/no question a judge answered, phrased so that "yes" is the good answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JudgeAnswer {
    pub question: String,
    pub yes: bool,
    /// 0..1
    pub confidence: f64,
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
///
/// `input_tokens` counts every prompt token, cached or not. The cache fields are a pev extension
/// (docs/reference.md#4-run-result), written only when a model read or wrote a prompt cache:
/// the part of `input_tokens` read from the cache, the part written to it, and what the cache
/// saved against paying every prompt token at the plain input price (negative when writes cost
/// more than reads saved).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    pub llm_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub tool_calls: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero_usd")]
    pub cache_saved_usd: f64,
}

impl Usage {
    /// Adds `other`'s model usage (calls, tokens, cost, cache) to this one; tool calls are the
    /// engine's to count and are left as they are.
    pub fn add_models(&mut self, other: &Usage) {
        self.llm_calls = self.llm_calls.saturating_add(other.llm_calls);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cost_usd += other.cost_usd;
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(other.cache_write_tokens);
        self.cache_saved_usd += other.cache_saved_usd;
    }

    /// The share of prompt tokens read from the cache, 0 to 1 (0 with no prompt tokens).
    pub fn cached_share(&self) -> f64 {
        if self.input_tokens == 0 {
            return 0.0;
        }
        self.cache_read_tokens as f64 / self.input_tokens as f64
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_usd(usd: &f64) -> bool {
    *usd == 0.0
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
    /// The final re-check of the evidence against the workspace as the run left it (a pev
    /// extension, docs/reference.md#4-run-result). Absent in results stored before pev had it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_check: Option<FinalCheck>,
}

/// What the final re-check found: every assertion of every done step, and every postcondition
/// that was verified before the end, run again once the run is over. Evidence is point-in-time;
/// this is what makes `success` a statement about the result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FinalCheck {
    /// Assertions run again at the end.
    pub rechecked: u64,
    /// Assertions that passed when their evidence was gathered and fail now.
    #[serde(default)]
    pub regressed: Vec<Regression>,
    /// Assertions that were not run again (not safely repeatable, or with nothing to compare
    /// against): their evidence is from when they ran, and only that.
    #[serde(default)]
    pub checked_once: Vec<CheckedOnce>,
    /// The run's oracle: what was recorded, what changed, the pristine re-check and the hidden
    /// checks (absent when the run recorded none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle: Option<crate::oracle::OracleCheck>,
}

/// Whose evidence an entry of [`FinalCheck`] is about: a step, or a postcondition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceOf {
    Step(String),
    Postcondition(String),
}

impl EvidenceOf {
    /// The step, when the evidence is a step's.
    pub fn step(&self) -> Option<&str> {
        match self {
            Self::Step(id) => Some(id),
            Self::Postcondition(_) => None,
        }
    }

    /// The postcondition's description, when the evidence is a postcondition's.
    pub fn postcondition(&self) -> Option<&str> {
        match self {
            Self::Step(_) => None,
            Self::Postcondition(description) => Some(description),
        }
    }
}

impl std::fmt::Display for EvidenceOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Step(id) => write!(f, "step '{id}'"),
            Self::Postcondition(description) => write!(f, "postcondition \"{description}\""),
        }
    }
}

/// Evidence that no longer holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Regression {
    pub of: EvidenceOf,
    /// The assertion's type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The workspace path the assertion reads, if it reads one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What the assertion saw when it passed.
    pub then: String,
    /// What it sees now.
    pub now: String,
    /// Calls the journal holds from after the evidence was gathered that may have undone it
    /// (`file.write site/style.css (step 'x')`); empty when the journal knows of none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_by: Vec<String>,
}

/// An assertion the final re-check did not run again, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckedOnce {
    pub of: EvidenceOf,
    #[serde(rename = "type")]
    pub kind: String,
    pub why: String,
    /// The file the assertion checks, when it names one: what the evidence depends on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}
