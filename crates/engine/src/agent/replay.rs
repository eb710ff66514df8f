//! Replaying a recorded run: every model call is answered from the journal instead of a model.
//! A [`Recording`] holds a run's exchanges per conversation (role, step, attempt, in order);
//! a [`ReplayClient`] stands in for a role's client, checks that each request it is asked
//! equals the one recorded at that place (tool results compared with their timings, dates,
//! temporary paths and process ids masked: `agent::volatile`), and
//! answers with the recorded response, or the recorded failure. The first request that differs,
//! or that the recording does not have, is a [`Divergence`] naming the call and the message; the
//! call then fails, so the run goes on as a run whose model stopped answering, and the
//! divergence is what the replay reports.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pev_providers::{
    BoxFuture, ChatRequest, ChatResponse, ContentBlock, ModelClient, ProviderError, StreamSink,
};
use serde_json::Value;

use crate::agent::conversation::Exchange;
use crate::agent::volatile::Masks;
use crate::model_scope;

type Key = (String, Option<String>, Option<u32>);

/// Where a replay left the recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// The recorded call at that place (`None`: the recording has no call there).
    pub call: Option<u64>,
    pub role: String,
    pub step: Option<String>,
    pub attempt: Option<u32>,
    pub what: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.call {
            Some(seq) => write!(f, "call {seq} ({}", self.role)?,
            None => write!(f, "a new call ({}", self.role)?,
        }
        if let Some(step) = &self.step {
            write!(f, ", step {step}")?;
        }
        if let Some(attempt) = self.attempt {
            write!(f, ", attempt {attempt}")?;
        }
        write!(f, "): {}", self.what)
    }
}

/// A run's recorded exchanges, handed out in order per conversation.
#[derive(Debug, Default)]
pub struct Recording {
    queues: Mutex<HashMap<Key, VecDeque<Exchange>>>,
    divergences: Mutex<Vec<Divergence>>,
    answered: Mutex<u64>,
    /// What is masked in tool results before a request is compared.
    masks: Masks,
}

impl Recording {
    /// The exchanges, compared with the built-in volatile rules.
    pub fn new(exchanges: Vec<Exchange>) -> Arc<Self> {
        Self::with_masks(exchanges, Masks::default())
    }

    /// The exchanges, compared with `masks` (the rules a text recording declares).
    pub fn with_masks(exchanges: Vec<Exchange>, masks: Masks) -> Arc<Self> {
        let mut queues: HashMap<Key, VecDeque<Exchange>> = HashMap::new();
        for x in exchanges {
            let key = (x.call.role.clone(), x.call.step_id.clone(), x.call.attempt);
            queues.entry(key).or_default().push_back(x);
        }
        Arc::new(Self {
            queues: Mutex::new(queues),
            divergences: Mutex::default(),
            answered: Mutex::default(),
            masks,
        })
    }

    /// Where the replay left the recording, in the order met.
    /// Whether any recorded request offered the tool `name` (say, whether the recorded run
    /// could delegate, so a replay offers the same tools).
    pub fn offered(&self, name: &str) -> bool {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues
            .values()
            .flatten()
            .any(|x| x.request.as_ref().is_some_and(|r| r.tools.iter().any(|t| t.name == name)))
    }

    pub fn divergences(&self) -> Vec<Divergence> {
        self.divergences.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Calls answered from the recording.
    pub fn answered(&self) -> u64 {
        *self.answered.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Recorded calls the replay never asked for.
    pub fn unused(&self) -> Vec<u64> {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        let mut seqs: Vec<u64> = queues.values().flatten().map(|x| x.call.seq).collect();
        seqs.sort_unstable();
        seqs
    }

    fn answer(&self, role: &str, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let scope = model_scope::current();
        let key: Key =
            (role.to_owned(), scope.as_ref().map(|s| s.step.clone()), scope.map(|s| s.attempt));
        let next = self
            .queues
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&key)
            .and_then(VecDeque::pop_front);
        let diverge = |call: Option<u64>, what: String| {
            let d =
                Divergence { call, role: key.0.clone(), step: key.1.clone(), attempt: key.2, what };
            let message = format!("replay diverged from the recording at {d}");
            self.divergences.lock().unwrap_or_else(PoisonError::into_inner).push(d);
            Err(ProviderError::Config(message))
        };
        let Some(x) = next else {
            return diverge(None, "the recording has no call here".to_owned());
        };
        let Some(recorded) = &x.request else {
            return diverge(Some(x.call.seq), "the recording did not keep this request".to_owned());
        };
        if let Some(what) = difference_with(recorded, request, &self.masks) {
            return diverge(Some(x.call.seq), what);
        }
        *self.answered.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        match (&x.response, &x.call.error_type) {
            (Some(response), _) => Ok(response.clone()),
            (None, Some(kind)) => {
                Err(recorded_error(kind, x.call.error.as_deref().unwrap_or_default()))
            }
            (None, None) => {
                diverge(Some(x.call.seq), "the recording has no answer to this call".to_owned())
            }
        }
    }
}

impl Recording {
    /// For a resumed run: the recorded answer to `request` if it is the next one of its
    /// conversation and asks the same (the budget note aside: the resumed session's differs),
    /// with no usage (the earlier session paid for it). A request that differs, or a recorded
    /// call that failed, ends the recording for that conversation: it goes to the model.
    fn answer_resumed(&self, role: &str, request: &ChatRequest) -> Option<ChatResponse> {
        let scope = model_scope::current()?;
        let key: Key = (role.to_owned(), Some(scope.step), Some(scope.attempt));
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        let queue = queues.get_mut(&key)?;
        let next = queue.front()?;
        // A child run's call (a delegated step's) is not the interrupted parent's, whatever
        // its step and attempt: it goes to the model, and the parent's recording stays.
        if model_scope::current_run().is_some_and(|run| run != next.call.run_id) {
            return None;
        }
        let same = next.request.as_ref().is_some_and(|r| {
            difference_with(&without_budget(r), &without_budget(request), &self.masks).is_none()
        });
        let Some(response) = next.response.clone().filter(|_| same) else {
            queue.clear();
            return None;
        };
        queue.pop_front();
        *self.answered.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Some(ChatResponse { usage: Default::default(), ..response })
    }
}

/// `request` without its system prompt's `## Budget` section (what is left changes from one
/// session to the next).
fn without_budget(request: &ChatRequest) -> ChatRequest {
    let mut r = request.clone();
    if let Some(system) = &r.system
        && let Some(start) = system.find("\n## Budget\n")
    {
        let rest = &system[start + 1..];
        let end = rest[3..].find("\n## ").map_or(system.len(), |i| start + 1 + 3 + i);
        r.system = Some(format!("{}{}", &system[..start], &system[end..]));
    }
    r
}

/// A role's client in a resumed run: the interrupted attempts' calls are answered from the
/// journal while they ask what was recorded (see [`Recording::answer_resumed`]); everything else
/// goes to `inner`, the live client. It sits outside the budget: what is answered from the
/// journal was paid for by the session that asked it.
pub struct ResumingClient {
    role: String,
    recording: Arc<Recording>,
    inner: Arc<dyn ModelClient>,
}

impl ResumingClient {
    pub fn new(role: &str, recording: Arc<Recording>, inner: Arc<dyn ModelClient>) -> Self {
        Self { role: role.to_owned(), recording, inner }
    }
}

impl pev_providers::layer::Layer for ResumingClient {
    fn inner(&self) -> &dyn ModelClient {
        self.inner.as_ref()
    }

    /// A turn the interrupted session was answered is answered from the journal; the others
    /// go on to the model.
    fn turn<'a>(
        &'a self,
        request: &'a ChatRequest,
        sink: Option<StreamSink<'a>>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        match (self.recording.answer_resumed(&self.role, request), sink) {
            (Some(response), _) => Box::pin(async move { Ok(response) }),
            (None, Some(sink)) => self.inner.chat_stream(request, sink),
            (None, None) => self.inner.chat(request),
        }
    }
}

pev_providers::layered!(ResumingClient);

/// The failure a recorded call ended with, as the client would have returned it.
fn recorded_error(kind: &str, message: &str) -> ProviderError {
    let provider = "replay".to_owned();
    let message = message.to_owned();
    match kind {
        "rate_limited" => ProviderError::RateLimited { provider, retry_after: None, message },
        "overloaded" => ProviderError::Overloaded { provider, retry_after: None, message },
        "timeout" => {
            ProviderError::Timeout { provider, after: Duration::ZERO, what: "the recorded call" }
        }
        "budget_exhausted" => ProviderError::BudgetExhausted(message),
        "bad_request" => ProviderError::BadRequest { provider, status: 400, message },
        "malformed_response" => ProviderError::Malformed { provider, message },
        _ => ProviderError::Server { provider, status: 500, message },
    }
}

/// Where `now` differs from `recorded`, in words; `None` when they are the same request (tool
/// results compared with the built-in volatile rules).
pub fn difference(recorded: &ChatRequest, now: &ChatRequest) -> Option<String> {
    difference_with(recorded, now, &Masks::default())
}

/// [`difference`], with tool results compared under `masks`.
pub fn difference_with(recorded: &ChatRequest, now: &ChatRequest, masks: &Masks) -> Option<String> {
    if recorded.model != now.model {
        return Some(format!("the model was {:?}, now {:?}", recorded.model, now.model));
    }
    if recorded.system != now.system {
        let (a, b) =
            (recorded.system.as_deref().unwrap_or(""), now.system.as_deref().unwrap_or(""));
        return Some(format!("the system prompt differs: {}", excerpt(a, b)));
    }
    if recorded.tools != now.tools {
        let names =
            |r: &ChatRequest| r.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>().join(", ");
        return Some(format!(
            "the tools differ: recorded [{}], now [{}]",
            names(recorded),
            names(now)
        ));
    }
    for (i, (a, b)) in recorded.messages.iter().zip(&now.messages).enumerate() {
        let (ja, jb) = (
            masked(&serde_json::to_value(a).unwrap_or_default(), masks),
            masked(&serde_json::to_value(b).unwrap_or_default(), masks),
        );
        if ja != jb {
            return Some(format!(
                "message {} ({:?}) differs: {}",
                i + 1,
                b.role,
                excerpt(&text_of(&a.content), &text_of(&b.content))
            ));
        }
    }
    if recorded.messages.len() != now.messages.len() {
        return Some(format!(
            "the recording sent {} message(s), now {}",
            recorded.messages.len(),
            now.messages.len()
        ));
    }
    let params = |r: &ChatRequest| {
        (
            r.max_tokens,
            r.temperature.map(f32::to_bits),
            r.stop_sequences.clone(),
            r.tool_choice.clone(),
        )
    };
    if params(recorded) != params(now) {
        return Some("the request's parameters (max_tokens, temperature, stop sequences, tool choice) differ".to_owned());
    }
    None
}

/// A message as JSON with what changes from run to run masked in its tool results: `duration_ms`
/// and `elapsed_ms`, and the volatile tokens `masks` finds (by default times, durations,
/// temporary paths, process ids: `agent::volatile`). A result that is JSON (a tool's output) is
/// masked string by string, in the text as the tool gave it: in its serialised form a line break
/// is the two characters `\n`, so the `n` would stick to the word after it ("\npid 4242" has no
/// word boundary before `pid`) and a process id or time at the start of a line would go unmasked.
fn masked(message: &Value, masks: &Masks) -> Value {
    let mut v = message.clone();
    if let Some(parts) = v.get_mut("content").and_then(Value::as_array_mut) {
        for part in parts {
            if part.get("type").and_then(Value::as_str) == Some("tool_result")
                && let Some(Value::String(text)) = part.get_mut("content")
                && let Ok(mut inner) = serde_json::from_str::<Value>(text)
            {
                mask_durations(&mut inner);
                mask_strings(&mut inner, masks);
                *text = inner.to_string();
            } else if part.get("type").and_then(Value::as_str) == Some("tool_result")
                && let Some(Value::String(text)) = part.get_mut("content")
            {
                *text = masks.mask(text).into_owned();
            }
        }
    }
    v
}

fn mask_durations(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                if k == "duration_ms" || k == "elapsed_ms" {
                    *val = Value::Null;
                } else {
                    mask_durations(val);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask_durations),
        _ => {}
    }
}

/// Every string in `v` (keys stay) with `masks` applied.
fn mask_strings(v: &mut Value, masks: &Masks) {
    match v {
        Value::String(text) => {
            if let std::borrow::Cow::Owned(done) = masks.mask(text) {
                *text = done;
            }
        }
        Value::Object(map) => map.values_mut().for_each(|val| mask_strings(val, masks)),
        Value::Array(items) => items.iter_mut().for_each(|val| mask_strings(val, masks)),
        _ => {}
    }
}

fn text_of(content: &[ContentBlock]) -> String {
    content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.clone(),
            ContentBlock::ToolUse { name, input, .. } => format!("{name} {input}"),
            ContentBlock::ToolResult { content, .. } => content.clone(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The two texts from the first character where they differ, a little of each.
fn excerpt(a: &str, b: &str) -> String {
    let at = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let from = at.saturating_sub(20);
    let cut = |s: &str| {
        let part: String = s.chars().skip(from).take(80).collect();
        let more = if s.chars().count() > from + 80 { "…" } else { "" };
        format!("{:?}{more}", part)
    };
    format!("at character {}: recorded {} / now {}", at + 1, cut(a), cut(b))
}

/// A role's client that answers from a [`Recording`].
pub struct ReplayClient {
    role: String,
    recording: Arc<Recording>,
}

impl ReplayClient {
    pub fn new(role: &str, recording: Arc<Recording>) -> Self {
        Self { role: role.to_owned(), recording }
    }
}

impl ModelClient for ReplayClient {
    fn provider(&self) -> &str {
        "replay"
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move { self.recording.answer(&self.role, request) })
    }

    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        _sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        self.chat(request)
    }
}

#[cfg(test)]
mod tests {
    use pev_providers::Message;

    use super::*;

    fn request(texts: &[&str]) -> ChatRequest {
        ChatRequest::new("m", texts.iter().map(|t| Message::user(*t)).collect())
    }

    #[test]
    fn the_same_request_has_no_difference_and_timings_are_masked() {
        assert_eq!(difference(&request(&["a", "b"]), &request(&["a", "b"])), None);
        let result = |ms: u64| {
            let mut r = request(&["a"]);
            r.messages.push(Message {
                role: pev_providers::Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "t1".into(),
                    content: serde_json::json!({"exit_code": 0, "duration_ms": ms}).to_string(),
                    is_error: false,
                }],
            });
            r
        };
        assert_eq!(difference(&result(12), &result(40)), None);
    }

    /// A command's output is masked in the text it printed, line by line: the process id and
    /// the time at the start of the second line are masked too (in the serialised output they
    /// follow the two characters `\n`, and were not), while what means something is not.
    #[test]
    fn volatile_tokens_at_the_start_of_an_output_line_are_masked() {
        let result = |stdout: &str| {
            let mut r = request(&["a"]);
            let output = serde_json::json!({"exit_code": 0, "stdout": stdout});
            r.messages.push(Message {
                role: pev_providers::Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "t1".into(),
                    content: output.to_string(),
                    is_error: false,
                }],
            });
            r
        };
        let run = |pid: u32, time: &str| {
            result(&format!("{time}Z\npid {pid} in /tmp/s-{pid}\n{time}Z done\n"))
        };
        let first = run(17510, "2026-11-27T23:04:51.871332683");
        let later = run(17706, "2026-11-27T23:04:53.260721972");
        assert_eq!(difference(&first, &later), None);
        let meaning = |code: &str| result(&format!("pid 1\nexit {code}\n"));
        assert!(difference(&meaning("0"), &meaning("1")).is_some());
    }

    #[test]
    fn the_budget_section_is_left_out_of_a_resumed_comparison() {
        let with = |note: &str| {
            let mut r = request(&["a"]);
            r.system = Some(format!("## Your step\nid: a\n\n## Budget\n{note}\n\n## Rules\n- x\n"));
            r
        };
        assert!(difference(&with("$0.40 left"), &with("$0.10 left")).is_some());
        assert_eq!(
            difference(&without_budget(&with("$0.40 left")), &without_budget(&with("$0.10 left"))),
            None
        );
        let kept = without_budget(&with("$1")).system.unwrap();
        assert!(
            kept.contains("## Your step") && kept.contains("## Rules") && !kept.contains("$1"),
            "{kept}"
        );
    }

    #[test]
    fn a_difference_names_the_message_and_shows_both_sides() {
        let what = difference(&request(&["a", "make it green"]), &request(&["a", "make it blue"]))
            .unwrap();
        assert!(what.starts_with("message 2 (User) differs: at character 9"), "{what}");
        assert!(what.contains("green\"") && what.contains("blue\""), "{what}");
        let what = difference(&request(&["a"]), &request(&["a", "b"])).unwrap();
        assert!(what.contains("1 message(s), now 2"), "{what}");
        let mut other = request(&["a"]);
        other.model = "n".into();
        assert!(difference(&request(&["a"]), &other).unwrap().contains("model"));
        let mut sys = request(&["a"]);
        sys.system = Some("be careful".into());
        assert!(difference(&request(&["a"]), &sys).unwrap().contains("system prompt"));
    }
}
