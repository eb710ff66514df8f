//! `pev lint --format sarif`: the lint result as a SARIF 2.1.0 log, for code-scanning UIs.
//!
//! One run whose driver lists every lint code as a rule (its explanation, its fix as help, its
//! default level), and one result per finding: the rule, the level it was reported at, the
//! message, the plan file with the line and column when the locator found them, and the JSON
//! pointer as a logical location. Columns count Unicode code points, and the run says so.

use pev_protocol::{Finding, LintCode, LintResult};
use serde_json::{Value, json};

use crate::explain::level_word;
use crate::locate::Locations;

const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// Where the plan came from: a file path (for `artifactLocation.uri`) or standard input.
pub struct Artifact<'a> {
    pub path: Option<&'a str>,
    pub locations: &'a Locations,
}

/// The SARIF log for one lint result.
pub fn log(result: &LintResult, artifact: &Artifact<'_>) -> Value {
    let rules: Vec<Value> = LintCode::ALL
        .iter()
        .map(|code| {
            json!({
                "id": code.as_str(),
                "shortDescription": {"text": code.explain()},
                "help": {"text": code.fix()},
                "defaultConfiguration": {"level": level_word(code.default_level())},
                "properties": {"severity": code.severity()},
            })
        })
        .collect();
    let results: Vec<Value> = result
        .errors
        .iter()
        .map(|f| finding(f, "error", artifact))
        .chain(result.warnings.iter().map(|f| finding(f, "warning", artifact)))
        .collect();
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "pev",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
            "properties": {"status": result.status, "riskScore": result.risk_score},
        }],
    })
}

fn finding(f: &Finding, level: &str, artifact: &Artifact<'_>) -> Value {
    let rule_index = LintCode::ALL.iter().position(|c| *c == f.code).unwrap_or_default();
    let mut location = serde_json::Map::new();
    if let Some(path) = artifact.path {
        let mut physical = json!({"artifactLocation": {"uri": uri_reference(path)}});
        if let Some(pos) = artifact.locations.get(&f.path) {
            physical["region"] = json!({"startLine": pos.line, "startColumn": pos.column});
        }
        location.insert("physicalLocation".into(), physical);
    }
    if !f.path.is_empty() {
        location.insert(
            "logicalLocations".into(),
            json!([{"fullyQualifiedName": f.path, "kind": "element"}]),
        );
    }
    let mut result = json!({
        "ruleId": f.code.as_str(),
        "ruleIndex": rule_index,
        "level": level,
        "message": {"text": f.msg},
        "properties": {"severity": f.severity, "step": f.step, "stepId": f.step_id},
    });
    if !location.is_empty() {
        result["locations"] = json!([Value::Object(location)]);
    }
    result
}

/// A file path as a relative URI reference: `/` separators, other bytes outside RFC 3986's
/// unreserved set percent-encoded.
fn uri_reference(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(char::from(b))
            }
            b'\\' => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
