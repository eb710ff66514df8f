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
    /// The call the kill interrupted (started, never finished): settled by the resume rules
    /// (`recover`) when the executor asks for it again.
    in_flight: Option<crate::recover::Recovery>,
    /// Files a finished call wrote whose change the killed session did not get to journal:
    /// the path, the content before the attempt's first write to it (`None`: it did not
    /// exist) and that content's hash. The change is worked out against the file as it is.
    pub unjournaled: Vec<(String, Option<Vec<u8>>, Option<String>)>,
}

impl Continuation {
    /// The continuation of `step`'s attempt `attempt`, from `record`; `None` when the attempt
    /// finished no call (there is nothing to continue).
    pub(crate) fn of(
        record: &RunRecord,
        step: &str,
        attempt: u32,
        blobs: &std::collections::HashMap<String, Vec<u8>>,
    ) -> Option<Self> {
        let in_flight = record
            .tool_calls
            .iter()
            .rfind(|c| c.step_id == step && c.attempt == attempt)
            .filter(|c| c.status == ToolCallStatus::Started)
            .map(|c| crate::recover::Recovery {
                call: c.clone(),
                before_hashes: record
                    .file_hashes
                    .iter()
                    .filter(|h| h.step_id == step && h.phase == pev_store::HashPhase::Before)
                    .map(|h| (h.path.clone(), h.sha256.clone()))
                    .collect(),
                before_content: c.pre_sha256.as_ref().and_then(|s| blobs.get(s).cloned()),
            });
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
            // A call an earlier resume closed as interrupted ended with no answer the model saw:
            // it is not one to answer from the journal (the next call starts live).
            .filter(|c| {
                !(c.status == ToolCallStatus::Failed
                    && c.error.as_deref().is_some_and(|e| e.contains("interrupted")))
            })
            .cloned()
            .collect();
        if calls.is_empty() && in_flight.is_none() {
            return None;
        }
        let goal_action = calls.iter().any(|c| {
            c.status != ToolCallStatus::Failed
                && pev_verify::is_goal_action(&c.tool, c.effect, &c.arguments)
        });
        let mutations: Vec<(StepMutation, Option<String>)> = record
            .mutations
            .iter()
            .filter(|m| m.step_id == step)
            .map(|m| {
                let change = StepMutation { step: step.to_owned(), mutation: m.mutation.clone() };
                (change, m.before_sha256.clone())
            })
            .collect();
        let mut unjournaled: Vec<(String, Option<Vec<u8>>, Option<String>)> = Vec::new();
        for c in calls.iter().filter(|c| c.status != ToolCallStatus::Failed) {
            let Some(path) =
                c.path.as_ref().filter(|_| c.effect == pev_protocol::tool::Effect::Write)
            else {
                continue;
            };
            let journaled = mutations.iter().any(|(m, _)| m.mutation.path == *path);
            if journaled || unjournaled.iter().any(|(p, _, _)| p == path) {
                continue;
            }
            let before = c.pre_sha256.as_ref().and_then(|s| blobs.get(s).cloned());
            if c.pre_sha256.is_some() && before.is_none() {
                // What it held before is not in the journal: the change cannot be worked out.
                continue;
            }
            unjournaled.push((path.clone(), before, c.pre_sha256.clone()));
        }
        Some(Self { calls, mutations, goal_action, replayed: 0, in_flight, unjournaled })
    }

    /// Each file a call still to be answered (or the interrupted one) writes, with its hash
    /// before the first such call: what the file was at this point of the interrupted session.
    pub(crate) fn pending_hashes(&self) -> std::collections::HashMap<String, Option<String>> {
        let mut out = std::collections::HashMap::new();
        let pending = self.calls.iter().chain(self.in_flight.iter().map(|r| &r.call));
        for c in pending.filter(|c| c.effect == pev_protocol::tool::Effect::Write) {
            if let Some(path) = &c.path {
                out.entry(path.clone()).or_insert_with(|| c.pre_sha256.clone());
            }
        }
        out
    }

    /// The interrupted call, if `tool(args)` is it and every finished call was asked for first.
    pub(crate) fn in_flight(
        &mut self,
        tool: &str,
        args: &Value,
    ) -> Option<crate::recover::Recovery> {
        if !self.calls.is_empty() {
            return None;
        }
        let call = &self.in_flight.as_ref()?.call;
        if call.tool == tool && call.arguments == *args {
            self.in_flight.take()
        } else {
            self.in_flight = None;
            None
        }
    }

    /// The journaled result of the call `tool(args)` if it is the attempt's next finished call;
    /// anything else ends the replay (every later call runs for real).
    pub(crate) fn answer(&mut self, tool: &str, args: &Value) -> Option<Result<Value, String>> {
        let next = self.calls.front()?;
        if next.tool != tool || next.arguments != *args {
            self.calls.clear();
            self.in_flight = None;
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
