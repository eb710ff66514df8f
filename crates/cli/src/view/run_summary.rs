//! The summary printed when a run ends: status, reasons, step counts, assertions,
//! postconditions, file mutations, warnings, usage, and what to do next.

use std::fmt::Write as _;

use pev_protocol::run::{FileMutation, ReasonCode, RunResult, RunStatus, StepStatus};

use crate::view::style::{GOAL_SHOWN, Style, clean, duration, truncate};

/// The summary printed when `pev run` ends: the outcome, why, what ran and changed, and what
/// to do next. Long lists (warnings, files) are capped; `pev show` has everything.
#[cfg(test)]
pub fn render_summary(result: &RunResult, style: &Style) -> String {
    render_summary_at(result, style, "")
}

/// [`render_summary`] whose `next:` commands carry `at` (`--workspace DIR`, `--store FILE`) so
/// that they work as printed from where the run was started.
pub fn render_summary_at(result: &RunResult, style: &Style, at: &str) -> String {
    let s = style;
    let mut out = String::new();
    let id = clean(&result.run_id);
    let status = status_name(result.status);
    let _ = writeln!(out, "{} {id}: {}", s.bold("run"), s.status(status));
    let _ = writeln!(out, "{} {}", s.dim("goal:"), truncate(&clean(&result.goal), GOAL_SHOWN));
    if !result.reasons.is_empty() {
        let _ = writeln!(out, "{}", s.bold("reasons:"));
        for r in &result.reasons {
            let code = reason_name(r.code);
            let step = r.step.as_deref().map(|st| format!(" [{}]", clean(st))).unwrap_or_default();
            let code =
                if result.status == RunStatus::Failed { s.red(code) } else { s.yellow(code) };
            let _ = writeln!(out, "  {code}{step}: {}", clean(&r.message));
        }
        // A plan re-run on work already done changes nothing: partial, but not a failure of
        // this run, and the summary says so in words.
        if result.reasons.iter().all(|r| r.code == pev_protocol::run::ReasonCode::NoOpMutation) {
            let _ = writeln!(
                out,
                "  {}",
                s.dim(
                    "nothing changed: the workspace already had this content (the work was \
                     done before; this run had nothing to do)"
                )
            );
        }
    }
    let count =
        |want: &[StepStatus]| result.steps.iter().filter(|st| want.contains(&st.status)).count();
    let done = count(&[StepStatus::Done]);
    let failed = count(&[StepStatus::Failed]);
    let skipped = count(&[StepStatus::Skipped]);
    let not_run = count(&[StepStatus::Pending, StepStatus::InProgress, StepStatus::Blocked]);
    let mut parts = vec![s.green(&format!("{done} done"))];
    if failed > 0 {
        parts.push(s.red(&format!("{failed} failed")));
    }
    if skipped > 0 {
        parts.push(format!("{skipped} skipped"));
    }
    if not_run > 0 {
        parts.push(s.yellow(&format!("{not_run} not run")));
    }
    let total = result.steps.len();
    let _ = writeln!(out, "{} {} (of {total})", s.dim("steps:"), parts.join(", "));
    let assertions = result.steps.iter().flat_map(|st| &st.assertions);
    let (passed, failed): (Vec<_>, Vec<_>) = assertions.partition(|a| a.passed);
    if !passed.is_empty() || !failed.is_empty() {
        let failed = if failed.is_empty() {
            "0 failed".to_owned()
        } else {
            s.red(&format!("{} failed", failed.len()))
        };
        let _ = writeln!(out, "{} {} passed, {failed}", s.dim("assertions:"), passed.len());
    }
    if let Some(line) = final_check_line(result, s) {
        let _ = writeln!(out, "{} {line}", s.dim("final re-check:"));
    }
    if !result.postconditions.is_empty() {
        let ok = result.postconditions.iter().filter(|p| p.satisfied).count();
        let n = result.postconditions.len();
        let _ = writeln!(out, "{} {ok} of {n} satisfied", s.dim("postconditions:"));
        for p in &result.postconditions {
            let mark = if p.satisfied { s.green("✓") } else { s.red("✗") };
            let desc = truncate(&clean(&p.description), 80).into_owned();
            let _ = writeln!(out, "  {mark} {desc}: {}", truncate(&clean(&p.evidence), 120));
        }
    }
    if !result.file_mutations.is_empty() {
        let _ = writeln!(out, "{}", s.dim("files:"));
        for m in result.file_mutations.iter().take(MAX_LISTED) {
            let _ = writeln!(out, "  {}", mutation_line(m, s));
        }
        more(&mut out, result.file_mutations.len(), s);
    }
    if !result.warnings.is_empty() {
        let _ = writeln!(out, "{}", s.dim("warnings:"));
        for w in result.warnings.iter().take(MAX_LISTED) {
            let _ = writeln!(out, "  {}", s.yellow(&format!("! {}", clean(w))));
        }
        more(&mut out, result.warnings.len(), s);
    }
    let u = &result.usage;
    let mut usage =
        format!("{} tool call{}", u.tool_calls, if u.tool_calls == 1 { "" } else { "s" });
    if let Some(models) = model_usage(u) {
        let _ = write!(usage, ", {models}");
    }
    let _ = writeln!(out, "{} {usage} in {}", s.dim("usage:"), duration(result.duration_ms));
    let next = match result.status {
        RunStatus::AwaitingApproval => format!("pev approve {id}{at} && pev resume {id}{at}"),
        RunStatus::Success => {
            format!(
                "pev show {id}{at}  (steps, evidence and diffs; as one HTML file: pev report {id}{at})"
            )
        }
        RunStatus::Partial | RunStatus::Failed => {
            format!("pev show {id}{at}  (or as one HTML file: pev report {id}{at})")
        }
    };
    let _ = writeln!(out, "{} {}", s.dim("next:"), s.bold(&next));
    out
}

/// The final re-check in one line: how many assertions ran again at the end, how many no
/// longer hold, how many could be checked only once. `None` when there was none (a run that
/// stopped early, a result stored before pev had it).
pub(crate) fn final_check_line(result: &RunResult, s: &Style) -> Option<String> {
    let check = result.final_check.as_ref()?;
    let mut line = format!(
        "{} assertion{} run again on the final workspace",
        check.rechecked,
        if check.rechecked == 1 { "" } else { "s" }
    );
    if check.regressed.is_empty() {
        line.push_str(", all hold");
    } else {
        line.push_str(", ");
        line.push_str(&s.red(&format!("{} no longer hold", check.regressed.len())));
    }
    if !check.checked_once.is_empty() {
        let _ = write!(line, ", {} checked once", check.checked_once.len());
    }
    Some(line)
}

/// How many files or warnings the summary lists before "… N more".
const MAX_LISTED: usize = 20;

fn more(out: &mut String, n: usize, s: &Style) {
    if n > MAX_LISTED {
        let _ = writeln!(out, "  {}", s.dim(&format!("… {} more (pev show)", n - MAX_LISTED)));
    }
}

/// `site/style.css  120 → 121 bytes  +1 −1` (or `no-op`).
pub(crate) fn mutation_line(m: &FileMutation, s: &Style) -> String {
    let change = if m.no_op {
        s.yellow("no-op")
    } else {
        format!(
            "{} {}",
            s.green(&format!("+{}", m.lines_added)),
            s.red(&format!("−{}", m.lines_removed))
        )
    };
    format!("{}  {} → {} bytes  {change}", clean(&m.path), m.bytes_before, m.bytes_after)
}

/// The reason code as written in JSON (`assertion_failed`).
pub(crate) fn reason_name(code: ReasonCode) -> &'static str {
    match code {
        ReasonCode::StepFailed => "step_failed",
        ReasonCode::StepsNotRun => "steps_not_run",
        ReasonCode::AssertionFailed => "assertion_failed",
        ReasonCode::PostconditionUnverified => "postcondition_unverified",
        ReasonCode::NoEffects => "no_effects",
        ReasonCode::NoOpMutation => "no_op_mutation",
        ReasonCode::BudgetExhausted => "budget_exhausted",
        ReasonCode::JudgeRejected => "judge_rejected",
        ReasonCode::Stagnation => "stagnation",
        ReasonCode::Cancelled => "cancelled",
        ReasonCode::ApprovalPending => "approval_pending",
        ReasonCode::EvidenceRegressed => "evidence_regressed",
        ReasonCode::PlanExecutionMismatch => "plan_execution_mismatch",
        ReasonCode::OracleChanged => "oracle_changed",
        ReasonCode::HiddenCheckFailed => "hidden_check_failed",
    }
}

/// The status as written in JSON (`awaiting_approval`).
pub(crate) fn status_name(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Success => "success",
        RunStatus::Partial => "partial",
        RunStatus::Failed => "failed",
        RunStatus::AwaitingApproval => "awaiting_approval",
    }
}

/// The model calls of a run, with the prompt cache's share and saving when a cache was used:
/// "4 model calls (12000 in, 83% from cache / 900 out tokens, $0.0123; the cache saved $0.0200)".
pub(crate) fn model_usage(u: &pev_protocol::run::Usage) -> Option<String> {
    if u.llm_calls == 0 {
        return None;
    }
    let calls = if u.llm_calls == 1 { "model call" } else { "model calls" };
    let cache = if u.cache_read_tokens > 0 || u.cache_write_tokens > 0 {
        format!(", {:.0}% from cache", u.cached_share() * 100.0)
    } else {
        String::new()
    };
    let saved = if u.cache_saved_usd != 0.0 {
        format!("; the cache saved ${:.4}", u.cache_saved_usd)
    } else {
        String::new()
    };
    Some(format!(
        "{} {calls} ({} in{cache} / {} out tokens, ${:.4}{saved})",
        u.llm_calls, u.input_tokens, u.output_tokens, u.cost_usd
    ))
}

/// The arguments that point a later `pev` command at this run's journal from the current
/// directory: `--workspace` unless it is the current directory, `--store` unless it is the
/// workspace's default journal. Paths are quoted for a POSIX shell when they need it.
pub fn location_args(workspace: &std::path::Path, db: &pev_store::Location) -> String {
    let mut out = String::new();
    let canonical = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let here = std::env::current_dir().ok().map(|d| canonical(&d));
    if here.as_deref() != Some(canonical(workspace).as_path()) {
        let _ = write!(out, " --workspace {}", shell_quote(&workspace.display().to_string()));
    }
    if db.file() != Some(pev_store::default_path(workspace).as_path()) {
        let _ = write!(out, " --store {}", shell_quote(&db.to_string()));
    }
    out
}

/// `text` as one POSIX shell word.
pub fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:,@%=".contains(c));
    if plain { text.to_owned() } else { format!("'{}'", text.replace('\'', "'\\''")) }
}
