//! What a run knows while it runs: each step's slot, interrupted calls and attempts to settle
//! or continue, approvals, mutations, warnings, usage carried over from earlier sessions. The
//! scheduler builds and updates it; `finish` reads it to decide the verdict.

use std::collections::{HashMap, HashSet};

use crate::call::Recovery;
use crate::call::StepMutation;
use crate::state::slot::Slot;

/// Everything the loop tracks.
pub(crate) struct RunState {
    pub slots: Vec<Slot>,
    pub recoveries: HashMap<usize, Recovery>,
    /// Instruction steps whose interrupted attempt a resume continues.
    pub continuations: HashMap<usize, crate::continuation::Continuation>,
    pub approved: HashSet<String>,
    pub mutations: Vec<StepMutation>,
    pub warnings: Vec<String>,
    pub tool_calls: u64,
    /// Hashes before the run of the paths postconditions check with `content_changed`.
    pub run_before: HashMap<String, Option<String>>,
    pub prior_duration_ms: u64,
    /// Model usage of earlier sessions of this run (a `pev resume` in a new process; zero when
    /// the same process continues under a revised plan, whose budget already counts it).
    pub prior_usage: pev_protocol::run::Usage,
    pub cancelled: bool,
    /// Steps failed by a judge's confident "no".
    pub judge_rejected: Vec<String>,
    /// Why the budget stopped the run, if it did.
    pub budget_exhausted: Option<String>,
}
