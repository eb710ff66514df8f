//! A run's journal as OpenTelemetry spans, following the GenAI semantic conventions (schema
//! 1.42, development status). Pure: the same journal gives the same spans, ids included, so a
//! run exported twice is one trace, and a live export and a replay agree.
//!
//! The tree:
//!
//! ```text
//! invoke_agent pev                      the run (gen_ai.conversation.id = run id)
//! ├── plan                              one per plan version
//! │   └── chat {model}                  the planner's calls that wrote it
//! ├── step {id}                         one per attempt
//! │   ├── chat {model}                  the executor's calls
//! │   ├── execute_tool {tool}           each tool call
//! │   └── verify {id}                   assertions and the judge, as gen_ai.evaluation.result
//! │       └── chat {model}              the judge's calls
//! └── verify run                        postconditions and the final re-check
//! ```
//!
//! Times are the journal's. Content (the goal, tool arguments and outputs, the plan) is left
//! out unless [`Options::capture_content`] is set, and then cut to a byte cap.

use std::collections::HashMap;

use pev_protocol::event::{Event, EventBody, epoch_ms};
use pev_protocol::run::{RunResult, RunStatus};
use pev_store::ModelCallRecord;
use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use crate::span::{Attributes, Kind, Span, SpanEvent, SpanId, Status, TraceId, Value};

/// The semantic conventions the spans follow.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.42.0";

/// What the mapping includes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The goal, tool arguments and outputs, plans and judge feedback (off by default: they
    /// may hold what a backend should not).
    pub capture_content: bool,
    /// The most bytes of one captured value.
    pub max_content_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self { capture_content: false, max_content_bytes: 8 * 1024 }
    }
}

/// One run, as the journal holds it.
#[derive(Debug, Clone, Copy)]
pub struct RunJournal<'a> {
    pub run_id: &'a str,
    /// In sequence order.
    pub events: &'a [Event],
    /// In the order they were journaled.
    pub model_calls: &'a [ModelCallRecord],
    /// Every plan version: `(version, plan)`.
    pub plans: &'a [(u32, Json)],
    /// For a child run (a delegated step's): its parent run. Its spans join the trace of the
    /// tree's top run, under the parent's `delegate` span.
    pub parent: Option<&'a str>,
}

/// The top run of `run_id`'s tree: a child's id is `PARENT.STEP.ATTEMPT`, and a top-level id
/// has no dot.
pub fn tree_root(run_id: &str) -> &str {
    run_id.split('.').next().unwrap_or(run_id)
}

/// The id of the parent's span for child run `child`: where the child's root span hangs.
pub fn delegate_span_id(parent: &str, child: &str) -> SpanId {
    span_id(parent, &format!("delegate:{child}"))
}

/// The trace id of run `run_id`: the first 16 bytes of a SHA-256 of it.
pub fn trace_id(run_id: &str) -> TraceId {
    let digest = Sha256::digest(format!("pev trace\0{run_id}"));
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id
}

/// The id of the span `key` names in run `run_id`.
fn span_id(run_id: &str, key: &str) -> SpanId {
    let digest = Sha256::digest(format!("pev span\0{run_id}\0{key}"));
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    id
}

/// Maps a run's journal to its spans, the root first.
pub fn map_run(run: &RunJournal<'_>, options: &Options) -> Vec<Span> {
    Mapper::new(run, options).map()
}

/// A step attempt's span, while the mapping builds it.
struct Attempt {
    step: String,
    attempt: u32,
    /// The `step.started` event's sequence number: a resumed run can start the same attempt
    /// number of a step again, and each start is a span of its own.
    seq: u64,
    span: Span,
    /// Its verification span, once something verified it.
    verify: Option<Span>,
}

struct Mapper<'a> {
    run: &'a RunJournal<'a>,
    options: &'a Options,
    trace: TraceId,
    root: SpanId,
    /// The latest time the journal knows.
    last_ms: u64,
    sandbox: Option<String>,
    /// Tool name of each step id, from the plan versions.
    tools: HashMap<String, String>,
}

impl<'a> Mapper<'a> {
    fn new(run: &'a RunJournal<'a>, options: &'a Options) -> Self {
        let mut tools = HashMap::new();
        for (_, plan) in run.plans {
            for step in plan.get("steps").and_then(Json::as_array).into_iter().flatten() {
                if let (Some(id), Some(tool)) =
                    (step.get("id").and_then(Json::as_str), step.get("tool").and_then(Json::as_str))
                {
                    tools.insert(id.to_owned(), tool.to_owned());
                }
            }
        }
        let event_times = run.events.iter().filter_map(|e| epoch_ms(&e.at));
        let call_ends = run.model_calls.iter().filter_map(call_end);
        let last_ms = event_times.chain(call_ends).max().unwrap_or(0);
        let sandbox = run.events.iter().find_map(|e| match &e.body {
            EventBody::RunStarted { sandbox: Some(s), .. } => {
                s.get("level").and_then(Json::as_str).map(str::to_owned)
            }
            _ => None,
        });
        // A child run's spans are part of its tree's trace.
        let trace = match run.parent {
            Some(_) => trace_id(tree_root(run.run_id)),
            None => trace_id(run.run_id),
        };
        Self { run, options, trace, root: span_id(run.run_id, "run"), last_ms, sandbox, tools }
    }

    /// An internal span (a model call's is made a client span by its caller).
    fn span(&self, key: &str, parent: SpanId, name: String, start_ms: u64) -> Span {
        Span {
            trace_id: self.trace,
            span_id: span_id(self.run.run_id, key),
            parent: Some(parent),
            name,
            kind: Kind::Internal,
            start_ms,
            end_ms: start_ms,
            attributes: Vec::new(),
            events: Vec::new(),
            status: Status::Unset,
            open: false,
        }
    }

    /// `text` if content is captured, cut to the cap on a character boundary.
    fn content(&self, text: &str) -> Option<String> {
        if !self.options.capture_content {
            return None;
        }
        let cap = self.options.max_content_bytes;
        if text.len() <= cap {
            return Some(text.to_owned());
        }
        let mut end = cap;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        Some(format!("{}…[{} bytes cut]", &text[..end], text.len() - end))
    }

    /// An error status: its message when content is captured, else `fallback` (a tool's or a
    /// model's error can quote files and prompts).
    fn status(&self, message: &str, fallback: &str) -> Status {
        Status::Error(self.content(message).unwrap_or_else(|| fallback.to_owned()))
    }

    fn map(&self) -> Vec<Span> {
        let mut root = self.root_span();
        let mut plans: Vec<Span> = Vec::new();
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut tools: Vec<Span> = Vec::new();
        let mut open_tools: HashMap<&str, usize> = HashMap::new();
        let mut run_verify: Option<Span> = None;
        let mut delegations: Vec<Span> = Vec::new();
        for event in self.run.events {
            let Some(at) = epoch_ms(&event.at) else { continue };
            match &event.body {
                EventBody::PlanCreated { version, steps }
                | EventBody::PlanRevised { version, steps, .. } => {
                    let mut span =
                        self.span(&format!("plan:{version}"), self.root, "plan".to_owned(), at);
                    span.attributes.push(("pev.plan.version".into(), (*version).into()));
                    span.attributes.push(("pev.plan.steps".into(), (*steps as u64).into()));
                    if let EventBody::PlanRevised { reason, .. } = &event.body
                        && let Some(text) = self.content(reason)
                    {
                        span.attributes.push(("pev.plan.reason".into(), text.into()));
                    }
                    if let Some((_, plan)) = self.run.plans.iter().find(|(v, _)| v == version)
                        && let Some(text) = self.content(&plan.to_string())
                    {
                        span.attributes.push(("gen_ai.output.messages".into(), text.into()));
                    }
                    plans.push(span);
                }
                EventBody::StepStarted { step, attempt } => {
                    close_attempt(&mut attempts, step, at, None);
                    let mut span = self.span(
                        &format!("step:{step}:{attempt}:{}", event.seq),
                        self.root,
                        format!("step {step}"),
                        at,
                    );
                    span.open = true;
                    span.attributes.push(("pev.step.id".into(), step.as_str().into()));
                    span.attributes.push(("pev.step.attempt".into(), (*attempt).into()));
                    if let Some(tool) = self.tools.get(step) {
                        span.attributes.push(("pev.step.tool".into(), tool.as_str().into()));
                    }
                    attempts.push(Attempt {
                        step: step.clone(),
                        attempt: *attempt,
                        seq: event.seq,
                        span,
                        verify: None,
                    });
                }
                EventBody::DelegateStarted { step, attempt, child_run, mode, depth, .. } => {
                    let parent =
                        current_attempt(&attempts, step).map_or(self.root, |a| a.span.span_id);
                    let mut span = self.span(
                        &format!("delegate:{child_run}"),
                        parent,
                        format!("invoke_agent {child_run}"),
                        at,
                    );
                    span.span_id = delegate_span_id(self.run.run_id, child_run);
                    span.open = true;
                    let attrs = &mut span.attributes;
                    attrs.push(("gen_ai.operation.name".into(), "invoke_agent".into()));
                    attrs.push(("gen_ai.agent.name".into(), "pev".into()));
                    attrs.push(("pev.child_run.id".into(), child_run.as_str().into()));
                    attrs.push(("pev.step.id".into(), step.as_str().into()));
                    attrs.push(("pev.step.attempt".into(), (*attempt).into()));
                    attrs.push(("pev.delegate.mode".into(), mode.as_str().into()));
                    attrs.push(("pev.delegate.depth".into(), (*depth).into()));
                    // A resumed parent starts the same child again: one span.
                    delegations.retain(|d| d.span_id != span.span_id);
                    delegations.push(span);
                }
                EventBody::DelegateFinished { child_run, status, .. } => {
                    let id = delegate_span_id(self.run.run_id, child_run);
                    if let Some(span) = delegations.iter_mut().find(|d| d.span_id == id) {
                        span.end_ms = at.max(span.start_ms);
                        span.open = false;
                        let word = serde_json::to_value(status)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default();
                        span.attributes.push(("pev.run.status".into(), word.as_str().into()));
                        if word != "success" {
                            span.status = Status::Error(format!("the child run ended {word}"));
                        }
                    }
                }
                EventBody::StepFinished { step, status, error, .. } => {
                    let word = serde_json::to_value(status)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    let error = error.as_deref().and_then(|e| self.content(e));
                    close_attempt(&mut attempts, step, at, Some((&word, error.as_deref())));
                }
                EventBody::ToolCalled { step, call_id, tool, effect, arguments } => {
                    let parent =
                        current_attempt(&attempts, step).map_or(self.root, |a| a.span.span_id);
                    let mut span = self.span(
                        &format!("tool:{call_id}"),
                        parent,
                        format!("execute_tool {tool}"),
                        at,
                    );
                    span.open = true;
                    let attrs = &mut span.attributes;
                    attrs.push(("gen_ai.operation.name".into(), "execute_tool".into()));
                    attrs.push(("gen_ai.tool.name".into(), tool.as_str().into()));
                    attrs.push(("gen_ai.tool.call.id".into(), call_id.as_str().into()));
                    attrs.push(("gen_ai.tool.type".into(), "function".into()));
                    let effect = serde_json::to_value(effect).ok();
                    if let Some(effect) = effect.as_ref().and_then(Json::as_str) {
                        attrs.push(("pev.tool.effect".into(), effect.into()));
                    }
                    if let Some(level) = &self.sandbox {
                        attrs.push(("pev.sandbox".into(), level.as_str().into()));
                    }
                    if let Some(text) = self.content(&arguments.to_string()) {
                        attrs.push(("gen_ai.tool.call.arguments".into(), text.into()));
                    }
                    open_tools.insert(call_id.as_str(), tools.len());
                    tools.push(span);
                }
                EventBody::ToolFinished { call_id, ok, output, error, recovered, .. } => {
                    let Some(i) = open_tools.remove(call_id.as_str()) else { continue };
                    let span = &mut tools[i];
                    span.end_ms = at.max(span.start_ms);
                    span.open = false;
                    if *recovered {
                        span.attributes.push(("pev.tool.recovered".into(), true.into()));
                    }
                    if let Some(text) = output.as_ref().and_then(|o| self.content(&o.to_string())) {
                        span.attributes.push(("gen_ai.tool.call.result".into(), text.into()));
                    }
                    if !ok {
                        span.attributes.push(("error.type".into(), "tool_error".into()));
                        span.status = self
                            .status(error.as_deref().unwrap_or_default(), "the tool call failed");
                    }
                }
                EventBody::AssertionChecked { step, result, postcondition } => {
                    // A step's evidence checked again after the step ended (the final re-check)
                    // belongs to the run's verification, not to a span already closed.
                    let running = step.as_deref().filter(|id| {
                        attempts.iter().rev().find(|a| a.step == *id).is_some_and(|a| a.span.open)
                    });
                    let verify = match running {
                        Some(step) => self.verify_of(&mut attempts, step, at),
                        None => Some(run_verify.get_or_insert_with(|| self.run_verify(at))),
                    };
                    let Some(verify) = verify else { continue };
                    let mut attrs: Attributes = vec![
                        ("gen_ai.evaluation.name".into(), result.kind.as_str().into()),
                        (
                            "gen_ai.evaluation.score.label".into(),
                            if result.passed { "pass" } else { "fail" }.into(),
                        ),
                        (
                            "gen_ai.evaluation.score.value".into(),
                            f64::from(u8::from(result.passed)).into(),
                        ),
                    ];
                    if let Some(text) = self.content(&result.detail) {
                        attrs.push(("gen_ai.evaluation.explanation".into(), text.into()));
                    }
                    if let Some(step) = step.as_deref().filter(|_| running.is_none()) {
                        attrs.push(("pev.step.id".into(), step.into()));
                    }
                    if let Some(pc) = postcondition.as_deref().and_then(|p| self.content(p)) {
                        attrs.push(("pev.postcondition".into(), pc.into()));
                    }
                    evaluate(verify, at, attrs, !result.passed);
                }
                EventBody::JudgeDecided {
                    step,
                    attempt,
                    pass,
                    confidence,
                    outcome,
                    feedback,
                    answers,
                } => {
                    let Some(verify) = self.verify_of(&mut attempts, step, at) else { continue };
                    for answer in answers {
                        let attrs: Attributes = vec![
                            ("gen_ai.evaluation.name".into(), "pev.judge.question".into()),
                            (
                                "gen_ai.evaluation.score.label".into(),
                                if answer.yes { "yes" } else { "no" }.into(),
                            ),
                            ("gen_ai.evaluation.score.value".into(), answer.confidence.into()),
                        ];
                        let mut attrs = attrs;
                        if let Some(text) = self.content(&answer.question) {
                            attrs.push(("gen_ai.evaluation.explanation".into(), text.into()));
                        }
                        evaluate(verify, at, attrs, false);
                    }
                    let mut attrs: Attributes = vec![
                        ("gen_ai.evaluation.name".into(), "pev.judge".into()),
                        ("gen_ai.evaluation.score.label".into(), outcome.as_str().into()),
                        ("gen_ai.evaluation.score.value".into(), (*confidence).into()),
                        ("pev.step.attempt".into(), (*attempt).into()),
                    ];
                    if let Some(text) = self.content(feedback).filter(|t| !t.is_empty()) {
                        attrs.push(("gen_ai.evaluation.explanation".into(), text.into()));
                    }
                    let judge_call = self.run.model_calls.iter().rev().find(|c| {
                        c.role == "verifier"
                            && c.step_id.as_deref() == Some(step.as_str())
                            && c.attempt == Some(*attempt)
                    });
                    if let Some(id) = judge_call.and_then(|c| c.response_id.as_deref()) {
                        attrs.push(("gen_ai.response.id".into(), id.into()));
                    }
                    evaluate(verify, at, attrs, !pass && outcome == "failed");
                }
                EventBody::RunFinished { result } => self.finish_root(&mut root, result, at),
                // A run resumed after it finished (it waited for approval) is going again.
                EventBody::RunStarted { resumed: true, .. } => root.open = true,
                _ => {}
            }
        }
        // The final re-check: how much was checked again (what regressed came as assertions).
        if let Some(rechecked) = final_check(self.run.events) {
            let verify = run_verify.get_or_insert_with(|| self.run_verify(root.end_ms));
            verify.attributes.push(("pev.final_check.rechecked".into(), rechecked.into()));
        }
        // Still open: ends at the latest time the journal knows.
        for a in &mut attempts {
            if a.span.open {
                a.span.end_ms = self.last_ms.max(a.span.start_ms);
            }
        }
        for t in &mut tools {
            if t.open {
                t.end_ms = self.last_ms.max(t.start_ms);
            }
        }
        let chats = self.chat_spans(&mut plans, &mut attempts, root.open);
        // A verification can still grow while its attempt runs, and the run's while the run does.
        for a in &mut attempts {
            if let Some(verify) = &mut a.verify {
                verify.open = a.span.open;
            }
        }
        if let Some(verify) = &mut run_verify {
            verify.open = root.open;
        }
        if root.open {
            root.end_ms = self.last_ms.max(root.start_ms);
        }
        let mut out = vec![root];
        out.extend(plans);
        for a in attempts {
            out.push(a.span);
            out.extend(a.verify);
        }
        out.extend(tools);
        out.extend(delegations);
        out.extend(chats);
        out.extend(run_verify);
        out
    }

    fn root_span(&self) -> Span {
        let first_event = self.run.events.iter().find_map(|e| epoch_ms(&e.at));
        let first_call = self.run.model_calls.iter().filter_map(|c| epoch_ms(&c.started_at)).min();
        let start = first_event.into_iter().chain(first_call).min().unwrap_or(0);
        let mut span = self.span("run", self.root, "invoke_agent pev".to_owned(), start);
        span.span_id = self.root;
        span.parent = self.run.parent.map(|parent| delegate_span_id(parent, self.run.run_id));
        span.open = true;
        let attrs = &mut span.attributes;
        attrs.push(("gen_ai.operation.name".into(), "invoke_agent".into()));
        attrs.push(("gen_ai.agent.name".into(), "pev".into()));
        attrs.push(("gen_ai.conversation.id".into(), self.run.run_id.into()));
        attrs.push(("pev.run.id".into(), self.run.run_id.into()));
        let goal = self.run.events.iter().find_map(|e| match &e.body {
            EventBody::RunStarted { goal, .. } => Some(goal.as_str()),
            _ => None,
        });
        if let Some(text) = goal.and_then(|g| self.content(g)) {
            attrs.push(("gen_ai.input.messages".into(), text.into()));
        }
        if let Some(level) = &self.sandbox {
            attrs.push(("pev.sandbox".into(), level.as_str().into()));
        }
        span
    }

    /// The run's outcome on the root span. The last `run.finished` wins (a resumed run
    /// finishes again).
    fn finish_root(&self, root: &mut Span, result: &RunResult, at: u64) {
        root.end_ms = at.max(root.start_ms);
        root.open = false;
        root.attributes.retain(|(k, _)| !k.starts_with("pev.run.") || k == "pev.run.id");
        root.attributes.retain(|(k, _)| !k.starts_with("gen_ai.usage.") && k != "error.type");
        let status = serde_json::to_value(result.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let u = &result.usage;
        let attrs = &mut root.attributes;
        attrs.push(("pev.run.status".into(), status.as_str().into()));
        attrs.push(("pev.run.cost_usd".into(), u.cost_usd.into()));
        attrs.push(("pev.run.model_calls".into(), u.llm_calls.into()));
        attrs.push(("pev.run.tool_calls".into(), u.tool_calls.into()));
        attrs.push(("gen_ai.usage.input_tokens".into(), u.input_tokens.into()));
        attrs.push(("gen_ai.usage.output_tokens".into(), u.output_tokens.into()));
        let codes: Vec<String> = result
            .reasons
            .iter()
            .filter_map(|r| serde_json::to_value(r.code).ok()?.as_str().map(str::to_owned))
            .collect();
        if !codes.is_empty() {
            attrs.push(("pev.run.reasons".into(), Value::StrArray(codes)));
        }
        root.status = match result.status {
            RunStatus::Success | RunStatus::AwaitingApproval => Status::Unset,
            _ => {
                attrs.push(("error.type".into(), status.as_str().into()));
                let first = result.reasons.first().map_or(status.as_str(), |r| r.message.as_str());
                self.status(first, &format!("the run ended {status}"))
            }
        };
    }

    fn run_verify(&self, at: u64) -> Span {
        let mut span = self.span("verify:run", self.root, "verify run".to_owned(), at);
        span.attributes.push(("pev.verify.of".into(), "postconditions".into()));
        span
    }

    /// The verification span of `step`'s current attempt, created on first use.
    fn verify_of<'m>(
        &self,
        attempts: &'m mut [Attempt],
        step: &str,
        at: u64,
    ) -> Option<&'m mut Span> {
        let a = attempts.iter_mut().rev().find(|a| a.step == step)?;
        let parent = a.span.span_id;
        let key = format!("verify:{}:{}:{}", a.step, a.attempt, a.seq);
        let attempt = a.attempt;
        Some(a.verify.get_or_insert_with(|| {
            let mut span = self.span(&key, parent, format!("verify {step}"), at);
            span.attributes.push(("pev.step.id".into(), step.into()));
            span.attributes.push(("pev.step.attempt".into(), attempt.into()));
            span
        }))
    }

    /// One `chat {model}` span per model call, under the plan, step attempt or verification it
    /// was made for.
    fn chat_spans(
        &self,
        plans: &mut [Span],
        attempts: &mut [Attempt],
        run_open: bool,
    ) -> Vec<Span> {
        let mut out = Vec::new();
        let mut orphan_planner = false;
        for call in self.run.model_calls {
            let Some(start) = epoch_ms(&call.started_at) else { continue };
            let end = start.saturating_add(call.duration_ms);
            let scoped = call.step_id.as_deref().zip(call.attempt);
            // The start of that attempt the call falls in (a resumed run may start it again).
            let attempt = scoped.and_then(|(step, n)| {
                attempts
                    .iter_mut()
                    .filter(|a| a.step == step && a.attempt == n)
                    .rev()
                    .find(|a| a.span.start_ms <= start || a.seq == 0)
            });
            let parent = match attempt {
                Some(a) if call.role == "verifier" => {
                    let key = format!("verify:{}:{}:{}", a.step, a.attempt, a.seq);
                    let parent = a.span.span_id;
                    let step = a.step.clone();
                    let attempt = a.attempt;
                    let verify = a.verify.get_or_insert_with(|| {
                        let mut span = self.span(&key, parent, format!("verify {step}"), start);
                        span.attributes.push(("pev.step.id".into(), step.as_str().into()));
                        span.attributes.push(("pev.step.attempt".into(), attempt.into()));
                        span
                    });
                    stretch(verify, start, end);
                    verify.span_id
                }
                Some(a) => a.span.span_id,
                None if call.role == "planner" => {
                    // The plan version the call wrote: the first one journaled after it ended.
                    match plans.iter_mut().find(|p| p.end_ms + 1 >= end) {
                        Some(plan) => {
                            plan.start_ms = plan.start_ms.min(start);
                            plan.span_id
                        }
                        None => {
                            // No plan yet (a replan under way): its parent is not known.
                            orphan_planner = run_open;
                            self.root
                        }
                    }
                }
                None => self.root,
            };
            let mut span = self.chat_span(call, parent, start, end);
            span.open = std::mem::take(&mut orphan_planner);
            out.push(span);
        }
        out
    }

    fn chat_span(&self, call: &ModelCallRecord, parent: SpanId, start: u64, end: u64) -> Span {
        let mut span = self.span(
            &format!("model:{}", call.seq),
            parent,
            format!("chat {}", call.request_model),
            start,
        );
        span.kind = Kind::Client;
        span.end_ms = end;
        let attrs = &mut span.attributes;
        attrs.push(("gen_ai.operation.name".into(), "chat".into()));
        attrs.push(("gen_ai.provider.name".into(), provider_name(&call.provider).into()));
        attrs.push(("gen_ai.request.model".into(), call.request_model.as_str().into()));
        attrs.push(("pev.role".into(), call.role.as_str().into()));
        if let Some(server) = &call.server {
            let (host, port) = match server.rsplit_once(':') {
                Some((host, port)) if port.parse::<u16>().is_ok() => (host, port.parse().ok()),
                _ => (server.as_str(), None::<u16>),
            };
            attrs.push(("server.address".into(), host.into()));
            if let Some(port) = port {
                attrs.push(("server.port".into(), u32::from(port).into()));
            }
        }
        if let Some(model) = &call.response_model {
            attrs.push(("gen_ai.response.model".into(), model.as_str().into()));
        }
        if let Some(id) = &call.response_id {
            attrs.push(("gen_ai.response.id".into(), id.as_str().into()));
        }
        if let Some(reason) = &call.finish_reason {
            attrs.push((
                "gen_ai.response.finish_reasons".into(),
                Value::StrArray(vec![reason.clone()]),
            ));
        }
        if call.error_type.is_none() {
            attrs.push(("gen_ai.usage.input_tokens".into(), call.input_tokens.into()));
            attrs.push(("gen_ai.usage.output_tokens".into(), call.output_tokens.into()));
            if call.cache_read_tokens > 0 {
                attrs.push((
                    "gen_ai.usage.cache_read.input_tokens".into(),
                    call.cache_read_tokens.into(),
                ));
            }
            if call.cache_write_tokens > 0 {
                attrs.push((
                    "gen_ai.usage.cache_creation.input_tokens".into(),
                    call.cache_write_tokens.into(),
                ));
            }
        }
        if !call.retries.is_empty() {
            attrs.push(("pev.retries".into(), (call.retries.len() as u64).into()));
        }
        if let Some(cost) = call.cost_usd {
            attrs.push(("pev.cost_usd".into(), cost.into()));
        }
        if let Some(kind) = &call.error_type {
            attrs.push(("error.type".into(), kind.as_str().into()));
            span.status = self.status(call.error.as_deref().unwrap_or_default(), "the call failed");
        }
        span
    }
}

/// Where a call's span ends.
fn call_end(call: &ModelCallRecord) -> Option<u64> {
    Some(epoch_ms(&call.started_at)?.saturating_add(call.duration_ms))
}

/// The semantic conventions' provider names; pev's scripted models are its own.
fn provider_name(provider: &str) -> &str {
    match provider {
        "anthropic" => "anthropic",
        "openai" => "openai",
        "script" => "pev.script",
        other => other,
    }
}

/// The current (latest) attempt of `step`.
fn current_attempt<'m>(attempts: &'m [Attempt], step: &str) -> Option<&'m Attempt> {
    attempts.iter().rev().find(|a| a.step == step)
}

/// Ends `step`'s open attempt at `at`, with its final state when the step finished.
fn close_attempt(
    attempts: &mut [Attempt],
    step: &str,
    at: u64,
    finished: Option<(&str, Option<&str>)>,
) {
    let Some(a) = attempts.iter_mut().rev().find(|a| a.step == step && a.span.open) else { return };
    a.span.open = false;
    a.span.end_ms = at.max(a.span.start_ms);
    if let Some(verify) = &mut a.verify {
        verify.end_ms = verify.end_ms.min(a.span.end_ms).max(verify.start_ms);
    }
    let Some((status, error)) = finished else {
        // A new attempt began: this one failed.
        a.span.attributes.push(("pev.step.status".into(), "failed".into()));
        a.span.attributes.push(("error.type".into(), "attempt_failed".into()));
        a.span.status = Status::Error("the attempt did not pass; the step was tried again".into());
        return;
    };
    a.span.attributes.push(("pev.step.status".into(), status.into()));
    if status == "failed" {
        a.span.attributes.push(("error.type".into(), "step_failed".into()));
        a.span.status = Status::Error(error.unwrap_or("the step failed").to_owned());
    }
}

/// Adds an evaluation event to `verify`, widening it to `at`; a failure marks it an error.
fn evaluate(verify: &mut Span, at: u64, attributes: Attributes, failed: bool) {
    stretch(verify, at, at);
    verify.events.push(SpanEvent {
        name: "gen_ai.evaluation.result".to_owned(),
        at_ms: at,
        attributes,
    });
    if failed && verify.status == Status::Unset {
        verify.attributes.push(("error.type".into(), "verification_failed".into()));
        verify.status = Status::Error("an assertion or the judge did not pass".into());
    }
}

/// Widens `span` to hold `start..end`.
fn stretch(span: &mut Span, start: u64, end: u64) {
    span.start_ms = span.start_ms.min(start);
    span.end_ms = span.end_ms.max(end);
}

/// How many assertions the final re-check of the last `run.finished` ran again.
fn final_check(events: &[Event]) -> Option<u64> {
    let result = events.iter().rev().find_map(|e| match &e.body {
        EventBody::RunFinished { result } => Some(result),
        _ => None,
    })?;
    Some(result.final_check.as_ref()?.rechecked)
}

#[cfg(test)]
#[path = "map_tests.rs"]
mod tests;
