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

use crate::call::StepMutation;

/// What an interrupted attempt left behind.
#[derive(Debug, Clone, Default)]
pub(crate) struct Continuation {
    /// The attempt's finished calls, in the order they started.
    calls: VecDeque<ToolCallRecord>,
    /// The step's journaled file changes, and the blob of each file before its change.
    pub mutations: Vec<(StepMutation, Option<String>)>,
    /// The evidence line each of those changes gave the step when its call made it (the same
    /// words, in the same order): the judge of the continued attempt is shown what the judge of
    /// the interrupted one was, and a judge call the killed session was answered is answered
    /// from the journal again instead of being asked anew.
    pub evidence: Vec<String>,
    /// A finished call was a goal action (a write, an exec).
    pub goal_action: bool,
    /// Calls answered from the journal so far.
    pub replayed: u32,
    /// The call the kill interrupted (started, never finished): settled by the resume rules
    /// (`recover`) when the executor asks for it again.
    in_flight: Option<crate::call::Recovery>,
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
            .map(|c| crate::call::Recovery {
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
        // The interrupted attempt's own changes: the files its calls wrote, and, when it ran a
        // command, what else the step changed that no earlier attempt's call wrote. (An earlier
        // attempt's change must not stand as this attempt's evidence.)
        let of_attempt = |a: &dyn Fn(u32) -> bool| {
            record
                .tool_calls
                .iter()
                .filter(move |c| c.step_id == step && a(c.attempt))
                .filter(|c| c.effect == pev_protocol::tool::Effect::Write)
                .filter_map(|c| c.path.clone())
                .collect::<std::collections::HashSet<String>>()
        };
        let written = of_attempt(&|a| a == attempt);
        let earlier = of_attempt(&|a| a < attempt);
        let ran_command = record.tool_calls.iter().any(|c| {
            c.step_id == step
                && c.attempt == attempt
                && c.effect == pev_protocol::tool::Effect::Exec
        });
        let records: Vec<&pev_store::MutationRecord> = record
            .mutations
            .iter()
            .filter(|m| m.step_id == step)
            .filter(|m| {
                written.contains(&m.mutation.path)
                    || (ran_command && !earlier.contains(&m.mutation.path))
            })
            .collect();
        let evidence = evidence_of(record, (step, attempt), &records);
        let mutations: Vec<(StepMutation, Option<String>)> = records
            .iter()
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
        Some(Self { calls, mutations, evidence, goal_action, replayed: 0, in_flight, unjournaled })
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
    pub(crate) fn in_flight(&mut self, tool: &str, args: &Value) -> Option<crate::call::Recovery> {
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

/// The evidence line of each of `changes` as the call that made it gave it (`step::check`): a
/// file a write call of the attempt targets is that call's change (the k-th change of a path is
/// its k-th write call that did not fail), any other the command's, created, changed or removed.
/// Worked out, not journaled: where a command and a write changed one file, or the attempt's end
/// recorded a watched file a command changed (`executor changed …`), a line can name the wrong
/// call; the judge then sees another request and is asked again, as before lines were restored.
fn evidence_of(
    record: &RunRecord,
    (step, attempt): (&str, u32),
    changes: &[&pev_store::MutationRecord],
) -> Vec<String> {
    use pev_protocol::tool::Effect;
    let of_attempt = || {
        record
            .tool_calls
            .iter()
            .filter(move |c| c.step_id == step && c.attempt == attempt)
            .filter(|c| c.status != ToolCallStatus::Started)
    };
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    changes
        .iter()
        .map(|m| {
            let path = m.mutation.path.as_str();
            let k = seen.entry(path).or_default();
            let writes: Vec<&ToolCallRecord> = of_attempt()
                .filter(|c| c.effect == Effect::Write && c.path.as_deref() == Some(path))
                .filter(|c| c.status != ToolCallStatus::Failed)
                .collect();
            *k += 1;
            match writes.get(*k - 1).or(writes.last()) {
                Some(call) => crate::call::write_evidence(&call.tool, &m.mutation),
                None => {
                    // A file too large to keep has no hashes, only sizes.
                    let existed = m.before_sha256.is_some() || m.mutation.bytes_before > 0;
                    let exists = m.after_sha256.is_some() || m.mutation.bytes_after > 0;
                    let what = crate::call::change_word(existed, exists);
                    // Only `shell.exec` takes the inventory a command's changes come from.
                    crate::call::change_evidence("shell.exec", what, &m.mutation)
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use pev_protocol::tool::Effect;
    use pev_store::MutationRecord;
    use serde_json::json;

    use super::*;

    fn call(
        n: u32,
        attempt: u32,
        tool: &str,
        path: &str,
        status: ToolCallStatus,
    ) -> ToolCallRecord {
        ToolCallRecord {
            run_id: "r".into(),
            call_id: format!("c{n}"),
            step_id: "s".into(),
            attempt,
            tool: tool.into(),
            effect: if tool == "file.read" { Effect::Read } else { Effect::Write },
            arguments: json!({"path": path, "n": n}),
            path: (tool != "file.read").then(|| path.to_owned()),
            pre_sha256: Some(format!("before-{path}-{n}")),
            intended_sha256: None,
            started_at: format!("2026-01-01T00:00:0{n}.000Z"),
            status,
            output: Some(json!({"n": n})),
            error: (status == ToolCallStatus::Failed)
                .then(|| crate::step::recover::CRASHED.to_owned()),
            ended_at: None,
            duration_ms: None,
        }
    }

    fn change(path: &str) -> MutationRecord {
        MutationRecord {
            run_id: "r".into(),
            step_id: "s".into(),
            mutation: pev_verify::mutation(path, Some(b"a"), Some(b"b")),
            before_sha256: None,
            after_sha256: None,
        }
    }

    fn record(tool_calls: Vec<ToolCallRecord>, mutations: Vec<MutationRecord>) -> RunRecord {
        RunRecord {
            run_id: "r".into(),
            goal: "g".into(),
            workspace: "/ws".into(),
            status: "running".into(),
            created_at: String::new(),
            updated_at: String::new(),
            options: json!({}),
            plan: json!({}),
            plan_version: 1,
            result: None,
            steps: Vec::new(),
            tool_calls,
            file_hashes: Vec::new(),
            mutations,
            approvals: Vec::new(),
            next_seq: 0,
        }
    }

    #[test]
    fn only_the_interrupted_attempts_calls_and_changes_are_continued() {
        let rec = record(
            vec![
                call(1, 1, "file.write", "old.txt", ToolCallStatus::Finished),
                call(2, 2, "file.read", "a.txt", ToolCallStatus::Finished),
                call(3, 2, "file.write", "a.txt", ToolCallStatus::Finished),
                call(4, 2, "file.write", "b.txt", ToolCallStatus::Started),
            ],
            vec![change("old.txt"), change("a.txt")],
        );
        let mut c = Continuation::of(&rec, "s", 2, &std::collections::HashMap::new()).unwrap();
        let paths: Vec<&str> = c.mutations.iter().map(|(m, _)| m.mutation.path.as_str()).collect();
        assert_eq!(paths, ["a.txt"], "an earlier attempt's change is not this attempt's evidence");
        // What the interrupted session saw: the file before each write not yet answered.
        let seen = c.pending_hashes();
        assert_eq!(seen.get("a.txt"), Some(&Some("before-a.txt-3".to_owned())));
        assert_eq!(seen.get("b.txt"), Some(&Some("before-b.txt-4".to_owned())));
        // Answered in order; then the call in flight is handed to the resume rules.
        let read = rec.tool_calls[1].arguments.clone();
        assert_eq!(c.answer("file.read", &read), Some(Ok(json!({"n": 2}))));
        let write = rec.tool_calls[2].arguments.clone();
        assert_eq!(c.answer("file.write", &write), Some(Ok(json!({"n": 3}))));
        assert_eq!(c.replayed, 2);
        assert!(!c.pending_hashes().contains_key("a.txt"));
        let in_flight = rec.tool_calls[3].arguments.clone();
        assert!(c.answer("file.write", &in_flight).is_none(), "no finished call left");
        assert!(c.in_flight("file.write", &in_flight).is_some());
        assert!(c.pending_hashes().is_empty());
    }

    /// The lines `step::check` gave each change when its call made it: the k-th change of a
    /// path is its k-th write's; a change no write targets is the command's, created or not.
    #[test]
    fn each_restored_change_gives_the_evidence_line_its_call_gave() {
        let mut exec = call(3, 1, "shell.exec", "", ToolCallStatus::Finished);
        (exec.effect, exec.path) = (Effect::Exec, None);
        let made = MutationRecord {
            mutation: pev_verify::mutation("out.txt", None, Some(b"x\n")),
            ..change("out.txt")
        };
        let same = MutationRecord {
            mutation: pev_verify::mutation("a.txt", Some(b"b"), Some(b"b")),
            ..change("a.txt")
        };
        let gone = MutationRecord {
            mutation: pev_verify::mutation("gone.txt", Some(b"x\n"), None),
            before_sha256: Some("b".into()),
            ..change("gone.txt")
        };
        // A file too large to keep: sizes only, no hashes; it existed before and after.
        let big = MutationRecord {
            mutation: pev_protocol::run::FileMutation {
                path: "big.bin".into(),
                bytes_before: 10,
                bytes_after: 12,
                lines_added: 0,
                lines_removed: 0,
                no_op: false,
            },
            ..change("big.bin")
        };
        let rec = record(
            vec![
                call(1, 1, "file.write", "a.txt", ToolCallStatus::Finished),
                call(2, 1, "file.patch", "a.txt", ToolCallStatus::Finished),
                exec,
                // Another attempt's write of a file the command made is not its call.
                call(4, 2, "file.write", "out.txt", ToolCallStatus::Finished),
            ],
            vec![change("a.txt"), same, made, gone, big],
        );
        let c = Continuation::of(&rec, "s", 1, &std::collections::HashMap::new()).unwrap();
        assert_eq!(
            c.evidence,
            [
                "file.write changed a.txt: 1 -> 1 bytes, +1 -1 lines",
                "file.patch left a.txt unchanged (1 bytes)",
                "shell.exec created out.txt: 0 -> 2 bytes, +1 -0 lines",
                "shell.exec removed gone.txt: 2 -> 0 bytes, +0 -1 lines",
                "shell.exec changed big.bin: 10 -> 12 bytes, +0 -0 lines",
            ]
        );
    }

    #[test]
    fn another_call_ends_the_replay_and_an_earlier_resumes_interruption_is_not_an_answer() {
        let rec = record(
            vec![
                call(1, 1, "file.read", "a.txt", ToolCallStatus::Failed),
                call(2, 1, "file.read", "b.txt", ToolCallStatus::Finished),
                call(3, 1, "file.write", "c.txt", ToolCallStatus::Started),
            ],
            Vec::new(),
        );
        let mut c = Continuation::of(&rec, "s", 1, &std::collections::HashMap::new()).unwrap();
        // The call closed as interrupted is skipped: the first answer is call 2's.
        let other = json!({"path": "elsewhere"});
        assert!(c.answer("file.read", &other).is_none());
        // Once the model asked for something else, nothing more is answered or settled.
        assert!(c.answer("file.read", &rec.tool_calls[1].arguments).is_none());
        assert!(c.in_flight("file.write", &rec.tool_calls[2].arguments).is_none());
        assert!(c.pending_hashes().is_empty());
    }
}
