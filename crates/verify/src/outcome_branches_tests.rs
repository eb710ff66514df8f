//! The outcome branches that only model work reaches: a step failed by the judge's confident
//! "no" (`judge_rejected`, with the judge's words), and a run stopped by its budget
//! (`budget_exhausted`: never success, `partial` or `failed` by what got done).

use super::*;

const JUDGE: &str = "the judge saw the body rule still set to white: the colour did not change";
const BUDGET: &str = "the next call needs about $0.40 and $0.10 is left";

/// `patch-css` failed without a failed assertion, its error the judge's answer.
fn judged() -> Case {
    let mut c = Case::good();
    let patch = c.step_mut("patch-css");
    patch.status = StepStatus::Failed;
    patch.assertions.clear();
    patch.error = Some(JUDGE.into());
    c.judge_rejected = vec!["patch-css".into()];
    c
}

#[test]
fn a_step_the_judge_rejected_is_judge_rejected_with_its_words() {
    let c = judged();
    expect(
        &c,
        RunStatus::Failed,
        &[(
            ReasonCode::JudgeRejected,
            Some("patch-css"),
            "step 'patch-css' (file.patch): the judge saw the body rule still set to white: the \
             colour did not change",
        )],
    );

    // Without an error recorded the reason still says who rejected it.
    let mut c = judged();
    c.step_mut("patch-css").error = None;
    expect(
        &c,
        RunStatus::Failed,
        &[(
            ReasonCode::JudgeRejected,
            Some("patch-css"),
            "step 'patch-css' (file.patch): the judge rejected the step",
        )],
    );

    // On `continue`, with another step done: partial.
    let mut c = judged();
    c.plan.steps[1].on_fail = OnFail::Continue;
    let (status, reasons) = c.decide();
    assert_eq!(status, RunStatus::Partial, "{reasons:?}");
    assert_eq!(reasons.iter().map(|r| r.code).collect::<Vec<_>>(), [ReasonCode::JudgeRejected]);
}

#[test]
fn the_same_failure_not_listed_by_the_judge_is_step_failed() {
    let mut c = judged();
    c.judge_rejected.clear();
    expect(
        &c,
        RunStatus::Failed,
        &[(
            ReasonCode::StepFailed,
            Some("patch-css"),
            "step 'patch-css' (file.patch) failed: the judge saw the body rule still set to \
             white: the colour did not change",
        )],
    );
    // Another step listed does not make this one judge_rejected.
    c.judge_rejected = vec!["read-css".into()];
    let (_, reasons) = c.decide();
    assert_eq!(reasons.iter().map(|r| r.code).collect::<Vec<_>>(), [ReasonCode::StepFailed]);
}

#[test]
fn judge_rejected_is_only_for_failed_steps_without_a_failed_assertion() {
    // A failed assertion is the harness's own evidence: it is what the reason names.
    let mut c = judged();
    c.step_mut("patch-css").assertions =
        vec![fail("content_changed", "site/style.css is unchanged")];
    expect(
        &c,
        RunStatus::Failed,
        &[(
            ReasonCode::AssertionFailed,
            Some("patch-css"),
            "step 'patch-css' (file.patch): content_changed failed: site/style.css is unchanged",
        )],
    );
    // A step listed by the judge that is done (the judge accepted a later attempt) is no reason.
    let mut c = Case::good();
    c.judge_rejected = vec!["patch-css".into(), "read-css".into()];
    expect(&c, RunStatus::Success, &[]);
}

const MISMATCH: &str = "plan-execution mismatch: the step was to change site/style.css, but it \
                        changed site/theme.css instead";

/// `patch-css` failed for changing another file than the one it named; a judge had said yes.
fn mismatched() -> Case {
    let mut c = judged();
    let patch = c.step_mut("patch-css");
    patch.error = Some(MISMATCH.into());
    c.judge_rejected.clear();
    c.mismatched = vec!["patch-css".into()];
    c
}

#[test]
fn a_step_that_changed_another_file_is_a_plan_execution_mismatch_naming_both() {
    let c = mismatched();
    expect(
        &c,
        RunStatus::Failed,
        &[(
            ReasonCode::PlanExecutionMismatch,
            Some("patch-css"),
            "step 'patch-css' (file.patch): plan-execution mismatch: the step was to change \
             site/style.css, but it changed site/theme.css instead",
        )],
    );
    // It outranks a judge's word: listed by both, the mismatch is the reason.
    let mut c = mismatched();
    c.judge_rejected = vec!["patch-css".into()];
    let (_, reasons) = c.decide();
    assert_eq!(
        reasons.iter().map(|r| r.code).collect::<Vec<_>>(),
        [ReasonCode::PlanExecutionMismatch]
    );
    // A failed assertion is still what the reason names first.
    let mut c = mismatched();
    c.step_mut("patch-css").assertions =
        vec![fail("file_contains", "no #013220 in site/style.css")];
    let (_, reasons) = c.decide();
    assert_eq!(reasons.iter().map(|r| r.code).collect::<Vec<_>>(), [ReasonCode::AssertionFailed]);
    // Listed but done (a later attempt changed the right file): no reason.
    let mut c = Case::good();
    c.mismatched = vec!["patch-css".into()];
    expect(&c, RunStatus::Success, &[]);
}

/// A read-only goal whose run the budget stopped with `pending` steps not yet run (no
/// mutations, no postconditions: only the budget and the steps left are reasons).
fn stopped_by_the_budget(pending: &[&str]) -> Case {
    let mut c = Case::good();
    for id in pending {
        let step = c.step_mut(id);
        step.status = StepStatus::Pending;
        step.assertions.clear();
    }
    c.mutations.clear();
    c.mutation_steps.clear();
    c.plan.postconditions.clear();
    c.postconditions.clear();
    c.plan.goal = "Count the lines of the stylesheet".into();
    c.budget_exhausted = Some(BUDGET.into());
    c
}

#[test]
fn an_exhausted_budget_after_some_work_is_partial() {
    let mut c = stopped_by_the_budget(&["patch-css"]);
    expect(
        &c,
        RunStatus::Partial,
        &[
            (ReasonCode::StepsNotRun, None, "1 step did not run: 'patch-css'"),
            (
                ReasonCode::BudgetExhausted,
                None,
                "the run stopped before its budget ran out: the next call needs about $0.40 and \
                 $0.10 is left",
            ),
        ],
    );

    // Cancelled too: both reasons, budget first.
    c.cancelled = true;
    let (status, reasons) = c.decide();
    assert_eq!(status, RunStatus::Partial);
    assert_eq!(
        reasons.iter().map(|r| r.code).collect::<Vec<_>>(),
        [ReasonCode::StepsNotRun, ReasonCode::BudgetExhausted, ReasonCode::Cancelled]
    );
}

#[test]
fn an_exhausted_budget_before_any_step_is_done_is_failed() {
    let mut c = stopped_by_the_budget(&["read-css", "patch-css"]);
    expect(
        &c,
        RunStatus::Failed,
        &[
            (ReasonCode::StepsNotRun, None, "2 steps did not run: 'read-css', 'patch-css'"),
            (
                ReasonCode::BudgetExhausted,
                None,
                "the run stopped before its budget ran out: the next call needs about $0.40 and \
                 $0.10 is left",
            ),
        ],
    );
    // Steps never reported at all count the same.
    c.steps.clear();
    let (status, reasons) = c.decide();
    assert_eq!(status, RunStatus::Failed);
    assert_eq!(
        reasons.iter().map(|r| r.code).collect::<Vec<_>>(),
        [ReasonCode::StepsNotRun, ReasonCode::BudgetExhausted]
    );
}

#[test]
fn an_exhausted_budget_is_never_success_nor_awaiting_approval() {
    // Every step done and verified: the budget reason alone keeps it from success.
    let mut c = Case::good();
    c.budget_exhausted = Some(BUDGET.into());
    let (status, reasons) = c.decide();
    assert_eq!(status, RunStatus::Partial);
    assert_eq!(reasons.iter().map(|r| r.code).collect::<Vec<_>>(), [ReasonCode::BudgetExhausted]);

    // Stopped by the budget while a step waits for approval: not something resume alone fixes.
    let mut c = waiting();
    c.budget_exhausted = Some(BUDGET.into());
    let (status, reasons) = c.decide();
    assert_eq!(status, RunStatus::Partial, "{reasons:?}");
    assert_eq!(reasons.last().map(|r| r.code), Some(ReasonCode::BudgetExhausted));
}
