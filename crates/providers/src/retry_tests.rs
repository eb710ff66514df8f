//! Tests of retries: which errors are retried, the waits requested (recorded by a fake sleeper,
//! so nothing actually sleeps), the caps on attempts and total wait, jitter bounds, and streams
//! that already reached the caller.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

use super::*;
use crate::script::{FailureKind, ScriptTurn, ScriptedClient};
use crate::{ContentBlock, Message, StreamEvent};

/// Records every wait and returns at once.
#[derive(Default)]
struct Recorder(Mutex<Vec<Duration>>);

impl Sleeper for Recorder {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.0.lock().unwrap().push(duration);
        Box::pin(std::future::ready(()))
    }
}

struct Setup {
    script: Arc<ScriptedClient>,
    sleeps: Arc<Recorder>,
    client: Retrying,
}

impl Setup {
    fn new(turns: Vec<ScriptTurn>, policy: RetryPolicy) -> Self {
        let script = Arc::new(ScriptedClient::from_turns("retry", turns));
        let sleeps = Arc::new(Recorder::default());
        let client =
            Retrying::new(script.clone(), policy).with_sleeper(sleeps.clone()).with_jitter_seed(42);
        Self { script, sleeps, client }
    }

    fn chat(&self) -> Result<ChatResponse, ProviderError> {
        block_on(self.client.chat(&request()))
    }

    fn calls(&self) -> usize {
        self.script.requests().len()
    }

    fn sleeps(&self) -> Vec<Duration> {
        self.sleeps.0.lock().unwrap().clone()
    }
}

fn request() -> ChatRequest {
    ChatRequest::new("m", vec![Message::user("hi")])
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
}

fn fail(kind: FailureKind) -> ScriptTurn {
    ScriptTurn::failure(kind, None)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn the_default_policy_is_the_documented_one() {
    let p = RetryPolicy::default();
    assert_eq!(p.max_attempts, 3);
    assert_eq!(p.base_delay, Duration::from_millis(500));
    assert_eq!(p.max_delay, secs(30));
    assert_eq!(p.max_total_wait, secs(60));
}

#[test]
fn a_rate_limit_waits_exactly_what_the_server_asked_then_succeeds() {
    let s = Setup::new(
        vec![ScriptTurn::failure(FailureKind::RateLimited, Some(secs(7))), ScriptTurn::text("ok")],
        RetryPolicy::default(),
    );
    assert_eq!(s.chat().unwrap().text(), "ok");
    assert_eq!(s.sleeps(), vec![secs(7)]);
    assert_eq!(s.calls(), 2);
}

#[test]
fn a_server_error_is_retried_after_a_jittered_backoff() {
    let s =
        Setup::new(vec![fail(FailureKind::Server), ScriptTurn::text("ok")], RetryPolicy::default());
    assert_eq!(s.chat().unwrap().text(), "ok");
    let sleeps = s.sleeps();
    assert_eq!(sleeps.len(), 1);
    assert!(sleeps[0] <= Duration::from_millis(500), "{sleeps:?}");
    assert_eq!(s.calls(), 2);
}

#[test]
fn overload_five_times_gives_up_after_five_attempts() {
    let policy = RetryPolicy { max_attempts: 5, ..RetryPolicy::default() };
    let s = Setup::new(vec![fail(FailureKind::Overloaded); 6], policy);
    let err = s.chat().unwrap_err();
    assert!(matches!(err, ProviderError::Overloaded { .. }), "{err:?}");
    assert_eq!(s.calls(), 5);
    assert_eq!(s.script.remaining(), 1);
    let sleeps = s.sleeps();
    assert_eq!(sleeps.len(), 4);
    // Each wait is within its doubling cap: 0.5 s, 1 s, 2 s, 4 s.
    for (i, wait) in sleeps.iter().enumerate() {
        let cap = Duration::from_millis(500 << i);
        assert!(*wait <= cap, "retry {i}: {wait:?} > {cap:?}");
    }
}

#[test]
fn client_errors_are_not_retried() {
    for kind in [FailureKind::BadRequest, FailureKind::Authentication, FailureKind::ContextTooLong]
    {
        let s = Setup::new(vec![fail(kind), ScriptTurn::text("ok")], RetryPolicy::default());
        let err = s.chat().unwrap_err();
        assert!(!err.is_retryable(), "{err:?}");
        assert_eq!(s.calls(), 1, "{kind:?}");
        assert!(s.sleeps().is_empty());
    }
}

#[test]
fn timeouts_and_transport_errors_are_retried() {
    for kind in [FailureKind::Timeout, FailureKind::Transport] {
        let s = Setup::new(vec![fail(kind), ScriptTurn::text("ok")], RetryPolicy::default());
        assert_eq!(s.chat().unwrap().text(), "ok", "{kind:?}");
        assert_eq!(s.calls(), 2);
    }
}

#[test]
fn a_retry_after_beyond_the_budget_gives_up_at_once() {
    let policy = RetryPolicy { max_total_wait: secs(5), ..RetryPolicy::default() };
    let s = Setup::new(
        vec![ScriptTurn::failure(FailureKind::RateLimited, Some(secs(7))), ScriptTurn::text("ok")],
        policy,
    );
    let err = s.chat().unwrap_err();
    assert_eq!(err.retry_after(), Some(secs(7)));
    assert_eq!(s.calls(), 1);
    assert!(s.sleeps().is_empty());
}

#[test]
fn a_retry_after_longer_than_what_is_left_gives_up_even_when_max_delay_would_fit() {
    // Budget 10 s, single waits cut to 3 s. Two waits of 3 s leave 4 s; the server then asks for
    // 5 s. Cut to 3 s the wait would fit, but the server said not before 5 s: give up.
    let policy =
        RetryPolicy { max_delay: secs(3), max_total_wait: secs(10), ..RetryPolicy::default() };
    let limited = |s| ScriptTurn::failure(FailureKind::RateLimited, Some(secs(s)));
    let s = Setup::new(vec![limited(3), limited(3), limited(5), ScriptTurn::text("ok")], policy);
    let err = s.chat().unwrap_err();
    assert!(matches!(err, ProviderError::RateLimited { .. }), "{err:?}");
    assert_eq!(err.retry_after(), Some(secs(5)));
    assert_eq!(s.sleeps(), vec![secs(3), secs(3)]);
    assert_eq!(s.calls(), 3);
    assert_eq!(s.script.remaining(), 1);
}

#[test]
fn giving_up_on_a_retry_after_past_the_budget_does_not_sleep() {
    // The real tokio timer: a client that waited (even the cut 2 s) would show it in the clock.
    let policy =
        RetryPolicy { max_delay: secs(2), max_total_wait: secs(5), ..RetryPolicy::default() };
    let script = Arc::new(ScriptedClient::from_turns(
        "retry",
        vec![ScriptTurn::failure(FailureKind::Overloaded, Some(secs(60))), ScriptTurn::text("ok")],
    ));
    let client = Retrying::new(script.clone(), policy);
    let started = std::time::Instant::now();
    let err = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(client.chat(&request()))
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(500), "gave up after {elapsed:?}");
    assert!(matches!(err, ProviderError::Overloaded { .. }), "{err:?}");
    assert_eq!(err.retry_after(), Some(secs(60)));
    assert_eq!(script.requests().len(), 1);
}

#[test]
fn the_longest_retry_after_a_header_can_give_is_not_waited_for() {
    // What `retry-after: 1e300` parses to (an hour, see http::retry_after) against the default
    // budget of two minutes: no wait, the error at once.
    let hour = secs(3600);
    let s = Setup::new(
        vec![ScriptTurn::failure(FailureKind::RateLimited, Some(hour)), ScriptTurn::text("ok")],
        RetryPolicy::default(),
    );
    assert_eq!(s.chat().unwrap_err().retry_after(), Some(hour));
    assert!(s.sleeps().is_empty());
    // With a budget that allows it, the hour is cut to max_delay.
    let policy = RetryPolicy { max_total_wait: secs(7200), ..RetryPolicy::default() };
    let s = Setup::new(
        vec![ScriptTurn::failure(FailureKind::RateLimited, Some(hour)), ScriptTurn::text("ok")],
        policy,
    );
    assert_eq!(s.chat().unwrap().text(), "ok");
    assert_eq!(s.sleeps(), vec![secs(30)]);
}

#[test]
fn the_total_wait_is_capped() {
    let policy = RetryPolicy { max_total_wait: secs(10), ..RetryPolicy::default() };
    let limited = ScriptTurn::failure(FailureKind::RateLimited, Some(secs(6)));
    let s = Setup::new(vec![limited.clone(), limited, ScriptTurn::text("ok")], policy);
    assert!(matches!(s.chat(), Err(ProviderError::RateLimited { .. })));
    // 6 s fit in the budget of 10 s; another 6 s would not.
    assert_eq!(s.sleeps(), vec![secs(6)]);
    assert_eq!(s.calls(), 2);
}

#[test]
fn a_long_retry_after_is_cut_to_max_delay() {
    let policy = RetryPolicy { max_delay: secs(3), ..RetryPolicy::default() };
    let s = Setup::new(
        vec![ScriptTurn::failure(FailureKind::Overloaded, Some(secs(20))), ScriptTurn::text("ok")],
        policy,
    );
    assert_eq!(s.chat().unwrap().text(), "ok");
    assert_eq!(s.sleeps(), vec![secs(3)]);
}

#[test]
fn backoff_never_exceeds_the_total_budget() {
    let policy = RetryPolicy {
        max_attempts: 50,
        base_delay: secs(1),
        max_delay: secs(8),
        max_total_wait: secs(20),
    };
    let s = Setup::new(vec![fail(FailureKind::Server); 50], policy);
    assert!(s.chat().is_err());
    let total: Duration = s.sleeps().iter().sum();
    assert!(total <= secs(20), "{total:?}");
    assert!(s.calls() < 50, "the budget, not the attempts, ended it");
    assert_eq!(s.calls(), s.sleeps().len() + 1);
}

#[test]
fn zero_attempts_means_one_call() {
    let policy = RetryPolicy { max_attempts: 0, ..RetryPolicy::default() };
    let s = Setup::new(vec![fail(FailureKind::Server), ScriptTurn::text("ok")], policy);
    assert!(s.chat().is_err());
    assert_eq!(s.calls(), 1);
}

#[test]
fn backoff_caps_double_and_saturate() {
    let p = RetryPolicy::default();
    assert_eq!(p.backoff_cap(0), Duration::from_millis(500));
    assert_eq!(p.backoff_cap(1), secs(1));
    assert_eq!(p.backoff_cap(5), secs(16));
    assert_eq!(p.backoff_cap(6), secs(30));
    assert_eq!(p.backoff_cap(40), secs(30));
    assert_eq!(p.backoff_cap(u32::MAX), secs(30));
}

#[test]
fn jitter_stays_within_zero_and_the_cap() {
    let cap = Duration::from_millis(1500);
    assert_eq!(full_jitter(cap, 0), Duration::ZERO);
    assert_eq!(full_jitter(cap, u64::MAX), cap);
    assert_eq!(full_jitter(cap, u64::MAX / 2), Duration::from_nanos(749_999_999));
    let rng = Jitter::new(7);
    let mut low = false;
    let mut high = false;
    for _ in 0..10_000 {
        let wait = full_jitter(cap, rng.next());
        assert!(wait <= cap);
        low |= wait < cap / 4;
        high |= wait > cap * 3 / 4;
    }
    assert!(low && high, "the waits spread over the range");
    assert_eq!(full_jitter(Duration::MAX, u64::MAX), Duration::from_nanos(u64::MAX));
}

#[test]
fn the_generator_is_xorshift64_13_7_17() {
    // Marsaglia's xorshift64 with the (13, 7, 17) triple has the full period 2^64 - 1; another
    // triple (or `|=` for `^=`) silently gives a worse one. The first outputs from seed 1.
    let rng = Jitter::new(1);
    let got: Vec<u64> = (0..3).map(|_| rng.next()).collect();
    assert_eq!(got, [1_082_269_761, 1_152_992_998_833_853_505, 11_177_516_664_432_764_457]);
}

#[test]
fn the_generator_never_sticks() {
    let rng = Jitter::new(0);
    let a = rng.next();
    let b = rng.next();
    assert_ne!(a, 0);
    assert_ne!(a, b);
    assert_ne!(Jitter::from_entropy().next(), 0);
}

fn stream(s: &Setup) -> (Vec<StreamEvent>, Result<ChatResponse, ProviderError>) {
    let events = Mutex::new(Vec::new());
    let sink = |e: StreamEvent| events.lock().unwrap().push(e);
    let result = block_on(s.client.chat_stream(&request(), &sink));
    (events.into_inner().unwrap(), result)
}

#[test]
fn a_stream_that_failed_before_any_event_is_retried() {
    let s = Setup::new(
        vec![fail(FailureKind::Overloaded), ScriptTurn::text("hello")],
        RetryPolicy::default(),
    );
    let (events, result) = stream(&s);
    assert_eq!(result.unwrap().text(), "hello");
    assert_eq!(events.len(), 2, "only the successful attempt's text: {events:?}");
    assert_eq!(s.calls(), 2);
}

#[test]
fn a_stream_that_failed_after_a_delta_is_not_retried() {
    let mut cut = fail(FailureKind::Server);
    cut.content = vec![ContentBlock::text("half an ans")];
    let s = Setup::new(vec![cut, ScriptTurn::text("whole")], RetryPolicy::default());
    let (events, result) = stream(&s);
    assert!(matches!(result, Err(ProviderError::Server { status: 500, .. })), "{result:?}");
    assert_eq!(s.calls(), 1);
    assert!(s.sleeps().is_empty());
    assert_eq!(events.len(), 2);
    assert_eq!(s.script.remaining(), 1);
}

#[test]
fn the_wrapper_keeps_the_provider_name() {
    let s = Setup::new(Vec::new(), RetryPolicy::default());
    assert_eq!(s.client.provider(), "script:retry");
    assert!(format!("{:?}", s.client).contains("script:retry"));
}

#[test]
fn a_retry_after_exactly_what_is_left_is_waited_for() {
    // Budget 10 s: waits of 3 s and 3 s leave 4 s, and the server asks for exactly 4 s. That
    // fits: the client waits it out and the next try succeeds.
    let policy = RetryPolicy {
        max_attempts: 5,
        max_delay: secs(5),
        max_total_wait: secs(10),
        ..RetryPolicy::default()
    };
    let limited = |s| ScriptTurn::failure(FailureKind::RateLimited, Some(secs(s)));
    let s = Setup::new(vec![limited(3), limited(3), limited(4), ScriptTurn::text("ok")], policy);
    assert!(s.chat().is_ok());
    assert_eq!(s.sleeps(), vec![secs(3), secs(3), secs(4)]);
    assert_eq!(s.calls(), 4);
}

#[test]
fn the_client_keeps_the_policy_it_was_given() {
    let policy = RetryPolicy { max_attempts: 7, max_delay: secs(9), ..RetryPolicy::default() };
    let script = Arc::new(ScriptedClient::from_turns("policy", vec![ScriptTurn::text("ok")]));
    assert_eq!(Retrying::new(script, policy).policy(), &policy);
}

fn collecting() -> (NoticeSink, Arc<Mutex<Vec<CallNotice>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    (Arc::new(move |n| sink.lock().unwrap().push(n)), seen)
}

/// The marks' waits: the first two end at once, the third never does and lets the call answer.
#[derive(Default)]
struct TwoMarks {
    asked: AtomicUsize,
    answer: Arc<tokio::sync::Notify>,
}

impl Sleeper for TwoMarks {
    fn sleep(&self, _: Duration) -> BoxFuture<'static, ()> {
        if self.asked.fetch_add(1, AtomicOrdering::SeqCst) < 2 {
            return Box::pin(std::future::ready(()));
        }
        self.answer.notify_one();
        Box::pin(std::future::pending())
    }
}

/// A call that answers when `answer` is notified.
struct AnswersWhen(Arc<tokio::sync::Notify>);

impl ModelClient for AnswersWhen {
    fn provider(&self) -> &str {
        "slow"
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move {
            self.0.notified().await;
            Ok(ChatResponse {
                id: String::new(),
                model: request.model.clone(),
                content: vec![ContentBlock::text("late")],
                stop_reason: crate::StopReason::EndTurn,
                usage: Default::default(),
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

/// A call that waits is reported at 15 s and 30 s, and not after it has answered (which it
/// does while the wait for the third mark, 1 min, is under way).
#[tokio::test]
async fn a_call_that_waits_is_reported_as_it_waits() {
    let (sink, seen) = collecting();
    let marks = Arc::new(TwoMarks::default());
    let client = Retrying::new(Arc::new(AnswersWhen(marks.answer.clone())), RetryPolicy::default())
        .with_watch(marks.clone())
        .with_notice(sink);
    let response = client.chat(&request()).await.unwrap();
    assert_eq!(response.text(), "late");
    let waits: Vec<CallNotice> = seen.lock().unwrap().clone();
    assert_eq!(
        waits,
        vec![
            CallNotice::Waiting { waited: secs(15), attempt: 1, of: 3 },
            CallNotice::Waiting { waited: secs(30), attempt: 1, of: 3 },
        ]
    );
    assert_eq!(marks.asked.load(AtomicOrdering::SeqCst), 3);
}

/// Each retry is reported before its wait, with the attempt it starts and the error before it.
#[test]
fn each_retry_is_reported_with_its_attempt_and_the_error() {
    let (sink, seen) = collecting();
    let script = Arc::new(ScriptedClient::from_turns(
        "retry",
        vec![fail(FailureKind::Overloaded), fail(FailureKind::Server), ScriptTurn::text("ok")],
    ));
    let client = Retrying::new(script, RetryPolicy::default())
        .with_sleeper(Arc::new(Recorder::default()))
        .with_notice(sink);
    assert_eq!(block_on(client.chat(&request())).unwrap().text(), "ok");
    let notices = seen.lock().unwrap().clone();
    assert_eq!(notices.len(), 2);
    assert!(matches!(
        &notices[0],
        CallNotice::Retrying { attempt: 2, of: 3, error, .. } if error.contains("overloaded")
    ));
    assert!(matches!(
        &notices[1],
        CallNotice::Retrying { attempt: 3, of: 3, error, .. } if error.contains("server error 500")
    ));
}
