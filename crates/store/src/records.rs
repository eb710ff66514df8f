//! The rows of the journal as Rust values: what the engine hands the [`crate::Journal`] to write
//! ([`Record`] and its parts) and what [`crate::Store`] reads back ([`RunRecord`], [`RunSummary`]).
//!
//! Enumerations are stored as the same snake_case words their JSON uses, so a person reading
//! the database with `sqlite3` sees `done`, `write`, `after`, not numbers.

use pev_protocol::assertion::AssertionResult;
use pev_protocol::event::Event;
use pev_protocol::run::{FileMutation, RunResult, StepStatus};
use pev_protocol::tool::Effect;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A new run, as `pev run` starts it: the `runs` row and plan version 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    pub run_id: String,
    pub goal: String,
    pub workspace: String,
    pub plan: Value,
    pub options: Value,
    pub created_at: String,
}

/// One line of `pev runs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub run_id: String,
    pub goal: String,
    pub status: String,
    pub created_at: String,
    pub updated_at: String,
    /// Steps of the latest plan version (or of the step states, if more were recorded).
    pub steps_total: u64,
    /// Steps whose state is `done`.
    pub steps_done: u64,
    /// For a child run (a delegated step's): its parent run and step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_step: Option<String>,
}

/// A run's id, status, workspace and options (see [`crate::Store::run_options`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    pub run_id: String,
    pub status: String,
    pub workspace: String,
    pub options: Value,
}

/// Everything the journal knows about one run: what `pev show` prints and `pev resume` replays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub run_id: String,
    pub goal: String,
    pub workspace: String,
    pub status: String,
    pub created_at: String,
    pub updated_at: String,
    pub options: Value,
    /// The latest plan version.
    pub plan: Value,
    pub plan_version: u32,
    pub result: Option<RunResult>,
    /// In the order the steps were first recorded.
    pub steps: Vec<StepState>,
    /// In the order they started.
    pub tool_calls: Vec<ToolCallRecord>,
    pub file_hashes: Vec<FileHashRecord>,
    pub mutations: Vec<MutationRecord>,
    pub approvals: Vec<ApprovalRecord>,
    /// The sequence number the next event of this run takes (max + 1; 0 for none).
    pub next_seq: u64,
}

/// One write for the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    /// Appended; a second event with the same (run, seq) is an error.
    Event(Event),
    /// Inserted or replaced: the step's latest state.
    StepState(StepState),
    ToolCallStarted(ToolCallStart),
    /// Completes the call recorded by `ToolCallStarted`; an unknown call is an error.
    ToolCallFinished(ToolCallEnd),
    FileHash(FileHashRecord),
    /// Content-addressed: writing the same blob twice keeps one.
    Blob {
        sha256: String,
        content: Vec<u8>,
    },
    Mutation(MutationRecord),
    RunStatus {
        run_id: String,
        status: String,
        result: Option<Box<RunResult>>,
        updated_at: String,
    },
    PlanVersion {
        run_id: String,
        version: u32,
        plan: Value,
        reason: String,
        created_at: String,
    },
    /// A second approval of the same step keeps the first.
    Approval(ApprovalRecord),
    /// One model call; its `seq` is assigned by the writer (the next in the run).
    ModelCall(Box<ModelCallRecord>),
}

impl Record {
    /// The record's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Event(_) => "event",
            Self::StepState(_) => "step state",
            Self::ToolCallStarted(_) => "tool call start",
            Self::ToolCallFinished(_) => "tool call end",
            Self::FileHash(_) => "file hash",
            Self::Blob { .. } => "blob",
            Self::Mutation(_) => "mutation",
            Self::RunStatus { .. } => "run status",
            Self::PlanVersion { .. } => "plan version",
            Self::Approval(_) => "approval",
            Self::ModelCall(_) => "model call",
        }
    }

    /// The run the record belongs to (blobs belong to none).
    pub fn run_id(&self) -> Option<&str> {
        match self {
            Self::Event(e) => Some(&e.run_id),
            Self::StepState(s) => Some(&s.run_id),
            Self::ToolCallStarted(s) => Some(&s.run_id),
            Self::ToolCallFinished(e) => Some(&e.run_id),
            Self::FileHash(h) => Some(&h.run_id),
            Self::Blob { .. } => None,
            Self::Mutation(m) => Some(&m.run_id),
            Self::RunStatus { run_id, .. } | Self::PlanVersion { run_id, .. } => Some(run_id),
            Self::Approval(a) => Some(&a.run_id),
            Self::ModelCall(m) => Some(&m.run_id),
        }
    }
}

/// One call to a model: who made it (role, step, attempt), what answered (provider, server,
/// model, response id, why it stopped), what it consumed and how long it took, or how it
/// failed. What the tracing export's `chat` spans and the report's timeline are drawn from.
/// Never a key; the conversation itself is not stored here.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelCallRecord {
    pub run_id: String,
    /// 1, 2, … in the order the calls were journaled within the run (assigned on write).
    #[serde(default)]
    pub seq: u64,
    /// `planner`, `executor`, `verifier`.
    pub role: String,
    /// The step the call was made for (none for the planner's calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// `anthropic`, `openai`, `script`.
    pub provider: String,
    /// The API's host (and port), when the client talks to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub request_model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// `end_turn`, `tool_use`, `max_tokens`, `refusal`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// What the call cost at the run's prices; none when the model has no price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    pub started_at: String,
    pub duration_ms: u64,
    /// The kind of failure (`rate_limited`, `timeout`, `abandoned`, …); none on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The request as it was sent, by reference to blobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<RequestRef>,
    /// The blob of the response as it was received (JSON), when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_sha256: Option<String>,
    /// The attempts of this call that failed and were retried, in order (what failed, how long
    /// the client waited): the call's record is its last attempt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retries: Vec<String>,
}

/// A model request kept without storing a conversation's growing prefix again on every turn:
/// its messages are the first `prior_messages` of call `prior`'s (itself stored the same way),
/// then `messages`; every message, the system prompt and the tool definitions are blobs
/// (content-addressed, so each is stored once however many calls send it).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RequestRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior: Option<u64>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prior_messages: usize,
    /// Blob sha256s of the messages after the prior ones, in order.
    pub messages: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The blob of the tool definitions (a JSON array).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<String>,
    /// The rest of the request as sent: `max_tokens`, `tool_choice`, `temperature`, …
    #[serde(default)]
    pub params: Value,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A step's state; recording it again replaces the previous one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepState {
    pub run_id: String,
    pub step_id: String,
    pub status: StepStatus,
    pub attempts: u32,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub assertions: Vec<AssertionResult>,
    pub evidence: Vec<String>,
}

/// A tool call about to run, written (durably, for effects) before it runs, so a resumed run
/// knows what may have happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallStart {
    pub run_id: String,
    pub call_id: String,
    pub step_id: String,
    pub attempt: u32,
    pub tool: String,
    pub effect: Effect,
    pub arguments: Value,
    /// The file a write or patch targets.
    pub path: Option<String>,
    /// The target's hash before the call (None: absent or not a file tool).
    pub pre_sha256: Option<String>,
    /// The hash the target will have if the call succeeds (write: known in advance).
    pub intended_sha256: Option<String>,
    pub started_at: String,
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallEnd {
    pub run_id: String,
    pub call_id: String,
    /// Finished, Failed or Recovered (Started is not an end).
    pub status: ToolCallStatus,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub ended_at: String,
    pub duration_ms: u64,
}

/// Where a tool call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    Started,
    Finished,
    Failed,
    /// On resume, the call's effect was found already applied and was not run again.
    Recovered,
}

impl ToolCallStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Finished => "finished",
            Self::Failed => "failed",
            Self::Recovered => "recovered",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "started" => Self::Started,
            "finished" => Self::Finished,
            "failed" => Self::Failed,
            "recovered" => Self::Recovered,
            _ => return None,
        })
    }
}

/// A tool call as the journal holds it: its start and, once it ended, its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    pub run_id: String,
    pub call_id: String,
    pub step_id: String,
    pub attempt: u32,
    pub tool: String,
    pub effect: Effect,
    pub arguments: Value,
    pub path: Option<String>,
    pub pre_sha256: Option<String>,
    pub intended_sha256: Option<String>,
    pub started_at: String,
    pub status: ToolCallStatus,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub ended_at: Option<String>,
    pub duration_ms: Option<u64>,
}

/// Whether a file hash was taken before or after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HashPhase {
    Before,
    After,
}

impl HashPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Before => "before",
            Self::After => "after",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "before" => Some(Self::Before),
            "after" => Some(Self::After),
            _ => None,
        }
    }
}

/// A file's hash around a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileHashRecord {
    pub run_id: String,
    pub step_id: String,
    pub path: String,
    pub phase: HashPhase,
    /// None: the file did not exist.
    pub sha256: Option<String>,
    pub bytes: Option<u64>,
    pub at: String,
}

/// A file the run changed, with the hashes of the blobs holding its two versions (for diffs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MutationRecord {
    pub run_id: String,
    pub step_id: String,
    pub mutation: FileMutation,
    pub before_sha256: Option<String>,
    pub after_sha256: Option<String>,
}

/// The approval key of running again `call_id` of `step`, a call cut off by a crash that may
/// have run: `STEP@CALL`. `pev approve RUN STEP` records it beside the step's own approval.
pub fn rerun_approval_key(step: &str, call_id: &str) -> String {
    format!("{step}@{call_id}")
}

/// A person's (or `--yes`'s) approval of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    pub run_id: String,
    pub step_id: String,
    pub by: String,
    pub at: String,
}

/// A step status as stored (its JSON word).
pub fn step_status_str(s: StepStatus) -> &'static str {
    match s {
        StepStatus::Pending => "pending",
        StepStatus::InProgress => "in_progress",
        StepStatus::Done => "done",
        StepStatus::Failed => "failed",
        StepStatus::Blocked => "blocked",
        StepStatus::Skipped => "skipped",
    }
}

pub(crate) fn parse_step_status(s: &str) -> Option<StepStatus> {
    Some(match s {
        "pending" => StepStatus::Pending,
        "in_progress" => StepStatus::InProgress,
        "done" => StepStatus::Done,
        "failed" => StepStatus::Failed,
        "blocked" => StepStatus::Blocked,
        "skipped" => StepStatus::Skipped,
        _ => return None,
    })
}

/// An effect class as stored (its JSON word).
pub(crate) fn effect_str(e: Effect) -> &'static str {
    match e {
        Effect::Read => "read",
        Effect::Write => "write",
        Effect::Exec => "exec",
        Effect::Network => "network",
    }
}

pub(crate) fn parse_effect(s: &str) -> Option<Effect> {
    Some(match s {
        "read" => Effect::Read,
        "write" => Effect::Write,
        "exec" => Effect::Exec,
        "network" => Effect::Network,
        _ => return None,
    })
}
