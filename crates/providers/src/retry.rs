//! Retries of model calls: a [`ModelClient`] wrapper that tries again on the failures that can
//! pass (rate limits, overload, 5xx, timeouts, a broken connection) and never on the others (a
//! bad request stays bad).
//!
//! The wait honours the server's `retry-after` when it gave one; otherwise it is exponential
//! backoff with full jitter (a uniform wait in `[0, min(base * 2^n, max_delay)]`), which spreads
//! the clients that failed together. Attempts and the total wait are both capped, so a run never
//! hangs on a provider that is down. A stream is retried only while nothing has reached the
//! caller: once text was shown, replaying the turn would show it twice.
//!
//! Sleeping goes through [`Sleeper`] so that tests run instantly and see the exact waits.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::notice::{CallNotice, NoticeSink, waiting_marks};
use crate::{BoxFuture, ChatRequest, ChatResponse, ModelClient, ProviderError, StreamSink};

/// When to try again and when to give up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Calls in all, the first included (0 counts as 1).
    pub max_attempts: u32,
    /// The cap of the first backoff; it doubles with each retry.
    pub base_delay: Duration,
    /// The longest single wait (a longer `retry-after` is cut to this).
    pub max_delay: Duration,
    /// The longest time spent waiting over all retries of one call.
    pub max_total_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            // An interactive tool: a provider that fails three times in a row is down for now,
            // and a person is waiting; a minute of waiting in all, not minutes.
            max_attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_total_wait: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The cap of the backoff before retry `retry` (0 for the first retry):
    /// `min(base_delay * 2^retry, max_delay)`, without overflow.
    pub fn backoff_cap(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }
}

/// A wait of `cap * random / u64::MAX`: uniform in `[0, cap]` ("full jitter").
pub fn full_jitter(cap: Duration, random: u64) -> Duration {
    let nanos = cap.as_nanos().saturating_mul(u128::from(random)) / u128::from(u64::MAX);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// How a retry waits.
pub trait Sleeper: Send + Sync {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// Waits on the tokio timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// A xorshift64 generator: jitter needs spread, not cryptographic quality, and a dependency for
/// it would be out of proportion.
#[derive(Debug)]
struct Jitter(AtomicU64);

impl Jitter {
    fn new(seed: u64) -> Self {
        // Xorshift is stuck at zero; any other seed works.
        Self(AtomicU64::new(if seed == 0 { 0x9E37_79B9_7F4A_7C15 } else { seed }))
    }

    /// Seeded from the clock and the process's random hasher keys, so that clients started
    /// together do not wait in step.
    fn from_entropy() -> Self {
        let nanos =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Self::new(RandomState::new().hash_one(nanos))
    }

    fn next(&self) -> u64 {
        let step = |mut x: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let previous = self.0.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| Some(step(x)));
        // The closure never refuses, so both arms hold the previous state.
        step(previous.unwrap_or_else(|x| x))
    }
}

/// A client that retries another's retryable failures.
pub struct Retrying {
    inner: Arc<dyn ModelClient>,
    policy: RetryPolicy,
    sleeper: Arc<dyn Sleeper>,
    /// The waits between "still waiting" notices (tests end them when they choose).
    watch: Arc<dyn Sleeper>,
    jitter: Jitter,
    notice: Option<NoticeSink>,
}

impl std::fmt::Debug for Retrying {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retrying")
            .field("provider", &self.inner.provider())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Retrying {
    /// Retries `inner`'s calls under `policy`, sleeping on the tokio timer.
    pub fn new(inner: Arc<dyn ModelClient>, policy: RetryPolicy) -> Self {
        Self {
            inner,
            policy,
            sleeper: Arc::new(TokioSleeper),
            watch: Arc::new(TokioSleeper),
            jitter: Jitter::from_entropy(),
            notice: None,
        }
    }

    /// Reports a call that is still waiting for its answer, and each retry, to `notice`.
    pub fn with_notice(mut self, notice: NoticeSink) -> Self {
        self.notice = Some(notice);
        self
    }

    /// Waits between the notices of a call still waiting through `watch`, not the tokio timer.
    #[cfg(test)]
    pub(crate) fn with_watch(mut self, watch: Arc<dyn Sleeper>) -> Self {
        self.watch = watch;
        self
    }

    /// Waits through `sleeper` instead (tests record the waits and return at once).
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.sleeper = sleeper;
        self
    }

    /// Seeds the jitter, for reproducible waits.
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.jitter = Jitter::new(seed);
        self
    }

    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The wait before retry `retry` after `error`, or `None` to give up because the budget
    /// `left` cannot cover it.
    fn delay(&self, error: &ProviderError, retry: u32, left: Duration) -> Option<Duration> {
        let wait = match error.retry_after() {
            // The server's wish is honoured when the budget allows it; past max_delay it is cut
            // (a long wait the budget allows is better spent trying than idling).
            Some(asked) if asked > left => return None,
            Some(asked) => asked.min(self.policy.max_delay),
            None => full_jitter(self.policy.backoff_cap(retry), self.jitter.next()),
        };
        (wait <= left).then_some(wait)
    }

    /// Runs `attempt` until it succeeds, fails for good, or the policy gives up; the last error
    /// is returned. `attempt` returns whether a failure may be retried besides its kind (a
    /// stream that already reached the caller may not).
    async fn run<'a, F>(&'a self, mut attempt: F) -> Result<ChatResponse, ProviderError>
    where
        F: FnMut() -> BoxFuture<'a, (Result<ChatResponse, ProviderError>, bool)>,
    {
        let attempts = self.policy.max_attempts.max(1);
        let mut waited = Duration::ZERO;
        let mut retry = 0u32;
        loop {
            let number = retry.saturating_add(1);
            let (result, may_retry) = match &self.notice {
                Some(notice) => {
                    watched(attempt(), notice, self.watch.as_ref(), number, attempts).await
                }
                None => attempt().await,
            };
            let error = match result {
                Ok(response) => return Ok(response),
                Err(error) => error,
            };
            if !may_retry || !error.is_retryable() || retry.saturating_add(1) >= attempts {
                return Err(error);
            }
            let left = self.policy.max_total_wait.saturating_sub(waited);
            let Some(wait) = self.delay(&error, retry, left) else {
                return Err(error);
            };
            if let Some(notice) = &self.notice {
                notice(CallNotice::Retrying {
                    attempt: number.saturating_add(1),
                    of: attempts,
                    after: wait,
                    error: error.to_string(),
                });
            }
            self.sleeper.sleep(wait).await;
            waited = waited.saturating_add(wait);
            retry = retry.saturating_add(1);
        }
    }
}

/// Runs one attempt, telling `notice` at each of [`waiting_marks`] that it is still waiting
/// (an attempt that has answered is never reported as waiting, even at its mark).
async fn watched<T>(
    attempt: BoxFuture<'_, T>,
    notice: &NoticeSink,
    watch: &dyn Sleeper,
    number: u32,
    of: u32,
) -> T {
    let started = std::time::Instant::now();
    let mut attempt = attempt;
    for mark in waiting_marks() {
        let until_mark = watch.sleep(mark.saturating_sub(started.elapsed()));
        tokio::select! {
            biased;
            done = &mut attempt => return done,
            () = until_mark => {
                notice(CallNotice::Waiting { waited: mark, attempt: number, of });
            }
        }
    }
    attempt.await
}

impl crate::layer::Layer for Retrying {
    fn inner(&self) -> &dyn ModelClient {
        self.inner.as_ref()
    }

    fn turn<'a>(
        &'a self,
        request: &'a ChatRequest,
        sink: Option<StreamSink<'a>>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        let Some(sink) = sink else {
            return Box::pin(
                self.run(move || Box::pin(async move { (self.inner.chat(request).await, true) })),
            );
        };
        Box::pin(self.run(move || {
            Box::pin(async move {
                let emitted = AtomicBool::new(false);
                let watch = |event| {
                    emitted.store(true, Ordering::Relaxed);
                    sink(event);
                };
                let result = self.inner.chat_stream(request, &watch).await;
                (result, !emitted.load(Ordering::Relaxed))
            })
        }))
    }
}

crate::layered!(Retrying);

#[cfg(test)]
#[path = "retry_tests.rs"]
mod tests;
