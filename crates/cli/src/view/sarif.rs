//! `pev lint --format sarif`: the lint result as a SARIF 2.1.0 log, for code-scanning UIs.
//!
//! One run whose driver lists every lint code as a rule (its explanation, its fix as help, its
//! default level), and one result per finding: the rule, the level it was reported at, the
//! message, the plan file with the line and column when the locator found them, and the JSON
//! pointer as a logical location. Columns count Unicode code points, and the run says so.
//!
//! The log is a tree of borrowed, typed structs serialised straight to the output: a plan with
//! 100,000 findings must not become a 100,000-node `serde_json::Value` first.

use std::io::{self, Write};

use pev_protocol::{Finding, LintCode, LintResult, LintStatus, Severity};
use serde::Serialize;

use crate::view::explain::level_word;
use pev_lint::locate::Locations;

const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// Where the plan came from: a file path (for `artifactLocation.uri`) or standard input.
pub struct Artifact<'a> {
    pub path: Option<&'a str>,
    pub locations: &'a Locations,
}

#[derive(Serialize)]
struct Log<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    version: &'static str,
    runs: [Run<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Run<'a> {
    tool: Tool,
    column_kind: &'static str,
    results: Results<'a>,
    properties: RunProperties,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RunProperties {
    status: LintStatus,
    risk_score: f64,
}

#[derive(Serialize)]
struct Tool {
    driver: Driver,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Driver {
    name: &'static str,
    version: &'static str,
    semantic_version: &'static str,
    rules: Vec<Rule>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    id: &'static str,
    short_description: Text<'static>,
    help: Text<'static>,
    default_configuration: Configuration,
    properties: RuleProperties,
}

#[derive(Serialize)]
struct Text<'a> {
    text: &'a str,
}

#[derive(Serialize)]
struct Configuration {
    level: &'static str,
}

#[derive(Serialize)]
struct RuleProperties {
    severity: Severity,
}

/// The results, made one at a time while they are written: tens of thousands of findings must
/// not be held a second time, as SARIF structs, next to the lint result.
struct Results<'a> {
    result: &'a LintResult,
    uri: Option<&'a str>,
    locations: &'a Locations,
}

impl Serialize for Results<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let errors = self.result.errors.iter().map(|f| (f, "error"));
        let warnings = self.result.warnings.iter().map(|f| (f, "warning"));
        serializer.collect_seq(
            errors.chain(warnings).map(|(f, level)| finding(f, level, self.uri, self.locations)),
        )
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SarifResult<'a> {
    rule_id: &'static str,
    rule_index: usize,
    level: &'static str,
    message: Text<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    locations: Vec<Location<'a>>,
    properties: ResultProperties<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResultProperties<'a> {
    severity: Severity,
    step: Option<usize>,
    step_id: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Location<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    physical_location: Option<PhysicalLocation<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    logical_locations: Vec<LogicalLocation<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PhysicalLocation<'a> {
    artifact_location: ArtifactLocation<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    region: Option<Region>,
}

#[derive(Serialize)]
struct ArtifactLocation<'a> {
    uri: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Region {
    start_line: usize,
    start_column: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LogicalLocation<'a> {
    fully_qualified_name: &'a str,
    kind: &'static str,
}

/// Writes the SARIF log for one lint result (pretty-printed, then a newline).
pub fn write(result: &LintResult, artifact: &Artifact<'_>, out: &mut dyn Write) -> io::Result<()> {
    let rules = LintCode::ALL
        .iter()
        .map(|code| Rule {
            id: code.as_str(),
            short_description: Text { text: code.explain() },
            help: Text { text: code.fix() },
            default_configuration: Configuration { level: level_word(code.default_level()) },
            properties: RuleProperties { severity: code.severity() },
        })
        .collect();
    let uri = artifact.path.map(uri_reference);
    let results = Results { result, uri: uri.as_deref(), locations: artifact.locations };
    let log = Log {
        schema: SCHEMA,
        version: "2.1.0",
        runs: [Run {
            tool: Tool {
                driver: Driver {
                    name: "pev",
                    version: env!("CARGO_PKG_VERSION"),
                    semantic_version: env!("CARGO_PKG_VERSION"),
                    rules,
                },
            },
            column_kind: "unicodeCodePoints",
            results,
            properties: RunProperties { status: result.status, risk_score: result.risk_score },
        }],
    };
    serde_json::to_writer_pretty(&mut *out, &log).map_err(io::Error::other)?;
    writeln!(out)
}

fn finding<'a>(
    f: &'a Finding,
    level: &'static str,
    uri: Option<&'a str>,
    locations: &Locations,
) -> SarifResult<'a> {
    let physical_location = uri.map(|uri| PhysicalLocation {
        artifact_location: ArtifactLocation { uri },
        region: locations
            .get(&f.path)
            .map(|p| Region { start_line: p.line, start_column: p.column }),
    });
    let logical_locations = if f.path.is_empty() {
        Vec::new()
    } else {
        vec![LogicalLocation { fully_qualified_name: &f.path, kind: "element" }]
    };
    let locations = if physical_location.is_none() && logical_locations.is_empty() {
        Vec::new()
    } else {
        vec![Location { physical_location, logical_locations }]
    };
    SarifResult {
        rule_id: f.code.as_str(),
        rule_index: LintCode::ALL.iter().position(|c| *c == f.code).unwrap_or_default(),
        level,
        message: Text { text: &f.msg },
        locations,
        properties: ResultProperties {
            severity: f.severity,
            step: f.step,
            step_id: f.step_id.as_deref(),
        },
    }
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
            _ => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.push('%');
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xF)]));
            }
        }
    }
    out
}
