use pev_protocol::parse::{Format, parse_plan};

use super::*;

fn finding(code: LintCode) -> Finding {
    Finding::plan(code, "", "m")
}

#[test]
fn risk_score_sums_distinct_codes_and_caps() {
    let policy = CompiledPolicy::default();
    let r = fold(
        vec![
            finding(LintCode::ToolDeny),
            finding(LintCode::ToolDeny),
            finding(LintCode::UnknownTool),
        ],
        &policy,
        LintOptions::default(),
    );
    assert_eq!(r.risk_score, 0.25);
    assert_eq!(r.status, LintStatus::Error);
    let many: Vec<_> = LintCode::ALL.iter().map(|&c| finding(c)).collect();
    assert_eq!(fold(many, &policy, LintOptions::default()).risk_score, 1.0);
}

#[test]
fn threshold_turns_warnings_into_error_status() {
    let policy = CompiledPolicy::default();
    let warn = fold(vec![finding(LintCode::UnknownTool)], &policy, LintOptions::default());
    assert_eq!(warn.status, LintStatus::Warn);
    let strict = LintOptions { fail_risk: Some(0.05) };
    assert_eq!(
        fold(vec![finding(LintCode::UnknownTool)], &policy, strict).status,
        LintStatus::Error
    );
    assert_eq!(fold(vec![], &policy, LintOptions::default()).status, LintStatus::Pass);
}

#[test]
fn schema_failure_is_an_error_result() {
    let text = r#"{"goal":"g","steps":[{"id":"a","depends_on":7}]}"#;
    let Err(pev_protocol::ParseError::Schema(issues)) = parse_plan(text, Format::Json) else {
        panic!("expected schema error")
    };
    let r = schema_failure(&issues, &CompiledPolicy::default(), LintOptions::default());
    assert_eq!(r.status, LintStatus::Error);
    assert_eq!(r.errors[0].code, LintCode::SchemaInvalid);
    assert_eq!(r.errors[0].step, Some(0));
    assert_eq!(r.errors[0].path, "/steps/0/depends_on");
}

#[test]
fn clean_plan_scores_positive_zero() {
    let r = fold(vec![], &CompiledPolicy::default(), LintOptions::default());
    assert!(r.risk_score == 0.0 && r.risk_score.is_sign_positive(), "{}", r.risk_score);
    assert_eq!(serde_json::to_string(&r.risk_score).unwrap(), "0.0");
}
