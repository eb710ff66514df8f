//! Tests of the budget: calls are refused before they are sent, the ceilings are never
//! exceeded (one caller or many at once), output is clamped to what is left, and what was spent
//! is counted per role and described for prompts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pev_providers::cost::{Price, PriceTable, cost_usd};
use pev_providers::script::{FailureKind, ScriptTurn, ScriptedClient};
use pev_providers::{
    BoxFuture, ChatRequest, ChatResponse, ContentBlock, Message, ModelClient, ProviderError,
    StopReason, StreamEvent, StreamSink, TokenUsage,
};

use super::{Ask, Budget, BudgetState, BudgetedClient, Charge, estimate_input_tokens};
use crate::agent::test_clients::Hang;

const SONNET: &str = "claude-sonnet-4-5";

fn request(model: &str, text: &str, max_tokens: u32) -> ChatRequest {
    let mut request = ChatRequest::new(model, vec![Message::user(text)]);
    request.max_tokens = max_tokens;
    request
}

fn new_state(budget: Budget) -> Arc<BudgetState> {
    Arc::new(BudgetState::new(budget, PriceTable::built_in()))
}

fn budgeted(inner: Arc<dyn ModelClient>, role: &str, state: &Arc<BudgetState>) -> BudgetedClient {
    BudgetedClient::new(inner, role, PriceTable::built_in(), Arc::clone(state))
}

/// What one token costs in the dollar budgets of [`per_token_state`]: a power of two, so that
/// every sum the budget makes is exact and a call can land exactly on the ceiling.
const TOKEN_USD: f64 = 1.0 / 1024.0;

/// A state whose dollar ceiling is `tokens` tokens' worth at [`TOKEN_USD`] a token, for the
/// model `priced` (input and output alike) and the model `input-only` (output is free).
fn per_token_state(tokens: u32) -> BudgetState {
    let mut prices = PriceTable::empty();
    prices.set("priced", Price::flat(TOKEN_USD * 1e6, TOKEN_USD * 1e6));
    prices.set("input-only", Price::flat(TOKEN_USD * 1e6, 0.0));
    let max_usd = f64::from(tokens) * TOKEN_USD;
    BudgetState::new(Budget { max_usd: Some(max_usd), ..Budget::default() }, prices)
}

/// An executor call of `model` (priced by `state`) with `input` tokens and up to `output`.
fn ask<'a>(state: &'a BudgetState, model: &'a str, input: u64, output: u64) -> Ask<'a> {
    let price = state.ledger.prices().lookup(model).unwrap().price;
    Ask { role: "executor", model, input_tokens: input, max_output: output, price }
}

fn used(input: u64, output: u64) -> Charge {
    Charge::Actual(TokenUsage {
        input_tokens: input,
        output_tokens: output,
        ..TokenUsage::default()
    })
}

fn refusal(result: Result<ChatResponse, ProviderError>) -> String {
    match result {
        Err(ProviderError::BudgetExhausted(message)) => message,
        other => panic!("expected BudgetExhausted, got {other:?}"),
    }
}

/// A model that spends the whole worst case of every call: input as large as the estimate
/// allows and every output token it may use. It can wait before answering, so that calls
/// overlap.
struct Greedy {
    calls: AtomicU64,
    delay: Option<Duration>,
}

impl Greedy {
    fn new(delay: Option<Duration>) -> Arc<Self> {
        Arc::new(Self { calls: AtomicU64::new(0), delay })
    }

    async fn answer(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        let bytes = serde_json::to_vec(request).map(|v| v.len()).unwrap_or(0) as u64;
        Ok(ChatResponse {
            id: String::new(),
            model: request.model.clone(),
            content: vec![ContentBlock::text("ok")],
            stop_reason: StopReason::MaxTokens,
            // Written to the cache: the dearest input there is.
            usage: TokenUsage {
                input_tokens: 0,
                output_tokens: u64::from(request.max_tokens),
                cache_read_tokens: 0,
                cache_write_tokens: bytes / 3,
            },
        })
    }
}

impl ModelClient for Greedy {
    fn provider(&self) -> &str {
        "greedy"
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(self.answer(request))
    }

    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        _sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(self.answer(request))
    }
}

/// A deterministic pseudo-random sequence (no dependency needed for a property-style loop).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 =
            self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

#[tokio::test]
async fn never_overspends_across_many_calls() {
    for (seed, max_usd) in [(1u64, 0.01), (2, 0.05), (3, 0.2), (4, 1.0)] {
        let mut rng = Lcg(seed);
        let state = new_state(Budget { max_usd: Some(max_usd), ..Budget::default() });
        let inner = Greedy::new(None);
        let client = budgeted(inner.clone(), "executor", &state);
        let (mut sent, mut refused) = (0u64, 0u64);
        for _ in 0..400 {
            let text = "x".repeat(usize::try_from(rng.next(6000)).unwrap());
            let max_tokens = u32::try_from(1 + rng.next(8000)).unwrap();
            match client.chat(&request(SONNET, &text, max_tokens)).await {
                Ok(_) => sent += 1,
                Err(ProviderError::BudgetExhausted(message)) => {
                    assert!(message.contains("needs up to $"), "{message}");
                    refused += 1;
                }
                Err(other) => panic!("unexpected error {other:?}"),
            }
            assert!(state.spent_usd() <= max_usd, "spent {} of {max_usd}", state.spent_usd());
        }
        assert!(sent > 0 && refused > 0, "budget {max_usd}: sent {sent}, refused {refused}");
        assert_eq!(inner.calls.load(Ordering::SeqCst), sent, "refused calls reached the model");
        assert_eq!(state.snapshot().llm_calls, sent);
        // The last calls ran the budget nearly dry: clamping used what was left.
        assert!(state.spent_usd() > max_usd * 0.5, "spent only {} of {max_usd}", state.spent_usd());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_callers_never_overspend_together() {
    let max_usd = 0.2;
    let max_tokens = 60_000;
    let state = new_state(Budget {
        max_usd: Some(max_usd),
        max_tokens: Some(max_tokens),
        ..Budget::default()
    });
    let inner = Greedy::new(Some(Duration::from_millis(2)));
    let client = Arc::new(budgeted(inner.clone(), "executor", &state));
    let mut tasks = Vec::new();
    for task in 0..8u64 {
        let client = Arc::clone(&client);
        tasks.push(tokio::spawn(async move {
            let mut rng = Lcg(task + 10);
            for _ in 0..30 {
                let text = "y".repeat(usize::try_from(rng.next(3000)).unwrap());
                let max_tokens = u32::try_from(256 + rng.next(4000)).unwrap();
                let _ = client.chat(&request(SONNET, &text, max_tokens)).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let usage = state.snapshot();
    assert!(usage.cost_usd <= max_usd, "spent {} of {max_usd}", usage.cost_usd);
    assert!(usage.input_tokens + usage.output_tokens <= max_tokens, "{usage:?}");
    assert_eq!(usage.llm_calls, inner.calls.load(Ordering::SeqCst));
    assert!(usage.llm_calls > 0 && usage.llm_calls < 240, "{usage:?}");
    let t = state.lock();
    assert_eq!((t.in_flight, t.reserved_tokens, t.reserved_usd), (0, 0, 0.0));
}

#[tokio::test]
async fn refuses_before_the_call_is_sent() {
    let state = new_state(Budget { max_usd: Some(0.001), ..Budget::default() });
    let inner = Arc::new(ScriptedClient::from_turns("t", vec![ScriptTurn::text("hi")]));
    let client = budgeted(inner.clone(), "planner", &state);
    let message = refusal(client.chat(&request(SONNET, &"z".repeat(3000), 4096)).await);
    assert!(
        message.starts_with("the planner call to claude-sonnet-4-5 needs up to $0.0"),
        "{message}"
    );
    assert!(message.ends_with(", $0.0010 left of $0.0010"), "{message}");
    assert!(inner.requests().is_empty(), "the refused call reached the model");
    assert_eq!(inner.remaining(), 1);
    assert_eq!(state.snapshot().llm_calls, 0);
}

#[tokio::test]
async fn a_passed_deadline_refuses_every_call() {
    let state = new_state(Budget { deadline: Some(Instant::now()), ..Budget::default() });
    let inner = Arc::new(ScriptedClient::from_turns("t", vec![ScriptTurn::text("hi")]));
    let client = budgeted(inner.clone(), "judge", &state);
    let message = refusal(client.chat(&request(SONNET, "hello", 100)).await);
    assert!(message.starts_with("the judge call to claude-sonnet-4-5 cannot start"), "{message}");
    assert!(message.contains("deadline passed"), "{message}");
    assert!(inner.requests().is_empty());
}

#[tokio::test]
async fn the_call_ceiling_counts_every_call() {
    let state = new_state(Budget { max_turns: Some(2), ..Budget::default() });
    let turns = vec![ScriptTurn::text("1"), ScriptTurn::text("2"), ScriptTurn::text("3")];
    let inner = Arc::new(ScriptedClient::from_turns("t", turns));
    let client = budgeted(inner.clone(), "executor", &state);
    assert_eq!(state.note(), "2 of 2 model calls left");
    assert_eq!(client.chat(&request(SONNET, "a", 10)).await.unwrap().text(), "1");
    assert_eq!(client.chat(&request(SONNET, "b", 10)).await.unwrap().text(), "2");
    let message = refusal(client.chat(&request(SONNET, "c", 10)).await);
    assert!(message.ends_with("cannot start: all 2 model calls are used"), "{message}");
    assert_eq!(inner.requests().len(), 2);
    assert_eq!(state.note(), "0 of 2 model calls left");
    assert_eq!(state.snapshot().llm_calls, 2);
}

#[tokio::test]
async fn output_is_clamped_to_the_tokens_left_or_the_call_refused() {
    let probe = request(SONNET, "clamp me", 4096);
    let input = estimate_input_tokens(&probe).unwrap();
    let state = new_state(Budget { max_tokens: Some(input + 1000), ..Budget::default() });
    let inner = Arc::new(ScriptedClient::from_turns("t", vec![ScriptTurn::text("short")]));
    let client = budgeted(inner.clone(), "executor", &state);
    client.chat(&probe).await.unwrap();
    assert_eq!(inner.requests()[0].max_tokens, 1000, "the output was not clamped");

    // Less than 256 tokens of output left: refused rather than clamped to a useless size.
    let state = new_state(Budget { max_tokens: Some(input + 255), ..Budget::default() });
    let inner = Arc::new(ScriptedClient::from_turns("t", vec![ScriptTurn::text("never")]));
    let client = budgeted(inner.clone(), "executor", &state);
    let message = refusal(client.chat(&probe).await);
    let (needs, left) = (input + 4096, input + 255);
    assert_eq!(
        message,
        format!("the executor call to {SONNET} needs up to {needs} tokens, {left} of {left} left")
    );
    assert!(inner.requests().is_empty());
    // A small request that fits whole is not refused for being under 256.
    let small = request(SONNET, "clamp me", 200);
    let inner = Arc::new(ScriptedClient::from_turns("t", vec![ScriptTurn::text("ok")]));
    let client = budgeted(inner.clone(), "executor", &state);
    client.chat(&small).await.unwrap();
    assert_eq!(inner.requests()[0].max_tokens, 200);
}

#[tokio::test]
async fn output_is_clamped_to_the_dollars_left() {
    let probe = request(SONNET, "clamp me by price", 4096);
    let input = estimate_input_tokens(&probe).unwrap();
    // Sonnet: $3.75 per million cache-written input (the dearest), $15 per million output.
    let max_usd = (input as f64 * 3.75 + 1000.0 * 15.0) / 1e6 + 1e-9;
    let state = new_state(Budget { max_usd: Some(max_usd), ..Budget::default() });
    let inner = Arc::new(ScriptedClient::from_turns("t", vec![ScriptTurn::text("short")]));
    let client = budgeted(inner.clone(), "executor", &state);
    client.chat(&probe).await.unwrap();
    let sent = inner.requests()[0].max_tokens;
    assert!((995..=1000).contains(&sent), "clamped to {sent}, expected about 1000");
}

#[tokio::test]
async fn usage_and_cost_are_recorded_per_role() {
    let state = new_state(Budget::default());
    let usage = TokenUsage {
        input_tokens: 1000,
        output_tokens: 200,
        cache_read_tokens: 500,
        cache_write_tokens: 0,
    };
    let planner_inner =
        Arc::new(ScriptedClient::from_turns("p", vec![ScriptTurn::text("plan").with_usage(usage)]));
    let executor_inner =
        Arc::new(ScriptedClient::from_turns("e", vec![ScriptTurn::text("done").with_usage(usage)]));
    let planner = budgeted(planner_inner, "planner", &state);
    let executor = budgeted(executor_inner, "executor", &state);
    // max_tokens covers the scripted output (a scripted count above it is cut to it).
    planner.chat(&request(SONNET, "plan it", 200)).await.unwrap();
    executor.chat(&request(SONNET, "do it", 200)).await.unwrap();

    let one = cost_usd(&PriceTable::built_in().lookup(SONNET).unwrap().price, &usage);
    let snapshot = state.snapshot();
    assert_eq!(snapshot.llm_calls, 2);
    assert_eq!(snapshot.input_tokens, 3000, "cached input counts as input");
    assert_eq!(snapshot.output_tokens, 400);
    assert!((snapshot.cost_usd - 2.0 * one).abs() < 1e-12, "{} vs {}", snapshot.cost_usd, one);
    assert_eq!((snapshot.cache_read_tokens, snapshot.cache_write_tokens), (1000, 0));
    // Each call read 500 tokens from the cache at $0.30 instead of $3 per MTok: 2 x $0.00135.
    assert!((snapshot.cache_saved_usd - 0.0027).abs() < 1e-12, "{}", snapshot.cache_saved_usd);
    let summary = state.summary();
    assert_eq!(summary.roles["planner"].calls, 1);
    assert_eq!(summary.roles["executor"].usage.output_tokens, 200);
    assert!(summary.complete());
}

#[tokio::test]
async fn an_unpriced_model_is_bounded_by_tokens_only() {
    let state =
        new_state(Budget { max_usd: Some(0.000_001), max_tokens: Some(5000), ..Budget::default() });
    let usage = TokenUsage { input_tokens: 2000, output_tokens: 1000, ..TokenUsage::default() };
    let turns = vec![ScriptTurn::text("a").with_usage(usage), ScriptTurn::text("b")];
    let inner = Arc::new(ScriptedClient::from_turns("t", turns));
    let client = budgeted(inner.clone(), "executor", &state);
    // The dollar ceiling is far below any priced call, but this model costs $0.
    client.chat(&request("local-llama", "hello", 1000)).await.unwrap();
    assert_eq!(state.spent_usd(), 0.0);
    assert_eq!(
        state.note(),
        "$0.0000 of $0.0000 left, 2000 of 5000 tokens left (no price is known for local-llama: \
         its calls count as $0)"
    );
    // The token ceiling still binds.
    let message = refusal(client.chat(&request("local-llama", &"w".repeat(9000), 100)).await);
    assert!(message.contains("tokens, 2000 of 5000 left"), "{message}");
    assert_eq!(inner.requests().len(), 1);
}

#[tokio::test]
async fn the_note_says_what_is_left() {
    let mut prices = PriceTable::empty();
    prices.set("m", Price::flat(1.0, 1.0));
    let state = Arc::new(BudgetState::new(
        Budget { max_usd: Some(1.0), max_turns: Some(40), ..Budget::default() },
        prices.clone(),
    ));
    let usage =
        TokenUsage { input_tokens: 300_000, output_tokens: 280_000, ..TokenUsage::default() };
    let inner =
        Arc::new(ScriptedClient::from_turns("t", vec![ScriptTurn::text("x").with_usage(usage)]));
    let client = BudgetedClient::new(inner, "executor", prices, Arc::clone(&state));
    client.chat(&request("m", "hi", 280_000)).await.unwrap();
    assert_eq!(state.note(), "$0.42 of $1.00 left, 39 of 40 model calls left");
    assert_eq!(BudgetState::new(Budget::default(), PriceTable::empty()).note(), "no budget limit");
}

#[tokio::test]
async fn failed_calls_count_and_are_charged_by_kind() {
    let state = new_state(Budget::default());
    let turns = vec![
        ScriptTurn::failure(FailureKind::BadRequest, None),
        ScriptTurn::failure(FailureKind::Timeout, None),
    ];
    let inner = Arc::new(ScriptedClient::from_turns("t", turns));
    let client = budgeted(inner, "executor", &state);
    let bad = request(SONNET, "bad", 300);
    assert!(matches!(client.chat(&bad).await, Err(ProviderError::BadRequest { .. })));
    let after_refusal = state.snapshot();
    assert_eq!((after_refusal.llm_calls, after_refusal.output_tokens), (1, 0));
    assert_eq!(after_refusal.cost_usd, 0.0, "a refused request costs nothing");

    // A timeout may have been billed: the worst case is charged.
    let slow = request(SONNET, "slow", 300);
    assert!(matches!(client.chat(&slow).await, Err(ProviderError::Timeout { .. })));
    let after_timeout = state.snapshot();
    assert_eq!(after_timeout.llm_calls, 2);
    assert_eq!(after_timeout.output_tokens, 300);
    assert_eq!(after_timeout.input_tokens, estimate_input_tokens(&slow).unwrap());
    assert!(after_timeout.cost_usd > 0.0);
}

#[tokio::test]
async fn an_abandoned_call_releases_its_reservation_and_charges_the_worst_case() {
    let state = new_state(Budget { max_tokens: Some(100_000), ..Budget::default() });
    let client = budgeted(Arc::new(Hang), "executor", &state);
    let hung = request(SONNET, "never answered", 1000);
    let input = estimate_input_tokens(&hung).unwrap();
    let waited = tokio::time::timeout(Duration::from_millis(20), client.chat(&hung)).await;
    assert!(waited.is_err(), "the hanging call answered");
    let usage = state.snapshot();
    assert_eq!((usage.llm_calls, usage.input_tokens, usage.output_tokens), (1, input, 1000));
    let t = state.lock();
    assert_eq!((t.in_flight, t.reserved_tokens), (0, 0));
    drop(t);
    assert_eq!(state.note(), format!("{} of 100000 tokens left", 100_000 - input - 1000));
}

#[tokio::test]
async fn streamed_calls_are_budgeted_and_stream() {
    let state = new_state(Budget { max_turns: Some(1), ..Budget::default() });
    let turns = vec![ScriptTurn::text("streamed answer"), ScriptTurn::text("never")];
    let inner = Arc::new(ScriptedClient::from_turns("t", turns));
    let client = budgeted(inner.clone(), "executor", &state);
    let seen = std::sync::Mutex::new(String::new());
    let sink = |event: StreamEvent| {
        if let StreamEvent::TextDelta { text, .. } = event {
            seen.lock().unwrap().push_str(&text);
        }
    };
    let response = client.chat_stream(&request(SONNET, "go", 50), &sink).await.unwrap();
    assert_eq!(response.text(), "streamed answer");
    assert_eq!(*seen.lock().unwrap(), "streamed answer");
    let message = refusal(client.chat_stream(&request(SONNET, "again", 50), &sink).await);
    assert!(message.ends_with("all 1 model calls are used"), "{message}");
    assert_eq!(inner.requests().len(), 1);
    assert_eq!(client.provider(), "script:t");
}

#[test]
fn the_state_keeps_the_ceilings_it_was_given() {
    let budget = Budget {
        max_usd: Some(2.5),
        max_tokens: Some(9000),
        max_turns: Some(7),
        deadline: Some(Instant::now() + Duration::from_secs(60)),
    };
    assert_eq!(*BudgetState::new(budget, PriceTable::empty()).budget(), budget);
}

#[test]
fn spent_and_reserved_dollars_shrink_what_a_call_may_use() {
    let state = per_token_state(1024);
    let first = state.admit(&ask(&state, "priced", 100, 200)).unwrap();
    assert_eq!(first.max_output, 200);
    // The reservation (300 tokens' worth) counts as spent.
    assert_eq!(state.note(), "$0.71 of $1.00 left");
    // 724 tokens' worth left while the first call is in flight: 100 for the input, 1 for
    // rounding, and the rest is the most the output may use.
    let second = state.admit(&ask(&state, "priced", 100, 1000)).unwrap();
    assert_eq!(second.max_output, 623);

    // The first call ends: its reservation is released, the second's stays, and what it really
    // used is spent.
    state.settle("executor", "priced", &first, used(100, 100));
    assert_eq!(state.lock().reserved_usd, 723.0 * TOKEN_USD);
    assert_eq!(state.spent_usd(), 200.0 * TOKEN_USD);
    state.settle("executor", "priced", &second, used(100, 123));
    assert_eq!(state.spent_usd(), 423.0 * TOKEN_USD);
    assert_eq!(state.lock().reserved_usd, 0.0);

    // 601 tokens' worth left after what was spent: the output gets 601 - 100 - 1.
    let third = state.admit(&ask(&state, "priced", 100, 1000)).unwrap();
    assert_eq!(third.max_output, 500);
    state.settle("executor", "priced", &third, Charge::WorstCase);
    assert_eq!(state.spent_usd(), 1023.0 * TOKEN_USD);
}

#[test]
fn a_call_exactly_at_the_dollar_ceiling_is_sent_and_one_token_more_is_not() {
    // $0.50: 512 tokens' worth, and output is free, so nothing is clamped and only the
    // comparison with the ceiling decides.
    let state = per_token_state(512);
    let spent = state.admit(&ask(&state, "input-only", 100, 50)).unwrap();
    state.settle("executor", "input-only", &spent, used(100, 50));
    let in_flight = state.admit(&ask(&state, "input-only", 200, 50)).unwrap();
    // 100 spent + 200 reserved + 212 = 512 tokens' worth: exactly the ceiling.
    let last = state.admit(&ask(&state, "input-only", 212, 50)).unwrap();
    assert_eq!(last.max_output, 50);
    state.settle("executor", "input-only", &last, Charge::Nothing);
    // One token more is over it.
    let message = state.admit(&ask(&state, "input-only", 213, 50)).unwrap_err();
    assert_eq!(
        message,
        "the executor call to input-only needs up to $0.2080, $0.2070 left of $0.5000"
    );
    state.settle("executor", "input-only", &in_flight, used(200, 50));
    let usage = state.snapshot();
    assert_eq!((usage.llm_calls, usage.input_tokens, usage.cost_usd), (3, 300, 300.0 * TOKEN_USD));
}

#[tokio::test]
async fn a_call_clamped_to_exactly_the_least_output_is_sent() {
    let probe = request(SONNET, "clamp me", 4096);
    let input = estimate_input_tokens(&probe).unwrap();
    let state = new_state(Budget { max_tokens: Some(input + 256), ..Budget::default() });
    let inner = Arc::new(ScriptedClient::from_turns("t", vec![ScriptTurn::text("short")]));
    let client = budgeted(inner.clone(), "executor", &state);
    client.chat(&probe).await.unwrap();
    assert_eq!(inner.requests()[0].max_tokens, 256);
}

#[tokio::test]
async fn a_refusal_names_the_ceiling_that_binds() {
    let probe = request(SONNET, "clamp me", 4096);
    let input = estimate_input_tokens(&probe).unwrap();
    let inner = Arc::new(ScriptedClient::from_turns("t", vec![ScriptTurn::text("never")]));
    // The tokens left pay for the input and exactly the least output; the dollars do not.
    let budget =
        Budget { max_usd: Some(0.0001), max_tokens: Some(input + 256), ..Budget::default() };
    let client = budgeted(inner.clone(), "executor", &new_state(budget));
    let message = refusal(client.chat(&probe).await);
    let needs = (input as f64 * 3.75 + 4096.0 * 15.0) / 1e6;
    assert_eq!(
        message,
        format!("the executor call to {SONNET} needs up to ${needs:.4}, $0.0001 left of $0.0001")
    );
    // One token less and both bind: the tokens are named.
    let budget = Budget { max_tokens: Some(input + 255), ..budget };
    let client = budgeted(inner.clone(), "executor", &new_state(budget));
    let message = refusal(client.chat(&probe).await);
    let (needs, left) = (input + 4096, input + 255);
    assert_eq!(
        message,
        format!("the executor call to {SONNET} needs up to {needs} tokens, {left} of {left} left")
    );
    assert!(inner.requests().is_empty());
}

/// The deadline bounds a call in flight: a model that never answers is abandoned when the run's
/// time is up, with a reason that names the role and the model, and charged its worst case.
#[tokio::test]
async fn the_deadline_abandons_a_call_in_flight() {
    let deadline = Instant::now() + Duration::from_millis(50);
    let state = new_state(Budget { deadline: Some(deadline), ..Budget::default() });
    let client = budgeted(Arc::new(Hang), "planner", &state);
    let hung = request(SONNET, "never answered", 1000);
    let input = estimate_input_tokens(&hung).unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), client.chat(&hung)).await;
    let message = refusal(answer.expect("abandoned at the deadline, not hung"));
    assert_eq!(
        message,
        "the run's time limit (--timeout) ran out while the planner model (claude-sonnet-4-5) was \
         answering; the call was abandoned"
    );
    let usage = state.snapshot();
    assert_eq!((usage.llm_calls, usage.input_tokens, usage.output_tokens), (1, input, 1000));
}

/// What is left of each ceiling, for a child run's slice: what was spent and what calls in
/// flight reserved both count; a ceiling with nothing left is spent.
#[test]
fn what_is_left_counts_spent_and_reserved_and_a_ceiling_at_zero_is_spent() {
    let state = per_token_state(1000);
    let untouched = state.remaining();
    assert_eq!(untouched.max_usd, Some(1000.0 * TOKEN_USD));
    assert_eq!((untouched.max_tokens, untouched.max_turns), (None, None));
    assert!(!state.is_spent());

    let grant = state.admit(&ask(&state, "priced", 100, 200)).expect("admitted");
    // In flight: its worst case (100 in + 200 out) is reserved.
    assert_eq!(state.remaining().max_usd, Some(700.0 * TOKEN_USD));
    state.settle("executor", "priced", &grant, used(100, 50));
    assert_eq!(state.remaining().max_usd, Some(850.0 * TOKEN_USD));
    assert!(!state.is_spent());
    let grant = state.admit(&ask(&state, "priced", 850, 0)).expect("the rest, exactly");
    state.settle("executor", "priced", &grant, used(850, 0));
    assert_eq!(state.remaining().max_usd, Some(0.0));
    assert!(state.is_spent());

    let turns =
        new_state(Budget { max_turns: Some(2), max_tokens: Some(500), ..Budget::default() });
    let grant = turns.admit(&ask(&turns, SONNET, 10, 10)).expect("first call");
    turns.settle("executor", SONNET, &grant, used(10, 10));
    let left = turns.remaining();
    assert_eq!((left.max_turns, left.max_tokens), (Some(1), Some(480)));
    assert!(!turns.is_spent());
    let grant = turns.admit(&ask(&turns, SONNET, 10, 10)).expect("second call");
    turns.settle("executor", SONNET, &grant, used(10, 10));
    assert_eq!(turns.remaining().max_turns, Some(0));
    assert!(turns.is_spent(), "no call is left");

    let tokens = new_state(Budget { max_tokens: Some(20), ..Budget::default() });
    let grant = tokens.admit(&ask(&tokens, SONNET, 10, 10)).expect("admitted");
    tokens.settle("executor", SONNET, &grant, used(10, 10));
    assert_eq!(tokens.remaining().max_tokens, Some(0));
    assert!(tokens.is_spent());

    let past = new_state(Budget {
        deadline: Some(Instant::now() - Duration::from_millis(1)),
        ..Budget::default()
    });
    assert!(past.is_spent(), "a deadline passed leaves nothing");
    let future = new_state(Budget {
        deadline: Some(Instant::now() + Duration::from_secs(60)),
        ..Budget::default()
    });
    assert!(!future.is_spent());
}

/// A model that notes the marks of calls in flight it finds in `dir` while it answers.
struct Peek {
    dir: std::path::PathBuf,
    seen: std::sync::Mutex<Vec<serde_json::Value>>,
}

impl ModelClient for Peek {
    fn provider(&self) -> &str {
        "peek"
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move {
            for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
                let text = std::fs::read(entry.path()).unwrap_or_default();
                let mark = serde_json::from_slice(&text).unwrap_or(serde_json::Value::Null);
                self.seen.lock().unwrap().push(mark);
            }
            Ok(ChatResponse {
                id: String::new(),
                model: request.model.clone(),
                content: vec![ContentBlock::text("ok")],
                stop_reason: StopReason::EndTurn,
                usage: TokenUsage { input_tokens: 10, output_tokens: 5, ..TokenUsage::default() },
            })
        })
    }

    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        _sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        self.chat(request)
    }
}

/// Issue 31: a call in flight under a dollar or token ceiling is marked durably while it is in
/// flight (its worst case, for a resume to charge if a kill cuts it off) and unmarked once it
/// is settled; without such a ceiling, or before the run is known, nothing is marked.
#[tokio::test]
async fn a_call_in_flight_under_a_ceiling_is_marked_until_it_is_settled() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join(".pev/inflight/r");
    for (budget, marked) in [
        (Budget { max_usd: Some(1.0), ..Budget::default() }, true),
        (Budget { max_tokens: Some(100_000), ..Budget::default() }, true),
        (Budget { max_turns: Some(5), ..Budget::default() }, false),
    ] {
        let peek = Arc::new(Peek { dir: dir.clone(), seen: std::sync::Mutex::new(Vec::new()) });
        let state = new_state(budget);
        state.mark_calls_in(super::super::call_marks::CallMarks::new(root.path(), "r"));
        let client = budgeted(Arc::clone(&peek) as Arc<dyn ModelClient>, "executor", &state);
        client.chat(&request(SONNET, "hi", 1000)).await.expect("answered");
        let seen = peek.seen.lock().unwrap().clone();
        if marked {
            assert_eq!(seen.len(), 1, "{budget:?}: {seen:?}");
            assert_eq!(
                (seen[0]["role"].as_str(), seen[0]["model"].as_str()),
                (Some("executor"), Some(SONNET))
            );
            assert_eq!(seen[0]["max_output"], 1000, "{seen:?}");
            assert!(seen[0]["usd"].as_f64().is_some_and(|usd| usd > 0.0), "{seen:?}");
        } else {
            assert!(seen.is_empty(), "{budget:?}: {seen:?}");
        }
        let left = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
        assert_eq!(left, 0, "{budget:?}: the mark outlived its call");
    }

    // No marks set (the run not yet known): the call goes without one.
    let peek = Arc::new(Peek { dir: dir.clone(), seen: std::sync::Mutex::new(Vec::new()) });
    let state = new_state(Budget { max_usd: Some(1.0), ..Budget::default() });
    let client = budgeted(Arc::clone(&peek) as Arc<dyn ModelClient>, "executor", &state);
    client.chat(&request(SONNET, "hi", 1000)).await.expect("answered without marks");
    assert!(peek.seen.lock().unwrap().is_empty());
}

/// A mark that cannot be written: the call is not sent, and it costs nothing.
#[tokio::test]
async fn a_call_whose_mark_cannot_be_written_is_not_sent() {
    let root = tempfile::tempdir().unwrap();
    // `.pev` is a file: the marks' directory cannot be made.
    std::fs::write(root.path().join(".pev"), "not a directory").unwrap();
    let greedy = Greedy::new(None);
    let state = new_state(Budget { max_usd: Some(1.0), ..Budget::default() });
    state.mark_calls_in(super::super::call_marks::CallMarks::new(root.path(), "r"));
    let client = budgeted(Arc::clone(&greedy) as Arc<dyn ModelClient>, "executor", &state);
    let err = client.chat(&request(SONNET, "hi", 1000)).await.expect_err("refused");
    assert!(err.to_string().contains(".pev/inflight"), "{err}");
    assert_eq!(greedy.calls.load(Ordering::SeqCst), 0, "the call was sent");
    assert_eq!(state.snapshot().cost_usd, 0.0);
    assert!(
        state.remaining().max_usd.is_some_and(|usd| (usd - 1.0).abs() < 1e-12),
        "the reservation was released"
    );
}
