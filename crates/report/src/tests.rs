//! The report's structure and its escaping.

use pev_protocol::assertion::AssertionResult;
use pev_protocol::run::{FileMutation, Reason, ReasonCode, Usage};
use pev_store::{MutationRecord, ToolCallRecord};
use serde_json::json;

use super::*;

fn step(id: &str, status: StepStatus, start: &str, end: &str) -> StepResult {
    StepResult {
        id: id.to_owned(),
        status,
        attempts: 1,
        evidence: vec![format!("evidence of {id}")],
        assertions: vec![AssertionResult {
            kind: "file_exists".into(),
            passed: status == StepStatus::Done,
            detail: "seen".into(),
        }],
        output: None,
        error: None,
        started_at: Some(start.to_owned()),
        ended_at: Some(end.to_owned()),
    }
}

fn fixture() -> (RunRecord, RunResult) {
    let plan = json!({"goal": "Make <b>bold</b>", "steps": [
        {"id": "a", "tool": "file.write", "parameters": {"path": "x.txt", "content": "<script>alert(1)</script>"}},
        {"id": "b", "tool": "shell.exec", "parameters": {"command": "cat ${a.result.path}"}, "depends_on": ["a"]},
        {"id": "c", "title": "Third", "tool": "file.read", "parameters": {"path": "x.txt"}}
    ]});
    let parsed = pev_protocol::parse::from_value(plan).unwrap();
    let record = RunRecord {
        run_id: "r1".into(),
        goal: "Make <b>bold</b>".into(),
        workspace: "/w".into(),
        status: "partial".into(),
        created_at: "2026-11-25T10:00:00.000Z".into(),
        updated_at: "2026-11-25T10:00:02.000Z".into(),
        options: json!({}),
        plan: serde_json::to_value(&parsed.plan).unwrap(),
        plan_version: 1,
        result: None,
        steps: Vec::new(),
        tool_calls: vec![ToolCallRecord {
            run_id: "r1".into(),
            call_id: "c1".into(),
            step_id: "a".into(),
            attempt: 1,
            tool: "file.write".into(),
            effect: pev_protocol::tool::Effect::Write,
            arguments: json!({"path": "x.txt", "content": "<script>alert(1)</script>"}),
            path: Some("x.txt".into()),
            pre_sha256: None,
            intended_sha256: None,
            started_at: "2026-11-25T10:00:00.000Z".into(),
            status: ToolCallStatus::Finished,
            output: Some(json!("wrote <img src=x onerror=alert(2)>")),
            error: None,
            ended_at: Some("2026-11-25T10:00:00.500Z".into()),
            duration_ms: Some(500),
        }],
        file_hashes: Vec::new(),
        mutations: vec![MutationRecord {
            run_id: "r1".into(),
            step_id: "a".into(),
            mutation: FileMutation {
                path: "x.txt".into(),
                bytes_before: 4,
                bytes_after: 25,
                lines_added: 1,
                lines_removed: 1,
                no_op: false,
            },
            before_sha256: Some("old".into()),
            after_sha256: Some("new".into()),
        }],
        approvals: Vec::new(),
        next_seq: 0,
    };
    let result = RunResult {
        run_id: "r1".into(),
        goal: "Make <b>bold</b>".into(),
        status: RunStatus::Partial,
        reasons: vec![Reason {
            code: ReasonCode::StepFailed,
            step: Some("b".into()),
            message: "step 'b' failed: <oops>".into(),
        }],
        goal_actions_executed: true,
        steps: vec![
            step("a", StepStatus::Done, "2026-11-25T10:00:00.000Z", "2026-11-25T10:00:00.500Z"),
            step("b", StepStatus::Failed, "2026-11-25T10:00:00.500Z", "2026-11-25T10:00:02.000Z"),
            step("c", StepStatus::Done, "2026-11-25T10:00:00.000Z", "2026-11-25T10:00:01.000Z"),
        ],
        postconditions: Vec::new(),
        file_mutations: record.mutations.iter().map(|m| m.mutation.clone()).collect(),
        warnings: vec!["a warning with \u{1b}[31m escape".into()],
        usage: Usage::default(),
        duration_ms: 2_000,
        final_check: None,
    };
    (record, result)
}

fn report() -> String {
    let (record, result) = fixture();
    let blob = |sha: &str| match sha {
        "old" => Some(b"old\n".to_vec()),
        "new" => Some(b"<script>alert(1)</script>\n".to_vec()),
        _ => None,
    };
    let versions = vec![
        (1, record.plan.clone(), "initial plan".to_owned(), "t1".to_owned()),
        (2, record.plan.clone(), "replanned: dropped `z` (<why>)".to_owned(), "t2".to_owned()),
    ];
    let events = vec![pev_protocol::event::Event {
        run_id: "r1".into(),
        seq: 9,
        at: "2026-11-25T10:00:01.000Z".into(),
        body: pev_protocol::event::EventBody::JudgeDecided {
            step: "a".into(),
            attempt: 1,
            pass: false,
            confidence: 0.8,
            outcome: "failed".into(),
            feedback: "the <script>x</script> is still there".into(),
            answers: vec![pev_protocol::run::JudgeAnswer {
                question: "Is <b>it</b> green?".into(),
                yes: false,
                confidence: 0.8,
            }],
        },
    }];
    let call = |role: &str, step: Option<&str>, cost: Option<f64>| pev_store::ModelCallRecord {
        run_id: "r1".into(),
        seq: 1,
        role: role.into(),
        step_id: step.map(str::to_owned),
        attempt: step.map(|_| 1),
        provider: "anthropic".into(),
        request_model: "<model>".into(),
        input_tokens: 1000,
        output_tokens: 100,
        cost_usd: cost,
        started_at: "2026-11-25T10:00:00.200Z".into(),
        duration_ms: 300,
        ..pev_store::ModelCallRecord::default()
    };
    let calls = vec![
        call("planner", None, Some(0.5)),
        call("executor", Some("a"), Some(0.25)),
        call("executor", Some("a"), Some(0.25)),
        call("verifier", Some("a"), None),
    ];
    render(&Input {
        record: &record,
        result: &result,
        versions: &versions,
        blob: &blob,
        generated_at: "now",
        events: &events,
        model_calls: &calls,
    })
}

#[test]
fn the_judge_model_calls_and_usage_per_role_are_shown_escaped() {
    let html = report();
    assert!(html.contains("<h4>Judge</h4>"), "the judge's section");
    assert!(html.contains("Is &lt;b&gt;it&lt;/b&gt; green? — <b>no</b> (0.80)"), "its answer");
    assert!(html.contains("the &lt;script&gt;x&lt;/script&gt; is still there"), "its feedback");
    assert_eq!(html.matches("class=\"bar call r-executor\"").count(), 2, "the executor's calls");
    assert!(html.contains("(no step)</span><span class=\"bar call r-planner\""));
    assert!(html.contains("title=\"executor &lt;model&gt; · 300 ms\""));
    assert!(html.contains(
        "<td>executor</td><td>2</td><td>0</td><td>2000</td><td>200</td><td>$0.5000</td>"
    ));
    assert!(html.contains("<td>verifier</td><td>1</td><td>0</td><td>1000</td><td>100</td><td>$0.0000 (unpriced calls)</td>"));
}

#[test]
fn nothing_from_a_plan_a_tool_or_a_file_becomes_markup() {
    let html = report();
    assert!(!html.contains("<script>"), "a raw script tag");
    assert!(!html.contains("<img"), "a raw img tag");
    assert!(!html.contains("<b>bold"), "the goal as markup");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("Make &lt;b&gt;bold&lt;/b&gt;"));
    assert!(html.contains("\\u{1b}[31m"), "a terminal escape is shown, not passed on");
    // No script of its own, and a policy that forbids any.
    assert!(html.contains("default-src 'none'"));
    assert!(!html.to_lowercase().contains("<script"));
}

#[test]
fn the_verdict_graph_timeline_steps_and_diffs_are_there() {
    let html = report();
    assert!(html.contains("class=\"verdict s-partial\">partial<"));
    assert!(html.contains(
        "<code>step_failed</code> <a href=\"#step-b\">b</a>: step &#39;b&#39; failed: &lt;oops&gt;"
    ));
    // The graph: three nodes, one edge (b depends on a, by depends_on and by reference).
    assert_eq!(html.matches("<g class=\"node").count(), 3);
    assert_eq!(html.matches("class=\"edge\"").count(), 1);
    assert!(html.contains("<g class=\"node n-failed\"><title>b: failed</title>"));
    // The timeline: a bar per step (and a lane for the planner's calls); c ran beside a.
    assert_eq!(html.matches("class=\"lane\"").count(), 4);
    assert!(html.contains("left:25.000%;width:75.000%"), "b from 0.5 s to 2 s of 2 s");
    // Steps: the failed one open, the calls folded, the output escaped.
    assert!(html.contains("<details class=\"step\" id=\"step-b\" open>"));
    assert!(html.contains("<details class=\"step\" id=\"step-a\">"));
    assert!(html.contains("<code>file.write</code> ok · attempt 1 · 500 ms"));
    assert!(html.contains("wrote &lt;img src=x onerror=alert(2)&gt;"));
    // The diff, coloured, and the revision with its reason.
    assert!(html.contains("<span class=\"del\">-old</span>"));
    assert!(html.contains("<span class=\"add\">+&lt;script&gt;alert(1)&lt;/script&gt;</span>"));
    assert!(html.contains("replanned: dropped `z` (&lt;why&gt;)"));
    assert!(html.contains(" — Third"), "a step's title");
}

#[test]
fn times_and_durations() {
    assert_eq!(millis("1970-01-01T00:00:00.000Z"), Some(0));
    assert_eq!(millis("2024-02-29T23:59:59.500Z"), Some(1_709_251_199_500));
    assert_eq!(millis("nonsense"), None);
    assert_eq!(duration(999), "999 ms");
    assert_eq!(duration(1_500), "1.5 s");
    assert_eq!(duration(61_000), "1m01s");
}

#[test]
fn a_long_output_is_cut_saying_so_and_never_inside_a_character() {
    let text = "é".repeat(MAX_TEXT);
    let cut = esc_cut(&text);
    assert!(cut.ends_with("more bytes not shown]"));
    assert!(cut.len() < text.len());
}
