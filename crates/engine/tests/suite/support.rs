//! Shared fixtures: a workspace and a journal in a temporary directory, test tools that record
//! when they ran and how often, an observer that keeps every event, a scripted approver, and
//! helpers to run and resume a plan the way the CLI does.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pev_engine::{
    Approval, ApprovalMode, ApprovalRequest, Approver, Cancel, Engine, EngineConfig, EngineError,
    Observer, ResumeInput, RunInput,
};
use pev_protocol::Plan;
use pev_protocol::event::{Event, EventBody, now_rfc3339};
use pev_protocol::run::{ReasonCode, RunResult, StepResult};
use pev_protocol::tool::Effect;
use pev_store::{Journal, NewRun, Store};
use pev_tools::builtin::file_write::FileWrite;
use pev_tools::{BoxFuture, Registry, Tool, ToolContext, ToolError, Workspace};
use serde_json::{Value, json};
use tempfile::TempDir;

/// When one call of `test.sleep` ran.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub start: Instant,
    pub end: Instant,
}

/// What the test tools saw: spans of sleeps, how many ran at once, calls per key.
#[derive(Debug, Default)]
pub struct Probe {
    spans: Mutex<HashMap<String, Span>>,
    running: AtomicUsize,
    max_running: AtomicUsize,
    calls: Mutex<HashMap<String, u32>>,
}

impl Probe {
    pub fn span(&self, key: &str) -> Span {
        *self.spans.lock().unwrap().get(key).unwrap_or_else(|| panic!("no span for `{key}`"))
    }

    pub fn has_span(&self, key: &str) -> bool {
        self.spans.lock().unwrap().contains_key(key)
    }

    pub fn max_running(&self) -> usize {
        self.max_running.load(Ordering::SeqCst)
    }

    /// How many times a test tool was called with this `key` argument.
    pub fn calls(&self, key: &str) -> u32 {
        self.calls.lock().unwrap().get(key).copied().unwrap_or(0)
    }

    /// Counts a call; returns the count including this one.
    fn count(&self, key: &str) -> u32 {
        let mut calls = self.calls.lock().unwrap();
        let n = calls.entry(key.to_owned()).or_insert(0);
        *n += 1;
        *n
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `{key, ms}`: sleeps, records its span and the concurrency.
    Sleep,
    /// Always fails (told to the model).
    Fail,
    /// `{key, fail_times, ms?}`: fails the first `fail_times` calls per key (after `ms`).
    Flaky,
    /// Returns its arguments.
    Echo,
    /// Counts calls per `key`, returns the count.
    Count,
    /// `file.write` under another name, counting calls per `path`.
    Write,
    /// Reads the journal from another connection while the call is under way: returns the
    /// journaled status of its own call and of its step, proof that the intent was on disk.
    Peek,
}

struct TestTool {
    name: &'static str,
    effect: Effect,
    kind: Kind,
    /// Says it works in pev itself, as the `file.*` tools do (`test.nap`).
    in_process: bool,
    probe: Arc<Probe>,
    db: PathBuf,
}

fn fatal(e: impl std::fmt::Display) -> ToolError {
    ToolError::Fatal(e.to_string())
}

fn key_of(args: &Value) -> String {
    args.get("key").and_then(Value::as_str).unwrap_or("").to_owned()
}

impl TestTool {
    async fn run(&self, ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let key = key_of(&args);
        match self.kind {
            Kind::Sleep => {
                let ms = args.get("ms").and_then(Value::as_u64).ok_or_else(|| {
                    ToolError::RespondToModel(format!("`ms` must be a number, got {}", args["ms"]))
                })?;
                self.probe.count(&key);
                let now = self.probe.running.fetch_add(1, Ordering::SeqCst) + 1;
                self.probe.max_running.fetch_max(now, Ordering::SeqCst);
                let start = Instant::now();
                tokio::time::sleep(Duration::from_millis(ms)).await;
                let end = Instant::now();
                self.probe.running.fetch_sub(1, Ordering::SeqCst);
                self.probe.spans.lock().unwrap().insert(key.clone(), Span { start, end });
                Ok(json!({"key": key, "ms": ms}))
            }
            Kind::Fail => {
                self.probe.count(&key);
                Err(ToolError::RespondToModel(format!("deliberate failure of `{key}`")))
            }
            Kind::Flaky => {
                let fail_times = args.get("fail_times").and_then(Value::as_u64).unwrap_or(0);
                if let Some(ms) = args.get("ms").and_then(Value::as_u64) {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                let n = self.probe.count(&key);
                if u64::from(n) <= fail_times {
                    Err(ToolError::RespondToModel(format!("flaky failure {n}")))
                } else {
                    Ok(json!({"key": key, "calls": n}))
                }
            }
            Kind::Echo => {
                self.probe.count(&key);
                Ok(args)
            }
            Kind::Count => Ok(json!({"count": self.probe.count(&key)})),
            Kind::Write => {
                let path = args.get("path").and_then(Value::as_str).unwrap_or("").to_owned();
                self.probe.count(&path);
                FileWrite.call(ctx, args).await
            }
            Kind::Peek => {
                let store = Store::open_existing(&self.db).map_err(fatal)?;
                let runs = store.list_runs().map_err(fatal)?;
                let run = store.load_run(&runs[0].run_id).map_err(fatal)?;
                let call = run.tool_calls.iter().find(|c| c.arguments == args);
                let state = run.steps.iter().find(|s| Some(&s.step_id) == call.map(|c| &c.step_id));
                Ok(json!({
                    "call": call.map(|c| c.status.as_str()),
                    "step": state.map(|s| s.status),
                    "intended": call.and_then(|c| c.intended_sha256.clone()),
                }))
            }
        }
    }
}

impl Tool for TestTool {
    fn name(&self) -> &'static str {
        self.name
    }
    fn effect(&self) -> Effect {
        self.effect
    }
    fn in_process(&self) -> bool {
        self.in_process
    }
    fn description(&self) -> &'static str {
        "a tool for pev-engine's tests"
    }
    fn parameters_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(self.run(ctx, args))
    }
}

/// The built-ins plus the test tools, all reporting to `probe`; `test.peek` reads `db`.
pub fn registry(probe: &Arc<Probe>, db: &std::path::Path) -> Registry {
    let mut registry = Registry::builtin();
    let tools = [
        ("test.sleep", Effect::Read, Kind::Sleep),
        ("test.fail", Effect::Read, Kind::Fail),
        ("test.flaky", Effect::Read, Kind::Flaky),
        ("test.echo", Effect::Read, Kind::Echo),
        ("test.count", Effect::Write, Kind::Count),
        ("test.exec", Effect::Exec, Kind::Count),
        ("test.write", Effect::Write, Kind::Write),
        ("test.peek", Effect::Write, Kind::Peek),
        // `test.sleep` as a light step (what the scheduler takes a file step for).
        ("test.nap", Effect::Read, Kind::Sleep),
    ];
    for (name, effect, kind) in tools {
        let in_process = name == "test.nap";
        let (probe, db) = (Arc::clone(probe), db.to_path_buf());
        let tool = TestTool { name, effect, kind, in_process, probe, db };
        registry.register(Arc::new(tool)).unwrap();
    }
    registry
}

/// When the [`Collector`] raises a [`Cancel`]: on the event named `event` of step `step`.
struct CancelOn {
    event: &'static str,
    step: String,
    cancel: Arc<Cancel>,
}

/// Keeps every event; optionally raises a [`Cancel`] on a given event, the way Ctrl-C would
/// arrive at that moment.
#[derive(Default)]
pub struct Collector {
    events: Mutex<Vec<Event>>,
    cancel_on: Mutex<Option<CancelOn>>,
}

impl Collector {
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }

    /// Cancel when `step` sends `event` (`step.started`, `step.finished`, `tool.called`).
    pub fn cancel_on(&self, event: &'static str, step: &str, cancel: &Arc<Cancel>) {
        *self.cancel_on.lock().unwrap() =
            Some(CancelOn { event, step: step.to_owned(), cancel: Arc::clone(cancel) });
    }
}

fn step_of(body: &EventBody) -> Option<&str> {
    match body {
        EventBody::StepStarted { step, .. }
        | EventBody::StepFinished { step, .. }
        | EventBody::ToolCalled { step, .. }
        | EventBody::ToolFinished { step, .. } => Some(step),
        _ => None,
    }
}

impl Observer for Collector {
    fn on_event(&self, event: &Event) {
        self.events.lock().unwrap().push(event.clone());
        if let Some(on) = &*self.cancel_on.lock().unwrap()
            && event.body.name() == on.event
            && step_of(&event.body) == Some(on.step.as_str())
        {
            on.cancel.cancel();
        }
    }
}

/// Answers approval requests from a script (then `Defer`), keeping the requests.
#[derive(Default)]
pub struct ScriptedApprover {
    answers: Mutex<VecDeque<Approval>>,
    pub requests: Mutex<Vec<ApprovalRequest>>,
}

impl ScriptedApprover {
    pub fn new(answers: &[Approval]) -> Arc<Self> {
        Arc::new(Self { answers: Mutex::new(answers.iter().copied().collect()), ..Self::default() })
    }
}

impl Approver for ScriptedApprover {
    fn decide(&self, request: &ApprovalRequest) -> Approval {
        self.requests.lock().unwrap().push(request.clone());
        self.answers.lock().unwrap().pop_front().unwrap_or(Approval::Defer)
    }
}

/// A run's settings: `jobs` at once (file steps too), approval deferred, no approve_tools.
pub fn config(jobs: usize) -> EngineConfig {
    EngineConfig {
        jobs,
        light_jobs: jobs,
        approval: ApprovalMode::Defer,
        approve_tools: Vec::new(),
        cancel: Arc::new(Cancel::default()),
        models: None,
        final_events: true,
        cache: false,
        hooks: None,
        activity: None,
        write_locks: None,
        oracle: Some(pev_protocol::oracle::OracleSettings::default()),
        plan_from_user: true,
        permit_goal: None,
    }
}

/// A workspace (`ws/`) and a journal (`pev.db`) in one temporary directory.
pub struct Harness {
    _dir: TempDir,
    pub root: PathBuf,
    pub db: PathBuf,
    pub probe: Arc<Probe>,
    pub observer: Arc<Collector>,
}

impl Harness {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        let db = dir.path().join("pev.db");
        Self { _dir: dir, root, db, probe: Arc::default(), observer: Arc::default() }
    }

    pub fn engine(&self, config: EngineConfig) -> Engine {
        let workspace = Workspace::open(&self.root).unwrap();
        Engine {
            registry: Arc::new(registry(&self.probe, &self.db)),
            ctx: Arc::new(ToolContext::new(workspace)),
            observer: Arc::clone(&self.observer) as Arc<dyn Observer>,
            config,
        }
    }

    pub fn store(&self) -> Store {
        Store::open(&self.db).unwrap()
    }

    /// Creates the run in the store (status running, plan version 1); returns its id and plan.
    pub fn create(&self, plan: &Value) -> (String, Plan) {
        let parsed: Plan = serde_json::from_value(plan.clone()).unwrap();
        let run_id = pev_store::new_run_id();
        self.store()
            .create_run(&NewRun {
                run_id: run_id.clone(),
                goal: parsed.goal.clone(),
                workspace: self.root.display().to_string(),
                plan: plan.clone(),
                options: json!({}),
                created_at: now_rfc3339(),
            })
            .unwrap();
        (run_id, parsed)
    }

    /// Runs `plan` to its end; the journal is closed when this returns.
    pub async fn run(&self, plan: Value, config: EngineConfig) -> RunResult {
        self.try_run(plan, config).await.unwrap()
    }

    /// Runs `plan`, returning the engine's error if it refuses to.
    pub async fn try_run(
        &self,
        plan: Value,
        config: EngineConfig,
    ) -> Result<RunResult, EngineError> {
        let (run_id, plan) = self.create(&plan);
        let journal = Journal::start(&self.db).unwrap();
        let engine = self.engine(config);
        let input = RunInput { run_id, plan, journal: journal.clone() };
        let result = engine.run(input).await;
        journal.close().unwrap();
        result
    }

    /// Resumes `run_id` as `pev resume` does: blobs and earlier warnings from the store.
    pub async fn resume(&self, run_id: &str, config: EngineConfig) -> RunResult {
        let store = self.store();
        let record = store.load_run(run_id).unwrap();
        let mut blobs = HashMap::new();
        for sha in ResumeInput::blobs_needed(&record) {
            if let Some(content) = store.blob(&sha).unwrap() {
                blobs.insert(sha, content);
            }
        }
        let warnings = store
            .events(run_id)
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.body {
                EventBody::Warning { message, .. } => Some(message),
                _ => None,
            })
            .collect();
        drop(store);
        let journal = Journal::start(&self.db).unwrap();
        let engine = self.engine(config);
        let input = ResumeInput {
            record,
            journal: journal.clone(),
            blobs,
            warnings,
            prior_usage: None,
            revision: None,
        };
        let result = engine.resume(input).await.unwrap();
        journal.close().unwrap();
        result
    }

    pub fn write(&self, path: &str, content: &str) {
        let full = self.root.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(full, content).unwrap();
    }

    /// The tool names of the `tool.called` events, in order.
    pub fn called_tools(&self) -> Vec<String> {
        self.observer
            .events()
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::ToolCalled { tool, .. } => Some(tool.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.root.join(path)).unwrap()
    }
}

/// The step called `id` in a result.
pub fn step<'a>(result: &'a RunResult, id: &str) -> &'a StepResult {
    result.steps.iter().find(|s| s.id == id).unwrap_or_else(|| panic!("no step `{id}`"))
}

/// The reasons as (code, step) pairs, in order.
pub fn codes(result: &RunResult) -> Vec<(ReasonCode, Option<&str>)> {
    result.reasons.iter().map(|r| (r.code, r.step.as_deref())).collect()
}

/// The message of the first reason with `code`.
pub fn reason_message(result: &RunResult, code: ReasonCode) -> &str {
    result
        .reasons
        .iter()
        .find(|r| r.code == code)
        .map(|r| r.message.as_str())
        .unwrap_or_else(|| panic!("no reason {code:?} in {:?}", result.reasons))
}

/// The `error` of the `step.finished` event of `step` (the last one).
pub fn finished_error(events: &[Event], step: &str) -> Option<String> {
    events.iter().rev().find_map(|e| match &e.body {
        EventBody::StepFinished { step: s, error, .. } if s == step => Some(error.clone()),
        _ => None,
    })?
}

/// The messages of all `warning` events.
pub fn warnings(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Warning { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// A plan of `steps` with a neutral goal (one that does not ask for a change).
pub fn plan(steps: Value) -> Value {
    let mut plan = json!({"goal": "engine test"});
    plan["steps"] = steps;
    plan
}
