//! The executor model: carries out one instruction step (a step without `tool`) as a tool loop.
//! The model sees a system prompt scoped to that step alone (its description, criteria, the
//! assertions it will be checked against, its dependencies' outputs, the feedback of earlier
//! attempts, the budget left), calls tools through the engine's [`ToolGate`] (so every call is
//! approved, hashed and journaled like a tool step's), gets the results back paired by id, and
//! ends its turn with a summary. That summary is only a claim: the engine verifies the evidence.
//!
//! The loop stops when the model ends its turn without a tool call, at the step's turn limit, on
//! a provider error (a refused budget is told apart from the rest), on a refusal, or when the gate
//! says a call could not happen at all. An answer cut off at the token limit has none of its calls
//! made and the model is asked to go on more briefly; an empty one is asked once to go on
//! ([`super::turn`]).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;

use pev_providers::{
    ChatRequest, ContentBlock, Message, ModelClient, ProviderError, Role, ToolChoice,
};
use serde_json::Value;

use super::turn::{self, Call, Turn};
use crate::instruct::{
    GateResult, InstructionExecutor, InstructionOutcome, InstructionRequest, Interruption, ToolGate,
};
use pev_providers::BoxFuture;

pub(crate) use super::turn::{TOOL_OUTPUT_CAP, cap_text};

/// How much of one dependency's output goes into the system prompt.
pub(crate) const INPUT_CAP: usize = 4 * 1024;

/// Limits of one attempt at one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutorOptions {
    /// Model turns (calls) one attempt may use.
    pub max_turns_per_step: u32,
    /// The `max_tokens` of each model call.
    pub max_tokens: u32,
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        Self { max_turns_per_step: 12, max_tokens: 4096 }
    }
}

/// Carries out instruction steps with a model and the gate's tools.
pub struct ModelExecutor {
    client: Arc<dyn ModelClient>,
    model: String,
    options: ExecutorOptions,
}

impl ModelExecutor {
    pub fn new(client: Arc<dyn ModelClient>, model: String, options: ExecutorOptions) -> Self {
        Self { client, model, options }
    }

    async fn run(
        &self,
        request: &InstructionRequest,
        tools: &mut dyn ToolGate,
    ) -> InstructionOutcome {
        let max_turns = self.options.max_turns_per_step;
        let mut outcome = InstructionOutcome {
            summary: String::new(),
            turns: 0,
            model_calls: 0,
            usage: Default::default(),
            cost_usd: 0.0,
            interrupted: None,
        };
        // One request, grown turn by turn, so the conversation is not copied on every call.
        let mut chat = ChatRequest::new(self.model.clone(), vec![Message::user(kickoff(request))]);
        chat.system = Some(system_prompt(request, max_turns));
        chat.tools = request.tools.clone();
        chat.tool_choice = ToolChoice::Auto;
        chat.max_tokens = self.options.max_tokens;
        chat.cache = true;
        let known: HashSet<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        let mut nudged = false;

        loop {
            // Checked before the call: the tool calls of the last allowed turn have been made
            // (their effects are real and the verifier should see them), but the model gets no
            // further turn to read their results.
            if outcome.turns >= max_turns {
                outcome.interrupted = Some(Interruption::TurnLimit(max_turns));
                return outcome;
            }
            let answer = tokio::select! {
                answer = self.client.chat(&chat) => answer,
                () = tools.stopped() => {
                    outcome.interrupted = Some(Interruption::Stopped);
                    return outcome;
                }
            };
            let response = match answer {
                Ok(response) => response,
                // Refused before it was sent: not a model call.
                Err(ProviderError::BudgetExhausted(why)) => {
                    outcome.interrupted = Some(Interruption::Budget(why));
                    return outcome;
                }
                Err(e) => {
                    outcome.model_calls = outcome.model_calls.saturating_add(1);
                    outcome.interrupted = Some(Interruption::Provider(e.to_string()));
                    return outcome;
                }
            };
            outcome.turns = outcome.turns.saturating_add(1);
            outcome.model_calls = outcome.model_calls.saturating_add(1);
            outcome.usage.add(&response.usage);
            outcome.summary = response.text().trim().to_owned();
            let turn = turn::read(&response);
            chat.messages.push(Message::assistant(response.content));
            let calls = match turn {
                Turn::Calls(calls) => calls,
                Turn::Final(_) => return outcome,
                // Asked once to go on; a second empty answer ends the attempt, and the evidence
                // decides as always.
                Turn::Empty if !nudged => {
                    nudged = true;
                    chat.messages.push(Message::user(turn::EMPTY_ANSWER));
                    continue;
                }
                Turn::Empty => return outcome,
                Turn::CutOff(calls) => {
                    let reply = turn::cut_off_reply(&calls, chat.max_tokens);
                    chat.messages.push(Message { role: Role::User, content: reply });
                    continue;
                }
                Turn::Refused(text) => {
                    outcome.interrupted =
                        Some(Interruption::Provider(turn::refusal("executor", &text)));
                    return outcome;
                }
            };

            let mut results = Vec::with_capacity(calls.len());
            for Call { id, name, input } in calls {
                if !known.contains(name.as_str()) {
                    results.push(ContentBlock::ToolResult {
                        tool_use_id: id,
                        content: unknown_tool(&name, request),
                        is_error: true,
                    });
                    continue;
                }
                let GateResult { output, fatal } = tools.call(&name, input).await;
                if fatal {
                    let why = match output {
                        Err(message) => message,
                        Ok(value) => cap_text(&render(&value), TOOL_OUTPUT_CAP),
                    };
                    outcome.interrupted = Some(Interruption::Provider(format!(
                        "the tool call {name} could not be made: {why}"
                    )));
                    return outcome;
                }
                let (content, is_error) = match output {
                    Ok(value) => (cap_text(&render(&value), TOOL_OUTPUT_CAP), false),
                    Err(message) => (cap_text(&message, TOOL_OUTPUT_CAP), true),
                };
                results.push(ContentBlock::ToolResult { tool_use_id: id, content, is_error });
            }
            chat.messages.push(Message { role: Role::User, content: results });
        }
    }
}

impl InstructionExecutor for ModelExecutor {
    fn execute<'a>(
        &'a self,
        request: &'a InstructionRequest,
        tools: &'a mut dyn ToolGate,
    ) -> BoxFuture<'a, InstructionOutcome> {
        Box::pin(self.run(request, tools))
    }
}

/// The first user message: the scope is in the system prompt, this starts the work.
fn kickoff(request: &InstructionRequest) -> String {
    format!(
        "Carry out step `{}` now, using the tools. When it is done, end your turn with your \
         one-paragraph summary.",
        request.step.id
    )
}

/// The answer to a call of a tool the model was not offered: the gate is not asked, and the
/// model learns what it may call instead.
fn unknown_tool(name: &str, request: &InstructionRequest) -> String {
    let available: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    let available = if available.is_empty() { "none".to_owned() } else { available.join(", ") };
    format!("unknown tool {name}; available: {available}")
}

/// The system prompt for one attempt at one step: this step and nothing else of the plan.
pub(crate) fn system_prompt(request: &InstructionRequest, max_turns: u32) -> String {
    let step = &request.step;
    let mut p = String::with_capacity(4096);
    p.push_str(
        "You are the executor of one step of a plan run by the pev harness. Work on this step \
         only; other steps (before and after it) are handled separately.\n\n",
    );
    let _ =
        writeln!(p, "Run goal (for context only; do not do the whole of it): {}", request.run_goal);

    let _ = writeln!(p, "\n## Your step\nid: {}", step.id);
    if let Some(title) = &step.title {
        let _ = writeln!(p, "title: {title}");
    }
    let _ = writeln!(p, "attempt: {} of {}", request.attempt, request.max_attempts);
    if let Some(description) = &step.description {
        let _ = writeln!(p, "description:\n{description}");
    }
    if !step.expected_outputs.is_empty() {
        let _ = writeln!(p, "expected outputs: {}", step.expected_outputs.join(", "));
    }

    if !step.acceptance_criteria.is_empty() {
        p.push_str("\n## Acceptance criteria (a skeptical reviewer checks these)\n");
        for criterion in &step.acceptance_criteria {
            let _ = writeln!(p, "- {criterion}");
        }
    }
    if !step.assertions.is_empty() {
        p.push_str(
            "\n## Assertions the harness checks after you finish\nThe harness checks these \
             itself, on the workspace, whatever you say. Make them pass by doing the work:\n",
        );
        for assertion in &step.assertions {
            let text =
                serde_json::to_string(assertion).unwrap_or_else(|_| format!("{assertion:?}"));
            let _ = writeln!(p, "- {text}");
        }
    }

    let inputs = dependency_inputs(request);
    if !inputs.is_empty() {
        p.push_str("\n## Outputs of the steps this one depends on\n");
        for (id, value) in inputs {
            let _ = writeln!(p, "### {id}\n{}", cap_text(&render(value), INPUT_CAP));
        }
    }
    if !request.feedback.is_empty() {
        p.push_str("\n## Why earlier attempts failed (fix this)\n");
        for (i, feedback) in request.feedback.iter().enumerate() {
            let _ = writeln!(p, "{}. {feedback}", i.saturating_add(1));
        }
    }
    if let Some(note) = &request.budget_note {
        let _ = writeln!(p, "\n## Budget\n{note}. Spend it on the work, not on exploration.");
    }

    let _ = write!(
        p,
        "\n## Rules\n\
         - Make the changes yourself, with the tools. Describing a change is not making it.\n\
         - Your claim of success is not believed: the harness checks the workspace and a \
         reviewer checks the rest. Only what the tools did counts.\n\
         - Do this step only; do not start the work of other steps.\n\
         - When a tool returns an error, read it and change the call; do not repeat a failing \
         call unchanged.\n\
         - You have at most {max_turns} turns for this attempt.\n\
         - When the step is done, end your turn without a tool call, with a one-paragraph \
         summary of what you changed and how you checked it.\n"
    );
    p
}

/// The inputs that belong to this step: its `depends_on`, the steps its parameters reference
/// and the steps its assertions read, in id order. Anything else the request holds is not shown,
/// so an attempt never sees the rest of the run's history.
fn dependency_inputs(request: &InstructionRequest) -> Vec<(&str, &Value)> {
    let step = &request.step;
    let mut wanted: HashSet<&str> = step.depends_on.iter().map(|d| d.as_str()).collect();
    wanted.extend(step.refs.iter().map(|r| r.reference.step.as_str()));
    wanted.extend(step.assertions.iter().filter_map(|a| a.step().map(|s| s.as_str())));
    let mut inputs: Vec<(&str, &Value)> = request
        .inputs
        .iter()
        .filter(|(id, _)| wanted.contains(id.as_str()))
        .map(|(id, value)| (id.as_str(), value))
        .collect();
    inputs.sort_unstable_by(|a, b| a.0.cmp(b.0));
    inputs
}

/// A value as the model reads it: a string as itself, anything else as compact JSON.
fn render(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "executor_tests.rs"]
mod tests;
