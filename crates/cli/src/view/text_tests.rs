//! Unit tests for the text renderer: layout, and colour only when asked for.

use pev_protocol::{Finding, LintCode, LintResult, LintStatus, Plan, Step, StepId};

use super::Report;
use pev_lint::locate::Locations;

fn result() -> LintResult {
    LintResult {
        status: LintStatus::Error,
        risk_score: 0.25,
        errors: vec![Finding::step(LintCode::ToolDeny, (0, "s1"), "/steps/0/tool", "no db.exec")],
        warnings: vec![Finding::plan(LintCode::EmptyPlan, "", "plan-level")],
    }
}

fn render(color: bool) -> String {
    let plan = Plan {
        steps: vec![Step { id: StepId::new("s1"), title: Some("Write".into()), ..Step::default() }],
        ..Plan::default()
    };
    let text = "{\"steps\": [{\"id\": \"s1\",\n \"tool\": \"db.exec\"}]}";
    let result = result();
    let locations = Locations::json(text, ["/steps/0/tool"]);
    let report = Report {
        name: "p.json",
        result: &result,
        plan: Some(&plan),
        locations: &locations,
        threshold: 0.8,
        color,
    };
    let mut out = Vec::new();
    report.write(&mut out).expect("writes to a Vec");
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn plain_layout() {
    let expected = "\
p.json: error (risk score 0.25, fails at 0.80)

error[TOOL_DENY] step 0 `s1` (Write): no db.exec
  at /steps/0/tool (line 2)
  fix: Use an allowed tool, or add this one to the policy's allow_tools.

warning[EMPTY_PLAN]: plan-level
  fix: Add the steps that achieve the goal.

1 error, 1 warning
";
    assert_eq!(render(false), expected);
}

#[test]
fn colour_only_when_asked() {
    let coloured = render(true);
    assert!(coloured.contains("\x1b[1;31merror[TOOL_DENY]\x1b[0m"), "{coloured:?}");
    assert!(coloured.contains("\x1b[1;33mwarning[EMPTY_PLAN]\x1b[0m"), "{coloured:?}");
    assert!(!render(false).contains('\x1b'));
}
