//! Unit tests for `pev show` and `pev runs` rendering: the plan, step details, the coloured
//! diff with its cap, and the runs table's alignment.

use pev_protocol::assertion::AssertionResult;
use pev_protocol::run::{
    FileMutation, PostconditionResult, Reason, ReasonCode, RunResult, RunStatus, StepResult,
    StepStatus, Usage,
};
use pev_protocol::{Plan, Step, StepId};
use serde_json::json;

use super::{FileDiff, RunRow, output_summary, render_runs, render_show};
use crate::view::style::Style;

fn plan() -> Plan {
    Plan {
        goal: "Change the site background to dark green".into(),
        steps: vec![
            Step {
                id: StepId::new("read-css"),
                title: Some("Read the CSS".into()),
                tool: Some("file.read".into()),
                ..Step::default()
            },
            Step {
                id: StepId::new("patch-css"),
                title: Some("Patch the body rule".into()),
                tool: Some("file.patch".into()),
                depends_on: vec![StepId::new("read-css")],
                ..Step::default()
            },
            Step { id: StepId::new("check"), tool: Some("shell.exec".into()), ..Step::default() },
        ],
        ..Plan::default()
    }
}

fn step(id: &str, status: StepStatus, output: serde_json::Value) -> StepResult {
    StepResult {
        id: id.into(),
        status,
        attempts: 1,
        evidence: Vec::new(),
        assertions: Vec::new(),
        output: Some(output),
        error: None,
        started_at: Some("2026-11-21T14:00:00.000Z".into()),
        ended_at: Some("2026-11-21T14:00:01.250Z".into()),
    }
}

fn result() -> RunResult {
    let mut patch = step(
        "patch-css",
        StepStatus::Done,
        json!({"changed": true, "bytes_before": 40, "bytes_after": 42}),
    );
    patch.assertions = vec![
        AssertionResult {
            kind: "content_changed".into(),
            passed: true,
            detail: "sha256 differs".into(),
        },
        AssertionResult {
            kind: "file_contains".into(),
            passed: false,
            detail: "`#0b3d0b` not found".into(),
        },
    ];
    patch.evidence = vec!["site/style.css changed".into()];
    let mut check = step(
        "check",
        StepStatus::Failed,
        json!({"exit_code": 2, "stdout": "a\nb\nc\nd\ne\n", "stderr": "oops\n"}),
    );
    check.attempts = 3;
    RunResult {
        run_id: "RUN1".into(),
        goal: "Change the site background to dark green".into(),
        status: RunStatus::Failed,
        reasons: vec![Reason {
            code: ReasonCode::AssertionFailed,
            step: Some("patch-css".into()),
            message: "file_contains failed".into(),
        }],
        goal_actions_executed: true,
        steps: vec![
            step(
                "read-css",
                StepStatus::Done,
                json!({"content": "x", "bytes": 40, "sha256": "0123456789abcdef0000"}),
            ),
            patch,
            check,
        ],
        postconditions: vec![PostconditionResult {
            description: "The page is green".into(),
            satisfied: false,
            evidence: "no assertion: needs a judge".into(),
            judge: None,
        }],
        file_mutations: vec![FileMutation {
            path: "site/style.css".into(),
            bytes_before: 40,
            bytes_after: 42,
            lines_added: 1,
            lines_removed: 1,
            no_op: false,
        }],
        warnings: vec!["check: exit code 2".into()],
        usage: Usage { tool_calls: 3, ..Usage::default() },
        duration_ms: 1300,
        final_check: None,
    }
}

fn css(background: &str) -> Vec<u8> {
    let mut lines: Vec<String> = (1..=10).map(|i| format!("line {i}")).collect();
    lines[5] = format!("body {{ background: {background}; }}");
    (lines.join("\n") + "\n").into_bytes()
}

fn diff(before: Option<Vec<u8>>, after: Option<Vec<u8>>) -> FileDiff {
    FileDiff { step: "patch-css".into(), path: "site/style.css".into(), before, after }
}

#[test]
fn show_lists_a_judges_answers_under_its_postcondition() {
    use pev_protocol::run::{JudgeAnswer, PostconditionJudgment};
    let mut r = result();
    r.postconditions = vec![PostconditionResult {
        description: "The page is green".into(),
        satisfied: true,
        evidence: "judged by claude-haiku-4-5: yes (confidence 0.90): the diff sets #013220".into(),
        judge: Some(PostconditionJudgment {
            model: "claude-haiku-4-5".into(),
            holds: true,
            confidence: 0.9,
            answers: vec![
                JudgeAnswer { question: "Does it hold?".into(), yes: true, confidence: 0.9 },
                JudgeAnswer { question: "All of it?".into(), yes: true, confidence: 0.85 },
            ],
            explanation: "the diff sets #013220".into(),
        }),
    }];
    let text = render_show("RUN1", "success", &plan(), &r, &[], &Style::plain());
    assert!(
        text.contains(
            "\npostconditions\n  ✓ The page is green\n      judged by claude-haiku-4-5: yes \
             (confidence 0.90): the diff sets #013220\n        yes (0.90) Does it hold?\n        \
             yes (0.85) All of it?\n"
        ),
        "{text}"
    );
}

#[test]
fn show_lists_plan_steps_and_outcome() {
    let text = render_show("RUN1", "failed", &plan(), &result(), &[], &Style::plain());
    assert!(text.starts_with("run RUN1: failed\ngoal: Change the site background to dark green\n"));
    assert!(text.contains("\nplan (3 steps)\n   1. read-css  Read the CSS  file.read\n"), "{text}");
    assert!(text.contains("   2. patch-css  Patch the body rule  file.patch  after read-css\n"));
    assert!(text.contains("   3. check  shell.exec\n"));
    assert!(
        text.contains(
            "  ✓ read-css  done  1 attempt  1.2s\n      output: 40 bytes, sha256 0123456789ab\n"
        ),
        "{text}"
    );
    assert!(text.contains(
        "      output: changed, 40 → 42 bytes\n      evidence: site/style.css changed\n"
    ));
    assert!(text.contains(
        "      ✓ content_changed  sha256 differs\n      ✗ file_contains  `#0b3d0b` not found\n"
    ));
    assert!(text.contains("  ✗ check  failed  3 attempts  1.2s\n      output: exit 2\n        stdout: a\n        stdout: b\n        stdout: c\n        stdout: … 2 more lines\n        stderr: oops\n"), "{text}");
    assert!(
        text.contains(
            "\npostconditions\n  ✗ The page is green\n      no assertion: needs a judge\n"
        )
    );
    assert!(text.contains("\nreasons\n  assertion_failed [patch-css]: file_contains failed\n"));
    assert!(text.contains("\nwarnings\n  ! check: exit code 2\n"));
    assert!(text.contains("\nfiles\n  site/style.css  40 → 42 bytes  +1 −1\n"), "{text}");
    assert!(
        text.ends_with("outcome: failed  goal actions executed: yes  3 tool calls in 1.3s\n"),
        "{text}"
    );
    assert!(!text.contains('\x1b'));
}

#[test]
fn show_prints_a_unified_diff_with_context() {
    let d = diff(Some(css("white")), Some(css("#0b3d0b")));
    let text = render_show("RUN1", "failed", &plan(), &result(), &[d], &Style::plain());
    let expected = "  site/style.css  40 → 42 bytes  +1 −1  (patch-css)\n\
        \x20   @@ -3,7 +3,7 @@\n\
        \x20    line 3\n\
        \x20    line 4\n\
        \x20    line 5\n\
        \x20   -body { background: white; }\n\
        \x20   +body { background: #0b3d0b; }\n\
        \x20    line 7\n\
        \x20    line 8\n\
        \x20    line 9\n";
    assert!(text.contains(expected), "{text}");
    assert!(!text.contains("line 2\n") && !text.contains("line 10"), "3 lines of context only");
}

#[test]
fn show_colours_the_diff_when_asked() {
    let d = diff(Some(css("white")), Some(css("green")));
    let text = render_show("RUN1", "failed", &plan(), &result(), &[d], &Style { color: true });
    assert!(text.contains("\x1b[31m-body { background: white; }\x1b[0m"), "{text}");
    assert!(text.contains("\x1b[32m+body { background: green; }\x1b[0m"));
    assert!(text.contains("\x1b[36m@@ -3,7 +3,7 @@\x1b[0m"));
}

#[test]
fn show_separates_hunks_and_caps_long_diffs() {
    let before: String = (0..1000).map(|i| format!("l{i}\n")).collect();
    let after: String = (0..1000)
        .map(|i| if i % 10 == 0 { format!("L{i}\n") } else { format!("l{i}\n") })
        .collect();
    let d = diff(Some(before.into_bytes()), Some(after.into_bytes()));
    let text = render_show("RUN1", "failed", &plan(), &result(), &[d], &Style::plain());
    // Changes 10 lines apart with 3 lines of context: separate hunks.
    assert!(text.contains("    @@ -1,4 +1,4 @@\n    -l0\n    +L0\n     l1\n     l2\n     l3\n    @@ -8,7 +8,7 @@\n"), "{text}");
    let diff_lines =
        text.lines().filter(|l| l.starts_with("    ") && !l.starts_with("     output")).count();
    assert!(text.contains("    … "), "a cap note");
    let note = text.lines().find(|l| l.starts_with("    … ")).unwrap();
    // The first hunk has 5 lines, the 99 others 8, each with a header: 897 lines, 200 shown.
    assert_eq!(note, "    … 697 more lines");
    assert!(diff_lines >= 201);
}

#[test]
fn show_describes_binary_new_and_missing_contents() {
    let bin = diff(Some(vec![0, 1, 2]), Some(vec![0, 1, 2, 3]));
    let text = render_show("RUN1", "failed", &plan(), &result(), &[bin], &Style::plain());
    assert!(text.contains("    binary, 3 → 4 bytes\n"), "{text}");
    let new = diff(None, Some(b"a\nb\n".to_vec()));
    let text = render_show("RUN1", "failed", &plan(), &result(), &[new], &Style::plain());
    assert!(text.contains("    (new file)\n    @@ -0,0 +1,2 @@\n    +a\n    +b\n"), "{text}");
    let unknown = FileDiff { path: "other.txt".into(), ..diff(None, None) };
    let text = render_show("RUN1", "failed", &plan(), &result(), &[unknown], &Style::plain());
    assert!(text.contains("  other.txt  (patch-css)\n    (contents not stored)\n"), "{text}");
    let evil = diff(Some(b"a\n".to_vec()), Some(b"\x1b[2Ja\n".to_vec()));
    let text = render_show("RUN1", "failed", &plan(), &result(), &[evil], &Style::plain());
    assert!(text.contains("    +\\e[2Ja\n"), "{text}");
}

#[test]
fn output_summaries_stay_short() {
    assert_eq!(output_summary(Some("file.list"), &json!({"entries": [1, 2, 3]})), ["3 entries"]);
    assert_eq!(
        output_summary(Some("http.request"), &json!({"status": 404, "body": "nope"})),
        ["status 404, body 4 bytes"]
    );
    assert_eq!(
        output_summary(
            Some("shell.exec"),
            &json!({"exit_code": 0, "stdout": "", "truncated": true})
        ),
        ["exit 0 (output truncated)"]
    );
    let other = output_summary(None, &json!({"x": "y".repeat(500)}));
    assert_eq!(other.len(), 1);
    assert_eq!(other[0].chars().count(), 160);
}

fn row(id: &str, status: &str, goal: &str, done: u64, total: u64) -> RunRow {
    RunRow {
        run_id: id.into(),
        status: status.into(),
        goal: goal.into(),
        created_at: "2026-11-21T14:22:33.123Z".into(),
        steps_done: done,
        steps_total: total,
    }
}

#[test]
fn runs_table_is_aligned_and_fits_100_columns() {
    let rows = vec![
        row("20261121-142233-3fa9c1", "success", "Change the site background", 3, 3),
        row("20261121-142240-000001", "awaiting_approval", &"long goal ".repeat(20), 12, 140),
    ];
    let text = render_runs(&rows, &Style::plain());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[0],
        "RUN                     STATUS              STEPS  CREATED              GOAL"
    );
    assert_eq!(
        lines[1],
        "20261121-142233-3fa9c1  success               3/3  2026-11-21 14:22:33  Change the site background"
    );
    assert!(lines[2].starts_with(
        "20261121-142240-000001  awaiting_approval  12/140  2026-11-21 14:22:33  long goal"
    ));
    assert_eq!(lines[2].chars().count(), 100, "{}", lines[2]);
    assert!(lines[2].ends_with('…'));
    // Every column starts at the same place on every line.
    let goal_at = lines[0].find("GOAL").unwrap();
    assert_eq!(lines[1].find("Change").unwrap(), goal_at);
    assert_eq!(render_runs(&[], &Style::plain()), "no runs yet\n");
}

#[test]
fn runs_table_pads_before_colouring() {
    let rows = vec![row("a", "failed", "g", 0, 1), row("b", "success", "g", 1, 1)];
    let text = render_runs(&rows, &Style { color: true });
    assert!(text.contains("\x1b[1m\x1b[31mfailed\x1b[0m   "), "{text}");
    let plain = render_runs(&rows, &Style::plain());
    let widths: Vec<usize> = plain.lines().map(|l| l.find(" g").unwrap_or(0)).skip(1).collect();
    assert_eq!(widths[0], widths[1]);
}
