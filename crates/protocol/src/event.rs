//! The run's event stream (CONTRACTS.md §4): what `pev run --json` prints, one JSON object per
//! line, and what the journal stores, in the same shape.
//!
//! Every event carries the run id, a sequence number that is dense and increasing within a run
//! (resumed runs continue the numbering), and an RFC 3339 UTC timestamp. The kind is the `event`
//! field (`step.started`, …) so a consumer can switch on one key.

use std::time::{SystemTime, UNIX_EPOCH};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::assertion::AssertionResult;
use crate::run::{JudgeAnswer, Reason, RunResult, RunStatus, StepStatus, Usage};
use crate::tool::Effect;

/// One event of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Event {
    pub run_id: String,
    pub seq: u64,
    /// RFC 3339, UTC, millisecond precision.
    pub at: String,
    #[serde(flatten)]
    pub body: EventBody,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "event")]
pub enum EventBody {
    /// A run began (or was resumed: `resumed` is true).
    #[serde(rename = "run.started")]
    RunStarted {
        goal: String,
        workspace: String,
        #[serde(default)]
        resumed: bool,
        /// The sandbox commands run in (what `pev-sandbox` enforced: mode, level, mechanisms,
        /// network, journal, gaps).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<Value>,
    },
    /// The plan the run executes (version 1).
    #[serde(rename = "plan.created")]
    PlanCreated { version: u32, steps: usize },
    /// A new version of the plan replaced the old one.
    #[serde(rename = "plan.revised")]
    PlanRevised { version: u32, steps: usize, reason: String },
    /// A step began an attempt.
    #[serde(rename = "step.started")]
    StepStarted { step: String, attempt: u32 },
    /// A step waits for a person's approval.
    #[serde(rename = "approval.requested")]
    ApprovalRequested { step: String, tool: Option<String> },
    /// A person (or `--yes`) approved a step.
    #[serde(rename = "approval.granted")]
    ApprovalGranted { step: String, by: String },
    /// A tool call is about to run, with its resolved arguments.
    #[serde(rename = "tool.called")]
    ToolCalled { step: String, call_id: String, tool: String, effect: Effect, arguments: Value },
    /// A tool call ended.
    #[serde(rename = "tool.finished")]
    ToolFinished {
        step: String,
        call_id: String,
        tool: String,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        duration_ms: u64,
        /// On resume: the effect was found already applied (by content hash), not run again.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        recovered: bool,
    },
    /// An assertion was checked (`step` is absent for a postcondition's).
    #[serde(rename = "assertion.checked")]
    AssertionChecked {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        postcondition: Option<String>,
        result: AssertionResult,
    },
    /// The verifier model judged a step's attempt that tier 1 passed but could not fully check:
    /// its decomposed questions with their answers, and what the engine made of the verdict
    /// (`passed`, `failed`: a confident no, `doubted`: a no below the threshold, a warning).
    #[serde(rename = "judge.decided")]
    JudgeDecided {
        step: String,
        attempt: u32,
        pass: bool,
        confidence: f64,
        outcome: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        feedback: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        answers: Vec<JudgeAnswer>,
    },
    /// A delegated step's attempt started its child run (journaled before the child runs, so
    /// that a resume finds the child instead of starting another).
    #[serde(rename = "delegate.started")]
    DelegateStarted {
        step: String,
        attempt: u32,
        child_run: String,
        mode: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
        /// Nesting depth of the child (1: a child of a top-level run).
        depth: u32,
    },
    /// A child run ended: its verdict, which the parent step is held to.
    #[serde(rename = "delegate.finished")]
    DelegateFinished {
        step: String,
        attempt: u32,
        child_run: String,
        status: RunStatus,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasons: Vec<Reason>,
        /// The files the child changed (no-op writes left out).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changed: Vec<String>,
    },
    /// A step reached a final state for this attempt.
    #[serde(rename = "step.finished")]
    StepFinished {
        step: String,
        status: StepStatus,
        attempts: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The step's verified result was reused from the cache (`--cache`): nothing ran.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cached: bool,
    },
    /// A non-fatal observation (a silent failure in a tool's output, a resumed exec step).
    #[serde(rename = "warning")]
    Warning {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<String>,
        message: String,
    },
    /// What the run's models have consumed so far (cumulative), journaled as it grows so that
    /// a resumed run knows what a killed session spent.
    #[serde(rename = "usage")]
    Usage { usage: Usage },
    /// The verifier decided the outcome.
    #[serde(rename = "verify.finished")]
    VerifyFinished { status: RunStatus, reasons: Vec<Reason> },
    /// The run ended (for now: `awaiting_approval` can be resumed).
    #[serde(rename = "run.finished")]
    RunFinished { result: Box<RunResult> },
    /// The workspace as `pev mcp` found it when a client created its plan: each file's sha256
    /// and size (`files`: path → `{sha256, bytes}`), and the git HEAD and status when it is a
    /// repository. What the client changes afterwards is found against it, not taken from the
    /// model's word.
    #[serde(rename = "workspace.snapshot")]
    WorkspaceSnapshot {
        files: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        git: Option<Value>,
        /// The workspace had more files than a snapshot holds: changes are not tracked.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        truncated: bool,
    },
    /// The run's oracle, recorded when its plan was made: the files its checks judge it by
    /// (tests, test configuration, protected files, files a check's command names), each with
    /// its sha256 (the content is a blob) and why it is one. `truncated`: the workspace had more
    /// files than pev walks, so the list may be incomplete.
    #[serde(rename = "oracle.recorded")]
    OracleRecorded {
        files: Vec<crate::oracle::OracleFile>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        truncated: bool,
    },
    /// An MCP client called one of pev's plan tools (`pev mcp`). `state` is the plan's state
    /// after the call, when the call changed it (the latest one is the run's plan).
    #[serde(rename = "client.plan_call")]
    ClientPlanCall {
        tool: String,
        arguments: Value,
        ok: bool,
        reply: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<Value>,
    },
    /// A client's own tool call, recorded by `pev gate --record` (a PostToolUse hook): the
    /// tool's name and what the harness keeps of it (a command and its exit code, a file path).
    #[serde(rename = "client.tool")]
    ClientTool { tool: String, summary: Value },
    /// `pev gate` answered a client that wanted to stop: `allow`, `block` (the client is told
    /// to go on, with the reasons) or `stop` (the refusal cap was reached: the client stops and
    /// the run is recorded unfinished).
    #[serde(rename = "gate.decided")]
    GateDecided {
        hook: String,
        decision: String,
        refusals: u32,
        reasons: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<String>,
    },
}

impl EventBody {
    /// The `event` name, as printed.
    pub fn name(&self) -> &'static str {
        match self {
            Self::RunStarted { .. } => "run.started",
            Self::PlanCreated { .. } => "plan.created",
            Self::PlanRevised { .. } => "plan.revised",
            Self::DelegateStarted { .. } => "delegate.started",
            Self::DelegateFinished { .. } => "delegate.finished",
            Self::StepStarted { .. } => "step.started",
            Self::ApprovalRequested { .. } => "approval.requested",
            Self::ApprovalGranted { .. } => "approval.granted",
            Self::ToolCalled { .. } => "tool.called",
            Self::ToolFinished { .. } => "tool.finished",
            Self::AssertionChecked { .. } => "assertion.checked",
            Self::JudgeDecided { .. } => "judge.decided",
            Self::StepFinished { .. } => "step.finished",
            Self::Warning { .. } => "warning",
            Self::Usage { .. } => "usage",
            Self::VerifyFinished { .. } => "verify.finished",
            Self::RunFinished { .. } => "run.finished",
            Self::WorkspaceSnapshot { .. } => kind::WORKSPACE_SNAPSHOT,
            Self::OracleRecorded { .. } => "oracle.recorded",
            Self::ClientPlanCall { .. } => kind::CLIENT_PLAN_CALL,
            Self::ClientTool { .. } => kind::CLIENT_TOOL,
            Self::GateDecided { .. } => kind::GATE_DECIDED,
        }
    }
}

/// The names of the events a reader looks up by kind (the journal's `kind` column), the same
/// strings [`EventBody::name`] gives and the `event` field holds.
pub mod kind {
    pub const WORKSPACE_SNAPSHOT: &str = "workspace.snapshot";
    pub const CLIENT_PLAN_CALL: &str = "client.plan_call";
    pub const CLIENT_TOOL: &str = "client.tool";
    pub const GATE_DECIDED: &str = "gate.decided";
}

/// `time` as RFC 3339 in UTC with milliseconds: `2026-11-21T14:03:07.123Z`.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let millis = since.subsec_millis();
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// The current time as [`rfc3339`].
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// Milliseconds since the epoch of an RFC 3339 UTC time as pev writes it
/// (`2026-11-21T14:03:07.123Z`, the fraction optional); `None` for anything else.
pub fn epoch_ms(text: &str) -> Option<u64> {
    let num = |range: std::ops::Range<usize>| {
        let part = text.get(range)?;
        part.bytes().all(|b| b.is_ascii_digit()).then(|| part.parse::<u64>().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let ms = if text.get(19..20) == Some(".") { num(20..23).unwrap_or(0) } else { 0 };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || y < 1970 || h > 23 || mi > 59 {
        return None;
    }
    // Days from civil (Howard Hinnant), for years from 1970.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = if mo > 2 { mo - 3 } else { mo + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    let secs = days.checked_mul(86_400)?.checked_add(h * 3600 + mi * 60 + sec)?;
    secs.checked_mul(1000)?.checked_add(ms)
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm, for
/// non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // 2024-02-29T23:59:59.5Z: a leap day, the last second of it.
        let t = UNIX_EPOCH + Duration::from_millis(1_709_251_199_500);
        assert_eq!(rfc3339(t), "2024-02-29T23:59:59.500Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        assert_eq!(rfc3339(t), "2026-11-18T11:06:40.000Z");
    }

    #[test]
    fn parses_what_it_formats() {
        assert_eq!(epoch_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(epoch_ms("2024-02-29T23:59:59.500Z"), Some(1_709_251_199_500));
        assert_eq!(epoch_ms("2026-11-18T11:06:40Z"), Some(1_795_000_000_000));
        for ms in [0u64, 951_782_400_123, 1_709_251_199_500, 4_102_444_800_999] {
            let t = UNIX_EPOCH + Duration::from_millis(ms);
            assert_eq!(epoch_ms(&rfc3339(t)), Some(ms));
        }
        assert_eq!(epoch_ms("garbage"), None);
        assert_eq!(epoch_ms("2026-13-01T00:00:00Z"), None);
        assert_eq!(epoch_ms("2026-1é-01T00:00:00Z"), None);
        assert_eq!(epoch_ms("2026-+1-01T00:00:00Z"), None);
    }

    #[test]
    fn event_kind_is_the_event_field() {
        let e = Event {
            run_id: "r1".into(),
            seq: 3,
            at: "x".into(),
            body: EventBody::StepStarted { step: "a".into(), attempt: 1 },
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["event"], "step.started");
        assert_eq!(v["seq"], 3);
        assert_eq!(v["step"], "a");
        let back: Event = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
        assert_eq!(back.body.name(), "step.started");
    }
}
