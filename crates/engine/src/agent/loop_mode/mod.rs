//! Loop mode (`pev agent GOAL --mode loop`): one model in one tool loop, with the workspace
//! tools (called through the engine's [`ToolGate`], so approved and journaled like any other
//! call) and the plan tools the harness answers itself (`plan_create`, `plan_show`,
//! `step_update`, `postcondition_verify`, `todo_write`; never through the gate, they touch no
//! file). The driver runs the goal as a one-step plan whose executor is a [`LoopExecutor`], then
//! reads its [`LoopReport`] to judge the run: the steps left unfinished, the postconditions only
//! claimed, a multi-step goal worked without a plan, a gate that ran out of refusals.
//!
//! The loop ends when the finalization gate (`gate`) accepts a final answer or runs out of
//! refusals, at the round limit, on a provider error (a refused budget told apart), or when the
//! tool gate says a call could not happen at all.
//!
//! - `plan_tools`: the plan's types, the tools' argument structs and schemas, the rendering.
//! - `plan_state`: what the plan tools do (creation, the rewrite rule, updates, verification).
//! - `evidence`: the assertions run to check the evidence, the before-hashes they need, and the
//!   files a step names (the plan-execution mismatch rule).
//! - `todo`: `todo_write`.
//! - `gate`: the finalization gate, the multi-step heuristic and the reminder.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use pev_providers::{
    ChatRequest, ContentBlock, Message, ModelClient, ProviderError, Role, ToolChoice,
};
use pev_tools::ToolContext;
use serde::Serialize;
use serde_json::Value;

use crate::agent::turn::{self, Call, Turn};
use crate::agent::turn::{TOOL_OUTPUT_CAP, cap_text};
use crate::instruct::{
    GateResult, InstructionExecutor, InstructionOutcome, InstructionRequest, Interruption, ToolGate,
};
use pev_providers::BoxFuture;

pub mod delegate_tool;
mod evidence;
pub mod gate;
pub mod plan_state;
pub mod plan_tools;
pub mod todo;

pub use gate::goal_is_multi_step;
pub use plan_tools::{
    DroppedStep, ModelPlan, ModelPostcondition, ModelStep, PlanRevision, StepStatus, VerifiedBy,
};
pub use todo::{TodoItem, TodoStatus};

use gate::{Decision, FinalGate, reminder_message};
pub use plan_state::EvidenceMarks;
use plan_state::{PlanBook, is_plan_tool};
use plan_tools::{PLAN_SHOW, plan_tool_specs};
use todo::{TODO_WRITE, todo_tool_spec};

/// Limits and switches of one loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopOptions {
    /// Model calls the loop may make.
    pub max_rounds: u32,
    /// Rounds without a plan or todo update after which a reminder is injected (0: never).
    pub reminder_every: u32,
    /// Premature final answers the gate refuses before it ends the loop.
    pub max_refusals: u32,
    /// The finalization gate; off, the first final answer is accepted.
    pub gate: bool,
    /// The `max_tokens` of each model call.
    pub max_tokens: u32,
}

impl Default for LoopOptions {
    fn default() -> Self {
        Self { max_rounds: 50, reminder_every: 10, max_refusals: 3, gate: true, max_tokens: 4096 }
    }
}

/// What the loop did, for the driver: the plan as it ended, every revision, the todo list, and
/// the gate's counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LoopReport {
    pub plan: Option<ModelPlan>,
    /// Every accepted `plan_create`, in order (the driver journals each as a plan version).
    pub revisions: Vec<PlanRevision>,
    pub todo: Vec<TodoItem>,
    /// The final answer the loop ended with; `None` when none was accepted.
    pub final_answer: Option<String>,
    /// Final answers the gate refused.
    pub refusals: u32,
    /// Final answers given while the work was incomplete (refused, or accepted with the gate
    /// off).
    pub premature_finalizations: u32,
    /// The gate reached its refusal cap and ended the loop.
    pub gate_exhausted: bool,
    /// Model calls answered.
    pub rounds: u32,
    /// Calls of the harness's own tools (the plan tools and todo_write), refused ones included.
    pub plan_tool_calls: u32,
    /// Whether the goal was judged multi-step (a plan was owed).
    pub multi_step_goal: bool,
    /// Where the accepted evidence was taken, for the final re-check.
    pub evidence: EvidenceMarks,
    /// What each child run that ended `success` (`delegate`) verified in the workspace: the
    /// final re-check runs it again.
    pub child_claims: Vec<ChildClaims>,
}

/// A successful child run's workspace evidence, with the step in progress when it was
/// delegated.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ChildClaims {
    pub child_run: String,
    pub step: Option<String>,
    pub claims: Vec<pev_protocol::Assertion>,
}

/// Carries out a whole goal as one model loop with plan tools and the finalization gate.
pub struct LoopExecutor {
    client: Arc<dyn ModelClient>,
    model: String,
    options: LoopOptions,
    ctx: Arc<ToolContext>,
    report: Mutex<LoopReport>,
    stop_hook: Option<StopHook>,
}

/// Asked before a final answer is accepted: `Some(reason)` blocks it (the `stop` hook).
pub type StopHook =
    Arc<dyn Fn(String) -> pev_providers::BoxFuture<'static, Option<String>> + Send + Sync>;

/// The state of one `execute`, kept out of the mutex so no lock is held across an await.
struct Run {
    book: PlanBook,
    todo: Vec<TodoItem>,
    gate: FinalGate,
    final_answer: Option<String>,
    gate_exhausted: bool,
    rounds: u32,
    plan_tool_calls: u32,
    quiet_rounds: u32,
    child_claims: Vec<ChildClaims>,
}

impl LoopExecutor {
    /// `ctx` is the workspace the plan tools check assertions in (the engine's own).
    pub fn new(
        client: Arc<dyn ModelClient>,
        model: String,
        options: LoopOptions,
        ctx: Arc<ToolContext>,
    ) -> Self {
        Self {
            client,
            model,
            options,
            ctx,
            report: Mutex::new(LoopReport::default()),
            stop_hook: None,
        }
    }

    /// Runs `hook` before accepting a final answer (also with the gate off: a hook that
    /// blocks is never bypassed).
    pub fn with_stop_hook(mut self, hook: StopHook) -> Self {
        self.stop_hook = Some(hook);
        self
    }

    /// What the last (or current) `execute` did, as of its last round.
    pub fn report(&self) -> LoopReport {
        self.report.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Publish `run` as the report. Done every round, so a loop the engine abandons (a timeout
    /// drops the future) still leaves what it had done.
    fn publish(&self, run: &Run) {
        let report = LoopReport {
            plan: run.book.plan.clone(),
            revisions: run.book.revisions.clone(),
            todo: run.todo.clone(),
            final_answer: run.final_answer.clone(),
            refusals: run.gate.refusals,
            premature_finalizations: run.gate.premature,
            gate_exhausted: run.gate_exhausted,
            rounds: run.rounds,
            plan_tool_calls: run.plan_tool_calls,
            multi_step_goal: run.gate.multi_step(),
            evidence: run.book.marks(),
            child_claims: run.child_claims.clone(),
        };
        *self.report.lock().unwrap_or_else(PoisonError::into_inner) = report;
    }

    async fn run(
        &self,
        request: &InstructionRequest,
        tools: &mut dyn ToolGate,
    ) -> InstructionOutcome {
        let goal = request
            .step
            .description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .unwrap_or(&request.run_goal);
        let mut run = Run {
            book: PlanBook::default(),
            todo: Vec::new(),
            gate: FinalGate::new(self.options.gate, self.options.max_refusals, goal),
            final_answer: None,
            gate_exhausted: false,
            rounds: 0,
            plan_tool_calls: 0,
            quiet_rounds: 0,
            child_claims: Vec::new(),
        };
        let mut outcome = InstructionOutcome {
            summary: String::new(),
            turns: 0,
            model_calls: 0,
            usage: Default::default(),
            cost_usd: 0.0,
            interrupted: None,
        };
        let mut chat = ChatRequest::new(self.model.clone(), vec![Message::user(kickoff(goal))]);
        chat.system = Some(system_prompt(request, &self.options, run.gate.multi_step()));
        chat.tools = offered_tools(&request.tools);
        let can_delegate = tools.can_delegate();
        if can_delegate {
            chat.tools.insert(0, delegate_tool::delegate_tool_spec());
            if let Some(system) = chat.system.as_mut() {
                system.push_str(DELEGATE_NOTE);
            }
        }
        chat.tool_choice = ToolChoice::Auto;
        chat.max_tokens = self.options.max_tokens;
        chat.cache = true;
        let workspace: HashSet<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        let mut nudged = false;

        outcome.interrupted = loop {
            self.publish(&run);
            if outcome.turns >= self.options.max_rounds {
                break Some(Interruption::TurnLimit(self.options.max_rounds));
            }
            let answer = tokio::select! {
                answer = self.client.chat(&chat) => answer,
                () = tools.stopped() => break Some(Interruption::Stopped),
            };
            let response = match answer {
                Ok(response) => response,
                // Refused before it was sent: not a model call.
                Err(ProviderError::BudgetExhausted(why)) => break Some(Interruption::Budget(why)),
                Err(e) => {
                    outcome.model_calls = outcome.model_calls.saturating_add(1);
                    break Some(Interruption::Provider(e.to_string()));
                }
            };
            outcome.turns = outcome.turns.saturating_add(1);
            outcome.model_calls = outcome.model_calls.saturating_add(1);
            outcome.usage.add(&response.usage);
            run.rounds = outcome.turns;
            let turn = turn::read(&response);
            chat.messages.push(Message::assistant(response.content));
            let (calls, text) = match turn {
                Turn::Calls(calls) => (calls, String::new()),
                Turn::Final(text) => (Vec::new(), text),
                // Asked once to go on; a second empty answer goes to the gate like any other.
                Turn::Empty if !nudged => {
                    nudged = true;
                    chat.messages.push(Message::user(turn::EMPTY_ANSWER));
                    continue;
                }
                Turn::Empty => (Vec::new(), String::new()),
                Turn::CutOff(calls) => {
                    let reply = turn::cut_off_reply(&calls, chat.max_tokens);
                    chat.messages.push(Message { role: Role::User, content: reply });
                    continue;
                }
                Turn::Refused(text) => {
                    break Some(Interruption::Provider(turn::refusal("agent", &text)));
                }
            };

            if calls.is_empty() {
                let mut decision = run.gate.on_final_answer(run.book.plan.as_ref());
                if let (Decision::Accept { .. }, Some(hook)) = (&decision, &self.stop_hook)
                    && let Some(reason) = hook(text.clone()).await
                {
                    decision = run.gate.on_stop_blocked(&reason);
                }
                match decision {
                    Decision::Accept { .. } => {
                        outcome.summary.clone_from(&text);
                        run.final_answer = Some(text);
                        break None;
                    }
                    Decision::Refuse(message) => {
                        chat.messages.push(Message::user(message));
                        continue;
                    }
                    Decision::Exhausted(message) => {
                        run.gate_exhausted = true;
                        break Some(Interruption::Provider(message));
                    }
                }
            }

            let mut results = Vec::with_capacity(calls.len().saturating_add(1));
            let mut updated = false;
            let mut fatal = None;
            for Call { id, name, input } in calls {
                let reply = if name == delegate_tool::DELEGATE && can_delegate {
                    match delegate_tool::read(input) {
                        Err(e) => Err(e),
                        Ok(delegation) => match tools.delegate(delegation).await {
                            Err(e) => Err(e),
                            Ok(child) => {
                                let status =
                                    crate::verdict::finish::status_name(child.result.status);
                                run.book.note_child(&child.result.run_id, status);
                                if !child.claims.is_empty() {
                                    let step = run.book.plan.as_ref().and_then(|p| {
                                        p.steps
                                            .iter()
                                            .find(|s| s.status == StepStatus::InProgress)
                                            .map(|s| s.id.clone())
                                    });
                                    run.child_claims.push(ChildClaims {
                                        child_run: child.result.run_id.clone(),
                                        step,
                                        claims: child.claims,
                                    });
                                }
                                Ok(child_verdict(&child.result))
                            }
                        },
                    }
                } else if is_plan_tool(&name) || name == TODO_WRITE {
                    run.plan_tool_calls = run.plan_tool_calls.saturating_add(1);
                    updated |= name != PLAN_SHOW;
                    if name == TODO_WRITE {
                        todo::write(&mut run.todo, input)
                    } else {
                        run.book.note_position(tools.journal_position());
                        run.book.note_changes(tools.changed_files());
                        run.book.note_recorded(tools.recorded_hashes());
                        run.book.call(&name, input, &self.ctx).await
                    }
                } else if workspace.contains(name.as_str()) {
                    let GateResult { output, fatal: is_fatal } = tools.call(&name, input).await;
                    let output = output.map(|v| render(&v));
                    if is_fatal {
                        let why = output.unwrap_or_else(|e| e);
                        fatal = Some(format!(
                            "the tool call {name} could not be made: {}",
                            cap_text(&why, TOOL_OUTPUT_CAP)
                        ));
                        break;
                    }
                    output
                } else {
                    Err(unknown_tool(&name, &chat))
                };
                let (content, is_error) = match reply {
                    Ok(text) => (cap_text(&text, TOOL_OUTPUT_CAP), false),
                    Err(text) => (cap_text(&text, TOOL_OUTPUT_CAP), true),
                };
                results.push(ContentBlock::ToolResult { tool_use_id: id, content, is_error });
            }
            if let Some(why) = fatal {
                break Some(Interruption::Provider(why));
            }
            run.quiet_rounds = if updated { 0 } else { run.quiet_rounds.saturating_add(1) };
            let every = self.options.reminder_every;
            if every > 0 && run.quiet_rounds >= every {
                results.push(ContentBlock::text(reminder_message(
                    run.quiet_rounds,
                    run.book.plan.as_ref(),
                )));
                run.quiet_rounds = 0;
            }
            chat.messages.push(Message { role: Role::User, content: results });
        };
        self.publish(&run);
        outcome
    }
}

impl InstructionExecutor for LoopExecutor {
    fn execute<'a>(
        &'a self,
        request: &'a InstructionRequest,
        tools: &'a mut dyn ToolGate,
    ) -> BoxFuture<'a, InstructionOutcome> {
        Box::pin(self.run(request, tools))
    }

    fn keeps_own_plan(&self) -> bool {
        true
    }
}

/// Every tool a loop-mode model is offered: the harness's tools first, then the workspace's
/// (minus any that would shadow a plan tool: those names are answered by the harness whatever
/// the registry holds). `pev doctor --ping` offers the same list.
pub fn offered_tools(workspace: &[pev_providers::ToolSpec]) -> Vec<pev_providers::ToolSpec> {
    let mut tools = plan_tool_specs();
    tools.push(todo_tool_spec());
    tools.extend(
        workspace.iter().filter(|t| !is_plan_tool(&t.name) && t.name != TODO_WRITE).cloned(),
    );
    tools
}

/// What the system prompt says about `delegate` when it is offered.
const DELEGATE_NOTE: &str = "\n## Sub-agents\nThe delegate tool hands a self-contained part of \
    the task to a sub-agent (a child run with its own plan and verification), optionally limited \
    to a directory (scope) and a budget. It returns the child's verdict as the harness decided \
    it. A step whose work a child did can be marked done only if that child ended success.\n";

/// A child run's verdict as the model reads it: the harness's decision, not the child's words.
fn child_verdict(child: &pev_protocol::run::RunResult) -> String {
    let reasons: Vec<String> = child
        .reasons
        .iter()
        .map(|r| match &r.step {
            Some(step) => format!("{} (step {step})", r.message),
            None => r.message.clone(),
        })
        .collect();
    let changed: Vec<&str> =
        child.file_mutations.iter().filter(|m| !m.no_op).map(|m| m.path.as_str()).collect();
    serde_json::json!({
        "child_run": child.run_id,
        "status": crate::verdict::finish::status_name(child.status),
        "reasons": reasons,
        "changed_files": changed,
    })
    .to_string()
}

/// The answer to a call of a tool the model was not offered: the gate is not asked.
fn unknown_tool(name: &str, chat: &ChatRequest) -> String {
    let available: Vec<&str> = chat.tools.iter().map(|t| t.name.as_str()).collect();
    format!("unknown tool {name}; available: {}", available.join(", "))
}

/// A value as the model reads it: a string as itself, anything else as compact JSON.
fn render(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The first user message: the goal, as the user gave it.
fn kickoff(goal: &str) -> String {
    format!("Task: {goal}\n\nStart now, using the tools.")
}

/// The system prompt. It is the same with the gate on and off, so an eval of the two measures
/// the gate and nothing else.
pub(crate) fn system_prompt(
    request: &InstructionRequest,
    options: &LoopOptions,
    multi_step: bool,
) -> String {
    let mut p = String::with_capacity(3072);
    p.push_str(
        "You are an agent carrying out a task in a workspace with tools, supervised by the pev \
         harness.\n\n## Tools\n",
    );
    let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    let names = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
    let _ = writeln!(p, "Workspace tools: {names}. Every call is recorded.");
    p.push_str(
        "Plan tools, answered by the harness: plan_create, plan_show, step_update, \
         postcondition_verify, todo_write.\n\n## How to work\n",
    );
    if multi_step {
        p.push_str("- This task has several parts: start by calling plan_create.\n");
    } else {
        p.push_str("- If the task needs more than one step, start by calling plan_create.\n");
    }
    let _ = write!(
        p,
        "- A plan has an objective, ordered steps and postconditions that must hold at the end. \
         Give steps and postconditions assertions wherever the result can be checked \
         (file_contains, content_changed, command_succeeds, …): the harness runs them itself.\n\
         - Mark a step in_progress when you start it (at most one at a time), and done with \
         evidence when it is finished: what you changed and how you checked it. Evidence is \
         checked: if the step's assertions fail the update is refused and you are told what the \
         harness saw. A step that cannot be done is marked blocked, with the reason.\n\
         - When the work is done, verify each postcondition with postcondition_verify.\n\
         - To change the plan, call plan_create again: keep every step of the current plan \
         (same id) or list it in `dropped` with a reason.\n\
         - todo_write keeps a todo list for finer-grained work, if it helps.\n\
         - Make changes with the workspace tools; describing a change is not making it.\n\
         - When a tool returns an error, read it and change the call; do not repeat it \
         unchanged.\n\n\
         ## Finishing\n\
         End your turn without a tool call, with a short summary of what you did, only when \
         every step is done or blocked and every postcondition is verified. The harness checks \
         the plan when you finish: your claim of success is not believed, only the recorded \
         evidence. You have at most {} rounds.\n",
        options.max_rounds
    );
    if !request.feedback.is_empty() {
        p.push_str("\n## Why an earlier attempt failed (fix this)\n");
        for (i, feedback) in request.feedback.iter().enumerate() {
            let _ = writeln!(p, "{}. {feedback}", i.saturating_add(1));
        }
    }
    if let Some(note) = &request.budget_note {
        let _ = writeln!(p, "\n## Budget\n{note}. Spend it on the work, not on exploration.");
    }
    p
}

#[cfg(test)]
#[path = "loop_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "delegate_tests.rs"]
mod delegate_tests;
