//! Unit tests for the run views: the JSON lines, the shared tracker's wording, the plain and
//! live views, and the final summary.

use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressDrawTarget, TermLike};
use pev_engine::Observer;
use pev_protocol::assertion::AssertionResult;
use pev_protocol::event::{Event, EventBody};
use pev_protocol::run::{
    FileMutation, PostconditionResult, Reason, ReasonCode, RunResult, RunStatus, StepResult,
    StepStatus, Usage,
};
use pev_protocol::tool::Effect;
use serde_json::json;

use super::{JsonLines, LiveView, Note, PlainView, Tracker, activity, render_summary};
use crate::view::style::Style;

fn ev(seq: u64, body: EventBody) -> Event {
    Event { run_id: "RUN1".into(), seq, at: "2026-11-21T14:00:00.000Z".into(), body }
}

fn check(kind: &str, passed: bool, detail: &str) -> AssertionResult {
    AssertionResult { kind: kind.into(), passed, detail: detail.into() }
}

/// A small run: started, a step that reads, a step whose assertion fails, a warning.
fn events() -> Vec<Event> {
    let bodies = vec![
        EventBody::RunStarted {
            goal: "Make it green".into(),
            workspace: "/w".into(),
            resumed: false,
            sandbox: None,
        },
        EventBody::PlanCreated { version: 1, steps: 2 },
        EventBody::StepStarted { step: "read-css".into(), attempt: 1 },
        EventBody::ToolCalled {
            step: "read-css".into(),
            call_id: "c1".into(),
            tool: "file.read".into(),
            effect: Effect::Read,
            arguments: json!({"path": "site/style.css"}),
        },
        EventBody::StepFinished {
            step: "read-css".into(),
            status: StepStatus::Done,
            attempts: 1,
            error: None,
            cached: false,
        },
        EventBody::StepStarted { step: "patch-css".into(), attempt: 1 },
        EventBody::ToolCalled {
            step: "patch-css".into(),
            call_id: "c2".into(),
            tool: "file.patch".into(),
            effect: Effect::Write,
            arguments: json!({"path": "site/style.css", "edits": []}),
        },
        EventBody::AssertionChecked {
            step: Some("patch-css".into()),
            postcondition: None,
            result: check("file_contains", false, "`#0b3d0b` not found in site/style.css"),
        },
        EventBody::StepFinished {
            step: "patch-css".into(),
            status: StepStatus::Failed,
            attempts: 1,
            error: None,
            cached: false,
        },
        EventBody::Warning { step: Some("patch-css".into()), message: "odd\x1b[2J".into() },
    ];
    bodies.into_iter().enumerate().map(|(i, b)| ev(i as u64, b)).collect()
}

#[test]
fn json_lines_writes_one_parseable_line_per_event() {
    let sink = JsonLines::new(Vec::new());
    let events = events();
    for e in &events {
        sink.on_event(e);
    }
    assert_eq!(sink.error(), None);
    let bytes = sink.into_inner();
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), events.len());
    for (line, e) in lines.iter().zip(&events) {
        let back: Event = serde_json::from_str(line).unwrap();
        assert_eq!(&back, e);
    }
    let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(first["event"], "run.started");
    assert_eq!(first["run_id"], "RUN1");
    assert!(text.ends_with('\n'));
}

/// A writer that fails every write with a given error kind, counting the attempts.
struct Failing(io::ErrorKind, Arc<Mutex<u32>>);

impl Write for Failing {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        *self.1.lock().unwrap() += 1;
        Err(io::Error::from(self.0))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn json_lines_stops_silently_on_a_broken_pipe() {
    let tries = Arc::new(Mutex::new(0));
    let sink = JsonLines::new(Failing(io::ErrorKind::BrokenPipe, tries.clone()));
    for e in events() {
        sink.on_event(&e);
    }
    assert_eq!(*tries.lock().unwrap(), 1, "no write after the pipe closed");
    assert_eq!(sink.error(), None);
}

#[test]
fn json_lines_keeps_other_write_errors() {
    let tries = Arc::new(Mutex::new(0));
    let sink = JsonLines::new(Failing(io::ErrorKind::StorageFull, tries.clone()));
    for e in events() {
        sink.on_event(&e);
    }
    assert_eq!(*tries.lock().unwrap(), 1);
    assert!(sink.error().unwrap().contains("cannot write the event stream"));
}

#[test]
fn tracker_explains_a_failed_step_with_its_assertion() {
    let mut t = Tracker::new(Style::plain());
    let now = Instant::now();
    let mut notes = Vec::new();
    for e in events() {
        notes.extend(t.apply(&e, now));
    }
    assert_eq!(notes[0], Note::Line("run RUN1: Make it green".into()));
    assert!(notes.contains(&Note::Total(2)));
    assert!(notes.contains(&Note::Activity {
        step: "patch-css".into(),
        text: "file.patch site/style.css".into()
    }));
    let stopped: Vec<&str> = notes
        .iter()
        .filter_map(|n| match n {
            Note::Stopped { line, .. } => Some(line.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(stopped.len(), 2);
    assert!(stopped[0].starts_with("✓ read-css  done  "), "{}", stopped[0]);
    assert!(
        stopped[1].starts_with(
            "✗ patch-css  failed: assertion file_contains failed: `#0b3d0b` not found"
        ),
        "{}",
        stopped[1]
    );
    assert_eq!(t.counts(), (2, 2));
    // The warning's escape sequence is neutralised.
    assert_eq!(notes.last(), Some(&Note::Line("! patch-css: odd\\e[2J".into())));
}

#[test]
fn tracker_counts_a_retried_step_once() {
    let mut t = Tracker::new(Style::plain());
    let now = Instant::now();
    let fin = |status| EventBody::StepFinished {
        step: "a".into(),
        status,
        attempts: 1,
        error: Some("exit 1".into()),
        cached: false,
    };
    t.apply(&ev(0, EventBody::StepStarted { step: "a".into(), attempt: 1 }), now);
    t.apply(&ev(1, fin(StepStatus::Failed)), now);
    assert_eq!(t.counts().0, 1);
    let notes = t.apply(&ev(2, EventBody::StepStarted { step: "a".into(), attempt: 2 }), now);
    assert_eq!(t.counts().0, 0);
    assert!(notes.contains(&Note::Activity { step: "a".into(), text: "attempt 2".into() }));
    let later = now + Duration::from_millis(1500);
    let notes = t.apply(&ev(3, fin(StepStatus::Done)), later);
    assert_eq!(t.counts().0, 1);
    assert!(notes.contains(&Note::Stopped { step: "a".into(), line: "✓ a  done  1.5s".into() }));
}

#[test]
fn tracker_marks_skipped_blocked_and_waiting_steps() {
    let mut t = Tracker::new(Style::plain());
    let now = Instant::now();
    let fin = |step: &str, status| {
        ev(
            0,
            EventBody::StepFinished {
                step: step.into(),
                status,
                attempts: 0,
                error: None,
                cached: false,
            },
        )
    };
    let line = |notes: Vec<Note>| match notes.last() {
        Some(Note::Stopped { line, .. }) => line.clone(),
        other => panic!("no stopped line: {other:?}"),
    };
    assert_eq!(line(t.apply(&fin("s", StepStatus::Skipped), now)), "↷ s  skipped");
    assert_eq!(line(t.apply(&fin("b", StepStatus::Blocked), now)), "⊘ b  blocked");
    let ask = EventBody::ApprovalRequested { step: "d".into(), tool: Some("shell.exec".into()) };
    assert_eq!(
        t.apply(&ev(1, ask), now),
        vec![Note::Line("? d waits for approval (shell.exec)".into())]
    );
    assert_eq!(line(t.apply(&fin("d", StepStatus::Pending), now)), "⏸ d  waiting for approval");
    let ask = EventBody::ApprovalRequested { step: "e".into(), tool: None };
    t.apply(&ev(2, ask), now);
    assert_eq!(line(t.apply(&fin("e", StepStatus::Blocked), now)), "⏸ e  waiting for approval");
    assert_eq!(t.counts().0, 2, "a waiting step is not finished");
    let granted = EventBody::ApprovalGranted { step: "e".into(), by: "ann".into() };
    assert_eq!(t.apply(&ev(3, granted), now), vec![Note::Line("✓ e approved by ann".into())]);
    assert_eq!(line(t.apply(&fin("e", StepStatus::Done), now)), "✓ e  done");
    assert_eq!(t.counts().0, 3);
}

#[test]
fn activity_names_what_a_tool_touches() {
    assert_eq!(activity("shell.exec", &json!({"command": "make test"})), "shell.exec make test");
    assert_eq!(activity("shell.exec", &json!({"argv": ["ls", "-l"]})), "shell.exec ls -l");
    assert_eq!(
        activity("http.request", &json!({"method": "POST", "url": "http://x/y"})),
        "http.request POST http://x/y"
    );
    assert_eq!(activity("file.list", &json!({})), "file.list");
    let long = activity("shell.exec", &json!({"command": "x".repeat(500)}));
    assert_eq!(long.chars().count(), 70);
    assert!(long.ends_with('…'));
}

#[test]
fn plain_view_prints_one_line_per_fact() {
    let view = PlainView::new(Vec::new(), Style::plain());
    for e in events() {
        view.on_event(&e);
    }
    let text = String::from_utf8(view.into_inner()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "run RUN1: Make it green");
    assert_eq!(lines[1], "▸ read-css  file.read site/style.css");
    assert!(
        lines[2].starts_with("✓ read-css  done  ") && lines[2].ends_with("  [1/2]"),
        "{}",
        lines[2]
    );
    assert_eq!(lines[3], "▸ patch-css  file.patch site/style.css");
    assert!(lines[4].starts_with("✗ patch-css  failed: assertion file_contains failed"));
    assert!(lines[4].ends_with("[2/2]"));
    assert_eq!(lines[5], "! patch-css: odd\\e[2J");
    assert_eq!(lines.len(), 6);
    assert!(!text.contains('\x1b'));
}

/// An in-memory terminal for indicatif that records every line written.
#[derive(Debug, Clone, Default)]
struct Screen(Arc<Mutex<String>>);

impl TermLike for Screen {
    fn width(&self) -> u16 {
        100
    }
    fn move_cursor_up(&self, _: usize) -> io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> io::Result<()> {
        let mut text = self.0.lock().unwrap();
        text.push_str(s);
        text.push('\n');
        Ok(())
    }
    fn write_str(&self, s: &str) -> io::Result<()> {
        self.0.lock().unwrap().push_str(s);
        Ok(())
    }
    fn clear_line(&self) -> io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn live_view_leaves_permanent_lines_and_can_suspend() {
    let screen = Screen::default();
    let target = ProgressDrawTarget::term_like(Box::new(screen.clone()));
    let view = LiveView::with_target(target, Style::plain());
    let events = events();
    let (first, rest) = events.split_at(3);
    for e in first {
        view.on_event(e);
    }
    // Events during a prompt are queued (sending them from inside would deadlock otherwise),
    // then drawn when it is done.
    let answer = view.suspend(|| {
        for e in rest {
            view.on_event(e);
        }
        let text = screen.0.lock().unwrap().clone();
        assert!(!text.contains("✓ read-css  done"), "{text}");
        42
    });
    assert_eq!(answer, 42);
    view.finish();
    let text = screen.0.lock().unwrap().clone();
    assert!(text.contains("run RUN1: Make it green"), "{text}");
    assert!(text.contains("✓ read-css  done"), "{text}");
    assert!(text.contains("✗ patch-css  failed: assertion file_contains failed"), "{text}");
    assert!(text.contains("! patch-css: odd\\e[2J"), "{text}");
    assert!(!text.contains("\x1b[2J"), "{text}");
    // The spinner line of a running step (drawn on its first tick).
    assert!(text.contains("read-css  file.read site/style.css  "), "{text}");
}

#[test]
fn live_view_templates_parse() {
    for t in
        [super::SPINNER_PLAIN, super::SPINNER_COLOR, super::OVERALL_PLAIN, super::OVERALL_COLOR]
    {
        assert!(indicatif::ProgressStyle::with_template(t).is_ok(), "{t}");
    }
}

fn step(id: &str, status: StepStatus, checks: Vec<AssertionResult>) -> StepResult {
    StepResult {
        id: id.into(),
        status,
        attempts: 1,
        evidence: Vec::new(),
        assertions: checks,
        output: None,
        error: None,
        started_at: None,
        ended_at: None,
    }
}

fn result(status: RunStatus, reasons: Vec<Reason>, steps: Vec<StepResult>) -> RunResult {
    RunResult {
        run_id: "RUN1".into(),
        goal: "Change the site background to dark green".into(),
        status,
        reasons,
        goal_actions_executed: true,
        steps,
        postconditions: Vec::new(),
        file_mutations: Vec::new(),
        warnings: Vec::new(),
        usage: Usage { tool_calls: 3, ..Usage::default() },
        duration_ms: 12,
        final_check: None,
    }
}

fn reason(code: ReasonCode, step: Option<&str>, message: &str) -> Reason {
    Reason { code, step: step.map(str::to_owned), message: message.into() }
}

#[test]
fn summary_of_a_success() {
    let mut r = result(
        RunStatus::Success,
        Vec::new(),
        vec![
            step("read-css", StepStatus::Done, Vec::new()),
            step("patch-css", StepStatus::Done, vec![check("file_contains", true, "found")]),
        ],
    );
    r.file_mutations.push(FileMutation {
        path: "site/style.css".into(),
        bytes_before: 120,
        bytes_after: 121,
        lines_added: 1,
        lines_removed: 1,
        no_op: false,
    });
    r.postconditions.push(PostconditionResult {
        description: "CSS changed".into(),
        satisfied: true,
        evidence: "content_changed: sha256 differs".into(),
        judge: None,
    });
    let text = render_summary(&r, &Style::plain());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "run RUN1: success");
    assert_eq!(lines[1], "goal: Change the site background to dark green");
    assert!(!text.contains("reasons:"));
    assert!(text.contains("\nsteps: 2 done (of 2)\n"), "{text}");
    assert!(text.contains("\nassertions: 1 passed, 0 failed\n"), "{text}");
    assert!(text.contains("postconditions: 1 of 1 satisfied\n  ✓ CSS changed: content_changed"));
    assert!(text.contains("\n  site/style.css  120 → 121 bytes  +1 −1\n"), "{text}");
    assert!(text.contains("\nusage: 3 tool calls in 12ms\n"), "{text}");
    assert_eq!(
        lines.last(),
        Some(
            &"next: pev show RUN1  (steps, evidence and diffs; as one HTML file: pev report RUN1)"
        )
    );
    assert!(!text.contains('\x1b'));
}

#[test]
fn summary_of_a_partial_run_names_its_reasons() {
    let mut r = result(
        RunStatus::Partial,
        vec![
            reason(ReasonCode::NoEffects, None, "the goal asks for a change, but no effect ran"),
            reason(ReasonCode::NoOpMutation, Some("patch-css"), "site/style.css did not change"),
        ],
        vec![
            step("a", StepStatus::Done, Vec::new()),
            step("b", StepStatus::Skipped, Vec::new()),
            step("c", StepStatus::Pending, Vec::new()),
            step("d", StepStatus::Blocked, Vec::new()),
        ],
    );
    r.file_mutations.push(FileMutation {
        path: "site/style.css".into(),
        bytes_before: 50,
        bytes_after: 50,
        lines_added: 0,
        lines_removed: 0,
        no_op: true,
    });
    r.warnings = (0..25).map(|i| format!("warning {i}")).collect();
    let text = render_summary(&r, &Style::plain());
    assert!(text.starts_with("run RUN1: partial\n"));
    assert!(
        text.contains(
            "reasons:\n  no_effects: the goal asks for a change, but no effect ran\n  \
         no_op_mutation [patch-css]: site/style.css did not change\n"
        ),
        "{text}"
    );
    assert!(text.contains("steps: 1 done, 1 skipped, 2 not run (of 4)"), "{text}");
    assert!(text.contains("  site/style.css  50 → 50 bytes  no-op\n"));
    assert!(text.contains("  ! warning 19\n  … 5 more (pev show)\n"), "{text}");
    assert!(!text.contains("warning 20"));
    assert!(
        text.ends_with("next: pev show RUN1  (or as one HTML file: pev report RUN1)\n"),
        "{text}"
    );
}

#[test]
fn summary_of_a_failed_run_counts_failed_assertions() {
    let r = result(
        RunStatus::Failed,
        vec![reason(
            ReasonCode::AssertionFailed,
            Some("patch-css"),
            "file_contains: `#0b3d0b` not found",
        )],
        vec![
            step("read-css", StepStatus::Done, vec![check("file_exists", true, "exists")]),
            step("patch-css", StepStatus::Failed, vec![check("file_contains", false, "not found")]),
        ],
    );
    let text = render_summary(&r, &Style::plain());
    assert!(text.starts_with("run RUN1: failed\n"));
    assert!(text.contains("  assertion_failed [patch-css]: file_contains: `#0b3d0b` not found\n"));
    assert!(text.contains("steps: 1 done, 1 failed (of 2)"), "{text}");
    assert!(text.contains("assertions: 1 passed, 1 failed"));
    assert!(
        text.ends_with("next: pev show RUN1  (or as one HTML file: pev report RUN1)\n"),
        "{text}"
    );
}

#[test]
fn summary_of_a_run_awaiting_approval_says_how_to_continue() {
    let r = result(
        RunStatus::AwaitingApproval,
        vec![reason(ReasonCode::ApprovalPending, Some("deploy"), "deploy needs approval")],
        vec![
            step("build", StepStatus::Done, Vec::new()),
            step("deploy", StepStatus::Pending, Vec::new()),
        ],
    );
    let text = render_summary(&r, &Style::plain());
    assert!(text.starts_with("run RUN1: awaiting_approval\n"));
    assert!(text.contains("  approval_pending [deploy]: deploy needs approval\n"));
    assert!(text.ends_with("next: pev approve RUN1 && pev resume RUN1\n"), "{text}");
}

#[test]
fn summary_is_coloured_only_when_asked() {
    let r = result(
        RunStatus::Failed,
        vec![reason(ReasonCode::StepFailed, Some("a"), "exit 1")],
        vec![step("a", StepStatus::Failed, Vec::new())],
    );
    let plain = render_summary(&r, &Style::plain());
    assert!(!plain.contains('\x1b'));
    let coloured = render_summary(&r, &Style { color: true });
    assert!(coloured.contains("\x1b[1m\x1b[31mfailed\x1b[0m"), "{coloured}");
    assert!(coloured.contains("\x1b[31mstep_failed\x1b[0m"));
}

#[test]
fn summary_shows_model_usage_when_there_was_any() {
    let mut r = result(RunStatus::Success, Vec::new(), Vec::new());
    r.usage = Usage {
        llm_calls: 2,
        input_tokens: 1000,
        output_tokens: 200,
        cost_usd: 0.0123,
        tool_calls: 1,
        ..Usage::default()
    };
    r.duration_ms = 61_000;
    let text = render_summary(&r, &Style::plain());
    assert!(
        text.contains(
            "usage: 1 tool call, 2 model calls (1000 in / 200 out tokens, $0.0123) in 1m01s"
        ),
        "{text}"
    );
}

#[test]
fn model_usage_shows_the_caches_share_and_saving_when_a_cache_was_used() {
    let mut u = Usage {
        llm_calls: 25,
        input_tokens: 100_000,
        output_tokens: 5_000,
        cost_usd: 0.1234,
        cache_read_tokens: 83_000,
        cache_write_tokens: 9_000,
        cache_saved_usd: 0.2,
        ..Usage::default()
    };
    assert_eq!(
        crate::view::run_summary::model_usage(&u).as_deref(),
        Some(
            "25 model calls (100000 in, 83% from cache / 5000 out tokens, $0.1234; the cache \
             saved $0.2000)"
        )
    );
    u.llm_calls = 1;
    u.cache_read_tokens = 0;
    u.cache_write_tokens = 0;
    u.cache_saved_usd = 0.0;
    assert_eq!(
        crate::view::run_summary::model_usage(&u).as_deref(),
        Some("1 model call (100000 in / 5000 out tokens, $0.1234)")
    );
    u.llm_calls = 0;
    assert_eq!(crate::view::run_summary::model_usage(&u), None);
}

/// A model call's notice is printed above the bars; one that arrives while a prompt has the
/// terminal waits for the prompt, and the caller is not held up.
#[test]
fn live_view_notes_go_above_the_bars_and_wait_for_a_prompt() {
    let screen = Screen::default();
    let target = ProgressDrawTarget::term_like(Box::new(screen.clone()));
    let view = LiveView::with_target(target, Style::plain());
    view.note("pev: planner (m) has waited 15s for an answer (attempt 1 of 3)");
    view.suspend(|| {
        view.note("pev: executor (m) has waited 30s for an answer (attempt 1 of 3)");
        let text = screen.0.lock().unwrap().clone();
        assert!(!text.contains("executor (m) has waited 30s"), "{text}");
    });
    view.finish();
    let text = screen.0.lock().unwrap().clone();
    assert!(text.contains("planner (m) has waited 15s"), "{text}");
    assert!(text.contains("executor (m) has waited 30s"), "{text}");
}

#[test]
fn live_view_draws_no_count_before_the_plan_is_known() {
    let screen = Screen::default();
    let target = ProgressDrawTarget::term_like(Box::new(screen.clone()));
    let view = LiveView::with_target(target, Style::plain());
    // The first steady tick of the old overall bar drew `0/0 steps  0ms` before any event.
    std::thread::sleep(std::time::Duration::from_millis(400));
    view.on_event(&events()[0]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = screen.0.lock().unwrap().clone();
    assert!(!before.contains("0/0 steps"), "{before}");
    for e in &events()[1..] {
        view.on_event(e);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    view.finish();
    let text = screen.0.lock().unwrap().clone();
    assert!(!text.contains("0/0 steps"), "{text}");
    assert!(text.contains("/2 steps"), "the count appears once the plan is known: {text}");
}

#[test]
fn a_resumed_run_counts_finished_steps_without_claiming_a_total() {
    let view = PlainView::new(Vec::new(), Style::plain());
    let resumed = ev(
        0,
        EventBody::RunStarted {
            goal: "Make it green".into(),
            workspace: "/w".into(),
            resumed: true,
            sandbox: None,
        },
    );
    view.on_event(&resumed);
    for e in events().into_iter().skip(2) {
        view.on_event(&e);
    }
    let text = String::from_utf8(view.into_inner()).unwrap();
    assert!(text.starts_with("resuming run RUN1: Make it green"), "{text}");
    assert!(!text.contains("/0]"), "{text}");
    assert!(text.contains("[1 finished]"), "{text}");
}

#[test]
fn a_step_reused_from_the_cache_is_marked() {
    let view = PlainView::new(Vec::new(), Style::plain());
    let bodies = vec![
        EventBody::PlanCreated { version: 1, steps: 1 },
        EventBody::StepStarted { step: "read-css".into(), attempt: 1 },
        EventBody::StepFinished {
            step: "read-css".into(),
            status: StepStatus::Done,
            attempts: 1,
            error: None,
            cached: true,
        },
    ];
    for (i, b) in bodies.into_iter().enumerate() {
        view.on_event(&ev(i as u64, b));
    }
    let text = String::from_utf8(view.into_inner()).unwrap();
    assert!(text.contains("✓ read-css  done (cached: nothing ran)"), "{text}");
}
