//! Budgets that are ceilings, not targets: dollars, tokens, model calls and a deadline for a
//! whole agent run, shared by every model client of the run (planner, executors, judge).
//!
//! [`BudgetedClient`] wraps a [`ModelClient`] and asks the shared [`BudgetState`] before every
//! call whether the call's *worst case* fits in what is left: the input estimated as one token
//! per 3 bytes of the serialized request, priced at the dearest input rate (plain, cache read or
//! cache write), plus the request's `max_tokens` priced as output. When the full worst case does
//! not fit but the input and at least [`MIN_CLAMPED_OUTPUT_TOKENS`] output tokens do, the call is
//! sent with `max_tokens` clamped down to what is affordable (a shorter answer is more useful
//! than none); otherwise it is refused with [`ProviderError::BudgetExhausted`] and never sent. The
//! worst case stays reserved while the call is in flight, so parallel calls cannot together
//! overshoot what each alone would fit in. After the call the reservation is replaced by the real
//! usage and its cost.
//!
//! A model whose price neither table knows costs $0 (see `pev_providers::cost`): for it the
//! dollar ceiling cannot bind, and only the token, call and time ceilings protect the run.
//!
//! The estimate is a bound only as long as a token averages at least 3 bytes of the serialized
//! request, which holds by a wide margin for text and JSON; a call whose real input exceeds it is
//! still recorded as it was, and the next call is refused.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use pev_protocol::run::Usage;
use pev_providers::cost::{CostLedger, CostSummary, Price, PriceTable};
use pev_providers::{
    BoxFuture, ChatRequest, ChatResponse, ModelClient, ProviderError, StreamSink, TokenUsage,
};

/// The least output a clamped call may be given: below this an answer is too short to be worth
/// paying for, so the call is refused instead.
pub const MIN_CLAMPED_OUTPUT_TOKENS: u64 = 256;

/// Bytes of serialized request per estimated input token (an overestimate of the token count
/// for text and JSON, whose tokens average about 4 bytes).
const BYTES_PER_TOKEN: u64 = 3;

/// A run's ceilings. `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    pub max_usd: Option<f64>,
    /// Input (including cached input) plus output tokens, over all calls.
    pub max_tokens: Option<u64>,
    /// Model calls over the whole run, answered or not.
    pub max_turns: Option<u32>,
    /// No model call starts at or after this instant.
    pub deadline: Option<Instant>,
}

/// What has been spent and what is reserved by calls in flight.
#[derive(Debug, Default)]
struct Tally {
    usd: f64,
    /// All input: plain, cache reads and cache writes.
    input_tokens: u64,
    cache_read_tokens: u64,
    cache_write_tokens: u64,
    /// What the prompt cache saved.
    saved_usd: f64,
    output_tokens: u64,
    /// Calls sent (admitted), answered or not.
    calls: u64,
    reserved_usd: f64,
    reserved_tokens: u64,
    in_flight: u64,
}

impl Tally {
    fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// What one call asks for, before admission.
#[derive(Debug, Clone, Copy)]
struct Ask<'r> {
    role: &'r str,
    model: &'r str,
    input_tokens: u64,
    max_output: u64,
    price: Price,
}

/// What admission granted: the output the call may use and what it reserved.
#[derive(Debug, Clone, Copy)]
struct Grant {
    input_tokens: u64,
    max_output: u64,
    usd: f64,
}

/// How a finished call is charged.
#[derive(Debug, Clone, Copy)]
enum Charge {
    /// The usage the provider reported.
    Actual(TokenUsage),
    /// The usage is unknown but may have been billed: charge the reserved worst case.
    WorstCase,
    /// The provider refused the call before doing any work.
    Nothing,
}

/// The budget of one run and what it has spent, per role. Share it (`Arc`) between every
/// [`BudgetedClient`] of the run.
#[derive(Debug)]
pub struct BudgetState {
    budget: Budget,
    ledger: CostLedger,
    tally: Mutex<Tally>,
    /// Where calls in flight are marked, once the run is known (`agent::call_marks`).
    marks: OnceLock<crate::agent::call_marks::CallMarks>,
}

impl BudgetState {
    /// A budget with nothing spent; `prices` count what each call cost.
    pub fn new(budget: Budget, prices: PriceTable) -> Self {
        Self {
            budget,
            ledger: CostLedger::new(prices),
            tally: Mutex::new(Tally::default()),
            marks: OnceLock::new(),
        }
    }

    /// From now on, each call in flight under a dollar or token ceiling is marked durably in
    /// `marks` while it is in flight, so that a kill cannot make the run forget what it may
    /// have been billed (`agent::call_marks`). The first call of this wins.
    pub fn mark_calls_in(&self, marks: crate::agent::call_marks::CallMarks) {
        let _ = self.marks.set(marks);
    }

    /// Marks a granted call in flight (when there are marks and a ceiling they protect); the
    /// guard removes the mark when the call is settled. A mark that cannot be written is an
    /// error: the call is not sent.
    async fn mark(
        self: &Arc<Self>,
        role: &str,
        model: &str,
        grant: &Grant,
    ) -> Result<Option<MarkGuard>, String> {
        let binds = self.budget.max_usd.is_some() || self.budget.max_tokens.is_some();
        if !binds || self.marks.get().is_none() {
            return Ok(None);
        }
        let scope = crate::model_scope::current();
        let mark = crate::agent::call_marks::CallMark {
            role: role.to_owned(),
            model: model.to_owned(),
            step: scope.as_ref().map(|s| s.step.clone()),
            attempt: scope.map(|s| s.attempt),
            run_id: crate::model_scope::current_run(),
            input_tokens: grant.input_tokens,
            max_output: grant.max_output,
            usd: grant.usd,
            at: pev_protocol::event::rfc3339(std::time::SystemTime::now()),
        };
        let state = Arc::clone(self);
        let written = tokio::task::spawn_blocking(move || match state.marks.get() {
            Some(marks) => marks.put(&mark),
            None => Err(io::Error::other("no marks")),
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
        match written {
            Ok(path) => Ok(Some(MarkGuard(path))),
            Err(e) => Err(format!(
                "the model call was not sent: its worst case could not be marked in \
                 .pev/inflight ({e}), and a kill would then forget what it may cost"
            )),
        }
    }

    /// The ceilings.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// What the run has consumed so far, for its result (`tool_calls` is the engine's to fill).
    /// `input_tokens` includes cached input; `llm_calls` counts every call sent, answered or not.
    pub fn snapshot(&self) -> Usage {
        let t = self.lock();
        Usage {
            llm_calls: t.calls,
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            cost_usd: t.usd,
            tool_calls: 0,
            cache_read_tokens: t.cache_read_tokens,
            cache_write_tokens: t.cache_write_tokens,
            cache_saved_usd: t.saved_usd,
        }
    }

    /// Usage and cost per role, and the models that have no price.
    pub fn summary(&self) -> CostSummary {
        self.ledger.summary()
    }

    /// What is left of each ceiling (amounts reserved by calls in flight count as spent):
    /// the most a child run's slice may have. `None` is no limit.
    pub fn remaining(&self) -> Budget {
        let t = self.lock();
        Budget {
            max_usd: self.budget.max_usd.map(|max| (max - t.usd - t.reserved_usd).max(0.0)),
            max_tokens: self
                .budget
                .max_tokens
                .map(|max| max.saturating_sub(t.tokens().saturating_add(t.reserved_tokens))),
            max_turns: self
                .budget
                .max_turns
                .map(|max| u32::try_from(u64::from(max).saturating_sub(t.calls)).unwrap_or(0)),
            deadline: self.budget.deadline,
        }
    }

    /// Whether nothing is left of some ceiling: no call can be admitted.
    pub fn is_spent(&self) -> bool {
        let left = self.remaining();
        left.max_usd.is_some_and(|usd| usd <= 0.0)
            || left.max_tokens == Some(0)
            || left.max_turns == Some(0)
            || left.deadline.is_some_and(|d| d <= Instant::now())
    }

    /// Dollars spent so far.
    pub fn spent_usd(&self) -> f64 {
        self.lock().usd
    }

    /// What is left, in words for a model's prompt: "$0.42 of $1.00 left, 12 of 40 model calls
    /// left". Amounts reserved by calls in flight count as spent.
    pub fn note(&self) -> String {
        let mut parts = Vec::new();
        let t = self.lock();
        if let Some(max) = self.budget.max_usd {
            let left = (max - t.usd - t.reserved_usd).max(0.0);
            parts.push(format!("{} of {} left", usd(left, max), usd(max, max)));
        }
        if let Some(max) = self.budget.max_tokens {
            let left = max.saturating_sub(t.tokens().saturating_add(t.reserved_tokens));
            parts.push(format!("{left} of {max} tokens left"));
        }
        if let Some(max) = self.budget.max_turns {
            let left = u64::from(max).saturating_sub(t.calls);
            parts.push(format!("{left} of {max} model calls left"));
        }
        drop(t);
        if let Some(deadline) = self.budget.deadline {
            let left = deadline.saturating_duration_since(Instant::now()).as_secs();
            parts.push(format!("{left} s of time left"));
        }
        if parts.is_empty() {
            return "no budget limit".to_owned();
        }
        let mut note = parts.join(", ");
        if self.budget.max_usd.is_some() {
            let unpriced = self.ledger.summary().unpriced_models;
            if !unpriced.is_empty() {
                let names: Vec<&str> = unpriced.iter().map(String::as_str).collect();
                note.push_str(&format!(
                    " (no price is known for {}: its calls count as $0)",
                    names.join(", ")
                ));
            }
        }
        note
    }

    fn lock(&self) -> MutexGuard<'_, Tally> {
        // The tally is a few numbers updated together under the lock; a panic elsewhere cannot
        // leave them in a state worse than losing them, so a poisoned lock is used as is.
        self.tally.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a call whose worst case fits (clamping its output if that makes it fit), and
    /// reserves that worst case; else says why not.
    fn admit(&self, ask: &Ask<'_>) -> Result<Grant, String> {
        let now = Instant::now();
        let mut t = self.lock();
        let what = format!("the {} call to {}", ask.role, ask.model);
        if let Some(deadline) = self.budget.deadline
            && now >= deadline
        {
            let ago = now.saturating_duration_since(deadline).as_secs();
            return Err(format!("{what} cannot start: the run's deadline passed {ago} s ago"));
        }
        if let Some(max) = self.budget.max_turns
            && t.calls.saturating_add(1) > u64::from(max)
        {
            return Err(format!("{what} cannot start: all {max} model calls are used"));
        }
        // The output each ceiling affords (None: no limit), after the input.
        let tokens_left = self
            .budget
            .max_tokens
            .map(|max| max.saturating_sub(t.tokens().saturating_add(t.reserved_tokens)));
        let usd_left = self.budget.max_usd.map(|max| max - t.usd - t.reserved_usd);
        let by_tokens = tokens_left.map(|left| left.saturating_sub(ask.input_tokens));
        let by_usd = usd_left.and_then(|left| affordable_output(ask, left));
        let max_output = [by_tokens, by_usd].into_iter().flatten().fold(ask.max_output, u64::min);
        let usd = worst_usd(&ask.price, ask.input_tokens, max_output);
        let tokens = ask.input_tokens.saturating_add(max_output);
        // Refused when clamped below the least useful output, or over a ceiling even so. The plain
        // comparison with each ceiling has the final word: it refuses a call whose input alone
        // does not fit, and rounding in `affordable_output` can only make a call refused, never
        // let one through.
        let too_short = max_output < ask.max_output && max_output < MIN_CLAMPED_OUTPUT_TOKENS;
        let over_usd = self.budget.max_usd.is_some_and(|max| t.usd + t.reserved_usd + usd > max);
        let over_tokens = tokens_left.is_some_and(|left| tokens > left);
        if too_short || over_usd || over_tokens {
            return Err(refusal(&what, ask, &self.budget, tokens_left, usd_left));
        }
        t.calls = t.calls.saturating_add(1);
        t.in_flight = t.in_flight.saturating_add(1);
        t.reserved_usd += usd;
        t.reserved_tokens = t.reserved_tokens.saturating_add(tokens);
        Ok(Grant { input_tokens: ask.input_tokens, max_output, usd })
    }

    /// Replaces a call's reservation by what it is charged.
    fn settle(&self, role: &str, model: &str, grant: &Grant, charge: Charge) {
        let usage = match charge {
            Charge::Actual(usage) => Some(usage),
            Charge::WorstCase => Some(TokenUsage {
                input_tokens: grant.input_tokens,
                output_tokens: grant.max_output,
                ..TokenUsage::default()
            }),
            Charge::Nothing => None,
        };
        // The ledger has its own lock; it is taken first and alone, so the two never nest.
        let recorded = usage.map(|usage| (usage, self.ledger.record(role, model, &usage)));
        let mut t = self.lock();
        t.in_flight = t.in_flight.saturating_sub(1);
        t.reserved_tokens =
            t.reserved_tokens.saturating_sub(grant.input_tokens.saturating_add(grant.max_output));
        // Float subtraction can leave dust; with nothing in flight the reservation is exactly 0.
        t.reserved_usd = if t.in_flight == 0 { 0.0 } else { (t.reserved_usd - grant.usd).max(0.0) };
        if let Some((usage, call)) = recorded {
            let input = usage
                .input_tokens
                .saturating_add(usage.cache_read_tokens)
                .saturating_add(usage.cache_write_tokens);
            t.input_tokens = t.input_tokens.saturating_add(input);
            t.output_tokens = t.output_tokens.saturating_add(usage.output_tokens);
            t.cache_read_tokens = t.cache_read_tokens.saturating_add(usage.cache_read_tokens);
            t.cache_write_tokens = t.cache_write_tokens.saturating_add(usage.cache_write_tokens);
            t.usd += call.cost_usd;
            t.saved_usd += call.saved_usd;
        }
    }
}

/// A call's mark in flight, removed when the call is settled or given up (a kill leaves it).
struct MarkGuard(std::path::PathBuf);

impl Drop for MarkGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The output tokens `left` dollars pay for after the input; `None` when output is free.
fn affordable_output(ask: &Ask<'_>, left: f64) -> Option<u64> {
    let rate = ask.price.output_per_mtok;
    if rate <= 0.0 {
        return None;
    }
    let for_output = left * 1_000_000.0 - ask.input_tokens as f64 * input_rate(&ask.price);
    // `as` saturates, so nothing left (a negative amount, or NaN) pays for 0 tokens; one token
    // less absorbs rounding.
    Some(((for_output / rate).floor() as u64).saturating_sub(1))
}

/// The dearest rate input can be billed at: a cacheable prompt may be written to the cache.
fn input_rate(price: &Price) -> f64 {
    price.input_per_mtok.max(price.cache_read_per_mtok).max(price.cache_write_per_mtok)
}

/// What `input` and `output` tokens cost at most, in USD.
fn worst_usd(price: &Price, input: u64, output: u64) -> f64 {
    (input as f64 * input_rate(price) + output as f64 * price.output_per_mtok) / 1_000_000.0
}

/// Why a call is refused, naming the ceiling that binds.
fn refusal(
    what: &str,
    ask: &Ask<'_>,
    budget: &Budget,
    tokens_left: Option<u64>,
    usd_left: Option<f64>,
) -> String {
    let least_output = ask.max_output.min(MIN_CLAMPED_OUTPUT_TOKENS);
    let least_tokens = ask.input_tokens.saturating_add(least_output);
    if let (Some(left), Some(max)) = (tokens_left, budget.max_tokens)
        && least_tokens > left
    {
        let needs = ask.input_tokens.saturating_add(ask.max_output);
        return format!("{what} needs up to {needs} tokens, {left} of {max} left");
    }
    let max = budget.max_usd.unwrap_or(0.0);
    let left = usd_left.unwrap_or(0.0).max(0.0);
    let needs = worst_usd(&ask.price, ask.input_tokens, ask.max_output);
    format!("{what} needs up to {}, {} left of {}", usd(needs, max), usd(left, max), usd(max, max))
}

/// Dollars for messages: cents for budgets of a dollar or more, else four decimals.
fn usd(amount: f64, scale: f64) -> String {
    if scale >= 1.0 { format!("${amount:.2}") } else { format!("${amount:.4}") }
}

/// Counts the bytes serde writes, without keeping them.
struct ByteCount(u64);

impl io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len() as u64);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The worst-case input tokens of `request`: one per 3 bytes of its JSON, rounded up.
fn estimate_input_tokens(request: &ChatRequest) -> Result<u64, ProviderError> {
    let mut count = ByteCount(0);
    serde_json::to_writer(&mut count, request).map_err(|e| {
        ProviderError::Config(format!("cannot measure the request to price it: {e}"))
    })?;
    Ok(count.0.div_ceil(BYTES_PER_TOKEN))
}

/// A call admitted and not yet settled. Dropped unsettled (the caller gave up on the call, e.g.
/// a timeout around it), it charges the worst case: the provider may have billed the call, and
/// nobody will ever say for how much.
struct Pending<'a> {
    state: &'a BudgetState,
    role: &'a str,
    model: &'a str,
    grant: Grant,
    settled: bool,
}

impl Pending<'_> {
    fn finish(mut self, charge: Charge) {
        self.settled = true;
        self.state.settle(self.role, self.model, &self.grant, charge);
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.state.settle(self.role, self.model, &self.grant, Charge::WorstCase);
        }
    }
}

/// How a failed call is charged. A provider that timed out or whose answer broke off may have
/// billed the work done; the other failures are refusals before any work.
/// What a finished call costs.
fn charge_of(result: &Result<ChatResponse, ProviderError>) -> Charge {
    match result {
        Ok(response) => Charge::Actual(response.usage),
        Err(error) => charge_for(error),
    }
}

fn charge_for(error: &ProviderError) -> Charge {
    match error {
        ProviderError::Timeout { .. } | ProviderError::Malformed { .. } => Charge::WorstCase,
        _ => Charge::Nothing,
    }
}

/// A model client that pays every call from a run's [`BudgetState`], and refuses (without
/// sending) a call whose worst case the budget cannot pay.
pub struct BudgetedClient {
    inner: Arc<dyn ModelClient>,
    role: String,
    prices: PriceTable,
    state: Arc<BudgetState>,
}

impl BudgetedClient {
    /// Wraps `inner` for `role` ("planner", "executor", "judge"). The worst case is priced at
    /// the higher of `prices` and the state's own prices, model by model, so that a mismatch
    /// between the two tables cannot make it too low; what a call cost is counted with the
    /// state's prices.
    pub fn new(
        inner: Arc<dyn ModelClient>,
        role: &str,
        prices: PriceTable,
        state: Arc<BudgetState>,
    ) -> Self {
        Self { inner, role: role.to_owned(), prices, state }
    }

    /// The budget this client pays from.
    pub fn state(&self) -> &Arc<BudgetState> {
        &self.state
    }

    /// The dearest price either table gives `model` ($0 when neither knows it).
    fn worst_price(&self, model: &str) -> Price {
        let mine = self.prices.lookup(model).map_or(Price::FREE, |m| m.price);
        let theirs = self.state.ledger.prices().lookup(model).map_or(Price::FREE, |m| m.price);
        Price {
            input_per_mtok: mine.input_per_mtok.max(theirs.input_per_mtok),
            output_per_mtok: mine.output_per_mtok.max(theirs.output_per_mtok),
            cache_read_per_mtok: mine.cache_read_per_mtok.max(theirs.cache_read_per_mtok),
            cache_write_per_mtok: mine.cache_write_per_mtok.max(theirs.cache_write_per_mtok),
        }
    }

    async fn call(
        &self,
        request: &ChatRequest,
        sink: Option<StreamSink<'_>>,
    ) -> Result<ChatResponse, ProviderError> {
        let ask = Ask {
            role: &self.role,
            model: &request.model,
            input_tokens: estimate_input_tokens(request)?,
            max_output: u64::from(request.max_tokens),
            price: self.worst_price(&request.model),
        };
        let grant = self.state.admit(&ask).map_err(ProviderError::BudgetExhausted)?;
        let pending = Pending {
            state: &self.state,
            role: &self.role,
            model: &request.model,
            grant,
            settled: false,
        };
        let _mark = match self.state.mark(&self.role, &request.model, &grant).await {
            Ok(mark) => mark,
            Err(why) => {
                pending.finish(Charge::Nothing);
                return Err(ProviderError::Config(why));
            }
        };
        // Admission never grants more output than was asked for: a grant that differs is clamped.
        let clamped;
        let request = if grant.max_output != ask.max_output {
            let mut smaller = request.clone();
            smaller.max_tokens = u32::try_from(grant.max_output).unwrap_or(request.max_tokens);
            clamped = smaller;
            &clamped
        } else {
            request
        };
        let call = async {
            match sink {
                Some(sink) => self.inner.chat_stream(request, sink).await,
                None => self.inner.chat(request).await,
            }
        };
        // The deadline bounds the call in flight too: a server that never answers cannot hold
        // the run past it. The abandoned call may have been billed, so it costs its worst case.
        let (result, charge) = match self.state.budget.deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline.into(), call).await {
                Ok(result) => {
                    let charge = charge_of(&result);
                    (result, charge)
                }
                Err(_) => {
                    let why = format!(
                        "the run's time limit (--timeout) ran out while the {} model ({}) was \
                         answering; the call was abandoned",
                        self.role, request.model
                    );
                    (Err(ProviderError::BudgetExhausted(why)), Charge::WorstCase)
                }
            },
            None => {
                let result = call.await;
                let charge = charge_of(&result);
                (result, charge)
            }
        };
        pending.finish(charge);
        result
    }
}

impl pev_providers::layer::Layer for BudgetedClient {
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

pev_providers::layered!(BudgetedClient);

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
