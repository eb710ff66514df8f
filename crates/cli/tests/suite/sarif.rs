//! `--format sarif` validates against the official SARIF 2.1.0 schema (vendored in
//! tests/fixtures, see its README) and carries rules, levels, lines and JSON pointers.

use pev_protocol::LintCode;
use serde_json::Value;

use super::support::{
    DENIED_PLAN, EMPTY_PLAN, READ_ONLY_POLICY, dir_with, fixture, pev, pev_in, run,
};

/// The language-tag pattern as published, with a `]` that ECMA-262 regex syntax rejects.
const LANGUAGE_PATTERN: &str = "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$";

/// The official schema, compiled with format checks on (`uri`, `uri-reference`, …).
fn sarif_validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(fixture("sarif-schema-2.1.0.json")).expect("schema fixture");
    let mut schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    // The language-tag patterns (`run.language`, `toolComponent.language`) have an unescaped
    // `]`, which fails jsonschema's meta-schema check (`format: regex`). Escaping it keeps its
    // meaning (a literal `]`); the vendored file itself stays as published.
    let fixed = escape_language_patterns(&mut schema);
    assert_eq!(fixed, 2, "the published schema has two such patterns");
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the SARIF schema compiles")
}

fn escape_language_patterns(value: &mut Value) -> usize {
    match value {
        Value::Object(map) => map
            .iter_mut()
            .map(|(key, v)| {
                if key == "pattern" && v == LANGUAGE_PATTERN {
                    *v = Value::from(LANGUAGE_PATTERN.replace("}]?", "}\\]?"));
                    1
                } else {
                    escape_language_patterns(v)
                }
            })
            .sum(),
        Value::Array(items) => items.iter_mut().map(escape_language_patterns).sum(),
        _ => 0,
    }
}

fn assert_valid_sarif(log: &Value) {
    let validator = sarif_validator();
    let errors: Vec<String> =
        validator.iter_errors(log).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "invalid SARIF:\n{}\n{log:#}", errors.join("\n"));
}

fn sarif_of(dir: &std::path::Path, args: &[&str]) -> Value {
    let r = pev_in(dir, args);
    assert!(r.code == 0 || r.code == 1 || r.code == 2, "{r:?}");
    r.json()
}

#[test]
fn a_log_with_findings_validates_and_says_where_they_are() {
    let dir = dir_with(&[("prices.json", DENIED_PLAN), ("policy.yaml", READ_ONLY_POLICY)]);
    let log = sarif_of(
        dir.path(),
        &["lint", "prices.json", "--policy", "policy.yaml", "--format", "sarif"],
    );
    assert_valid_sarif(&log);
    assert_eq!(log["version"], "2.1.0");
    assert!(log["$schema"].as_str().is_some_and(|s| s.ends_with("sarif-schema-2.1.0.json")));
    let run = &log["runs"][0];
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "pev");
    assert_eq!(driver["version"], env!("CARGO_PKG_VERSION"));
    let rules = driver["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), LintCode::ALL.len());
    for (rule, code) in rules.iter().zip(LintCode::ALL) {
        assert_eq!(rule["id"], code.as_str());
        assert_eq!(rule["shortDescription"]["text"], code.explain());
        assert_eq!(rule["help"]["text"], code.fix());
    }
    assert_eq!(rules[LintCode::UnknownTool as usize]["defaultConfiguration"]["level"], "warning");

    let results = run["results"].as_array().expect("results");
    let deny = results.iter().find(|r| r["ruleId"] == "TOOL_DENY").expect("a TOOL_DENY result");
    let index = deny["ruleIndex"].as_u64().expect("ruleIndex") as usize;
    assert_eq!(rules[index]["id"], "TOOL_DENY");
    assert_eq!(deny["level"], "error");
    assert!(deny["message"]["text"].as_str().is_some_and(|m| m.contains("db.exec")));
    let location = &deny["locations"][0];
    assert_eq!(location["physicalLocation"]["artifactLocation"]["uri"], "prices.json");
    assert_eq!(location["physicalLocation"]["region"]["startLine"], 15);
    assert_eq!(location["physicalLocation"]["region"]["startColumn"], 7);
    assert_eq!(location["logicalLocations"][0]["fullyQualifiedName"], "/steps/2/tool");
}

#[test]
fn warnings_a_clean_plan_a_schema_failure_and_stdin_all_validate() {
    let dir = dir_with(&[
        ("empty.json", EMPTY_PLAN),
        ("clean.yaml", "goal: g\nsteps:\n  - id: a\n    tool: file.read\n    args: {path: a}\n"),
        ("bad schema.json", "{\"goal\": 3, \"steps\": {}}"),
    ]);
    let log = sarif_of(dir.path(), &["lint", "empty.json", "--format", "sarif"]);
    assert_valid_sarif(&log);
    assert_eq!(log["runs"][0]["results"][0]["level"], "warning");
    assert_eq!(log["runs"][0]["results"][0]["ruleId"], "EMPTY_PLAN");

    let log = sarif_of(dir.path(), &["lint", "clean.yaml", "--format", "sarif"]);
    assert_valid_sarif(&log);
    assert_eq!(log["runs"][0]["results"], Value::Array(Vec::new()));

    let log = sarif_of(dir.path(), &["lint", "bad schema.json", "--format", "sarif"]);
    assert_valid_sarif(&log);
    let result = &log["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "SCHEMA_INVALID");
    assert_eq!(
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "bad%20schema.json"
    );

    let r = run(pev().write_stdin(DENIED_PLAN), &["lint", "-", "--format", "sarif"]);
    let log = r.json();
    assert_valid_sarif(&log);
    let results = log["runs"][0]["results"].as_array().expect("results");
    assert!(results.iter().all(|r| r["locations"][0].get("physicalLocation").is_none()));
}

#[test]
fn the_validator_rejects_a_broken_log() {
    // The test above is only as good as the validation: a log without `runs` must fail it.
    let validator = sarif_validator();
    assert!(!validator.is_valid(&serde_json::json!({"version": "2.1.0"})));
    assert!(
        !validator.is_valid(&serde_json::json!({"version": "2.1.0", "runs": [{"results": []}]}))
    );
}
