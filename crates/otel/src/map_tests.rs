//! The mapping against an in-memory exporter: the spans it returns are what would be sent.

use pev_protocol::assertion::AssertionResult;
use pev_protocol::event::{Event, EventBody};
use pev_protocol::run::{JudgeAnswer, Reason, ReasonCode, RunResult, RunStatus, StepStatus, Usage};
use pev_protocol::tool::Effect;
use pev_store::ModelCallRecord;
use serde_json::json;

use super::*;
use crate::span::{Kind, Span, Status, Value};

const RUN: &str = "20261125-120000-abcdef";

/// `2026-11-25T12:00:SS.mmmZ` for `ms` milliseconds after noon.
fn at(ms: u64) -> String {
    format!("2026-11-25T12:{:02}:{:02}.{:03}Z", ms / 60_000, (ms / 1000) % 60, ms % 1000)
}

fn noon() -> u64 {
    epoch_ms(&at(0)).unwrap()
}

struct Journal {
    events: Vec<Event>,
    calls: Vec<ModelCallRecord>,
    plans: Vec<(u32, Json)>,
}

impl Journal {
    fn push(&mut self, ms: u64, body: EventBody) {
        let seq = self.events.len() as u64;
        self.events.push(Event { run_id: RUN.into(), seq, at: at(ms), body });
    }

    fn call(
        &mut self,
        role: &str,
        step: Option<(&str, u32)>,
        ms: u64,
        duration_ms: u64,
    ) -> &mut ModelCallRecord {
        let seq = self.calls.len() as u64 + 1;
        self.calls.push(ModelCallRecord {
            run_id: RUN.into(),
            seq,
            role: role.into(),
            step_id: step.map(|(s, _)| s.to_owned()),
            attempt: step.map(|(_, a)| a),
            provider: "anthropic".into(),
            server: Some("api.anthropic.com".into()),
            request_model: format!("{role}-model"),
            response_model: Some(format!("{role}-model-2026")),
            response_id: Some(format!("msg_{seq}")),
            finish_reason: Some("end_turn".into()),
            input_tokens: 100,
            output_tokens: 20,
            cache_read_tokens: 80,
            cache_write_tokens: 0,
            cost_usd: Some(0.01),
            started_at: at(ms),
            duration_ms,
            error_type: None,
            error: None,
            request: None,
            response_sha256: None,
            retries: Vec::new(),
        });
        self.calls.last_mut().unwrap()
    }

    fn map(&self, options: &Options) -> Vec<Span> {
        map_run(
            &RunJournal {
                run_id: RUN,
                events: &self.events,
                model_calls: &self.calls,
                plans: &self.plans,
                parent: None,
            },
            options,
        )
    }
}

fn result(status: RunStatus) -> RunResult {
    RunResult {
        run_id: RUN.into(),
        goal: "Make the background dark green".into(),
        status,
        reasons: if status == RunStatus::Success {
            vec![]
        } else {
            vec![Reason {
                code: ReasonCode::StepFailed,
                step: Some("b".into()),
                message: "step b failed".into(),
            }]
        },
        goal_actions_executed: true,
        steps: vec![],
        postconditions: vec![],
        file_mutations: vec![],
        warnings: vec![],
        usage: Usage {
            llm_calls: 4,
            input_tokens: 400,
            output_tokens: 80,
            cost_usd: 0.25,
            tool_calls: 2,
            ..Usage::default()
        },
        duration_ms: 9000,
        final_check: None,
    }
}

/// A run: the planner writes a 2-step plan; step `a` (an instruction step) makes a model call,
/// writes a file, passes its assertion and the judge; step `b` runs a command that fails,
/// twice; a postcondition fails; the run ends `partial`.
fn journal() -> Journal {
    let mut j = Journal { events: vec![], calls: vec![], plans: vec![] };
    j.plans
        .push((1, json!({"goal": "g", "steps": [{"id": "a"}, {"id": "b", "tool": "shell.exec"}]})));
    j.call("planner", None, 0, 900);
    j.push(
        1000,
        EventBody::RunStarted {
            goal: "Make the background dark green with SECRET-GOAL".into(),
            workspace: "/ws".into(),
            resumed: false,
            sandbox: Some(json!({"level": "full"})),
        },
    );
    j.push(1000, EventBody::PlanCreated { version: 1, steps: 2 });
    j.push(1100, EventBody::StepStarted { step: "a".into(), attempt: 1 });
    j.call("executor", Some(("a", 1)), 1200, 300);
    j.push(
        1600,
        EventBody::ToolCalled {
            step: "a".into(),
            call_id: "c1".into(),
            tool: "file.write".into(),
            effect: Effect::Write,
            arguments: json!({"path": "style.css", "content": "SECRET-CONTENT ".repeat(100)}),
        },
    );
    j.push(
        1700,
        EventBody::ToolFinished {
            step: "a".into(),
            call_id: "c1".into(),
            tool: "file.write".into(),
            ok: true,
            output: Some(json!({"bytes": 1500})),
            error: None,
            duration_ms: 100,
            recovered: false,
        },
    );
    j.push(
        1800,
        EventBody::AssertionChecked {
            step: Some("a".into()),
            postcondition: None,
            result: AssertionResult {
                kind: "file_contains".into(),
                passed: true,
                detail: "found at line 2".into(),
            },
        },
    );
    j.call("verifier", Some(("a", 1)), 1850, 100);
    j.push(
        2000,
        EventBody::JudgeDecided {
            step: "a".into(),
            attempt: 1,
            pass: true,
            confidence: 0.9,
            outcome: "passed".into(),
            feedback: "SECRET-FEEDBACK".into(),
            answers: vec![JudgeAnswer {
                question: "Is it green?".into(),
                yes: true,
                confidence: 0.9,
            }],
        },
    );
    j.push(
        2100,
        EventBody::StepFinished {
            step: "a".into(),
            status: StepStatus::Done,
            attempts: 1,
            error: None,
            cached: false,
        },
    );
    for (attempt, base) in [(1u32, 3000u64), (2, 5000)] {
        j.push(base, EventBody::StepStarted { step: "b".into(), attempt });
        let call = format!("c-b{attempt}");
        j.push(
            base + 100,
            EventBody::ToolCalled {
                step: "b".into(),
                call_id: call.clone(),
                tool: "shell.exec".into(),
                effect: Effect::Exec,
                arguments: json!({"command": "make"}),
            },
        );
        j.push(
            base + 500,
            EventBody::ToolFinished {
                step: "b".into(),
                call_id: call,
                tool: "shell.exec".into(),
                ok: false,
                output: None,
                error: Some("exit status 2".into()),
                duration_ms: 400,
                recovered: false,
            },
        );
    }
    j.push(
        5600,
        EventBody::StepFinished {
            step: "b".into(),
            status: StepStatus::Failed,
            attempts: 2,
            error: Some("make failed".into()),
            cached: false,
        },
    );
    j.push(
        6000,
        EventBody::AssertionChecked {
            step: None,
            postcondition: Some("The site builds".into()),
            result: AssertionResult {
                kind: "command_succeeds".into(),
                passed: false,
                detail: "exit 2".into(),
            },
        },
    );
    j.push(6500, EventBody::VerifyFinished { status: RunStatus::Partial, reasons: vec![] });
    j.push(6500, EventBody::RunFinished { result: Box::new(result(RunStatus::Partial)) });
    j
}

fn named<'s>(spans: &'s [Span], name: &str) -> Vec<&'s Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn one<'s>(spans: &'s [Span], name: &str) -> &'s Span {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "{name}: {:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    found[0]
}

#[test]
fn the_tree_has_the_expected_names_kinds_and_parents() {
    let spans = journal().map(&Options::default());
    let root = &spans[0];
    assert_eq!(root.name, "invoke_agent pev");
    assert_eq!(root.parent, None);
    assert_eq!(root.kind, Kind::Internal);
    assert!(spans.iter().all(|s| s.trace_id == trace_id(RUN)), "one trace");
    let mut ids: Vec<SpanId> = spans.iter().map(|s| s.span_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), spans.len(), "span ids are distinct");
    // Every parent is a span of the trace.
    for s in &spans[1..] {
        let parent = s.parent.expect("only the root has no parent");
        assert!(spans.iter().any(|p| p.span_id == parent), "{} has a dangling parent", s.name);
    }

    let plan = one(&spans, "plan");
    assert_eq!(plan.parent, Some(root.span_id));
    let planner = one(&spans, "chat planner-model");
    assert_eq!(planner.parent, Some(plan.span_id), "the planner's call is under its plan");
    assert_eq!(planner.kind, Kind::Client);

    let step_a = one(&spans, "step a");
    assert_eq!(step_a.parent, Some(root.span_id));
    let executor = one(&spans, "chat executor-model");
    assert_eq!(executor.parent, Some(step_a.span_id));
    let write = one(&spans, "execute_tool file.write");
    assert_eq!(write.parent, Some(step_a.span_id));
    let verify_a = one(&spans, "verify a");
    assert_eq!(verify_a.parent, Some(step_a.span_id));
    let judge = one(&spans, "chat verifier-model");
    assert_eq!(judge.parent, Some(verify_a.span_id), "the judge's call is under the verification");

    let attempts_b = named(&spans, "step b");
    assert_eq!(attempts_b.len(), 2, "one span per attempt");
    let execs = named(&spans, "execute_tool shell.exec");
    assert_eq!(execs.len(), 2);
    assert_eq!(execs[0].parent, Some(attempts_b[0].span_id));
    assert_eq!(execs[1].parent, Some(attempts_b[1].span_id));

    let verify_run = one(&spans, "verify run");
    assert_eq!(verify_run.parent, Some(root.span_id));
    assert!(spans.iter().all(|s| !s.open), "a finished run has no open span");
}

#[test]
fn required_attributes_are_set() {
    let spans = journal().map(&Options::default());
    let root = &spans[0];
    assert_eq!(root.str_attr("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(root.str_attr("gen_ai.agent.name"), Some("pev"));
    assert_eq!(root.str_attr("gen_ai.conversation.id"), Some(RUN));
    assert_eq!(root.str_attr("pev.run.status"), Some("partial"));
    assert_eq!(root.attr("pev.run.cost_usd"), Some(&Value::Double(0.25)));
    assert_eq!(root.attr("gen_ai.usage.input_tokens").and_then(Value::as_int), Some(400));

    let chat = one(&spans, "chat executor-model");
    assert_eq!(chat.str_attr("gen_ai.operation.name"), Some("chat"));
    assert_eq!(chat.str_attr("gen_ai.provider.name"), Some("anthropic"));
    assert_eq!(chat.str_attr("gen_ai.request.model"), Some("executor-model"));
    assert_eq!(chat.str_attr("gen_ai.response.model"), Some("executor-model-2026"));
    assert_eq!(chat.str_attr("gen_ai.response.id"), Some("msg_2"));
    assert_eq!(
        chat.attr("gen_ai.response.finish_reasons"),
        Some(&Value::StrArray(vec!["end_turn".into()]))
    );
    assert_eq!(chat.attr("gen_ai.usage.input_tokens").and_then(Value::as_int), Some(100));
    assert_eq!(chat.attr("gen_ai.usage.output_tokens").and_then(Value::as_int), Some(20));
    assert_eq!(chat.attr("gen_ai.usage.cache_read.input_tokens").and_then(Value::as_int), Some(80));
    assert_eq!(chat.str_attr("server.address"), Some("api.anthropic.com"));
    assert_eq!(chat.str_attr("pev.role"), Some("executor"));

    let tool = one(&spans, "execute_tool file.write");
    assert_eq!(tool.str_attr("gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(tool.str_attr("gen_ai.tool.name"), Some("file.write"));
    assert_eq!(tool.str_attr("gen_ai.tool.call.id"), Some("c1"));
    assert_eq!(tool.str_attr("pev.tool.effect"), Some("write"));
    assert_eq!(tool.str_attr("pev.sandbox"), Some("full"));

    // One evaluation per assertion and per judge answer, and the judge's verdict.
    let verify = one(&spans, "verify a");
    let names: Vec<&str> = verify
        .events
        .iter()
        .map(|e| {
            assert_eq!(e.name, "gen_ai.evaluation.result");
            e.attributes
                .iter()
                .find(|(k, _)| k == "gen_ai.evaluation.name")
                .and_then(|(_, v)| v.as_str())
                .unwrap()
        })
        .collect();
    assert_eq!(names, ["file_contains", "pev.judge.question", "pev.judge"]);
    let label = |i: usize| {
        verify.events[i]
            .attributes
            .iter()
            .find(|(k, _)| k == "gen_ai.evaluation.score.label")
            .unwrap()
            .1
            .clone()
    };
    assert_eq!(label(0), Value::from("pass"));
    assert_eq!(label(2), Value::from("passed"));
    assert!(
        verify.events[2]
            .attributes
            .iter()
            .any(|(k, v)| k == "gen_ai.response.id" && v == &Value::from("msg_3"))
    );
    assert_eq!(verify.status, Status::Unset);
}

#[test]
fn failures_are_errors_with_an_error_type() {
    let mut j = journal();
    let failed = j.call("executor", Some(("b", 2)), 5100, 50);
    failed.error_type = Some("rate_limited".into());
    failed.error = Some("429 Too Many Requests".into());
    failed.response_id = None;
    // The messages quote what failed, so they are content: captured here.
    let spans = j.map(&Options { capture_content: true, ..Options::default() });
    let error_type = |s: &Span| s.str_attr("error.type").map(str::to_owned);

    let root = &spans[0];
    assert!(matches!(&root.status, Status::Error(m) if m == "step b failed"), "{:?}", root.status);
    assert_eq!(error_type(root).as_deref(), Some("partial"));

    let execs = named(&spans, "execute_tool shell.exec");
    assert!(matches!(&execs[0].status, Status::Error(m) if m == "exit status 2"));
    assert_eq!(error_type(execs[0]).as_deref(), Some("tool_error"));

    let attempts = named(&spans, "step b");
    assert_eq!(error_type(attempts[0]).as_deref(), Some("attempt_failed"));
    assert!(matches!(&attempts[1].status, Status::Error(m) if m == "make failed"));
    assert_eq!(error_type(attempts[1]).as_deref(), Some("step_failed"));
    assert_eq!(attempts[1].str_attr("pev.step.tool"), Some("shell.exec"));

    let chat = spans.iter().find(|s| s.str_attr("error.type") == Some("rate_limited")).unwrap();
    assert_eq!(chat.parent, Some(attempts[1].span_id));
    assert!(matches!(&chat.status, Status::Error(m) if m.contains("429")));
    assert!(chat.attr("gen_ai.usage.input_tokens").is_none(), "a failed call has no usage");

    let verify_run = one(&spans, "verify run");
    assert_eq!(error_type(verify_run).as_deref(), Some("verification_failed"));

    // And nothing that succeeded is marked.
    for name in ["step a", "execute_tool file.write", "verify a", "plan"] {
        assert_eq!(one(&spans, name).status, Status::Unset, "{name}");
        assert_eq!(error_type(one(&spans, name)), None, "{name}");
    }
}

#[test]
fn a_successful_run_root_is_not_an_error() {
    let mut j = journal();
    let last = j.events.len() - 1;
    j.events[last].body = EventBody::RunFinished { result: Box::new(result(RunStatus::Success)) };
    let spans = j.map(&Options::default());
    assert_eq!(spans[0].status, Status::Unset);
    assert_eq!(spans[0].str_attr("error.type"), None);
    assert_eq!(spans[0].str_attr("pev.run.status"), Some("success"));
}

#[test]
fn no_content_unless_opted_in_and_then_capped() {
    let j = journal();
    let quiet = j.map(&Options::default());
    let text = format!("{quiet:?}");
    for secret in [
        "SECRET-GOAL",
        "SECRET-CONTENT",
        "SECRET-FEEDBACK",
        "\"bytes\"",
        "found at line 2",
        "Is it green?",
        "exit status 2",
        "make failed",
        "step b failed",
        "The site builds",
    ] {
        assert!(!text.contains(secret), "{secret} leaked without opt-in");
    }
    // Errors are still errors, with a message that quotes nothing.
    let exec = named(&quiet, "execute_tool shell.exec")[0];
    assert_eq!(exec.status, Status::Error("the tool call failed".into()));
    assert_eq!(quiet[0].status, Status::Error("the run ended partial".into()));
    for key in [
        "gen_ai.input.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.output.messages",
    ] {
        assert!(quiet.iter().all(|s| s.attr(key).is_none()), "{key} set without opt-in");
    }

    let loud = j.map(&Options { capture_content: true, max_content_bytes: 64 });
    assert!(loud[0].str_attr("gen_ai.input.messages").unwrap().contains("SECRET-GOAL"));
    let args =
        one(&loud, "execute_tool file.write").str_attr("gen_ai.tool.call.arguments").unwrap();
    assert!(args.contains("SECRET-CONTENT"));
    assert!(args.len() < 64 + 40, "capped: {} bytes", args.len());
    assert!(args.ends_with("bytes cut]"), "{args}");
    assert!(one(&loud, "execute_tool file.write").attr("gen_ai.tool.call.result").is_some());
    assert!(one(&loud, "plan").attr("gen_ai.output.messages").is_some());
    assert!(format!("{loud:?}").contains("SECRET-FEEDBACK"));
}

#[test]
fn a_multibyte_value_is_cut_on_a_character_boundary() {
    let mut j = journal();
    j.events[0].body = EventBody::RunStarted {
        goal: "é".repeat(100),
        workspace: "/ws".into(),
        resumed: false,
        sandbox: None,
    };
    let spans = j.map(&Options { capture_content: true, max_content_bytes: 7 });
    let goal = spans[0].str_attr("gen_ai.input.messages").unwrap();
    assert!(goal.starts_with("ééé…"), "{goal}");
}

#[test]
fn timestamps_are_the_journals() {
    let j = journal();
    let spans = j.map(&Options::default());
    let t = |ms: u64| noon() + ms;
    let root = &spans[0];
    assert_eq!(
        (root.start_ms, root.end_ms),
        (t(0), t(6500)),
        "from the planner's call to run.finished"
    );
    let step_a = one(&spans, "step a");
    assert_eq!((step_a.start_ms, step_a.end_ms), (t(1100), t(2100)));
    let write = one(&spans, "execute_tool file.write");
    assert_eq!((write.start_ms, write.end_ms), (t(1600), t(1700)));
    let chat = one(&spans, "chat executor-model");
    assert_eq!((chat.start_ms, chat.end_ms), (t(1200), t(1500)));
    let plan = one(&spans, "plan");
    assert_eq!(
        (plan.start_ms, plan.end_ms),
        (t(0), t(1000)),
        "the plan span holds its planner call"
    );
    let verify = one(&spans, "verify a");
    assert_eq!((verify.start_ms, verify.end_ms), (t(1800), t(2000)));
    assert_eq!(verify.events[0].at_ms, t(1800));
    for s in &spans {
        assert!(s.end_ms >= s.start_ms, "{}", s.name);
    }
}

#[test]
fn mapping_is_deterministic_and_ids_come_from_the_run_id() {
    let j = journal();
    assert_eq!(j.map(&Options::default()), j.map(&Options::default()));
    assert_eq!(trace_id(RUN), trace_id(RUN));
    assert_ne!(trace_id(RUN), trace_id("another-run"));
}

#[test]
fn a_run_still_going_has_open_spans_that_end_at_the_last_known_time() {
    let mut j = journal();
    // Cut the journal after the first attempt of `b` started its tool call.
    let cut = j
        .events
        .iter()
        .position(
            |e| matches!(&e.body, EventBody::ToolFinished { call_id, .. } if call_id == "c-b1"),
        )
        .unwrap();
    j.events.truncate(cut);
    let spans = j.map(&Options::default());
    let root = &spans[0];
    assert!(root.open);
    assert_eq!(root.str_attr("pev.run.status"), None);
    let step_b = one(&spans, "step b");
    assert!(step_b.open);
    let exec = one(&spans, "execute_tool shell.exec");
    assert!(exec.open);
    assert_eq!(exec.end_ms, noon() + 3100, "the last time the journal knows");
    assert!(!one(&spans, "step a").open);
    assert!(!one(&spans, "verify a").open);
    assert!(!one(&spans, "chat executor-model").open);
}

#[test]
fn an_empty_journal_maps_to_a_lone_root() {
    let j = Journal { events: vec![], calls: vec![], plans: vec![] };
    let spans = j.map(&Options::default());
    assert_eq!(spans.len(), 1);
    assert!(spans[0].open);
}

#[test]
fn a_resumed_run_keeps_ids_distinct_and_late_evidence_goes_to_the_runs_verification() {
    let mut j = journal();
    // The run waited for approval, then was resumed: the same attempt of `b` starts again.
    j.push(
        7000,
        EventBody::RunStarted {
            goal: "g".into(),
            workspace: "/ws".into(),
            resumed: true,
            sandbox: None,
        },
    );
    j.push(7100, EventBody::StepStarted { step: "b".into(), attempt: 2 });
    j.call("executor", Some(("b", 2)), 7200, 100);
    // A replan's planner call, whose plan is not journaled yet.
    j.call("planner", None, 7400, 100);
    let spans = j.map(&Options::default());
    let mut ids: Vec<SpanId> = spans.iter().map(|s| s.span_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), spans.len(), "each start of an attempt is a span of its own");
    let attempts = named(&spans, "step b");
    assert_eq!(attempts.len(), 3);
    let late = spans.iter().rfind(|s| s.name == "chat executor-model").unwrap();
    assert_eq!(late.parent, Some(attempts[2].span_id), "the call goes to the attempt it fell in");
    assert!(spans[0].open, "the resumed run is going again");
    let replan = spans.iter().rfind(|s| s.name == "chat planner-model").unwrap();
    assert!(replan.open, "held back until its plan is journaled");

    // The final re-check, after step `a` finished: the run's verification.
    let mut j = journal();
    let at_end = j.events.len() - 2;
    j.events.insert(
        at_end,
        Event {
            run_id: RUN.into(),
            seq: 99,
            at: at(6400),
            body: EventBody::AssertionChecked {
                step: Some("a".into()),
                postcondition: None,
                result: AssertionResult {
                    kind: "file_contains".into(),
                    passed: false,
                    detail: "final re-check: gone".into(),
                },
            },
        },
    );
    let spans = j.map(&Options::default());
    let verify_a = one(&spans, "verify a");
    assert_eq!(verify_a.events.len(), 3, "step a's own verification is as it was");
    assert_eq!(verify_a.end_ms, noon() + 2000);
    let run = one(&spans, "verify run");
    let last = run.events.last().unwrap();
    assert!(last.attributes.iter().any(|(k, v)| k == "pev.step.id" && v == &Value::from("a")));
}

/// A delegated step's child run nests in its parent's trace: the parent's step span holds an
/// `invoke_agent CHILD` span, and the child's root span hangs under it, in the same trace.
#[test]
fn a_child_run_nests_under_its_parents_delegate_span_in_one_trace() {
    let child_id = format!("{RUN}.docs.1");
    let mut parent = Journal { events: Vec::new(), calls: Vec::new(), plans: Vec::new() };
    parent.push(0, EventBody::StepStarted { step: "docs".into(), attempt: 1 });
    parent.push(
        10,
        EventBody::DelegateStarted {
            step: "docs".into(),
            attempt: 1,
            child_run: child_id.clone(),
            mode: "pev".into(),
            scope: Some("docs".into()),
            depth: 1,
        },
    );
    parent.push(
        900,
        EventBody::DelegateFinished {
            step: "docs".into(),
            attempt: 1,
            child_run: child_id.clone(),
            status: RunStatus::Partial,
            reasons: Vec::new(),
            changed: vec!["docs/a.md".into()],
        },
    );
    parent.push(
        950,
        EventBody::StepFinished {
            step: "docs".into(),
            status: StepStatus::Failed,
            attempts: 1,
            error: None,
            cached: false,
        },
    );
    let parent_spans = parent.map(&Options::default());
    let step = parent_spans.iter().find(|s| s.name == "step docs").expect("step span");
    let delegate = parent_spans
        .iter()
        .find(|s| s.name == format!("invoke_agent {child_id}"))
        .expect("delegate span");
    assert_eq!(delegate.parent, Some(step.span_id));
    assert_eq!((delegate.start_ms, delegate.end_ms), (noon() + 10, noon() + 900));
    assert!(matches!(delegate.status, Status::Error(_)), "a partial child is an error status");

    let child_events = vec![Event {
        run_id: child_id.clone(),
        seq: 0,
        at: at(20),
        body: EventBody::RunStarted {
            goal: "docs".into(),
            workspace: "/ws".into(),
            resumed: false,
            sandbox: None,
        },
    }];
    let child_spans = map_run(
        &RunJournal {
            run_id: &child_id,
            events: &child_events,
            model_calls: &[],
            plans: &[],
            parent: Some(RUN),
        },
        &Options::default(),
    );
    let root = &child_spans[0];
    assert_eq!(root.name, "invoke_agent pev");
    assert_eq!(root.parent, Some(delegate.span_id), "the child hangs under the delegate span");
    assert_eq!(root.trace_id, delegate.trace_id, "one trace for the tree");
    assert_eq!(root.trace_id, trace_id(RUN));
    assert!(child_spans.iter().all(|s| s.trace_id == trace_id(RUN)));
    assert_eq!(tree_root(&format!("{child_id}.sub.2")), RUN);
}

/// The live exporter sends a span once, at the first look that finds it ended (the root waits
/// for the end): so a span that has ended in a journal cut short must be the span the whole
/// journal gives. Checked at every cut of the fixture run (a model call is journaled when it
/// returns), with content on and off.
#[test]
fn a_span_that_ended_is_the_span_the_finished_run_gives() {
    let j = journal();
    let end = |c: &ModelCallRecord| epoch_ms(&c.started_at).unwrap() + c.duration_ms;
    for options in [Options::default(), Options { capture_content: true, ..Options::default() }] {
        let full = j.map(&options);
        for cut in 0..=j.events.len() {
            let now = j.events[..cut].last().map_or(0, |e| epoch_ms(&e.at).unwrap());
            let prefix = Journal {
                events: j.events[..cut].to_vec(),
                calls: j.calls.iter().filter(|c| end(c) <= now).cloned().collect(),
                plans: j.plans.clone(),
            };
            for span in prefix.map(&options).iter().filter(|s| !s.open && s.parent.is_some()) {
                let last = full.iter().find(|s| s.span_id == span.span_id);
                assert_eq!(Some(span), last, "{} after {cut} events", span.name);
            }
        }
    }
}
