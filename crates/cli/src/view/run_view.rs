//! How `pev run` looks while it runs and when it ends: three observers of the engine's event
//! stream and the final summary.
//!
//! - [`JsonLines`] (`--json`): each event as one compact JSON line on stdout, and nothing else
//!   there, so a consumer can read stdout line by line.
//! - [`LiveView`] (a terminal): one spinner line per running step and an overall `3/12 steps`
//!   line, drawn on stderr by indicatif; a finished step leaves one permanent line behind.
//! - [`PlainView`] (stderr is not a terminal, no `--json`): the same information as plain lines.
//!
//! The two human views share a [`Tracker`] that turns events into what to show, so they cannot
//! drift apart and the tests can check the wording without a terminal.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{self, Stderr, Stdout, Write};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use pev_engine::Observer;
use pev_protocol::event::{Event, EventBody};
use pev_protocol::run::StepStatus;
use serde_json::Value;

use crate::view::style::{Style, clean, duration, truncate};
use crate::view::text::plural;

#[cfg(test)]
pub use crate::view::run_summary::render_summary;
pub(crate) use crate::view::run_summary::{mutation_line, reason_name, status_name};

/// Locks a mutex even if a thread panicked while holding it: a view must keep drawing.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `--json`: every event as one JSON line. Writes are flushed per line so a reader sees each
/// event as it happens; a closed pipe stops the output silently (the run goes on and is
/// journaled), any other write error is kept for [`JsonLines::error`].
pub struct JsonLines<W: Write + Send = Stdout> {
    state: Mutex<JsonState<W>>,
}

struct JsonState<W> {
    out: W,
    buf: Vec<u8>,
    stopped: bool,
    error: Option<String>,
}

impl JsonLines<Stdout> {
    pub fn stdout() -> Self {
        JsonLines::new(io::stdout())
    }
}

impl<W: Write + Send> JsonLines<W> {
    pub fn new(out: W) -> Self {
        let state = JsonState { out, buf: Vec::with_capacity(512), stopped: false, error: None };
        JsonLines { state: Mutex::new(state) }
    }

    /// The first write error other than a closed pipe, if there was one.
    pub fn error(&self) -> Option<String> {
        lock(&self.state).error.clone()
    }

    #[cfg(test)]
    pub fn into_inner(self) -> W {
        self.state.into_inner().unwrap_or_else(PoisonError::into_inner).out
    }
}

impl<W: Write + Send> Observer for JsonLines<W> {
    fn on_event(&self, event: &Event) {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        if state.stopped {
            return;
        }
        state.buf.clear();
        if let Err(e) = serde_json::to_writer(&mut state.buf, event) {
            state.error.get_or_insert_with(|| format!("cannot encode an event: {e}"));
            return;
        }
        state.buf.push(b'\n');
        let written = state.out.write_all(&state.buf).and_then(|()| state.out.flush());
        if let Err(e) = written {
            state.stopped = true;
            if e.kind() != io::ErrorKind::BrokenPipe {
                state.error = Some(format!("cannot write the event stream: {e}"));
            }
        }
    }
}

/// What a human view shows for one event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Note {
    /// A permanent line.
    Line(String),
    /// A step began an attempt.
    Started { step: String },
    /// What a running step is doing now (`file.patch site/style.css`).
    Activity { step: String, text: String },
    /// A step stopped running: drop its spinner and print `line`.
    Stopped { step: String, line: String },
    /// The number of steps in the plan.
    Total(u64),
    /// How many steps have reached a final state.
    Progress(u64),
    /// The run is over.
    End,
}

/// Turns events into [`Note`]s and keeps the little state that needs: step start times, the
/// failed assertion that explains a failure, the count of finished steps.
pub(crate) struct Tracker {
    style: Style,
    total: u64,
    finished: HashSet<String>,
    started: HashMap<String, Instant>,
    failed_assertion: HashMap<String, String>,
    awaiting: HashSet<String>,
}

impl Tracker {
    pub(crate) fn new(style: Style) -> Self {
        Tracker {
            style,
            total: 0,
            finished: HashSet::new(),
            started: HashMap::new(),
            failed_assertion: HashMap::new(),
            awaiting: HashSet::new(),
        }
    }

    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.finished.len() as u64, self.total)
    }

    /// `[3/12]`; `[3 finished]` when the number of steps is not known (a resumed run: steps
    /// finished before it are not counted, so no total is claimed).
    pub(crate) fn count_label(&self) -> String {
        match self.counts() {
            (done, 0) => format!("[{done} finished]"),
            (done, total) => format!("[{done}/{total}]"),
        }
    }

    pub(crate) fn apply(&mut self, event: &Event, now: Instant) -> Vec<Note> {
        let s = self.style;
        match &event.body {
            EventBody::RunStarted { goal, resumed, .. } => {
                let verb = if *resumed { "resuming run" } else { "run" };
                let goal = truncate(&clean(goal), crate::view::style::GOAL_SHOWN).into_owned();
                vec![Note::Line(format!("{} {}: {goal}", s.bold(verb), s.bold(&event.run_id)))]
            }
            EventBody::PlanCreated { steps, .. } => {
                self.total = *steps as u64;
                vec![Note::Total(self.total)]
            }
            EventBody::PlanRevised { version, steps, reason } => {
                self.total = *steps as u64;
                let line = format!(
                    "plan revised (v{version}, {}): {}",
                    plural(*steps, "step"),
                    clean(reason)
                );
                vec![Note::Total(*steps as u64), Note::Line(s.yellow(&line))]
            }
            EventBody::DelegateStarted { step, child_run, mode, scope, .. } => {
                let scope = scope.as_deref().map(|s| format!(", scope {}", clean(s)));
                let line = format!(
                    "  {} delegated to child run {} ({mode} mode{})",
                    clean(step),
                    clean(child_run),
                    scope.unwrap_or_default()
                );
                vec![Note::Line(s.dim(&line))]
            }
            EventBody::DelegateFinished { step, child_run, status, reasons, .. } => {
                let mut line = format!(
                    "  {} child run {} ended {}",
                    clean(step),
                    clean(child_run),
                    pev_engine::status_name(*status)
                );
                if let Some(first) = reasons.first() {
                    line.push_str(&format!(": {}", clean(&first.message)));
                }
                let line = if *status == pev_protocol::run::RunStatus::Success {
                    s.dim(&line)
                } else {
                    s.yellow(&line)
                };
                vec![Note::Line(line)]
            }
            EventBody::StepStarted { step, attempt } => {
                self.started.insert(step.clone(), now);
                let mut notes = Vec::with_capacity(3);
                if self.finished.remove(step) {
                    notes.push(Note::Progress(self.finished.len() as u64));
                }
                notes.push(Note::Started { step: step.clone() });
                if *attempt > 1 {
                    let text = format!("attempt {attempt}");
                    notes.push(Note::Activity { step: step.clone(), text });
                }
                notes
            }
            EventBody::ApprovalRequested { step, tool } => {
                self.awaiting.insert(step.clone());
                let tool = tool.as_deref().map(|t| format!(" ({})", clean(t))).unwrap_or_default();
                let line = format!("? {} waits for approval{tool}", clean(step));
                vec![Note::Line(s.yellow(&line))]
            }
            EventBody::ApprovalGranted { step, by } => {
                self.awaiting.remove(step);
                vec![Note::Line(s.dim(&format!("✓ {} approved by {}", clean(step), clean(by))))]
            }
            EventBody::ToolCalled { step, tool, arguments, .. } => {
                vec![Note::Activity { step: step.clone(), text: activity(tool, arguments) }]
            }
            EventBody::ToolFinished { step, tool, recovered: true, .. } => {
                let line = format!("↺ {}  {} was already applied (recovered)", clean(step), tool);
                vec![Note::Line(s.dim(&line))]
            }
            EventBody::ToolFinished { .. } | EventBody::VerifyFinished { .. } => Vec::new(),
            EventBody::AssertionChecked { step, postcondition, result } => {
                let what = format!("{} {}", result.kind, clean(&result.detail));
                match (step, postcondition) {
                    (Some(step), _) if !result.passed => {
                        let text = format!("assertion {} failed: {}", result.kind, result.detail);
                        self.failed_assertion.insert(step.clone(), text);
                        Vec::new()
                    }
                    (None, Some(post)) => {
                        let post = truncate(&clean(post), 60).into_owned();
                        let line = if result.passed {
                            s.green(&format!("✓ postcondition {post}: {what}"))
                        } else {
                            s.red(&format!("✗ postcondition {post}: {what}"))
                        };
                        vec![Note::Line(line)]
                    }
                    _ => Vec::new(),
                }
            }
            EventBody::StepFinished { step, status, attempts, error, cached } => {
                let finished =
                    Finished { step, status: *status, attempts: *attempts, error, cached: *cached };
                self.step_finished(&finished, now)
            }
            EventBody::Warning { step, message } => {
                let step = step.as_deref().map(|id| format!("{}: ", clean(id))).unwrap_or_default();
                vec![Note::Line(s.yellow(&format!("! {step}{}", clean(message))))]
            }
            EventBody::RunFinished { .. } => vec![Note::End],
            // The running spend is in the summary at the end; an MCP client's events are not
            // part of a run the live view drives.
            EventBody::Usage { .. }
            | EventBody::WorkspaceSnapshot { .. }
            | EventBody::OracleRecorded { .. }
            | EventBody::ClientPlanCall { .. }
            | EventBody::ClientTool { .. }
            | EventBody::GateDecided { .. }
            // The judge's verdict shows in the step's line and in `pev show`.
            | EventBody::JudgeDecided { .. } => Vec::new(),
        }
    }

    fn step_finished(&mut self, finished: &Finished<'_>, now: Instant) -> Vec<Note> {
        let Finished { step, status, attempts, error, cached } = *finished;
        let error = error.as_deref();
        let s = self.style;
        // The engine parks a step that waits for a person as blocked (or pending): not an end.
        let waiting = self.awaiting.contains(step)
            && matches!(status, StepStatus::Blocked | StepStatus::Pending | StepStatus::InProgress);
        let took = self.started.remove(step).map(|t| now.saturating_duration_since(t));
        let took = took.map(|d| format!("  {}", s.dim(&duration(millis(d))))).unwrap_or_default();
        let tries = if attempts > 1 { format!(" (attempt {attempts})") } else { String::new() };
        let id = clean(step);
        let failed_assertion = self.failed_assertion.remove(step);
        let line = match status {
            StepStatus::Done if cached => {
                format!("{} {id}  done {}{took}", s.green("✓"), s.dim("(cached: nothing ran)"))
            }
            StepStatus::Done => format!("{} {id}  done{tries}{took}", s.green("✓")),
            StepStatus::Failed => {
                let why = error.map(str::to_owned).or(failed_assertion);
                let why = why.map(|w| truncate(&clean(&w), 160).into_owned());
                let why = why.unwrap_or_else(|| "no detail".to_owned());
                format!("{} {id}  {}{tries}{took}", s.red("✗"), s.red(&format!("failed: {why}")))
            }
            _ if waiting => {
                format!("{} {id}  {}", s.yellow("⏸"), s.yellow("waiting for approval"))
            }
            StepStatus::Skipped => format!("{} {id}  {}", s.dim("↷"), s.dim("skipped")),
            StepStatus::Blocked => {
                let why =
                    error.map(|e| format!(": {}", truncate(&clean(e), 160))).unwrap_or_default();
                format!("{} {id}  {}", s.yellow("⊘"), s.yellow(&format!("blocked{why}")))
            }
            StepStatus::Pending | StepStatus::InProgress => {
                let state = if status == StepStatus::Pending { "pending" } else { "in progress" };
                let why =
                    error.map(|e| format!(": {}", truncate(&clean(e), 160))).unwrap_or_default();
                format!("{} {id}  {state}{why}", s.dim("·"))
            }
        };
        let mut notes = Vec::with_capacity(2);
        let final_state = matches!(
            status,
            StepStatus::Done | StepStatus::Failed | StepStatus::Skipped | StepStatus::Blocked
        );
        if final_state && !waiting && self.finished.insert(step.to_owned()) {
            notes.push(Note::Progress(self.finished.len() as u64));
        }
        notes.push(Note::Stopped { step: step.to_owned(), line });
        notes
    }
}

/// The fields of a `step.finished` event.
#[derive(Clone, Copy)]
struct Finished<'a> {
    step: &'a str,
    status: StepStatus,
    attempts: u32,
    error: &'a Option<String>,
    cached: bool,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `file.patch site/style.css`: the tool and the argument that says what it touches.
pub(crate) fn activity(tool: &str, arguments: &Value) -> String {
    let arg = |key: &str| arguments.get(key).and_then(Value::as_str);
    let detail = match tool {
        "shell.exec" => arg("command").map(str::to_owned).or_else(|| {
            let argv = arguments.get("argv")?.as_array()?;
            Some(argv.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "))
        }),
        "http.request" => arg("url").map(|url| format!("{} {url}", arg("method").unwrap_or("GET"))),
        _ => arg("path").map(str::to_owned),
    };
    let text = match detail {
        Some(d) => format!("{tool} {d}"),
        None => tool.to_owned(),
    };
    truncate(&clean(&text), 70).into_owned()
}

/// The live view on a terminal: spinners for running steps, permanent lines for finished ones,
/// an overall count. Drawn on stderr so stdout stays clean.
pub struct LiveView {
    multi: MultiProgress,
    state: Mutex<LiveState>,
}

struct LiveState {
    tracker: Tracker,
    spinner: ProgressStyle,
    bars: HashMap<String, ProgressBar>,
    /// The `3/12 steps` line: drawn from the first count of steps on (a resumed run has none:
    /// its lines carry the count of steps finished in this session instead).
    overall: Option<ProgressBar>,
    overall_style: ProgressStyle,
    ended: bool,
    /// While a prompt has the terminal ([`LiveView::suspend`]), events wait here instead of
    /// blocking the engine on indicatif's lock; they are drawn when the prompt is done.
    paused: u32,
    queued: Vec<Event>,
    /// Lines ([`LiveView::note`]) that arrived while a prompt had the terminal.
    queued_notes: Vec<String>,
}

/// indicatif's `{elapsed}` says "1 second"; a step line wants `1.2s`.
fn elapsed_key(state: &ProgressState, w: &mut dyn std::fmt::Write) {
    let _ = w.write_str(&duration(millis(state.elapsed())));
}

/// A running step's line: `⠋ patch-css  file.patch site/style.css  1.2s`.
pub(crate) const SPINNER_PLAIN: &str = "{spinner} {prefix}  {msg}  {secs}";
pub(crate) const SPINNER_COLOR: &str = "{spinner:.cyan} {prefix:.bold}  {msg}  {secs:.dim}";
/// The overall line under the spinners: `3/12 steps  4.1s`.
pub(crate) const OVERALL_PLAIN: &str = "{pos}/{len} steps  {secs}";
pub(crate) const OVERALL_COLOR: &str = "{pos}/{len} steps  {secs:.dim}";

fn template(text: &str) -> ProgressStyle {
    ProgressStyle::with_template(text)
        .map(|t| t.with_key("secs", elapsed_key))
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
}

impl LiveView {
    /// The view on stderr.
    pub fn stderr(style: Style) -> Self {
        LiveView::with_target(ProgressDrawTarget::stderr(), style)
    }

    /// The view on any indicatif draw target (the tests use an in-memory terminal).
    pub fn with_target(target: ProgressDrawTarget, style: Style) -> Self {
        let multi = MultiProgress::with_draw_target(target);
        let (spin, total) = if style.color {
            (SPINNER_COLOR, OVERALL_COLOR)
        } else {
            (SPINNER_PLAIN, OVERALL_PLAIN)
        };
        let state = LiveState {
            tracker: Tracker::new(style),
            spinner: template(spin),
            bars: HashMap::new(),
            overall: None,
            overall_style: template(total),
            ended: false,
            paused: 0,
            queued: Vec::new(),
            queued_notes: Vec::new(),
        };
        LiveView { multi, state: Mutex::new(state) }
    }

    /// Runs `f` with the bars hidden, so it can print (the approval prompt) without garbling
    /// them; they are redrawn afterwards. Events that arrive meanwhile are queued, not drawn,
    /// so running steps never wait for the person to answer.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        lock(&self.state).paused += 1;
        let result = self.multi.suspend(f);
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        state.paused = state.paused.saturating_sub(1);
        if state.paused == 0 {
            for line in std::mem::take(&mut state.queued_notes) {
                self.print_note(state, &line);
            }
            for event in std::mem::take(&mut state.queued) {
                self.apply(state, &event);
            }
        }
        result
    }

    /// Prints `line` above the bars (a model call that keeps the run waiting), so it does not
    /// garble them; queued while a prompt has the terminal, so the caller never waits on a
    /// person.
    pub fn note(&self, line: &str) {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        if state.paused > 0 {
            state.queued_notes.push(line.to_owned());
        } else {
            self.print_note(state, line);
        }
    }

    fn print_note(&self, state: &LiveState, line: &str) {
        if state.ended {
            // No bars left to keep clear of.
            let _ = writeln!(io::stderr().lock(), "{line}");
        } else {
            // A failed println loses one line of a display, nothing more.
            let _ = self.multi.println(line);
        }
    }

    /// Clears every bar (done on `run.finished`, on drop, or by the caller after an error).
    pub fn finish(&self) {
        let mut state = lock(&self.state);
        self.end(&mut state);
    }

    fn end(&self, state: &mut LiveState) {
        if state.ended {
            return;
        }
        state.ended = true;
        for (_, bar) in state.bars.drain() {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
        if let Some(overall) = state.overall.take() {
            overall.finish_and_clear();
            self.multi.remove(&overall);
        }
    }
}

impl Observer for LiveView {
    fn on_event(&self, event: &Event) {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        if state.paused > 0 {
            state.queued.push(event.clone());
        } else {
            self.apply(state, event);
        }
    }
}

impl LiveView {
    fn apply(&self, state: &mut LiveState, event: &Event) {
        if state.ended {
            return;
        }
        for note in state.tracker.apply(event, Instant::now()) {
            match note {
                // A failed println only loses a line of a display; the journal has everything.
                Note::Line(line) => drop(self.multi.println(line)),
                Note::Started { step } => match state.bars.get(&step) {
                    Some(bar) => bar.reset_elapsed(),
                    None => {
                        let bar = ProgressBar::new_spinner()
                            .with_style(state.spinner.clone())
                            .with_prefix(clean(&step).into_owned());
                        let bar = match &state.overall {
                            Some(overall) => self.multi.insert_before(overall, bar),
                            None => self.multi.add(bar),
                        };
                        bar.enable_steady_tick(Duration::from_millis(100));
                        state.bars.insert(step, bar);
                    }
                },
                Note::Activity { step, text } => {
                    if let Some(bar) = state.bars.get(&step) {
                        bar.set_message(text);
                    }
                }
                Note::Stopped { step, line } => {
                    if let Some(bar) = state.bars.remove(&step) {
                        bar.finish_and_clear();
                        self.multi.remove(&bar);
                    }
                    drop(self.multi.println(line));
                }
                Note::Total(n) => match &state.overall {
                    Some(overall) => overall.set_length(n),
                    None => {
                        let bar = ProgressBar::new(n).with_style(state.overall_style.clone());
                        let bar = self.multi.add(bar);
                        bar.enable_steady_tick(Duration::from_millis(250));
                        state.overall = Some(bar);
                    }
                },
                Note::Progress(n) => {
                    if let Some(overall) = &state.overall {
                        overall.set_position(n);
                    }
                }
                Note::End => self.end(state),
            }
        }
    }
}

impl Drop for LiveView {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The same information as [`LiveView`], one line at a time, for a stderr that is not a
/// terminal (CI logs): no spinners, no cursor movement.
pub struct PlainView<W: Write + Send = Stderr> {
    state: Mutex<PlainState<W>>,
}

struct PlainState<W> {
    out: W,
    tracker: Tracker,
    stopped: bool,
}

impl PlainView<Stderr> {
    pub fn stderr(style: Style) -> Self {
        PlainView::new(io::stderr(), style)
    }
}

#[allow(dead_code)] // into_inner() is for the tests
impl<W: Write + Send> PlainView<W> {
    pub fn new(out: W, style: Style) -> Self {
        let state = PlainState { out, tracker: Tracker::new(style), stopped: false };
        PlainView { state: Mutex::new(state) }
    }

    pub fn into_inner(self) -> W {
        self.state.into_inner().unwrap_or_else(PoisonError::into_inner).out
    }
}

impl<W: Write + Send> Observer for PlainView<W> {
    fn on_event(&self, event: &Event) {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        if state.stopped {
            return;
        }
        let mut text = String::new();
        for note in state.tracker.apply(event, Instant::now()) {
            match note {
                Note::Line(line) => {
                    let _ = writeln!(text, "{line}");
                }
                Note::Activity { step, text: what } => {
                    let _ = writeln!(text, "▸ {}  {what}", clean(&step));
                }
                Note::Stopped { line, .. } => {
                    let _ = writeln!(text, "{line}  {}", state.tracker.count_label());
                }
                Note::Started { .. } | Note::Total(_) | Note::Progress(_) | Note::End => {}
            }
        }
        if !text.is_empty() && state.out.write_all(text.as_bytes()).is_err() {
            // Nowhere left to report to: stop writing, the run goes on and is journaled.
            state.stopped = true;
        }
    }
}

#[cfg(test)]
#[path = "run_view_tests.rs"]
mod tests;
