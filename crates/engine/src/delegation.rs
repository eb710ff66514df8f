//! Delegated steps: a step with `delegate` is carried out by a sub-agent, as a run of its own
//! (a child run) in the same journal, with its own plan, its own slice of the parent's budget
//! and its own verdict. The engine only knows the [`Delegator`] trait (`agent::delegate`
//! implements it with the run's model clients); what it does itself is what makes the child's
//! word worthless and its verdict evidence: the child's id is fixed by the parent step and
//! attempt and journaled (durably) before the child starts, so a resume finds the child instead
//! of starting a second one; the step is `done` only when the child ended `success` *and* the
//! step's own assertions pass against the workspace the child left; a child that ended
//! `partial` or `failed` fails the step with the child's reasons, and the step's retry and
//! replan rules apply as for any step; a change outside the child's scope fails the step
//! whatever the child's verdict says.

use std::collections::HashMap;

use pev_protocol::run::RunResult;
use pev_protocol::{Delegation, Step};
use serde_json::Value;

use pev_providers::BoxFuture;

/// What a delegator gets for one attempt of one delegated step.
#[derive(Debug, Clone)]
pub struct DelegationRequest {
    pub parent_run: String,
    pub step: Step,
    pub delegation: Delegation,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The child's run id: fixed by the parent run, step and attempt ([`child_run_id`]). When the
    /// journal already holds it, an earlier session started it: the delegator continues it (or
    /// takes its verdict) instead of starting another.
    pub child_run: String,
    /// The outputs of the steps this one depends on.
    pub inputs: HashMap<String, Value>,
    /// Why earlier attempts failed (the children's reasons, failed assertions).
    pub feedback: Vec<String>,
}

/// Why a child run could not give a verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum DelegationError {
    /// The child cannot be run (the nesting bound, a scope outside the parent's, no budget left
    /// to slice, the journal refused it): the step fails with this.
    Refused(String),
    /// The parent's budget ran out.
    Budget(String),
    /// A person stopped the run; the child stopped too and a resume continues it.
    Stopped,
}

/// Runs child runs.
pub trait Delegator: Send + Sync {
    /// The nesting depth of the children this delegator starts (1: children of a top-level
    /// run).
    fn child_depth(&self) -> u32;

    /// Runs (or continues, or reads the verdict of) the child run `request.child_run`, and
    /// returns its result as the harness decided it.
    fn delegate<'a>(
        &'a self,
        request: &'a DelegationRequest,
    ) -> BoxFuture<'a, Result<RunResult, DelegationError>>;
    /// The assertions finished child run `child_run` relied on that depend only on the
    /// workspace (its done steps' and satisfied postconditions' file checks): the parent
    /// re-checks them when it ends.
    fn claims(&self, _child_run: &str) -> Vec<pev_protocol::Assertion> {
        Vec::new()
    }
}

/// The id of the child run of `step`'s `attempt` in run `parent`.
pub fn child_run_id(parent: &str, step: &str, attempt: u32) -> String {
    format!("{parent}.{step}.{attempt}")
}

/// Whether `path` (workspace-relative) is inside `scope` (`None`: the whole workspace), both
/// read by the workspace's own lexical rule (`..`, `.`, whole components: `src2` is not in
/// `src`). A path that leaves the workspace is in no scope.
pub fn in_scope(workspace: &pev_tools::Workspace, path: &str, scope: Option<&str>) -> bool {
    let Some(scope) = scope else { return true };
    match (workspace.resolve(path), workspace.resolve(scope)) {
        (Ok(path), Ok(scope)) => path.starts_with(scope),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_membership_is_by_whole_components() {
        let dir = tempfile::tempdir().unwrap();
        let ws = pev_tools::Workspace::open(dir.path()).unwrap();
        let inside = |path: &str, scope: Option<&str>| in_scope(&ws, path, scope);
        assert!(inside("src/a.rs", Some("src")));
        assert!(inside("src/a.rs", Some("./src/")));
        assert!(inside("src", Some("src")));
        assert!(!inside("src2/a.rs", Some("src")));
        assert!(!inside("a.rs", Some("src")));
        assert!(inside("a.rs", None));
        assert!(inside("a.rs", Some(".")));
        assert!(!inside("docs/x", Some("src/docs")));
        assert!(inside("b/x", Some("a/../b")));
        assert!(!inside("a/../c/x", Some("a")));
        assert!(!inside("../a/x", Some("a")), "a path out of the workspace is in no scope");
    }

    #[test]
    fn a_child_id_names_parent_step_and_attempt() {
        assert_eq!(child_run_id("20261126-1-abc", "build", 2), "20261126-1-abc.build.2");
    }
}
