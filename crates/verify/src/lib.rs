//! pev's tier-1 verifier: what the harness can establish by itself, without a model.
//!
//! - [`check`] evaluates one assertion of CONTRACTS.md §2 against the workspace sandbox, the
//!   outputs of earlier steps, a process, or a socket, and never errors: whatever goes wrong is a
//!   failed assertion whose detail says what was seen. [`check_postconditions`] does the same
//!   for the plan's postconditions.
//! - [`mutation`] and [`diff_lines`] describe what a write did to a file (line counts, no-op).
//! - [`silent_failures`] scans a tool's output for failures that did not fail the call.
//! - [`goal_asks_for_change`] and [`is_goal_action`] feed `goal_actions_executed` and the
//!   `no_effects` reason.
//! - [`named_files`] and [`mismatch`] are the plan-execution mismatch rule: a step that was to
//!   change named files and changed none of them is not done.
//! - [`recheck`] runs the evidence of a finished run again against the final workspace and
//!   reports what no longer holds ([`regression_reason`] words it as a reason).
//! - [`oracle`]: the files a run is checked by (tests, test configuration, protected files),
//!   what changed in them, the pristine copy the evidence is re-checked in, build products.
//! - [`decide`] is the outcome rule of CONTRACTS.md §4: the status and the reasons for it.
//!
//! The verifier never runs a tool with a write effect; `command_succeeds` runs a command the
//! plan's author wrote as a check, in the same sandbox as `shell.exec`.

use std::collections::HashMap;

use serde_json::Value;

mod assert;
mod assert_file;
mod assert_net;
mod assert_proc;
mod goal;
mod mismatch;
mod mutation;
pub mod oracle;
mod outcome;
mod recheck;
mod silent;
mod text;

#[cfg(test)]
mod test_support;

pub use assert::{check, check_postconditions};
pub use goal::{goal_asks_for_change, is_goal_action};
pub use mismatch::{MISMATCH, Mismatch, StepIntent, mismatch, named_files};
pub use mutation::{DiffLine, DiffTag, diff_lines, mutation};
pub use outcome::{OutcomeInput, decide};
pub use recheck::{Claim, checked_once_warning, recheck, regression_reason};
pub use silent::silent_failures;

/// What an assertion is checked against.
#[derive(Debug, Clone, Copy)]
pub struct CheckEnv<'a> {
    /// The workspace sandbox and the policy (allowed hosts, timeouts, output caps).
    pub ctx: &'a pev_tools::ToolContext,
    /// The step that owns the assertion; `None` for a postcondition.
    pub step: Option<&'a str>,
    /// Step id to output, for the steps that are done.
    pub outputs: &'a HashMap<String, Value>,
    /// Path (as the assertion writes it) to the file's sha256 before the step; `None` = absent.
    pub before: &'a HashMap<String, Option<String>>,
}
