//! One row of `pev eval`'s report: a scenario run with one gate setting, and how it ended.

use pev_protocol::run::{ReasonCode, RunStatus};
use serde::Serialize;

/// One scenario run with one gate setting.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub scenario: String,
    pub description: Option<String>,
    pub mode: &'static str,
    /// `on`, `off`, or null for a pev-mode scenario.
    pub gate: Option<&'static str>,
    pub expected: RunStatus,
    pub expected_reasons: Vec<ReasonCode>,
    /// The verified status; null when the run produced no result (see `error`).
    pub status: Option<RunStatus>,
    pub reasons: Vec<ReasonCode>,
    /// The status is the expected one and every expected reason is among the run's.
    pub correct: bool,
    /// The model claimed the work was finished: it gave a final answer that was accepted, with
    /// no step of its plan marked blocked (a model that says what it could not do claims no
    /// completion). Null in pev mode.
    pub claimed_done: Option<bool>,
    /// The model's claim was accepted but the verified status is not `success`: what a harness
    /// that trusts the model would have reported as a success.
    pub slipped: bool,
    /// Final answers given while the model's plan was incomplete (or a plan was owed).
    pub premature: u32,
    /// Final answers refused: by the gate, or by a `stop` hook (which can refuse one the plan
    /// would have let through, so this may exceed `premature`).
    pub caught: u32,
    pub gate_exhausted: bool,
    /// Model calls.
    pub turns: u64,
    /// Input and output tokens.
    pub tokens: u64,
    pub cost_usd: f64,
    pub wall_ms: u64,
    pub run_id: Option<String>,
    /// The copy of the fixture the run worked in, with `--keep`.
    pub workspace: Option<String>,
    /// Why the run produced no result (a crash, a timeout, a bad script).
    pub error: Option<String>,
    /// Why the loop step (or, in pev mode, the first failed step) failed, when one did: a
    /// scripted model that drifted from its script says so here.
    pub note: Option<String>,
}
