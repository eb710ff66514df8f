//! What a person waiting on a model call is told: that a call is still waiting for its answer,
//! and that a failed one will be tried again, when, and why. The clients report through a
//! [`NoticeSink`] and never print; the command line turns notices into lines on the terminal.

use std::sync::Arc;
use std::time::Duration;

/// Something worth saying about a call in progress.
#[derive(Debug, Clone, PartialEq)]
pub enum CallNotice {
    /// No answer yet after `waited` (this attempt's time).
    Waiting { waited: Duration, attempt: u32, of: u32 },
    /// Attempt `attempt - 1` failed with `error`; attempt `attempt` starts after `after`.
    Retrying { attempt: u32, of: u32, after: Duration, error: String },
}

/// Where notices go.
pub type NoticeSink = Arc<dyn Fn(CallNotice) + Send + Sync>;

/// When a waiting call is reported: after 15 s, 30 s, 1 min, 2 min, then every 2 min. Often
/// enough that a silent terminal is never a mystery for long, rarely enough not to scroll.
pub fn waiting_marks() -> impl Iterator<Item = Duration> {
    [15u64, 30, 60]
        .into_iter()
        .chain((1u64..).map(|n| n.saturating_mul(120)))
        .map(Duration::from_secs)
}

impl CallNotice {
    /// The notice as a line for `who` (e.g. "planner (claude-opus-4-6)").
    pub fn describe(&self, who: &str) -> String {
        match self {
            Self::Waiting { waited, attempt, of } => format!(
                "{who} has waited {} for an answer (attempt {attempt} of {of})",
                seconds(*waited)
            ),
            Self::Retrying { attempt, of, after, error } => format!(
                "{who} failed ({error}); trying again in {} (attempt {attempt} of {of})",
                seconds(*after)
            ),
        }
    }
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 10.0 { format!("{s:.1}s") } else { format!("{}s", d.as_secs()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_thin_out_and_never_end() {
        let marks: Vec<u64> = waiting_marks().take(6).map(|d| d.as_secs()).collect();
        assert_eq!(marks, [15, 30, 60, 120, 240, 360]);
    }

    #[test]
    fn notices_read_as_a_person_would_want() {
        let waiting = CallNotice::Waiting { waited: Duration::from_secs(30), attempt: 1, of: 3 };
        assert_eq!(
            waiting.describe("planner (claude-opus-4-6)"),
            "planner (claude-opus-4-6) has waited 30s for an answer (attempt 1 of 3)"
        );
        let retry = CallNotice::Retrying {
            attempt: 2,
            of: 3,
            after: Duration::from_millis(1500),
            error: "anthropic is overloaded: busy".into(),
        };
        assert_eq!(
            retry.describe("executor (m)"),
            "executor (m) failed (anthropic is overloaded: busy); trying again in 1.5s (attempt \
             2 of 3)"
        );
    }
}
