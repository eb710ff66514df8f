//! Continuing an instruction step's interrupted attempt on resume, instead of starting it over.
//!
//! A session killed in the middle of an executor's attempt left in the journal the tool calls
//! that attempt finished and the files they changed. On `pev resume` the attempt is run again
//! under the same number; the models' client answers the calls the journal already holds (see
//! `agent::replay::ResumingClient`), and when the executor, fed those answers, asks for a tool
//! call the attempt already finished (the same tool, the same arguments, in the same order),
//! the [`Continuation`] hands back the journaled result instead of running it again. The
//! first call that is not the next journaled one ends the replay for the step: from there on
//! everything runs for real. What the finished calls changed is the step's evidence again
//! (restored into the step's report, not counted twice in the run's file changes).

use std::collections::VecDeque;

use pev_store::{RunRecord, ToolCallRecord, ToolCallStatus};
use serde_json::Value;

use crate::state::StepMutation;

/// What an interrupted attempt left behind.
#[derive(Debug, Clone, Default)]
pub(crate) struct Continuation {
    /// The attempt's finished calls, in the order they started.
    calls: VecDeque<ToolCallRecord>,
    /// The step's journaled file changes, and the blob of each file before its change.
    pub mutations: Vec<(StepMutation, Option<String>)>,
    /// A finished call was a goal action (a write, an exec).
    pub goal_action: bool,
    /// Calls answered from the journal so far.
    pub replayed: u32,
}

impl Continuation {
    /// The continuation of `step`'s attempt `attempt`, from `record`; `None` when the attempt
    /// finished no call (there is nothing to continue).
    pub(crate) fn of(record: &RunRecord, step: &str, attempt: u32) -> Option<Self> {
        let calls: VecDeque<ToolCallRecord> = record
            .tool_calls
            .iter()
            .filter(|c| c.step_id == step && c.attempt == attempt)
            .filter(|c| {
                matches!(
                    c.status,
                    ToolCallStatus::Finished | ToolCallStatus::Failed | ToolCallStatus::Recovered
                )
            })
            .cloned()
            .collect();
        if calls.is_empty() {
            return None;
        }
        let goal_action = calls.iter().any(|c| {
            c.status != ToolCallStatus::Failed
                && pev_verify::is_goal_action(&c.tool, c.effect, &c.arguments)
        });
        let mutations = record
            .mutations
            .iter()
            .filter(|m| m.step_id == step)
            .map(|m| {
                let change = StepMutation { step: step.to_owned(), mutation: m.mutation.clone() };
                (change, m.before_sha256.clone())
            })
            .collect();
        Some(Self { calls, mutations, goal_action, replayed: 0 })
    }

    /// The journaled result of the call `tool(args)` if it is the attempt's next finished call;
    /// anything else ends the replay (every later call runs for real).
    pub(crate) fn answer(&mut self, tool: &str, args: &Value) -> Option<Result<Value, String>> {
        let next = self.calls.front()?;
        if next.tool != tool || next.arguments != *args {
            self.calls.clear();
            return None;
        }
        let call = self.calls.pop_front()?;
        self.replayed += 1;
        Some(match call.status {
            ToolCallStatus::Failed => {
                Err(call.error.unwrap_or_else(|| "the call failed".to_owned()))
            }
            _ => Ok(call.output.unwrap_or(Value::Null)),
        })
    }
}
