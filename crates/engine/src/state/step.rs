//! What a step task is given and gives back: the [`Shared`] context of the run, the
//! [`StepJob`] and the [`StepReport`], with the two rules every step kind applies to its slot
//! (`fail`, `max_attempts`). Below the step kinds and the pieces they call, so none of them
//! imports the driver (`step.rs`) for a type.

use std::collections::HashMap;
use std::sync::Arc;

use pev_lint::policy::Glob;
use pev_protocol::event::now_rfc3339;
use pev_protocol::run::StepStatus;
use pev_protocol::{Plan, Step};
use serde_json::Value;

use crate::call::Recovery;
use crate::call::StepMutation;
use crate::engine::Engine;
use crate::recorder::Recorder;
use crate::state::slot::Slot;

/// What every step task shares.
pub(crate) struct Shared {
    pub engine: Engine,
    pub plan: Arc<Plan>,
    pub recorder: Recorder,
    pub approve_globs: Vec<Glob>,
    /// One approval prompt at a time.
    pub approval_lock: tokio::sync::Mutex<()>,
    /// Distinguishes tool-call ids of this session from those of earlier ones of the same run.
    pub session: u64,
    /// Which steps are running (a command's changes are credited only when it ran alone).
    pub activity: Arc<crate::inventory::Activity>,
    /// The run's oracle: what its checks judge it by.
    pub oracle: Arc<crate::oracle::RunOracle>,
    /// One writer of a file at a time (`write_locks`).
    pub write_locks: Arc<crate::write_locks::WriteLocks>,
}

impl Shared {
    /// The lock of the file a call writes (`write_locks`), waited for; `None` for a call that
    /// writes no named file.
    pub(crate) async fn write_lock(
        &self,
        path: Option<&str>,
        effect: pev_protocol::tool::Effect,
    ) -> Option<crate::write_locks::Held> {
        let path = path.filter(|_| effect == pev_protocol::tool::Effect::Write)?;
        Some(self.write_locks.hold(&self.engine.ctx.workspace, path).await)
    }
}

/// The work handed to a step task.
pub(crate) struct StepJob {
    pub idx: usize,
    pub attempts_before: u32,
    /// The hashes from before the step's first attempt (an earlier session's, on resume): its
    /// `content_changed` checks and the final re-check compare with them.
    pub baseline: HashMap<String, Option<String>>,
    /// The outputs of the steps this one references or asserts on.
    pub inputs: HashMap<String, Value>,
    /// Approved already (journaled earlier, or `--yes`).
    pub approved: bool,
    pub recovery: Option<Recovery>,
    /// An instruction step's interrupted attempt to continue (resume).
    pub continuation: Option<crate::continuation::Continuation>,
    /// The changes earlier sessions journaled for this step (a delegated step's adopted child
    /// changes are not journaled twice when a resume meets the same child again).
    pub earlier_mutations: Vec<pev_protocol::run::FileMutation>,
}

/// What a step task hands back.
pub(crate) struct StepReport {
    pub idx: usize,
    pub slot: Slot,
    pub mutations: Vec<StepMutation>,
    pub tool_calls: u64,
    pub warnings: Vec<String>,
    /// A cancel stopped the step from trying again.
    pub cancelled: bool,
    /// The run's budget stopped the step.
    pub budget_exhausted: Option<String>,
    /// What `--cache` learned about the step (its key, what it read, whether it may be cached).
    pub cache: crate::cache::trace::Trace,
    /// The first this many of `mutations` were restored from an earlier session (a continued
    /// attempt): the step's evidence, already in the run's changes.
    pub restored_mutations: usize,
    /// Indexes in `mutations` (past the restored ones) already in the run's changes: a
    /// finished child's changes met again by a resume.
    pub already_counted: Vec<usize>,
    /// The changes earlier sessions journaled for this step (for child runs' changes met
    /// again; see `delegation`).
    pub earlier_mutations: Vec<pev_protocol::run::FileMutation>,
}

pub(crate) fn fail(slot: &mut Slot, message: &str) {
    slot.status = StepStatus::Failed;
    slot.error = Some(message.to_owned());
    slot.ended_at = Some(now_rfc3339());
}

/// How many attempts a step gets: `max_attempts` if the plan says, else 3 for `on_fail: retry`
/// and 1 otherwise.
pub(crate) fn max_attempts(step: &Step) -> u32 {
    let default = if step.on_fail == pev_protocol::OnFail::Retry { 3 } else { 1 };
    step.max_attempts.unwrap_or(default).max(1)
}
