//! Instruction steps: a step without a `tool` is carried out by an executor model with tools
//! (`pev agent`), and a step whose criteria are semantic is judged by a verifier model. The
//! engine only knows these traits; `agent` implements them with model clients.
//!
//! Every tool call an executor makes goes through a [`ToolGate`] the engine hands it: the same
//! path as a tool step's call (approval, the durable intent, hashes before and after, mutations,
//! the journal), so an executor cannot do anything the journal does not see.

use std::collections::HashMap;

use pev_protocol::Step;
use pev_protocol::assertion::AssertionResult;
use pev_protocol::run::FileMutation;
use pev_providers::TokenUsage;
use serde_json::Value;

use pev_providers::BoxFuture;

/// What an executor model gets for one attempt at one step.
#[derive(Debug, Clone)]
pub struct InstructionRequest {
    pub run_goal: String,
    pub step: Step,
    /// 1 for the first attempt.
    pub attempt: u32,
    pub max_attempts: u32,
    /// The outputs of the steps this one depends on (and only those).
    pub inputs: HashMap<String, Value>,
    /// Why earlier attempts failed: tool errors, failed assertions with their recovery hints, the
    /// judge's feedback. Empty on the first attempt.
    pub feedback: Vec<String>,
    /// The tools the executor may call (wire name, description, input schema).
    pub tools: Vec<pev_providers::ToolSpec>,
    /// What is left of the run's budget, in words the model can use ("$0.42 and 12 turns left").
    pub budget_note: Option<String>,
}

/// Why an executor stopped before saying it was done.
#[derive(Debug, Clone, PartialEq)]
pub enum Interruption {
    /// The step's turn limit was reached.
    TurnLimit(u32),
    /// The run's budget cannot pay for another model call.
    Budget(String),
    /// The model could not be reached or answered unusably (after retries).
    Provider(String),
    /// A person stopped the run while the model was thinking: no tool call was in flight, and
    /// the model call in flight was abandoned.
    Stopped,
}

/// How an executor's attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub struct InstructionOutcome {
    /// The model's final words (its claim; the harness checks the evidence, not this).
    pub summary: String,
    /// Model turns used.
    pub turns: u32,
    pub model_calls: u32,
    pub usage: TokenUsage,
    pub cost_usd: f64,
    /// `None` when the model ended its turn by itself.
    pub interrupted: Option<Interruption>,
}

/// The result of one tool call made through the gate.
#[derive(Debug, Clone, PartialEq)]
pub struct GateResult {
    /// The tool's output, or the error to show the model.
    pub output: Result<Value, String>,
    /// The call could not happen at all and the step must end (approval refused or pending, the
    /// journal failed, a sandbox escape).
    pub fatal: bool,
}

/// The engine's side of an executor's tool calls.
pub trait ToolGate: Send {
    /// Calls the tool the model named: `wire` is its wire name (`file_patch`), as offered in
    /// [`InstructionRequest::tools`]; the engine journals the call under the plan name.
    fn call<'a>(&'a mut self, wire: &'a str, arguments: Value) -> BoxFuture<'a, GateResult>;

    /// How many tool calls this session has journaled so far: a mark taken when evidence is
    /// checked, so that a later re-check can name the calls made after it. `None` when the
    /// gate journals nothing.
    fn journal_position(&self) -> Option<u64> {
        None
    }

    /// The files this session's calls have changed so far (not counting no-op writes), in
    /// order: what a step that names its files is held to. Empty when the gate records none.
    fn changed_files(&self) -> Vec<String> {
        Vec::new()
    }

    /// For a continued attempt (resume): each file a call not yet answered from the journal
    /// will write, with the hash it had before that call (`None`: absent) — the file as the
    /// interrupted session saw it at this point. Empty when nothing is being continued.
    fn recorded_hashes(&self) -> HashMap<String, Option<String>> {
        HashMap::new()
    }

    /// Whether [`ToolGate::delegate`] can run child runs here.
    fn can_delegate(&self) -> bool {
        false
    }

    /// Runs a child run for `delegation` (loop mode's `delegate` tool): journaled as a child of
    /// this step, its changes counted as this step's. Returns the child's result as the
    /// harness decided it, or why it could not run.
    fn delegate<'a>(
        &'a mut self,
        _delegation: pev_protocol::Delegation,
    ) -> BoxFuture<'a, Result<ChildVerdict, String>> {
        Box::pin(async { Err("delegation is not available in this run".to_owned()) })
    }

    /// Resolves when a person stops the run. An executor races each model call with it (a model
    /// call has no effect, so abandoning one loses nothing); tool calls always run to their end.
    /// Never resolves when the gate cannot be stopped.
    fn stopped(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::pending())
    }
}

/// A child run's result as the harness decided it, and the workspace evidence it relied on
/// (what the parent's final re-check runs again when the child succeeded).
#[derive(Debug, Clone, PartialEq)]
pub struct ChildVerdict {
    pub result: pev_protocol::run::RunResult,
    pub claims: Vec<pev_protocol::Assertion>,
}

/// Carries out instruction steps with a model and tools.
pub trait InstructionExecutor: Send + Sync {
    fn execute<'a>(
        &'a self,
        request: &'a InstructionRequest,
        tools: &'a mut dyn ToolGate,
    ) -> BoxFuture<'a, InstructionOutcome>;

    /// Whether this executor carries out the whole goal as one step with a plan of its own
    /// (loop mode) and holds that plan's steps to the files they name itself: the engine's
    /// plan-execution mismatch rule is then not applied to the one step that hosts it (its
    /// description is the goal, not a step).
    fn keeps_own_plan(&self) -> bool {
        false
    }
}

/// What the judge sees: the step, what the executor claimed, and the evidence the harness
/// gathered itself.
#[derive(Debug, Clone)]
pub struct JudgeRequest {
    pub run_goal: String,
    pub step: Step,
    /// The executor's summary, or the tool step's output, as text.
    pub claim: String,
    pub assertions: Vec<AssertionResult>,
    pub mutations: Vec<FileMutation>,
    /// Unified diffs of the files the step changed (capped).
    pub diffs: Vec<String>,
    pub evidence: Vec<String>,
    pub warnings: Vec<String>,
    pub budget_note: Option<String>,
}

/// One decomposed question and its answer (the run result's type, so what a judge answered is
/// recorded as it was given).
pub use pev_protocol::run::JudgeAnswer;

/// The judge's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeVerdict {
    pub pass: bool,
    /// 0..1: a "no" at or above the engine's threshold fails the step; below it, it is a warning.
    pub confidence: f64,
    /// What to fix, specifically (goes to the executor's next attempt).
    pub feedback: String,
    pub answers: Vec<JudgeAnswer>,
    pub model_calls: u32,
    pub usage: TokenUsage,
    pub cost_usd: f64,
}

/// Judges a step that tier 1 passed but cannot fully check, and the postconditions of a run
/// that have no assertions.
pub trait Judge: Send + Sync {
    fn judge<'a>(
        &'a self,
        request: &'a JudgeRequest,
    ) -> BoxFuture<'a, Result<JudgeVerdict, Interruption>>;

    /// Decides each postcondition of `request` from the run's evidence. A judge that cannot
    /// (the default) says so, and the postconditions stay unverified.
    fn judge_postconditions<'a>(
        &'a self,
        _request: &'a PostconditionRequest,
    ) -> BoxFuture<'a, Result<PostconditionVerdicts, Interruption>> {
        Box::pin(async {
            Err(Interruption::Provider("this judge does not decide postconditions".to_owned()))
        })
    }
}

/// What the judge sees to decide the postconditions a run could not check mechanically: the
/// evidence the harness gathered over the whole run, and (last, labelled) what models claimed.
#[derive(Debug, Clone, Default)]
pub struct PostconditionRequest {
    pub run_goal: String,
    /// The postconditions to decide, in order; the judge answers them as `p1`, `p2`, ….
    pub postconditions: Vec<String>,
    /// The plan's steps, each with what the harness recorded about it.
    pub steps: Vec<StepEvidence>,
    /// The files the run changed, with sizes and line counts.
    pub mutations: Vec<FileMutation>,
    /// Unified diffs of those files, from before the run to the workspace it left (capped).
    pub diffs: Vec<String>,
    /// The journaled tool calls, one line each (tool, arguments, result), oldest first.
    pub calls: Vec<String>,
    pub warnings: Vec<String>,
    /// What models said they did (summaries, a loop model's step notes): claims, not evidence.
    pub claims: Vec<String>,
    pub budget_note: Option<String>,
}

/// One step of the run as the postcondition judge sees it.
#[derive(Debug, Clone, Default)]
pub struct StepEvidence {
    pub id: String,
    /// Its title and description.
    pub task: String,
    /// `done`, `failed`, …
    pub status: String,
    /// What the harness recorded (files changed, assertions passed, the step judge's verdict).
    pub evidence: Vec<String>,
    pub assertions: Vec<AssertionResult>,
}

/// The judge's answers on the postconditions of a [`PostconditionRequest`], in its order:
/// `None` for one the judge did not answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PostconditionVerdicts {
    pub judgments: Vec<Option<pev_protocol::run::PostconditionJudgment>>,
    pub model_calls: u32,
    pub usage: TokenUsage,
}
