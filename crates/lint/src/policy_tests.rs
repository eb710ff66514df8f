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

fn error_of(yaml: &str) -> PolicyError {
    match compile(yaml) {
        Ok(policy) => panic!("{yaml:?} must be refused, got {policy:?}"),
        Err(e) => e,
    }
}

#[test]
fn unknown_key_is_named() {
    let err = error_of("alow_tools: [x]\n");
    let text = err.to_string();
    match err {
        PolicyError::Yaml { path, location, message } => {
            assert_eq!(path, Path::new("p.yaml"));
            assert_eq!(location, " at line 1, column 1");
            assert!(
                message.starts_with("unknown field `alow_tools`, expected one of"),
                "{message}"
            );
        }
        other => panic!("expected Yaml, got {other:?}"),
    }
    assert!(
        text.starts_with("invalid policy p.yaml at line 1, column 1: unknown field `alow_tools`")
    );
}

#[test]
fn invalid_regex_is_named_with_index() {
    let err = error_of("deny_tokens_regex: [ok, '(unclosed']\n");
    assert_eq!(
        err.to_string(),
        "policy p.yaml: deny_tokens_regex[1] `(unclosed` is not a valid regex: error: unclosed group"
    );
    match err {
        PolicyError::InvalidRegex { index, pattern, message, .. } => {
            assert_eq!((index, pattern.as_str()), (1, "(unclosed"));
            assert!(message.contains("unclosed group"), "{message}");
        }
        other => panic!("expected InvalidRegex, got {other:?}"),
    }
}

#[test]
fn bad_bounds_and_thresholds_are_errors() {
    // Each bad bound names its key and what is wrong with it.
    for (yaml, want_key, want_reason) in [
        ("bounds: {a.b: [5, 1]}\n", "a.b", "min 5 is greater than max 1"),
        ("bounds: {ab: [1, 5]}\n", "ab", "the key must be `<tool>.<argument>`"),
        ("bounds: {a.b: [.nan, 1]}\n", "a.b", "min and max must be finite numbers"),
    ] {
        match error_of(yaml) {
            PolicyError::InvalidBound { path, key, reason } => {
                assert_eq!(path, Path::new("p.yaml"), "{yaml}");
                assert_eq!((key.as_str(), reason.as_str()), (want_key, want_reason), "{yaml}");
            }
            other => panic!("{yaml}: expected InvalidBound, got {other:?}"),
        }
    }
    assert_eq!(
        error_of("bounds: {a.b: [5, 1]}\n").to_string(),
        "policy p.yaml: bounds.a.b: min 5 is greater than max 1"
    );
    // A bound that is not a pair is a shape error at its place in the YAML.
    match error_of("bounds: {a.b: [1]}\n") {
        PolicyError::Yaml { location, message, .. } => {
            assert_eq!(location, " at line 1, column 15");
            assert_eq!(message, "bounds.a.b: invalid length 1, expected an array of length 2");
        }
        other => panic!("expected Yaml, got {other:?}"),
    }
    for (yaml, want) in [
        ("fail_risk_threshold: 2\n", "2 is not between 0 and 1"),
        ("fail_risk_threshold: -0.5\n", "-0.5 is not between 0 and 1"),
    ] {
        match error_of(yaml) {
            PolicyError::InvalidValue { field, reason, .. } => {
                assert_eq!((field.as_str(), reason.as_str()), ("fail_risk_threshold", want));
            }
            other => panic!("{yaml}: expected InvalidValue, got {other:?}"),
        }
    }
    match error_of("severity: {NOPE: error}\n") {
        PolicyError::UnknownSeverityCode { code, .. } => assert_eq!(code, "NOPE"),
        other => panic!("expected UnknownSeverityCode, got {other:?}"),
    }
    assert_eq!(
        error_of("severity: {NOPE: error}\n").to_string(),
        "policy p.yaml: severity: unknown lint code `NOPE` (see `pev lint --explain`)"
    );
    match error_of("severity: {raw_secret: loud}\n") {
        PolicyError::Yaml { message, .. } => {
            assert!(message.starts_with("severity.raw_secret: unknown variant `loud`"), "{message}")
        }
        other => panic!("expected Yaml, got {other:?}"),
    }
    for blank in ["", "  \n\t\n"] {
        match error_of(blank) {
            PolicyError::Empty { path } => assert_eq!(path, Path::new("p.yaml")),
            other => panic!("{blank:?}: expected Empty, got {other:?}"),
        }
    }
    assert_eq!(error_of("").to_string(), "policy p.yaml is empty");
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
