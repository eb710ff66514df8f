//! Every model call of a run, journaled: [`LoggedClient`] wraps a role's client and hands a
//! [`ModelCallRecord`] per call (role, step and attempt, provider, server, models, response id,
//! finish reason, tokens, timing, or the kind of failure) to a [`CallLog`], which writes it to
//! the run's journal with the request and the response. What traces, reports and
//! `pev show --conversation` show of the models is read back from there ([`requests`],
//! [`response`]).
//!
//! A conversation grows by a turn or two per call, so a request is not stored whole: every
//! message is a blob (content-addressed, deflated where it pays), and a call whose messages begin
//! with those of the previous call of the same role, step and attempt names that call and lists
//! only its new messages. A 50-turn session then stores each message once instead of fifty
//! times. Keys are never part of a request.
//!
//! The planner's first call happens before its run exists: the log keeps calls until
//! [`CallLog::attach`] names the run, then writes them first. Each call is made durable before
//! its response is handed back, so no effect the response asks for can reach the journal ahead
//! of the call that decided it. A call abandoned mid-flight (the run's deadline, a person's stop)
//! is journaled as `abandoned`. A journal that cannot be written does not fail the run: the
//! first error is kept for the caller to report ([`CallLog::error`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use pev_protocol::event::rfc3339;
use pev_providers::cost::PriceTable;
use pev_providers::{
    BoxFuture, ChatRequest, ChatResponse, ModelClient, ProviderError, StopReason, StreamSink,
};
use pev_store::{Journal, ModelCallRecord, Record, RequestRef, StoreError};

use crate::model_scope;

/// Where a run's model calls go.
#[derive(Default)]
pub struct CallLog {
    state: Mutex<State>,
    /// What a call costs (the run's prices); with none, calls are not priced.
    prices: Option<PriceTable>,
}

struct State {
    /// Records of the calls made before the run was named (blobs and calls).
    pending: Vec<Record>,
    target: Option<(Journal, String)>,
    error: Option<String>,
    /// The number the next call takes.
    next_seq: u64,
    /// Blobs this log has written (or queued): not sent again.
    written: HashSet<String>,
    /// The last call of each conversation (role, step, attempt) and its messages' blobs.
    conversations: HashMap<Conversation, (u64, Vec<String>)>,
    /// Retries the client reported for the call each conversation has in flight.
    retries: HashMap<Conversation, Vec<String>>,
    /// The journal file (once attached): where the numbering of a child run's calls is read.
    db: Option<pev_store::Location>,
    /// The number the next call of each other run (a child run) takes.
    other_seq: HashMap<String, u64>,
    /// Calls of runs that do not exist in the journal yet (a child's planner), by run.
    held: HashMap<String, Vec<Record>>,
}

impl Default for State {
    fn default() -> Self {
        Self {
            pending: Vec::new(),
            target: None,
            error: None,
            next_seq: 1,
            written: HashSet::new(),
            conversations: HashMap::new(),
            retries: HashMap::new(),
            db: None,
            other_seq: HashMap::new(),
            held: HashMap::new(),
        }
    }
}

/// Who holds a conversation: run (empty: the attached one), role, step, attempt.
type Conversation = (String, String, Option<String>, Option<u32>);

/// A blob: its sha256 and content.
type Blob = (String, Vec<u8>);

/// A request's parts as blobs, made before the call is sent.
pub(crate) struct Parts {
    messages: Vec<Blob>,
    system: Option<Blob>,
    tools: Option<Blob>,
    params: serde_json::Value,
}

fn blob(content: Vec<u8>) -> Blob {
    (crate::digest::sha256_hex(&content), content)
}

impl Parts {
    fn of(request: &ChatRequest) -> Self {
        let messages = request
            .messages
            .iter()
            .map(|m| blob(serde_json::to_vec(m).unwrap_or_default()))
            .collect();
        let system = request.system.as_ref().map(|s| blob(s.as_bytes().to_vec()));
        let tools = (!request.tools.is_empty())
            .then(|| blob(serde_json::to_vec(&request.tools).unwrap_or_default()));
        let mut params = serde_json::to_value(request).unwrap_or_default();
        if let Some(obj) = params.as_object_mut() {
            for key in ["system", "messages", "tools"] {
                obj.remove(key);
            }
        }
        Self { messages, system, tools, params }
    }
}

impl std::fmt::Debug for CallLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallLog").finish_non_exhaustive()
    }
}

impl CallLog {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// A log that prices each call with `prices`.
    pub fn priced(prices: PriceTable) -> Arc<Self> {
        Arc::new(Self { prices: Some(prices), ..Self::default() })
    }

    /// From now on, calls are journaled as run `run_id`'s in `db` (which must hold the run);
    /// the calls made so far are written first.
    pub fn attach(
        &self,
        db: impl Into<pev_store::Location>,
        run_id: &str,
    ) -> Result<(), StoreError> {
        let db = db.into();
        let journal = Journal::start(&db)?;
        let last = pev_store::Store::open_existing(&db)?.model_calls(run_id)?.last().map(|c| c.seq);
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.pending.is_empty()
            && let Some(last) = last
        {
            // A resumed run: its numbering goes on.
            state.next_seq = last + 1;
        }
        let mut written = Ok(());
        for mut record in std::mem::take(&mut state.pending) {
            if let Record::ModelCall(call) = &mut record {
                call.run_id = run_id.to_owned();
            }
            written = written.and_then(|()| journal.record(record));
        }
        if let Err(e) = written.and_then(|()| journal.flush()) {
            // Nothing more is kept: a later call must not pile up unwritten.
            state.error = Some(format!("model calls are no longer journaled: {e}"));
            return Err(e);
        }
        state.target = Some((journal, run_id.to_owned()));
        state.db = Some(db);
        Ok(())
    }

    /// Holds the calls of run `run_id` (a child run about to be planned, not yet in the
    /// journal) until [`CallLog::release`].
    pub fn hold(&self, run_id: &str) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.held.entry(run_id.to_owned()).or_default();
    }

    /// Drops the held calls of `run_id`, which will not be created (their blobs may be written
    /// again by a later call).
    pub fn discard(&self, run_id: &str) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.held.remove(run_id);
        state.other_seq.remove(run_id);
    }

    /// Writes the held calls of `run_id`, which now exists, and journals its later calls as
    /// they come.
    pub fn release(&self, run_id: &str) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(records) = state.held.remove(run_id) else { return };
        let Some((journal, _)) = &state.target else { return };
        let mut written = Ok(());
        for record in records {
            written = written.and_then(|()| journal.record(record));
        }
        if let Err(e) = written.and_then(|()| journal.flush()) {
            state.error = Some(format!("model calls are no longer journaled: {e}"));
        }
    }

    /// Notes that `role`'s call in flight (in this task's step and attempt) failed an attempt
    /// and is being retried: `why` goes into the call's record when it is journaled. Called from
    /// the client's retry notices, which run in the calling task.
    pub fn note_retry(&self, role: &str, why: String) {
        let scope = model_scope::current();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        // Keyed as `log` keys the call: the attached run is "".
        let run = model_scope::current_run()
            .filter(|run| state.target.as_ref().is_none_or(|(_, attached)| run != attached))
            .unwrap_or_default();
        let key = (
            run,
            role.to_owned(),
            scope.as_ref().map(|s| s.step.clone()),
            scope.map(|s| s.attempt),
        );
        state.retries.entry(key).or_default().push(why);
    }

    /// The first error met writing a call, if any (the calls after it were not journaled).
    pub fn error(&self) -> Option<String> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).error.clone()
    }

    /// Flushes what was written and lets the journal go.
    pub fn close(&self) {
        let target = self.state.lock().unwrap_or_else(PoisonError::into_inner).target.take();
        if let Some((journal, _)) = target
            && let Err(e) = journal.close()
        {
            self.fail(&e);
        }
    }

    /// Journals one call; `durable` waits for the commit (an answered call, before its answer is
    /// used), otherwise it is queued (an abandoned call: nothing acts on it).
    fn log(
        &self,
        mut call: ModelCallRecord,
        parts: Option<Parts>,
        response: Option<Vec<u8>>,
        durable: bool,
    ) {
        if let Some(prices) = &self.prices
            && call.error_type.is_none()
        {
            let model = call.response_model.as_deref().unwrap_or(&call.request_model);
            let usage = pev_providers::TokenUsage {
                input_tokens: call.input_tokens,
                output_tokens: call.output_tokens,
                cache_read_tokens: call.cache_read_tokens,
                cache_write_tokens: call.cache_write_tokens,
            };
            let cost = prices.cost(model, &usage);
            call.cost_usd = cost.priced.then_some(cost.usd);
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.error.is_some() {
            return;
        }
        // A call of another run than the attached one (a child's) is numbered in that run.
        let own = match &state.target {
            Some((_, attached)) => call.run_id.is_empty() || call.run_id == *attached,
            None => call.run_id.is_empty(),
        };
        let conversation_run = if own { String::new() } else { call.run_id.clone() };
        if own {
            call.seq = state.next_seq;
            state.next_seq += 1;
        } else {
            let next = match state.other_seq.get(&call.run_id) {
                Some(n) => *n,
                None => state
                    .db
                    .as_ref()
                    .and_then(|db| pev_store::Store::open_existing(db).ok())
                    .and_then(|store| store.model_calls(&call.run_id).ok())
                    .and_then(|calls| calls.last().map(|c| c.seq + 1))
                    .unwrap_or(1),
            };
            call.seq = next;
            state.other_seq.insert(call.run_id.clone(), next + 1);
        }
        let key = (conversation_run.clone(), call.role.clone(), call.step_id.clone(), call.attempt);
        call.retries = state.retries.remove(&key).unwrap_or_default();
        let mut records = Vec::new();
        // A held call keeps its own copy of every blob (written with it, or dropped with it):
        // another call must never count on a blob that may be dropped.
        let held = !own && state.held.contains_key(&call.run_id);
        let mut keep = |state: &mut State, (sha, content): Blob| {
            if held || state.written.insert(sha.clone()) {
                records.push(Record::Blob { sha256: sha.clone(), content });
            }
            sha
        };
        if let Some(parts) = parts {
            let key = (conversation_run, call.role.clone(), call.step_id.clone(), call.attempt);
            let shas: Vec<String> = parts.messages.iter().map(|(sha, _)| sha.clone()).collect();
            let prior = state.conversations.get(&key).and_then(|(seq, before)| {
                (before.len() <= shas.len() && shas[..before.len()] == before[..])
                    .then_some((*seq, before.len()))
            });
            let (prior, prior_messages) = match prior {
                Some((seq, n)) => (Some(seq), n),
                None => (None, 0),
            };
            let messages = parts
                .messages
                .into_iter()
                .skip(prior_messages)
                .map(|b| keep(&mut state, b))
                .collect();
            let system = parts.system.map(|b| keep(&mut state, b));
            let tools = parts.tools.map(|b| keep(&mut state, b));
            call.request = Some(RequestRef {
                prior,
                prior_messages,
                messages,
                system,
                tools,
                params: parts.params,
            });
            state.conversations.insert(key, (call.seq, shas));
        }
        call.response_sha256 = response.map(|r| keep(&mut state, blob(r)));
        if held {
            let run = call.run_id.clone();
            records.push(Record::ModelCall(Box::new(call)));
            state.held.entry(run).or_default().extend(records);
            return;
        }
        let Some((journal, run_id)) = &state.target else {
            records.push(Record::ModelCall(Box::new(call)));
            state.pending.extend(records);
            return;
        };
        if own {
            call.run_id.clone_from(run_id);
        }
        let mut written = Ok(());
        for record in records {
            written = written.and_then(|()| journal.record(record));
        }
        let record = Record::ModelCall(Box::new(call));
        let written = written.and_then(|()| {
            if durable { journal.record_durable(record) } else { journal.record(record) }
        });
        if let Err(e) = written {
            state.error = Some(format!("model calls are no longer journaled: {e}"));
        }
    }

    fn fail(&self, e: &StoreError) {
        self.fail_with(format!("model calls are no longer journaled: {e}"));
    }

    fn fail_with(&self, message: String) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.error.get_or_insert(message);
    }
}

/// A role's model client whose calls go to a [`CallLog`].
pub struct LoggedClient {
    inner: Arc<dyn ModelClient>,
    role: String,
    log: Arc<CallLog>,
}

impl LoggedClient {
    pub fn new(inner: Arc<dyn ModelClient>, role: &str, log: Arc<CallLog>) -> Self {
        Self { inner, role: role.to_owned(), log }
    }

    async fn call(
        &self,
        request: &ChatRequest,
        sink: Option<StreamSink<'_>>,
    ) -> Result<ChatResponse, ProviderError> {
        let scope = model_scope::current();
        let provider = self.inner.provider();
        let record = ModelCallRecord {
            // Empty: the run the log is attached to.
            run_id: model_scope::current_run().unwrap_or_default(),
            seq: 0,
            role: self.role.clone(),
            step_id: scope.as_ref().map(|s| s.step.clone()),
            attempt: scope.map(|s| s.attempt),
            // `script:plan.json` is the scripted provider; the file is not the provider's name.
            provider: provider.split(':').next().unwrap_or(provider).to_owned(),
            server: self.inner.server(),
            request_model: request.model.clone(),
            started_at: rfc3339(SystemTime::now()),
            ..ModelCallRecord::default()
        };
        let mut pending = InFlight {
            log: &self.log,
            record: Some(record),
            parts: Some(Parts::of(request)),
            started: Instant::now(),
        };
        let result = match sink {
            Some(sink) => self.inner.chat_stream(request, sink).await,
            None => self.inner.chat(request).await,
        };
        if let Some((record, parts)) = pending.finish(&result) {
            let log = Arc::clone(&self.log);
            let response = result.as_ref().ok().and_then(|r| serde_json::to_vec(r).ok());
            // The write waits for a commit: off the async threads.
            let written =
                tokio::task::spawn_blocking(move || log.log(record, parts, response, true)).await;
            if let Err(e) = written {
                self.log.fail_with(format!("model calls are no longer journaled: {e}"));
            }
        }
        result
    }
}

/// A call not yet answered: journaled as `abandoned` if its future is dropped.
struct InFlight<'a> {
    log: &'a CallLog,
    record: Option<ModelCallRecord>,
    parts: Option<Parts>,
    started: Instant,
}

impl InFlight<'_> {
    /// The call's record, completed with its answer (taken: the drop writes nothing more).
    fn finish(
        &mut self,
        result: &Result<ChatResponse, ProviderError>,
    ) -> Option<(ModelCallRecord, Option<Parts>)> {
        let mut record = self.record.take()?;
        record.duration_ms = millis(self.started);
        match result {
            Ok(response) => {
                record.response_model = Some(response.model.clone()).filter(|m| !m.is_empty());
                record.response_id = Some(response.id.clone()).filter(|id| !id.is_empty());
                record.finish_reason = Some(finish_reason(&response.stop_reason));
                record.input_tokens = response.usage.input_tokens;
                record.output_tokens = response.usage.output_tokens;
                record.cache_read_tokens = response.usage.cache_read_tokens;
                record.cache_write_tokens = response.usage.cache_write_tokens;
            }
            Err(e) => {
                record.error_type = Some(error_type(e).to_owned());
                record.error = Some(e.to_string());
            }
        }
        Some((record, self.parts.take()))
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(mut record) = self.record.take() {
            record.duration_ms = millis(self.started);
            record.error_type = Some("abandoned".to_owned());
            record.error = Some("the call was abandoned before it was answered".to_owned());
            self.log.log(record, self.parts.take(), None, false);
        }
    }
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The stop reason as the journal (and traces) spell it.
pub fn finish_reason(reason: &StopReason) -> String {
    match reason {
        StopReason::EndTurn => "end_turn".to_owned(),
        StopReason::ToolUse => "tool_use".to_owned(),
        StopReason::MaxTokens => "max_tokens".to_owned(),
        StopReason::StopSequence => "stop_sequence".to_owned(),
        StopReason::Refusal => "refusal".to_owned(),
        StopReason::Other(other) => other.clone(),
    }
}

/// A low-cardinality name for a failure (an `error.type` in traces).
pub fn error_type(error: &ProviderError) -> &'static str {
    match error {
        ProviderError::RateLimited { .. } => "rate_limited",
        ProviderError::Overloaded { .. } => "overloaded",
        ProviderError::Server { .. } => "server_error",
        ProviderError::Timeout { .. } => "timeout",
        ProviderError::Authentication { .. } => "authentication",
        ProviderError::BadRequest { .. } => "bad_request",
        ProviderError::ContextTooLong { .. } => "context_too_long",
        ProviderError::Malformed { .. } => "malformed_response",
        ProviderError::Transport { .. } => "transport",
        ProviderError::Config(_) => "config",
        ProviderError::Script { .. } => "script",
        ProviderError::BudgetExhausted(_) => "budget_exhausted",
        ProviderError::Refused { .. } => "refused",
        ProviderError::InvalidStructuredOutput { .. } => "invalid_structured_output",
    }
}

impl pev_providers::layer::Layer for LoggedClient {
    fn inner(&self) -> &dyn ModelClient {
        self.inner.as_ref()
    }

    fn turn<'a>(
        &'a self,
        request: &'a ChatRequest,
        sink: Option<StreamSink<'a>>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(self.call(request, sink))
    }
}

pev_providers::layered!(LoggedClient);

#[cfg(test)]
#[path = "call_log_tests.rs"]
mod tests;
