//! The plan-lint 0.0.3 compatibility table: pev is a drop-in for plan-lint, so on plan-lint's own
//! example (and on cases that probe each of its rules) pev must give plan-lint's verdict where
//! plan-lint is right, and the right verdict where it is wrong.
//!
//! Each row holds a plan and a policy (fixtures), the verdict plan-lint 0.0.3 was *observed* to
//! give (`crates/lint/tests/fixtures/compat/observe.sh` re-runs it; risk rounded to 2 decimals),
//! the verdict pev must give, and whether plan-lint is right. The table is data, written from
//! plan-lint's behaviour; no plan-lint code is involved. Findings are compared as `CODE@step`
//! lists, order-free, so a row fails on a missing, extra or duplicated finding.

use pev_protocol::{Finding, LintResult, LintStatus};

use super::support::lint_with;

/// A fixture file's text, relative to `crates/lint/tests/fixtures/`.
macro_rules! fixture {
    ($path:literal) => {
        include_str!(concat!("../fixtures/", $path))
    };
}

/// A finding as the table writes it: code and 0-based step (`None` for plan-level findings).
type Code = (&'static str, Option<usize>);

/// A linter's verdict on one case.
struct Verdict {
    status: LintStatus,
    risk: f64,
    errors: &'static [Code],
    warnings: &'static [Code],
}

/// Whether plan-lint's observed verdict is the right one.
enum PlanLint {
    Right,
    /// Wrong, and why.
    Wrong(&'static str),
}

struct Row {
    case: &'static str,
    plan: &'static str,
    /// Policy YAML; empty for the default policy.
    policy: &'static str,
    plan_lint: Verdict,
    pev: Verdict,
    judgement: PlanLint,
}

use LintStatus::{Error, Pass};
use PlanLint::{Right, Wrong};

const NONE: &[Code] = &[];

static ROWS: &[Row] = &[
    Row {
        case: "bundled_price_drop",
        plan: fixture!("plan_lint/price_drop.json"),
        policy: fixture!("plan_lint/policy.yaml"),
        plan_lint: Verdict {
            status: Error,
            risk: 0.6,
            errors: &[
                ("LOOP_DETECTED", Some(2)),
                ("TOOL_DENY", Some(0)),
                ("RAW_SECRET", Some(2)),
                ("RAW_SECRET", Some(2)),
                ("TOOL_DENY", Some(0)),
            ],
            warnings: NONE,
        },
        // TOOL_DENY 0.2 + RAW_SECRET 0.5 (the policy's raw_secret weight) + two warning codes at
        // 0.05: the references to steps outside depends_on, and a bulk update nothing checks.
        pev: Verdict {
            status: Error,
            risk: 0.8,
            errors: &[("TOOL_DENY", Some(0)), ("RAW_SECRET", Some(2))],
            warnings: &[
                ("REFERENCE_NOT_DEPENDENCY", Some(2)),
                ("REFERENCE_NOT_DEPENDENCY", Some(2)),
                ("UNVERIFIED_EFFECT", Some(2)),
            ],
        },
        judgement: Wrong(
            "no cycle exists (step-003 merely reads two earlier steps); the secret and the denied \
             tool are each reported twice; the raw_secret weight is ignored",
        ),
    },
    Row {
        case: "real_two_cycle",
        plan: fixture!("compat/two_cycle.json"),
        policy: fixture!("compat/calc.policy.yaml"),
        plan_lint: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        pev: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("LOOP_DETECTED", Some(0))],
            warnings: NONE,
        },
        judgement: Wrong("first and second depend on each other; plan-lint ignores depends_on"),
    },
    Row {
        case: "two_references_no_cycle",
        plan: fixture!("compat/two_references.json"),
        policy: fixture!("compat/calc.policy.yaml"),
        plan_lint: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("LOOP_DETECTED", Some(2))],
            warnings: NONE,
        },
        pev: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        judgement: Wrong("a step that reads two earlier steps is not a cycle"),
    },
    Row {
        case: "dotted_bound_exceeded",
        plan: fixture!("compat/transfer_5000.json"),
        policy: fixture!("compat/transfer.policy.yaml"),
        plan_lint: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        pev: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("BOUND_VIOLATION", Some(0))],
            warnings: NONE,
        },
        judgement: Wrong(
            "payments.transfer.amount: [0.01, 1000] is read as tool `payments`, so 5000 passes",
        ),
    },
    Row {
        case: "dotted_bound_within",
        plan: fixture!("compat/transfer_999.json"),
        policy: fixture!("compat/transfer.policy.yaml"),
        plan_lint: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        pev: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        judgement: Right,
    },
    Row {
        case: "finance_transfer_over_limit",
        plan: fixture!("compat/finance_transfer_7500.json"),
        policy: fixture!("plan_lint/finance_policy.yaml"),
        plan_lint: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        // The finance policy weighs bound_violation at 0.5.
        pev: Verdict {
            status: Error,
            risk: 0.5,
            errors: &[("BOUND_VIOLATION", Some(1))],
            warnings: NONE,
        },
        judgement: Wrong(
            "the finance policy's own payments.transfer.amount bound is never applied",
        ),
    },
    Row {
        case: "finance_transfer_within_limit",
        plan: fixture!("compat/finance_transfer_250.json"),
        policy: fixture!("plan_lint/finance_policy.yaml"),
        plan_lint: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        pev: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        judgement: Right,
    },
    Row {
        case: "risk_weight_by_code",
        plan: fixture!("compat/aws_key.json"),
        policy: fixture!("compat/weights.policy.yaml"),
        plan_lint: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("RAW_SECRET", Some(0))],
            warnings: NONE,
        },
        pev: Verdict {
            status: Error,
            risk: 0.9,
            errors: &[("RAW_SECRET", Some(0))],
            warnings: NONE,
        },
        judgement: Wrong("risk_weights keyed by code are never looked up, every code weighs 0.2"),
    },
    Row {
        case: "policy_risk_threshold",
        plan: fixture!("compat/undeclared_reference.json"),
        policy: fixture!("compat/threshold.policy.yaml"),
        plan_lint: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        // A lone warning (0.05) reaches the policy's fail_risk_threshold of 0.05.
        pev: Verdict {
            status: Error,
            risk: 0.05,
            errors: NONE,
            warnings: &[("REFERENCE_NOT_DEPENDENCY", Some(1))],
        },
        judgement: Wrong(
            "the policy's fail_risk_threshold is replaced by the CLI default 0.8, and the \
             undeclared dependency is not seen",
        ),
    },
    Row {
        case: "select_created_at",
        plan: fixture!("compat/select_created_at.json"),
        policy: fixture!("compat/sql.policy.yaml"),
        plan_lint: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("TOOL_DENY", Some(0))],
            warnings: NONE,
        },
        pev: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        judgement: Wrong("`created_at` contains CREATE as a substring; the statement only reads"),
    },
    Row {
        case: "delete_in_readonly",
        plan: fixture!("compat/delete_in_readonly.json"),
        policy: fixture!("compat/sql.policy.yaml"),
        plan_lint: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("TOOL_DENY", Some(0))],
            warnings: NONE,
        },
        pev: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("SQL_WRITE_IN_READONLY", Some(0))],
            warnings: NONE,
        },
        // Same verdict; pev names the problem with its own, more precise code.
        judgement: Right,
    },
    Row {
        case: "long_identifier",
        plan: fixture!("compat/long_identifier.json"),
        policy: fixture!("compat/secrets.policy.yaml"),
        plan_lint: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("RAW_SECRET", Some(0))],
            warnings: NONE,
        },
        pev: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        judgement: Wrong("any run of 32+ letters and digits counts as a secret, even a plain name"),
    },
    Row {
        case: "commit_sha",
        plan: fixture!("compat/commit_sha.json"),
        policy: fixture!("compat/secrets.policy.yaml"),
        plan_lint: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("RAW_SECRET", Some(0))],
            warnings: NONE,
        },
        pev: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        judgement: Wrong("a 40-hex-digit git commit id is an identifier, not a credential"),
    },
    Row {
        case: "aws_access_key",
        plan: fixture!("compat/aws_key.json"),
        policy: fixture!("compat/secrets.policy.yaml"),
        plan_lint: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("RAW_SECRET", Some(0))],
            warnings: NONE,
        },
        pev: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("RAW_SECRET", Some(0))],
            warnings: NONE,
        },
        judgement: Right,
    },
    Row {
        case: "aws_key_nested_two_levels",
        plan: fixture!("compat/nested_aws_key.json"),
        policy: fixture!("compat/secrets.policy.yaml"),
        plan_lint: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("RAW_SECRET", Some(0))],
            warnings: NONE,
        },
        pev: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("RAW_SECRET", Some(0))],
            warnings: NONE,
        },
        judgement: Right,
    },
    Row {
        case: "anchored_deny_regex_nested",
        plan: fixture!("compat/nested_anchored_token.json"),
        policy: fixture!("compat/anchored.policy.yaml"),
        plan_lint: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        pev: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("RAW_SECRET", Some(0))],
            warnings: NONE,
        },
        judgement: Wrong(
            "patterns run over Python's printed form of the arguments, so `^…$` never matches a value",
        ),
    },
    Row {
        case: "allow_tools_glob",
        plan: fixture!("compat/glob_tools.json"),
        policy: fixture!("compat/glob.policy.yaml"),
        plan_lint: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("TOOL_DENY", Some(0)), ("TOOL_DENY", Some(1))],
            warnings: NONE,
        },
        pev: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("TOOL_DENY", Some(1))],
            warnings: NONE,
        },
        judgement: Wrong(
            "allow_tools `db.*` is compared as an exact name, so db.query_ro is denied",
        ),
    },
    Row {
        case: "max_steps_exceeded",
        plan: fixture!("compat/three_steps.json"),
        policy: fixture!("compat/max_steps.policy.yaml"),
        plan_lint: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("MAX_STEPS_EXCEEDED", None)],
            warnings: NONE,
        },
        pev: Verdict {
            status: Error,
            risk: 0.2,
            errors: &[("MAX_STEPS_EXCEEDED", None)],
            warnings: NONE,
        },
        judgement: Right,
    },
    Row {
        case: "max_steps_at_limit",
        plan: fixture!("compat/two_steps.json"),
        policy: fixture!("compat/max_steps.policy.yaml"),
        plan_lint: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        pev: Verdict { status: Pass, risk: 0.0, errors: NONE, warnings: NONE },
        judgement: Right,
    },
];

/// `CODE@step` labels, sorted, so that comparisons ignore order but not multiplicity.
fn labels<'a>(codes: impl IntoIterator<Item = (&'a str, Option<usize>)>) -> Vec<String> {
    let mut out: Vec<String> = codes
        .into_iter()
        .map(|(code, step)| match step {
            Some(i) => format!("{code}@{i}"),
            None => format!("{code}@plan"),
        })
        .collect();
    out.sort();
    out
}

fn finding_labels(findings: &[Finding]) -> Vec<String> {
    labels(findings.iter().map(|f| (f.code.as_str(), f.step)))
}

fn describe(status: LintStatus, risk: f64, errors: &[String], warnings: &[String]) -> String {
    format!(
        "{status:?} risk {risk} errors [{}] warnings [{}]",
        errors.join(", "),
        warnings.join(", ")
    )
}

fn describe_verdict(v: &Verdict) -> String {
    describe(
        v.status,
        v.risk,
        &labels(v.errors.iter().copied()),
        &labels(v.warnings.iter().copied()),
    )
}

fn same_risk(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// Why pev's result differs from the row's expected verdict, if it does.
fn mismatch(row: &Row, got: &LintResult) -> Option<String> {
    let want = &row.pev;
    let (errors, warnings) = (finding_labels(&got.errors), finding_labels(&got.warnings));
    let same = got.status == want.status
        && same_risk(got.risk_score, want.risk)
        && errors == labels(want.errors.iter().copied())
        && warnings == labels(want.warnings.iter().copied());
    (!same).then(|| {
        let messages: Vec<String> = got
            .errors
            .iter()
            .chain(&got.warnings)
            .map(|f| format!("    {}@{:?} {}: {}", f.code, f.step, f.path, f.msg))
            .collect();
        format!(
            "{}:\n  expected {}\n  got      {}\n{}",
            row.case,
            describe_verdict(want),
            describe(got.status, got.risk_score, &errors, &warnings),
            messages.join("\n")
        )
    })
}

#[test]
fn pev_gives_the_expected_verdict_on_every_row() {
    let mismatches: Vec<String> =
        ROWS.iter().filter_map(|row| mismatch(row, &lint_with(row.plan, row.policy))).collect();
    assert!(
        mismatches.is_empty(),
        "{} of {} plan-lint compatibility rows differ:\n{}",
        mismatches.len(),
        ROWS.len(),
        mismatches.join("\n")
    );
}

/// The table itself must be coherent: where plan-lint is called right pev agrees on the status,
/// and where it is called wrong the two verdicts really differ.
#[test]
fn the_table_is_coherent() {
    let mut problems = Vec::new();
    for (i, row) in ROWS.iter().enumerate() {
        if ROWS[..i].iter().any(|other| other.case == row.case) {
            problems.push(format!("{}: duplicate case name", row.case));
        }
        let (pl, pev) = (&row.plan_lint, &row.pev);
        match row.judgement {
            Right if pl.status != pev.status => problems.push(format!(
                "{}: plan-lint is called right but the statuses differ ({:?} vs {:?})",
                row.case, pl.status, pev.status
            )),
            Wrong(why)
                if describe_verdict(pl) == describe_verdict(pev) || why.trim().is_empty() =>
            {
                problems.push(format!(
                    "{}: plan-lint is called wrong but the verdicts are the same or no reason is given",
                    row.case
                ));
            }
            _ => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_table_covers_the_cases_the_issue_names() {
    let names: Vec<&str> = ROWS.iter().map(|r| r.case).collect();
    let required = [
        "bundled_price_drop",
        "real_two_cycle",
        "two_references_no_cycle",
        "dotted_bound_exceeded",
        "dotted_bound_within",
        "risk_weight_by_code",
        "policy_risk_threshold",
        "select_created_at",
        "delete_in_readonly",
        "long_identifier",
        "aws_access_key",
        "aws_key_nested_two_levels",
        "allow_tools_glob",
        "max_steps_exceeded",
    ];
    let missing: Vec<&str> = required.into_iter().filter(|r| !names.contains(r)).collect();
    assert!(missing.is_empty(), "rows missing from the table: {missing:?}");
}
