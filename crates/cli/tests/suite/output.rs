//! `--format json` is exactly the LintResult of CONTRACTS.md §5; `--format text` is for people.

use serde_json::Value;

use super::support::{DENIED_PLAN, READ_ONLY_POLICY, dir_with, pev_in};

fn denied(format: &str) -> super::support::Run {
    let dir = dir_with(&[("prices.json", DENIED_PLAN), ("policy.yaml", READ_ONLY_POLICY)]);
    pev_in(dir.path(), &["lint", "prices.json", "--policy", "policy.yaml", "--format", format])
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default()
}

#[test]
fn json_is_the_contract_shape_and_nothing_else() {
    let r = denied("json");
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.stderr, "");
    let result = r.json();
    assert_eq!(keys(&result), ["status", "risk_score", "errors", "warnings"]);
    assert_eq!(result["status"], "error");
    let score = result["risk_score"].as_f64().expect("a number");
    assert!((0.0..=1.0).contains(&score) && (score * 100.0).fract() == 0.0, "{score}");
    let deny: Vec<&Value> = result["errors"]
        .as_array()
        .expect("errors is an array")
        .iter()
        .filter(|f| f["code"] == "TOOL_DENY")
        .collect();
    assert_eq!(deny.len(), 1, "{result}");
    let f = deny[0];
    // The contract's keys, then where the finding is in the text (a pev extension, issue 13).
    assert_eq!(keys(f), ["step", "step_id", "code", "severity", "msg", "path", "line", "column"]);
    assert_eq!(f["step"], 2);
    assert_eq!(f["step_id"], "step-003");
    assert_eq!(f["severity"], "high");
    assert_eq!(f["path"], "/steps/2/tool");
    assert!(f["msg"].as_str().is_some_and(|m| m.contains("db.exec")), "{f}");
    for w in result["warnings"].as_array().expect("warnings is an array") {
        let k = keys(w);
        assert_eq!(k[..6], ["step", "step_id", "code", "severity", "msg", "path"], "{w}");
        assert!(k[6..].iter().all(|x| ["line", "column"].contains(x)), "{w}");
    }
}

#[test]
fn text_shows_the_step_id_title_path_line_and_fix() {
    let r = denied("text");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(!r.stdout.contains('\x1b'), "no colour when stdout is not a terminal");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines[0].starts_with("prices.json: error (risk score ")
            && lines[0].ends_with(", fails at 0.80)"),
        "{}",
        lines[0]
    );
    let at = lines
        .iter()
        .position(|l| l.starts_with("error[TOOL_DENY] step 2 `step-003` (Update prices): "))
        .unwrap_or_else(|| panic!("no TOOL_DENY line:\n{}", r.stdout));
    assert!(lines[at].contains("db.exec"), "{}", lines[at]);
    assert_eq!(lines[at + 1], "  at /steps/2/tool (line 15)");
    assert_eq!(
        lines[at + 2],
        "  fix: Use an allowed tool, or add this one to the policy's allow_tools."
    );

    // The summary counts what the JSON result holds.
    let json = denied("json").json();
    let count = |k: &str| json[k].as_array().map_or(0, Vec::len);
    let plural = |n: usize, w: &str| if n == 1 { format!("1 {w}") } else { format!("{n} {w}s") };
    let summary =
        format!("{}, {}", plural(count("errors"), "error"), plural(count("warnings"), "warning"));
    assert_eq!(lines.last().copied(), Some(summary.as_str()));
}

#[test]
fn text_for_a_yaml_plan_has_lines_too() {
    let plan = "\
goal: Update the prices
steps:
  - id: read
    title: Read prices
    tool: file.read
    args: {path: prices.csv}
  - id: write
    title: Write prices
    tool: db.exec
    args:
      sql: UPDATE prices SET amount = 1
    acceptance_criteria: [done]
";
    let dir = dir_with(&[("plan.yaml", plan), ("policy.yaml", READ_ONLY_POLICY)]);
    let r = pev_in(dir.path(), &["lint", "plan.yaml", "--policy", "policy.yaml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("error[TOOL_DENY] step 1 `write` (Write prices): "), "{}", r.stdout);
    assert!(r.stdout.contains("  at /steps/1/tool (line 9)\n"), "{}", r.stdout);
}

#[test]
fn a_plan_level_finding_has_no_step() {
    let dir = dir_with(&[("plan.json", "{\"goal\": \"g\",\n \"steps\": []}")]);
    let r = pev_in(dir.path(), &["lint", "plan.json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.starts_with("plan.json: warn (risk score 0.05, fails at 0.80)\n"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("\nwarning[EMPTY_PLAN]: "), "{}", r.stdout);
    assert!(r.stdout.ends_with("\n0 errors, 1 warning\n"), "{}", r.stdout);
}
