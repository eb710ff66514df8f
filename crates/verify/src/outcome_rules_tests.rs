//! The outcome rules beside the table: evidence for success, postcondition matching, the
//! `steps_not_run` message, empty plans, cancellation while waiting.

use super::*;

#[test]
fn success_only_with_evidence() {
    // Everything ran and passed, but a postcondition is a bare string: never success.
    let mut c = Case::good();
    c.plan.postconditions.push(Postcondition {
        description: "The page looks right".into(),
        ..Postcondition::default()
    });
    c.postconditions.push(PostconditionResult {
        description: "The page looks right".into(),
        satisfied: false,
        evidence: "no assertion: needs a judge".into(),
        judge: None,
    });
    expect(
        &c,
        RunStatus::Partial,
        &[(
            ReasonCode::PostconditionUnverified,
            None,
            "postcondition \"The page looks right\" is not satisfied: no assertion: needs a judge",
        )],
    );
    // Even if a caller forgot to check it.
    c.postconditions.pop();
    expect(
        &c,
        RunStatus::Partial,
        &[(
            ReasonCode::PostconditionUnverified,
            None,
            "postcondition \"The page looks right\" was not checked",
        )],
    );
    // Or claimed it satisfied without saying why.
    c.postconditions.push(PostconditionResult {
        description: "The page looks right".into(),
        satisfied: true,
        evidence: "  ".into(),
        judge: None,
    });
    expect(
        &c,
        RunStatus::Partial,
        &[(
            ReasonCode::PostconditionUnverified,
            None,
            "postcondition \"The page looks right\" was reported satisfied without evidence",
        )],
    );
}

#[test]
fn postcondition_results_are_matched_by_description_when_out_of_order() {
    let mut c = Case::good();
    c.plan
        .postconditions
        .insert(0, Postcondition { description: "first".into(), ..Postcondition::default() });
    c.postconditions.push(PostconditionResult {
        description: "first".into(),
        satisfied: false,
        evidence: "no assertion: needs a judge".into(),
        judge: None,
    });
    expect(
        &c,
        RunStatus::Partial,
        &[(
            ReasonCode::PostconditionUnverified,
            None,
            "postcondition \"first\" is not satisfied: no assertion: needs a judge",
        )],
    );
    // A result for a postcondition the plan does not list still counts when unsatisfied.
    let mut c = Case::good();
    c.postconditions.push(PostconditionResult {
        description: "extra".into(),
        satisfied: false,
        evidence: "it failed".into(),
        judge: None,
    });
    expect(
        &c,
        RunStatus::Partial,
        &[(
            ReasonCode::PostconditionUnverified,
            None,
            "postcondition \"extra\" is not satisfied: it failed",
        )],
    );
}

#[test]
fn one_result_answers_one_postcondition_even_when_two_share_a_description() {
    // Two postconditions with the same words; the result at the first one's position is about
    // something else, so the first takes the second's result by description. The second must not
    // reuse it (by position or by description): it was not checked.
    let mut c = Case::good();
    c.plan.postconditions = vec![
        Postcondition { description: "same".into(), ..Postcondition::default() },
        Postcondition { description: "same".into(), ..Postcondition::default() },
    ];
    c.postconditions = vec![
        PostconditionResult {
            description: "other".into(),
            satisfied: true,
            evidence: "file_exists: yes".into(),
            judge: None,
        },
        PostconditionResult {
            description: "same".into(),
            satisfied: false,
            evidence: "it failed".into(),
            judge: None,
        },
    ];
    expect(
        &c,
        RunStatus::Partial,
        &[
            (
                ReasonCode::PostconditionUnverified,
                None,
                "postcondition \"same\" is not satisfied: it failed",
            ),
            (ReasonCode::PostconditionUnverified, None, "postcondition \"same\" was not checked"),
        ],
    );
}

#[test]
fn steps_not_run_names_five_and_counts_the_rest() {
    let mut c = Case::good();
    for (i, status) in [
        StepStatus::Pending,
        StepStatus::InProgress,
        StepStatus::Blocked,
        StepStatus::Pending,
        StepStatus::Pending,
        StepStatus::Pending,
    ]
    .into_iter()
    .enumerate()
    {
        add(&mut c, &format!("s{i}"), "file.read", OnFail::Abort, status);
    }
    // A step of the plan that has no result at all has not run either.
    c.plan.steps.push(plan_step("unreported", "file.read", OnFail::Abort));
    expect(
        &c,
        RunStatus::Partial,
        &[(
            ReasonCode::StepsNotRun,
            None,
            "7 steps did not run: 's0', 's1', 's2', 's3', 's4' and 2 more",
        )],
    );
}

#[test]
fn an_empty_plan_is_never_success_for_want_of_evidence() {
    let plan = Plan { goal: "List the files".into(), ..Plan::default() };
    let input = OutcomeInput {
        plan: &plan,
        steps: &[],
        postconditions: &[],
        mutations: &[],
        mutation_steps: &[],
        goal_actions_executed: false,
        awaiting_approval: &[],
        cancelled: false,
        judge_rejected: &[],
        mismatched: &[],
        budget_exhausted: None,
        regressions: &[],
        oracle: &[],
    };
    let (status, reasons) = decide(&input);
    assert_eq!(status, RunStatus::Failed);
    assert_eq!(reasons.iter().map(|r| r.code).collect::<Vec<_>>(), vec![ReasonCode::StepsNotRun]);
    assert!(reasons[0].message.contains("no steps"), "{}", reasons[0].message);
    let plan = Plan { goal: "Create hello.txt".into(), ..Plan::default() };
    let (status, reasons) = decide(&OutcomeInput { plan: &plan, ..input });
    assert_eq!(status, RunStatus::Failed);
    assert_eq!(
        reasons.iter().map(|r| r.code).collect::<Vec<_>>(),
        vec![ReasonCode::NoEffects, ReasonCode::StepsNotRun]
    );
}

#[test]
fn cancelled_while_waiting_is_not_awaiting_approval() {
    let mut c = waiting();
    c.cancelled = true;
    let (status, reasons) = c.decide();
    assert_eq!(status, RunStatus::Partial);
    let codes: Vec<ReasonCode> = reasons.iter().map(|r| r.code).collect();
    assert_eq!(
        codes,
        vec![
            ReasonCode::StepsNotRun,
            ReasonCode::PostconditionUnverified,
            ReasonCode::ApprovalPending,
            ReasonCode::Cancelled,
        ]
    );
}
