use std::path::Path;

use super::*;

fn compile(yaml: &str) -> Result<CompiledPolicy, PolicyError> {
    let p = Path::new("p.yaml");
    CompiledPolicy::from_parts(CompiledPolicy::parse(yaml, p)?, p, Vec::new())
}

#[test]
fn globs_match_dotted_names() {
    assert!(Glob::new("db.*").matches("db.query_ro"));
    assert!(Glob::new("db.*").matches("db.x.y"));
    assert!(!Glob::new("db.*").matches("dbx.query"));
    assert!(Glob::new("*.write").matches("file.write"));
    assert!(Glob::new("file.?ead").matches("file.read"));
    assert!(!Glob::new("file.read").matches("file.reader"));
}

#[test]
fn plan_lint_policy_loads_with_a_note_for_non_code_weights() {
    let policy = compile(
        "allow_tools: [sql.query_ro]\nbounds:\n  priceAPI.bulkUpdate.discount_pct: [-40, 0]\n\
         deny_tokens_regex: [AWS_SECRET]\nmax_steps: 50\nrisk_weights:\n  tool_write: 0.4\n  raw_secret: 0.5\n\
         fail_risk_threshold: 0.8\n",
    )
    .unwrap();
    assert_eq!(policy.risk_weight(LintCode::RawSecret, Level::Error), 0.5);
    assert_eq!(policy.risk_weight(LintCode::ToolDeny, Level::Error), 0.2);
    assert_eq!(policy.notes.len(), 1);
    assert!(policy.notes[0].contains("tool_write"));
}

#[test]
fn unknown_key_is_named() {
    let err = compile("alow_tools: [x]\n").unwrap_err().to_string();
    assert!(err.contains("alow_tools"), "{err}");
    assert!(err.contains("line 1"), "{err}");
}

#[test]
fn invalid_regex_is_named_with_index() {
    let err = compile("deny_tokens_regex: [ok, '(unclosed']\n").unwrap_err().to_string();
    assert!(err.contains("deny_tokens_regex[1]") && err.contains("(unclosed"), "{err}");
}

#[test]
fn bad_bounds_and_thresholds_are_errors() {
    assert!(compile("bounds: {a.b: [5, 1]}\n").unwrap_err().to_string().contains("greater"));
    assert!(compile("bounds: {ab: [1, 5]}\n").is_err());
    assert!(compile("bounds: {a.b: [1]}\n").is_err());
    assert!(compile("fail_risk_threshold: 2\n").is_err());
    assert!(compile("severity: {NOPE: error}\n").is_err());
    assert!(compile("").is_err());
}

#[test]
fn severity_overrides_move_codes() {
    let p =
        compile("severity: {unknown_tool: error, raw_secret: warning, empty_plan: off}\n").unwrap();
    assert_eq!(p.level(LintCode::UnknownTool), Some(Level::Error));
    assert_eq!(p.level(LintCode::RawSecret), Some(Level::Warning));
    assert_eq!(p.level(LintCode::EmptyPlan), None);
    assert_eq!(p.level(LintCode::ToolDeny), Some(Level::Error));
}

#[test]
fn allow_and_deny_lists() {
    let p = compile("allow_tools: ['db.*', file.read]\ndeny_tools: [db.drop]\n").unwrap();
    assert!(p.tool_allowed("db.query"));
    assert!(!p.tool_allowed("db.drop"));
    assert!(!p.tool_allowed("shell.exec"));
    assert!(CompiledPolicy::default().tool_allowed("anything"));
}
