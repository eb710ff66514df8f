//! The outcome rule as a table: every reason code tier 1 produces, every status, and "success
//! only with evidence".

use pev_protocol::assertion::AssertionResult;
use pev_protocol::run::{
    FileMutation, PostconditionResult, ReasonCode, RunStatus, StepResult, StepStatus,
};
use pev_protocol::{OnFail, Plan, Postcondition, Step, StepId};

use super::*;

/// The owned data behind an [`OutcomeInput`].
#[derive(Clone)]
struct Case {
    plan: Plan,
    steps: Vec<StepResult>,
    postconditions: Vec<PostconditionResult>,
    mutations: Vec<FileMutation>,
    mutation_steps: Vec<String>,
    goal_actions_executed: bool,
    awaiting: Vec<String>,
    cancelled: bool,
    judge_rejected: Vec<String>,
    mismatched: Vec<String>,
    budget_exhausted: Option<String>,
}

impl Case {
    /// A finished, verified run of `read-css` -> `patch-css` for a change goal: success.
    fn good() -> Self {
        let plan = Plan {
            goal: "Change the site background to dark green".into(),
            steps: vec![
                plan_step("read-css", "file.read", OnFail::Abort),
                plan_step("patch-css", "file.patch", OnFail::Abort),
            ],
            postconditions: vec![Postcondition {
                description: "CSS changed".into(),
                assertions: vec![pev_protocol::Assertion::ContentChanged {
                    path: "site/style.css".into(),
                    recovery: None,
                }],
                ..Postcondition::default()
            }],
            ..Plan::default()
        };
        Self {
            plan,
            steps: vec![
                result("read-css", StepStatus::Done, vec![]),
                result("patch-css", StepStatus::Done, vec![pass("file_contains")]),
            ],
            postconditions: vec![PostconditionResult {
                description: "CSS changed".into(),
                satisfied: true,
                evidence: "content_changed: site/style.css changed: sha256 a -> b".into(),
                judge: None,
            }],
            mutations: vec![mutation("site/style.css", false)],
            mutation_steps: vec!["patch-css".into()],
            goal_actions_executed: true,
            awaiting: vec![],
            cancelled: false,
            judge_rejected: vec![],
            mismatched: vec![],
            budget_exhausted: None,
        }
    }

    fn step_mut(&mut self, id: &str) -> &mut StepResult {
        self.steps.iter_mut().find(|s| s.id == id).unwrap()
    }

    fn decide(&self) -> (RunStatus, Vec<Reason>) {
        decide(&OutcomeInput {
            plan: &self.plan,
            steps: &self.steps,
            postconditions: &self.postconditions,
            mutations: &self.mutations,
            mutation_steps: &self.mutation_steps,
            goal_actions_executed: self.goal_actions_executed,
            awaiting_approval: &self.awaiting,
            cancelled: self.cancelled,
            judge_rejected: &self.judge_rejected,
            mismatched: &self.mismatched,
            budget_exhausted: self.budget_exhausted.as_deref(),
            regressions: &[],
            oracle: &[],
        })
    }
}

fn plan_step(id: &str, tool: &str, on_fail: OnFail) -> Step {
    Step { id: StepId::new(id), tool: Some(tool.into()), on_fail, ..Step::default() }
}

fn result(id: &str, status: StepStatus, assertions: Vec<AssertionResult>) -> StepResult {
    StepResult {
        id: id.into(),
        status,
        attempts: u32::from(status != StepStatus::Pending),
        evidence: vec![],
        assertions,
        output: None,
        error: None,
        started_at: None,
        ended_at: None,
    }
}

fn pass(kind: &str) -> AssertionResult {
    AssertionResult { kind: kind.into(), passed: true, detail: "ok".into() }
}

fn fail(kind: &str, detail: &str) -> AssertionResult {
    AssertionResult { kind: kind.into(), passed: false, detail: detail.into() }
}

fn mutation(path: &str, no_op: bool) -> FileMutation {
    FileMutation {
        path: path.into(),
        bytes_before: 120,
        bytes_after: if no_op { 120 } else { 121 },
        lines_added: u64::from(!no_op),
        lines_removed: u64::from(!no_op),
        no_op,
    }
}

/// Add a step `id` (tool, on_fail) to the plan with a result of `status`.
fn add(case: &mut Case, id: &str, tool: &str, on_fail: OnFail, status: StepStatus) {
    case.plan.steps.push(plan_step(id, tool, on_fail));
    case.steps.push(result(id, status, vec![]));
}

type Expected = (ReasonCode, Option<&'static str>, &'static str);

#[track_caller]
fn expect(case: &Case, status: RunStatus, expected: &[Expected]) {
    let (got_status, reasons) = case.decide();
    let got: Vec<(ReasonCode, Option<&str>, &str)> =
        reasons.iter().map(|r| (r.code, r.step.as_deref(), r.message.as_str())).collect();
    let want: Vec<(ReasonCode, Option<&str>, &str)> = expected.to_vec();
    assert_eq!(got, want, "reasons");
    assert_eq!(got_status, status, "status, with reasons {got:?}");
}

/// A run stopped at `patch-css`, which waits for approval; `publish` after it has not run.
fn waiting() -> Case {
    let mut c = Case::good();
    c.step_mut("patch-css").status = StepStatus::Pending;
    c.step_mut("patch-css").assertions.clear();
    add(&mut c, "publish", "shell.exec", OnFail::Abort, StepStatus::Pending);
    c.awaiting = vec!["patch-css".into()];
    c.goal_actions_executed = false;
    c.mutations.clear();
    c.mutation_steps.clear();
    c.postconditions[0].satisfied = false;
    c.postconditions[0].evidence = "1 of 1 assertions failed: content_changed: unchanged".into();
    c
}

#[test]
fn the_outcome_table() {
    let mut table: Vec<(&str, Case, RunStatus, Vec<Expected>)> = Vec::new();

    table.push(("verified change", Case::good(), RunStatus::Success, vec![]));

    let mut c = Case::good();
    c.step_mut("patch-css").status = StepStatus::Failed;
    c.step_mut("patch-css").assertions = vec![
        fail("file_contains", "pattern '#013220' not found in site/style.css (120 bytes)"),
        fail("content_changed", "site/style.css is unchanged"),
    ];
    add(&mut c, "publish", "shell.exec", OnFail::Abort, StepStatus::Pending);
    table.push((
        "assertion failed, dependents not run",
        c,
        RunStatus::Failed,
        vec![
            (
                ReasonCode::AssertionFailed,
                Some("patch-css"),
                "step 'patch-css' (file.patch): file_contains failed: pattern '#013220' not \
                 found in site/style.css (120 bytes) (and 1 more failed assertion)",
            ),
            (ReasonCode::StepsNotRun, None, "1 step did not run: 'publish'"),
        ],
    ));

    let mut c = Case::good();
    add(&mut c, "lint", "shell.exec", OnFail::Continue, StepStatus::Failed);
    c.step_mut("lint").attempts = 3;
    c.step_mut("lint").evidence = vec!["started".into(), "`ruff` exited with code 1".into()];
    add(&mut c, "after-lint", "file.read", OnFail::Abort, StepStatus::Skipped);
    table.push((
        "continue failure: partial, skipped is no reason",
        c,
        RunStatus::Partial,
        vec![(
            ReasonCode::StepFailed,
            Some("lint"),
            "step 'lint' (shell.exec) failed after 3 attempts: `ruff` exited with code 1",
        )],
    ));

    let mut c = Case::good();
    c.step_mut("read-css").status = StepStatus::Failed;
    c.step_mut("patch-css").status = StepStatus::Blocked;
    c.goal_actions_executed = false;
    // patch-css never ran: nothing changed.
    c.mutations.clear();
    c.postconditions[0].satisfied = false;
    c.postconditions[0].evidence = "1 of 1 assertions failed: content_changed: unchanged".into();
    table.push((
        "abort failure: failed",
        c,
        RunStatus::Failed,
        vec![
            (ReasonCode::StepFailed, Some("read-css"), "step 'read-css' (file.read) failed"),
            (ReasonCode::StepsNotRun, None, "1 step did not run: 'patch-css'"),
            (
                ReasonCode::PostconditionUnverified,
                None,
                "postcondition \"CSS changed\" is not satisfied: 1 of 1 assertions failed: \
                 content_changed: unchanged",
            ),
            (
                ReasonCode::NoEffects,
                None,
                "the goal asks for a change (\"Change the site background to dark green\"), but \
                 no step with a write or exec effect, or a non-GET http.request, finished \
                 successfully",
            ),
        ],
    ));

    let mut c = Case::good();
    for s in &mut c.plan.steps {
        s.on_fail = OnFail::Continue;
    }
    for s in &mut c.steps {
        s.status = StepStatus::Failed;
    }
    c.goal_actions_executed = false;
    c.postconditions.clear();
    c.plan.postconditions.clear();
    c.plan.goal = "List the files".into();
    table.push((
        "continue failures but nothing done: failed",
        c,
        RunStatus::Failed,
        vec![
            (ReasonCode::StepFailed, Some("read-css"), "step 'read-css' (file.read) failed"),
            (ReasonCode::StepFailed, Some("patch-css"), "step 'patch-css' (file.patch) failed"),
        ],
    ));

    let mut c = Case::good();
    c.plan.steps.remove(1);
    c.steps.remove(1);
    c.mutations.clear();
    c.mutation_steps.clear();
    c.goal_actions_executed = false;
    c.plan.postconditions[0] = Postcondition {
        description: "The background is dark green".into(),
        ..Postcondition::default()
    };
    c.postconditions[0] = PostconditionResult {
        description: "The background is dark green".into(),
        satisfied: false,
        evidence: "no assertion: needs a judge".into(),
        judge: None,
    };
    table.push((
        "discovery only",
        c,
        RunStatus::Partial,
        vec![
            (
                ReasonCode::PostconditionUnverified,
                None,
                "postcondition \"The background is dark green\" is not satisfied: no assertion: \
                 needs a judge",
            ),
            (
                ReasonCode::NoEffects,
                None,
                "the goal asks for a change (\"Change the site background to dark green\"), but \
                 no step with a write or exec effect, or a non-GET http.request, finished \
                 successfully",
            ),
        ],
    ));

    let mut c = Case::good();
    c.goal_actions_executed = false;
    c.plan.goal = "Report the background colour".into();
    table.push(("read-only goal without effects", c, RunStatus::Success, vec![]));

    let mut c = Case::good();
    c.mutations[0] = mutation("site/style.css", true);
    table.push((
        "no-op write",
        c,
        RunStatus::Partial,
        vec![(
            ReasonCode::NoOpMutation,
            Some("patch-css"),
            "step 'patch-css' wrote site/style.css but left it byte-for-byte unchanged (120 bytes)",
        )],
    ));

    let c = waiting();
    table.push((
        "waiting for approval",
        c,
        RunStatus::AwaitingApproval,
        vec![
            (ReasonCode::StepsNotRun, None, "1 step did not run: 'publish'"),
            (
                ReasonCode::PostconditionUnverified,
                None,
                "postcondition \"CSS changed\" is not satisfied: 1 of 1 assertions failed: \
                 content_changed: unchanged",
            ),
            (
                ReasonCode::ApprovalPending,
                Some("patch-css"),
                "step 'patch-css' waits for approval: approve it with `pev approve`, then \
                 continue with `pev resume`",
            ),
        ],
    ));

    let mut c = waiting();
    c.plan.steps[0].on_fail = OnFail::Continue;
    c.step_mut("read-css").status = StepStatus::Failed;
    table.push((
        "waiting, but a step failed",
        c,
        RunStatus::Failed,
        vec![
            (ReasonCode::StepFailed, Some("read-css"), "step 'read-css' (file.read) failed"),
            (ReasonCode::StepsNotRun, None, "1 step did not run: 'publish'"),
            (
                ReasonCode::PostconditionUnverified,
                None,
                "postcondition \"CSS changed\" is not satisfied: 1 of 1 assertions failed: \
                 content_changed: unchanged",
            ),
            (
                ReasonCode::ApprovalPending,
                Some("patch-css"),
                "step 'patch-css' waits for approval: approve it with `pev approve`, then \
                 continue with `pev resume`",
            ),
        ],
    ));

    let mut c = Case::good();
    c.step_mut("patch-css").status = StepStatus::Pending;
    c.mutations.clear();
    c.mutation_steps.clear();
    c.cancelled = true;
    c.plan.postconditions.clear();
    c.postconditions.clear();
    c.goal_actions_executed = true;
    table.push((
        "cancelled after some work",
        c,
        RunStatus::Partial,
        vec![
            (ReasonCode::StepsNotRun, None, "1 step did not run: 'patch-css'"),
            (ReasonCode::Cancelled, None, "the run was cancelled before it finished"),
        ],
    ));

    let mut c = Case::good();
    c.steps.clear();
    c.cancelled = true;
    c.plan.postconditions.clear();
    c.postconditions.clear();
    c.mutations.clear();
    c.mutation_steps.clear();
    c.plan.goal = "Count the lines".into();
    table.push((
        "cancelled before anything ran (steps never reported)",
        c,
        RunStatus::Failed,
        vec![
            (ReasonCode::StepsNotRun, None, "2 steps did not run: 'read-css', 'patch-css'"),
            (ReasonCode::Cancelled, None, "the run was cancelled before it finished"),
        ],
    ));

    let mut c = Case::good();
    c.step_mut("patch-css").assertions =
        vec![pass("file_exists"), fail("file_contains", "pattern 'x' not found in a (1 byte)")];
    table.push((
        "a done step with a failed assertion is never success",
        c,
        RunStatus::Partial,
        vec![(
            ReasonCode::AssertionFailed,
            Some("patch-css"),
            "step 'patch-css' (file.patch): file_contains failed: pattern 'x' not found in a (1 \
             byte)",
        )],
    ));

    let mut c = Case::good();
    c.plan.steps[1].on_fail = OnFail::Retry;
    c.step_mut("patch-css").status = StepStatus::Failed;
    c.step_mut("patch-css").assertions.clear();
    c.step_mut("patch-css").attempts = 2;
    table.push((
        "retry exhausted: failed",
        c,
        RunStatus::Failed,
        vec![(
            ReasonCode::StepFailed,
            Some("patch-css"),
            "step 'patch-css' (file.patch) failed after 2 attempts",
        )],
    ));

    for (name, case, status, expected) in table {
        let (got_status, reasons) = case.decide();
        let got: Vec<(ReasonCode, Option<&str>, &str)> =
            reasons.iter().map(|r| (r.code, r.step.as_deref(), r.message.as_str())).collect();
        assert_eq!(got, expected, "reasons of {name}");
        assert_eq!(got_status, status, "status of {name}");
    }
}

#[path = "outcome_rules_tests.rs"]
mod rules;

#[path = "outcome_branches_tests.rs"]
mod branches;

/// `no_effects` says the run changed nothing: not when a failed step did change a file (its
/// failure is the reason), never when nothing else stands in the way of `success`.
#[test]
fn no_effects_is_only_for_a_run_that_changed_nothing() {
    // A patch that changed the file but failed its assertion: the files changed, the failure
    // is the reason; no `no_effects`.
    let mut c = Case::good();
    c.step_mut("patch-css").status = StepStatus::Failed;
    c.goal_actions_executed = false;
    let (status, reasons) = c.decide();
    assert_eq!(status, RunStatus::Failed);
    assert!(reasons.iter().all(|r| r.code != ReasonCode::NoEffects), "{reasons:?}");
    // The same with nothing changed: `no_effects` is there.
    c.mutations.clear();
    let (_, reasons) = c.decide();
    assert!(reasons.iter().any(|r| r.code == ReasonCode::NoEffects), "{reasons:?}");
    // A changed file but no effect step that succeeded, and no other reason: `no_effects`
    // stays, so this can never be a success.
    let mut c = Case::good();
    c.goal_actions_executed = false;
    let (status, reasons) = c.decide();
    assert_ne!(status, RunStatus::Success);
    assert_eq!(reasons.iter().map(|r| r.code).collect::<Vec<_>>(), vec![ReasonCode::NoEffects]);
}
