//! `pev show RUN` and `pev runs` for people: a run's plan, its steps with their evidence, the
//! files it changed with a coloured diff, and the outcome; and the table of runs.
//!
//! Everything here is a pure function of data the journal holds, returning a string: the
//! command reads the store, these decide how it looks. Every step is kept to a few lines (an
//! output summary, not the output) and every diff is capped, so `pev show` of a big run stays
//! readable; `--format json` is there for the whole thing. Text from plans, tools and files is
//! passed through [`clean`] so it cannot drive the terminal.

use std::collections::HashMap;
use std::fmt::Write as _;

use pev_protocol::Plan;
use pev_protocol::event::epoch_ms;
use pev_protocol::run::{RunResult, RunStatus, StepResult, StepStatus};
use pev_verify::{DiffLine, DiffTag, diff_lines};
use serde_json::Value;

use crate::view::run_view::{mutation_line, reason_name, status_name};
use crate::view::style::{Style, clean, duration, truncate};

/// The most diff lines shown per file; the rest is counted.
const MAX_DIFF_LINES: usize = 200;

/// Lines of a shell step's stdout or stderr shown.
const OUTPUT_LINES: usize = 3;

/// One file a step changed, with its content before and after (`None` = absent, or not stored).
#[derive(Debug, Clone, PartialEq)]
pub struct FileDiff {
    pub step: String,
    pub path: String,
    pub before: Option<Vec<u8>>,
    pub after: Option<Vec<u8>>,
}

/// One line of `pev runs`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub run_id: String,
    pub status: String,
    pub goal: String,
    pub created_at: String,
    pub steps_done: u64,
    pub steps_total: u64,
}

/// A whole run for people. `stored_status` is the journal's (`running` for a run that has not
/// finished); the outcome line at the end is the result's.
#[allow(clippy::too_many_arguments)] // the signature the show command was written against
pub fn render_show(
    run_id: &str,
    stored_status: &str,
    plan: &Plan,
    result: &RunResult,
    diffs: &[FileDiff],
    style: &Style,
) -> String {
    let s = style;
    let mut out = String::new();
    let _ = writeln!(out, "{} {}: {}", s.bold("run"), clean(run_id), s.status(stored_status));
    let _ = writeln!(
        out,
        "{} {}",
        s.dim("goal:"),
        truncate(&clean(&plan.goal), crate::view::style::GOAL_SHOWN)
    );

    let _ = writeln!(
        out,
        "\n{} ({})",
        s.bold("plan"),
        crate::view::text::plural(plan.steps.len(), "step")
    );
    for (i, step) in plan.steps.iter().enumerate() {
        let _ = write!(out, "  {:>2}. {}", i + 1, s.bold(&clean(step.id.as_str())));
        if let Some(title) = &step.title {
            let _ = write!(out, "  {}", truncate(&clean(title), 60));
        }
        if let Some(tool) = &step.tool {
            let _ = write!(out, "  {}", s.cyan(&clean(tool)));
        }
        if !step.depends_on.is_empty() {
            let deps: Vec<&str> = step.depends_on.iter().map(|d| d.as_str()).collect();
            let deps = truncate(&clean(&deps.join(", ")), 80).into_owned();
            let _ = write!(out, "  {}", s.dim(&format!("after {deps}")));
        }
        out.push('\n');
    }

    let _ = writeln!(out, "\n{}", s.bold("steps"));
    let results: HashMap<&str, &StepResult> =
        result.steps.iter().map(|r| (r.id.as_str(), r)).collect();
    for step in &plan.steps {
        match results.get(step.id.as_str()) {
            Some(r) => render_step(&mut out, r, step.tool.as_deref(), s),
            None => {
                let id = clean(step.id.as_str());
                let _ = writeln!(out, "  {} {id}  {}", s.dim("·"), s.dim("no state recorded"));
            }
        }
    }
    // Steps the result knows but this version of the plan does not (a revised plan).
    let index = plan.index();
    for r in result.steps.iter().filter(|r| !index.contains_key(r.id.as_str())) {
        render_step(&mut out, r, None, s);
    }

    if !result.file_mutations.is_empty() || !diffs.is_empty() {
        let _ = writeln!(out, "\n{}", s.bold("files"));
        render_files(&mut out, result, diffs, s);
    }

    if !result.postconditions.is_empty() {
        let _ = writeln!(out, "\n{}", s.bold("postconditions"));
        for p in &result.postconditions {
            let mark = if p.satisfied { s.green("✓") } else { s.red("✗") };
            let _ = writeln!(out, "  {mark} {}", clean(&p.description));
            let _ = writeln!(out, "      {}", s.dim(&truncate(&clean(&p.evidence), 200)));
            // A judge's decomposed answers, when a judge decided it.
            for a in p.judge.iter().flat_map(|j| &j.answers) {
                let answer = if a.yes { "yes" } else { "no" };
                let line = format!("{answer} ({:.2}) {}", a.confidence, clean(&a.question));
                let _ = writeln!(out, "        {}", s.dim(&truncate(&line, 160)));
            }
        }
    }
    if let Some(line) = crate::view::run_summary::final_check_line(result, s) {
        let _ = writeln!(out, "\n{} {line}", s.bold("final re-check:"));
        if let Some(check) = &result.final_check {
            for r in &check.regressed {
                let by = if r.changed_by.is_empty() {
                    String::new()
                } else {
                    format!("; changed after it by {}", r.changed_by.join(", "))
                };
                let _ = writeln!(
                    out,
                    "  {} {} {}: then {}; now {}{by}",
                    s.red("✗"),
                    clean(&r.of.to_string()),
                    r.kind,
                    truncate(&clean(&r.then), 120),
                    truncate(&clean(&r.now), 120)
                );
            }
            for c in &check.checked_once {
                let _ = writeln!(
                    out,
                    "  {} {} {}: {}",
                    s.dim("·"),
                    clean(&c.of.to_string()),
                    c.kind,
                    clean(&c.why)
                );
            }
        }
    }
    if let Some(oracle) = result.final_check.as_ref().and_then(|c| c.oracle.as_ref()) {
        render_oracle(&mut out, oracle, s);
    }
    if !result.reasons.is_empty() {
        let _ = writeln!(out, "\n{}", s.bold("reasons"));
        for r in &result.reasons {
            let step = r.step.as_deref().map(|st| format!(" [{}]", clean(st))).unwrap_or_default();
            let code = reason_name(r.code);
            let code =
                if result.status == RunStatus::Failed { s.red(code) } else { s.yellow(code) };
            let _ = writeln!(out, "  {code}{step}: {}", clean(&r.message));
        }
    }
    if !result.warnings.is_empty() {
        let _ = writeln!(out, "\n{}", s.bold("warnings"));
        for w in &result.warnings {
            let _ = writeln!(out, "  {}", s.yellow(&format!("! {}", clean(w))));
        }
    }
    let u = &result.usage;
    let actions = if result.goal_actions_executed { "yes" } else { "no" };
    // A run that never finished has no verdict: say what it is, not what a verdict over the
    // steps so far would be.
    let outcome = match stored_status {
        "interrupted" => s.yellow(&format!(
            "interrupted (it stopped before it finished, so there is no verdict yet; `pev resume \
             {}` continues it)",
            clean(run_id)
        )),
        "running" => s.yellow("running (another pev process is running it; no verdict yet)"),
        "open" => s.yellow(&format!(
            "open: {} if the client stopped now (an MCP client's run; the gate records the \
             verdict when the client stops)",
            status_name(result.status)
        )),
        _ => s.status(status_name(result.status)),
    };
    let _ = writeln!(
        out,
        "\n{} {}  goal actions executed: {actions}  {} tool call{} in {}",
        s.bold("outcome:"),
        outcome,
        u.tool_calls,
        if u.tool_calls == 1 { "" } else { "s" },
        duration(result.duration_ms)
    );
    if let Some(models) = crate::view::run_summary::model_usage(u) {
        let _ = writeln!(out, "{} {models}", s.dim("models:"));
    }
    out
}

/// One step: state, attempts, time; then its output summary, evidence and assertions.
fn render_step(out: &mut String, r: &StepResult, tool: Option<&str>, s: &Style) {
    let (mark, state) = match r.status {
        StepStatus::Done => (s.green("✓"), s.green("done")),
        StepStatus::Failed => (s.red("✗"), s.red("failed")),
        StepStatus::Skipped => (s.dim("↷"), s.dim("skipped")),
        StepStatus::Blocked => (s.yellow("⊘"), s.yellow("blocked")),
        StepStatus::Pending => (s.dim("·"), s.dim("pending")),
        StepStatus::InProgress => (s.yellow("…"), s.yellow("in progress")),
    };
    let tries = match r.attempts {
        0 => String::new(),
        1 => "  1 attempt".to_owned(),
        n => format!("  {n} attempts"),
    };
    let took = r
        .started_at
        .as_deref()
        .and_then(epoch_ms)
        .zip(r.ended_at.as_deref().and_then(epoch_ms))
        .map(|(a, b)| format!("  {}", s.dim(&duration(b.saturating_sub(a)))))
        .unwrap_or_default();
    let _ = writeln!(out, "  {mark} {}  {state}{tries}{took}", s.bold(&clean(&r.id)));
    if let Some(output) = &r.output {
        let mut lines = output_summary(tool, output).into_iter();
        if let Some(first) = lines.next() {
            let _ = writeln!(out, "      {} {first}", s.dim("output:"));
        }
        for line in lines {
            let _ = writeln!(out, "        {}", s.dim(&line));
        }
    }
    for e in &r.evidence {
        let _ = writeln!(out, "      {} {}", s.dim("evidence:"), truncate(&clean(e), 200));
    }
    for a in &r.assertions {
        let mark = if a.passed { s.green("✓") } else { s.red("✗") };
        let detail = truncate(&clean(&a.detail), 200).into_owned();
        let _ = writeln!(out, "      {mark} {}  {detail}", clean(&a.kind));
    }
}

/// A few lines saying what a tool returned (CONTRACTS.md §3 output shapes); an unknown tool's
/// output is shown as compact JSON, cut.
pub(crate) fn output_summary(tool: Option<&str>, output: &Value) -> Vec<String> {
    let num = |key: &str| output.get(key).and_then(Value::as_i64);
    let text = |key: &str| output.get(key).and_then(Value::as_str);
    let flag = |key: &str| output.get(key).and_then(Value::as_bool).unwrap_or(false);
    let sha = || text("sha256").map(|h| format!(", sha256 {}", h.get(..12).unwrap_or(h)));
    let mut lines = Vec::new();
    match tool {
        Some("shell.exec") => {
            let code =
                num("exit_code").map_or_else(|| "no exit code".to_owned(), |c| format!("exit {c}"));
            let extra = if flag("timed_out") { " (timed out)" } else { "" };
            lines.push(format!("{code}{extra}"));
            for key in ["stdout", "stderr"] {
                let Some(body) = text(key).filter(|b| !b.trim().is_empty()) else { continue };
                let total = body.lines().count();
                for line in body.lines().take(OUTPUT_LINES) {
                    lines.push(format!("{key}: {}", truncate(&clean(line), 160)));
                }
                if total > OUTPUT_LINES {
                    lines.push(format!("{key}: … {} more lines", total - OUTPUT_LINES));
                }
            }
        }
        Some("file.read") => {
            let bytes = num("bytes").unwrap_or(0);
            lines.push(format!("{bytes} bytes{}", sha().unwrap_or_default()));
        }
        Some("file.write") => {
            let bytes = num("bytes").unwrap_or(0);
            lines.push(format!("wrote {bytes} bytes{}", sha().unwrap_or_default()));
        }
        Some("file.list") => {
            let n = output.get("entries").and_then(Value::as_array).map_or(0, Vec::len);
            lines.push(format!("{n} entries"));
        }
        Some("file.patch") => {
            let changed = if flag("changed") { "changed" } else { "unchanged" };
            let (a, b) = (num("bytes_before").unwrap_or(0), num("bytes_after").unwrap_or(0));
            lines.push(format!("{changed}, {a} → {b} bytes"));
        }
        Some("http.request") => {
            let status =
                num("status").map_or_else(|| "no status".to_owned(), |c| format!("status {c}"));
            let body = text("body").map_or(0, str::len);
            lines.push(format!("{status}, body {body} bytes"));
        }
        _ => lines.push(truncate(&clean(&output.to_string()), 160).into_owned()),
    }
    if flag("truncated")
        && let Some(first) = lines.first_mut()
    {
        first.push_str(" (output truncated)");
    }
    lines
}

/// Each mutation with its stats and, when the contents are stored, its diff. The n-th mutation
/// of a path is paired with the n-th diff of that path; diffs without a mutation come last.
fn render_files(out: &mut String, result: &RunResult, diffs: &[FileDiff], s: &Style) {
    let mut used = vec![false; diffs.len()];
    for m in &result.file_mutations {
        let found = diffs.iter().enumerate().find(|(i, d)| !used[*i] && d.path == m.path);
        match found {
            Some((i, d)) => {
                used[i] = true;
                let step = s.dim(&format!("({})", clean(&d.step)));
                let _ = writeln!(out, "  {}  {step}", mutation_line(m, s));
                render_diff(out, d, s);
            }
            None => {
                let _ = writeln!(out, "  {}", mutation_line(m, s));
            }
        }
    }
    for (d, _) in diffs.iter().zip(&used).filter(|(_, used)| !**used) {
        let _ = writeln!(out, "  {}  {}", clean(&d.path), s.dim(&format!("({})", clean(&d.step))));
        render_diff(out, d, s);
    }
}

/// A unified diff with 3 lines of context, capped at [`MAX_DIFF_LINES`]; a binary file (a NUL
/// byte or invalid UTF-8 on either side) is only sized.
fn render_diff(out: &mut String, d: &FileDiff, s: &Style) {
    let pad = "    ";
    let (before, after) = match (&d.before, &d.after) {
        (None, None) => {
            let _ = writeln!(out, "{pad}{}", s.dim("(contents not stored)"));
            return;
        }
        (b, a) => (b.as_deref().unwrap_or_default(), a.as_deref().unwrap_or_default()),
    };
    let (Some(old), Some(new)) = (as_text(before), as_text(after)) else {
        let size =
            |b: &Option<Vec<u8>>| b.as_ref().map_or("absent".to_owned(), |b| b.len().to_string());
        let what = if d.before.is_some() && d.after.is_some() {
            format!("binary, {} → {} bytes", before.len(), after.len())
        } else {
            format!("binary, {} bytes", size(if d.after.is_some() { &d.after } else { &d.before }))
        };
        let _ = writeln!(out, "{pad}{}", s.dim(&what));
        return;
    };
    if d.before.is_none() {
        let _ = writeln!(out, "{pad}{}", s.dim("(new file)"));
    } else if d.after.is_none() {
        let _ = writeln!(out, "{pad}{}", s.dim("(deleted)"));
    }
    let lines = diff_lines(old, new);
    if lines.is_empty() {
        let _ = writeln!(out, "{pad}{}", s.dim("(no change)"));
        return;
    }
    let mut shown = 0usize;
    let mut hidden = 0usize;
    for hunk in hunks(&lines) {
        for line in std::iter::once(None).chain(hunk.iter().map(Some)) {
            if shown >= MAX_DIFF_LINES {
                hidden += 1;
                continue;
            }
            shown += 1;
            let text = match line {
                None => s.cyan(&hunk_header(hunk)),
                Some(l) => {
                    let text = clean(&l.text);
                    match l.tag {
                        DiffTag::Equal => format!(" {text}"),
                        DiffTag::Insert => s.green(&format!("+{text}")),
                        DiffTag::Delete => s.red(&format!("-{text}")),
                    }
                }
            };
            let _ = writeln!(out, "{pad}{text}");
        }
    }
    if hidden > 0 {
        let _ = writeln!(out, "{pad}{}", s.dim(&format!("… {hidden} more lines")));
    }
}

fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) { None } else { std::str::from_utf8(bytes).ok() }
}

/// Splits [`diff_lines`]' output where the line numbers jump: each piece is one hunk.
fn hunks(lines: &[DiffLine]) -> Vec<&[DiffLine]> {
    let mut out = Vec::new();
    let mut start = 0;
    let (mut next_old, mut next_new) = (None, None);
    for (i, l) in lines.iter().enumerate() {
        let jump = matches!((l.old_line, next_old), (Some(o), Some(n)) if o != n)
            || matches!((l.new_line, next_new), (Some(o), Some(n)) if o != n);
        if jump && i > start {
            out.push(&lines[start..i]);
            start = i;
        }
        if let Some(o) = l.old_line {
            next_old = Some(o.saturating_add(1));
        }
        if let Some(n) = l.new_line {
            next_new = Some(n.saturating_add(1));
        }
    }
    if start < lines.len() {
        out.push(&lines[start..]);
    }
    out
}

/// `@@ -3,7 +3,8 @@` for one hunk (a side with no lines starts at 0, as `diff -u` writes it).
fn hunk_header(hunk: &[DiffLine]) -> String {
    let old: Vec<usize> = hunk.iter().filter_map(|l| l.old_line).collect();
    let new: Vec<usize> = hunk.iter().filter_map(|l| l.new_line).collect();
    let first = |v: &[usize]| v.first().copied().unwrap_or(0);
    format!("@@ -{},{} +{},{} @@", first(&old), old.len(), first(&new), new.len())
}

/// `pev runs`: one aligned line per run, newest first as given, the goal cut to fit 100 columns.
pub fn render_runs(runs: &[RunRow], style: &Style) -> String {
    const WIDTH: usize = 100;
    const GAP: usize = 2;
    let s = style;
    if runs.is_empty() {
        return "no runs yet\n".to_owned();
    }
    let created = |r: &RunRow| {
        clean(&r.created_at.replacen('T', " ", 1)).chars().take(19).collect::<String>()
    };
    let steps = |r: &RunRow| format!("{}/{}", r.steps_done, r.steps_total);
    let width = |f: &dyn Fn(&RunRow) -> usize, head: &str| {
        runs.iter().map(f).chain([head.chars().count()]).max().unwrap_or(0)
    };
    let w_id = width(&|r| clean(&r.run_id).chars().count(), "RUN");
    let w_status = width(&|r| clean(&r.status).chars().count(), "STATUS");
    let w_steps = width(&|r| steps(r).chars().count(), "STEPS");
    let w_created = width(&|r| created(r).chars().count(), "CREATED");
    let used = w_id + w_status + w_steps + w_created + 4 * GAP;
    let w_goal = WIDTH.saturating_sub(used).max(10);
    let mut out = String::new();
    let head = format!(
        "{:<w_id$}  {:<w_status$}  {:>w_steps$}  {:<w_created$}  GOAL",
        "RUN", "STATUS", "STEPS", "CREATED"
    );
    let _ = writeln!(out, "{}", s.bold(&head));
    for r in runs {
        let status = clean(&r.status);
        // Pad before colouring: escape codes have no width.
        let pad = " ".repeat(w_status.saturating_sub(status.chars().count()));
        let goal = truncate(&clean(&r.goal), w_goal).into_owned();
        let _ = writeln!(
            out,
            "{:<w_id$}  {}{pad}  {:>w_steps$}  {:<w_created$}  {goal}",
            clean(&r.run_id),
            s.status(&status),
            steps(r),
            created(r),
        );
    }
    out
}

#[cfg(test)]
#[path = "show_view_tests.rs"]
mod tests;

/// What the run was checked by: the oracle files recorded when the plan was made (with why
/// each is one), each changed one with its diff, the pristine re-check and the hidden checks.
fn render_oracle(out: &mut String, oracle: &pev_protocol::oracle::OracleCheck, s: &Style) {
    use pev_protocol::oracle::OracleChangeKind;
    let shown: Vec<String> =
        oracle.inferred.iter().take(8).map(|f| clean(&f.path).into_owned()).collect();
    let more = oracle.files.saturating_sub(shown.len());
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    let files =
        if shown.is_empty() { "none".to_owned() } else { format!("{}{more}", shown.join(", ")) };
    let _ = writeln!(out, "\n{} {} file(s): {files}", s.bold("checked by (oracle):"), oracle.files);
    for c in &oracle.changed {
        let what = match c.change {
            OracleChangeKind::Modified => "changed",
            OracleChangeKind::Deleted => "deleted",
            OracleChangeKind::Created => "created",
        };
        let mark = if c.allowed { s.dim("·") } else { s.red("✗") };
        let allowed = if c.allowed { " (allowed)" } else { "" };
        let _ = writeln!(out, "  {mark} {} {what}{allowed}: {}", clean(&c.path), clean(&c.why));
        for line in c.diff.lines().take(40) {
            let styled = match line.chars().next() {
                Some('+') => s.green(&clean(line)),
                Some('-') => s.red(&clean(line)),
                _ => s.dim(&clean(line)),
            };
            let _ = writeln!(out, "      {styled}");
        }
    }
    if oracle.pristine_recheck {
        let _ = writeln!(
            out,
            "  {}",
            s.dim("the evidence was re-checked on a copy with the oracle as recorded")
        );
    }
    for h in &oracle.hidden {
        let mark = if h.passed { s.green("✓") } else { s.red("✗") };
        let _ = writeln!(
            out,
            "  {mark} hidden check `{}`: {}",
            clean(&h.name),
            truncate(&clean(&h.detail), 200)
        );
    }
    for p in &oracle.problems {
        let _ = writeln!(out, "  {}", s.yellow(&format!("! {}", clean(p))));
    }
}
