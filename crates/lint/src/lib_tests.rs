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

#[test]
fn fold_keeps_each_level_in_order_and_drops_codes_turned_off() {
    let path = std::path::Path::new("p.yaml");
    let yaml = "severity: {unknown_tool: error, raw_secret: warning, empty_plan: off}\n";
    let policy =
        CompiledPolicy::from_parts(CompiledPolicy::parse(yaml, path).unwrap(), path, Vec::new())
            .unwrap();
    let at = |code: LintCode, path: &str| Finding::plan(code, path, "m");
    let findings = vec![
        at(LintCode::RawSecret, "/w1"),
        at(LintCode::ToolDeny, "/e1"),
        at(LintCode::EmptyPlan, "/off"),
        at(LintCode::UnknownTool, "/e2"),
        at(LintCode::UnverifiedEffect, "/w2"),
        at(LintCode::EmptyPlan, "/off"),
        at(LintCode::ToolDeny, "/e3"),
    ];
    let r = fold(findings, &policy, LintOptions::default());
    let paths = |fs: &[Finding]| fs.iter().map(|f| f.path.clone()).collect::<Vec<_>>();
    assert_eq!(paths(&r.errors), ["/e1", "/e2", "/e3"]);
    assert_eq!(paths(&r.warnings), ["/w1", "/w2"]);
    assert_eq!(r.errors[1].code, LintCode::UnknownTool);
    assert_eq!(r.warnings[0].code, LintCode::RawSecret);
    // Distinct codes as reported: tool_deny 0.2 + unknown_tool 0.2 (as an error) + raw_secret
    // 0.05 (as a warning) + unverified_effect 0.05; the code turned off weighs nothing.
    assert_eq!(r.risk_score, 0.5);
}
