//! `pev report`: one self-contained HTML file of a run, to read a verdict and check it, or to
//! send to a colleague. The goal and the verdict with its reasons come first; then the plan as a
//! graph (dependencies drawn, each step coloured by its status) and its revisions; a timeline of
//! the steps (their parallelism shows); each step with its timing, attempts, tool calls
//! (arguments, outputs folded), assertions and what they saw, and the coloured diff of every
//! file it changed; postconditions, the final re-check, usage and warnings.
//!
//! The file needs nothing else: no network, no script at all (folding is `<details>`), inline
//! CSS. Everything that comes from a plan, a model, a tool or a file is escaped, and a Content
//! Security Policy forbids scripts and remote loads, so an output holding `<script>` is text.
//! A pure function of what the journal holds ([`Input`]); the command line reads the journal.

use std::collections::HashMap;
use std::fmt::Write as _;

use pev_protocol::Plan;
use pev_protocol::run::{RunResult, RunStatus, StepResult, StepStatus};
use pev_store::{RunRecord, ToolCallStatus};
use pev_verify::DiffTag;
use serde_json::Value;

/// The longest text shown whole (a tool's output, an argument); longer ones are cut, saying so.
const MAX_TEXT: usize = 64 * 1024;
/// The most diff lines shown per file.
const MAX_DIFF_LINES: usize = 2_000;

/// What a report is made of.
pub struct Input<'a> {
    pub record: &'a RunRecord,
    pub result: &'a RunResult,
    /// The plan versions: number, plan, reason, time.
    pub versions: &'a [(u32, Value, String, String)],
    /// A blob's content by sha256 (the two sides of a diff).
    pub blob: &'a dyn Fn(&str) -> Option<Vec<u8>>,
    /// When the report was made (RFC 3339).
    pub generated_at: &'a str,
    /// The run's events (the judge's questions and answers are read from them).
    pub events: &'a [pev_protocol::event::Event],
    /// The run's model calls, for the timeline and the usage per role.
    pub model_calls: &'a [pev_store::ModelCallRecord],
}

/// The report as one HTML document.
pub fn render(input: &Input<'_>) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let result = input.result;
    let plan: Plan = serde_json::from_value(input.record.plan.clone()).unwrap_or_default();
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>pev run {} — {}</title><style>{STYLE}</style></head><body>\n",
        esc(&result.run_id),
        status_word(result.status)
    );
    header(&mut out, input);
    reasons(&mut out, result);
    graph(&mut out, &plan, &result.steps);
    revisions(&mut out, input.versions);
    timeline(&mut out, &result.steps, input.model_calls);
    steps(&mut out, input, &plan);
    postconditions(&mut out, result);
    files(&mut out, input);
    usage(&mut out, result, input.model_calls);
    let _ = write!(
        out,
        "<footer>pev report, made {} from the journal of run <code>{}</code> (<code>pev show {}</code> \
         prints the same run).</footer>\n</body></html>\n",
        esc(input.generated_at),
        esc(&result.run_id),
        esc(&result.run_id)
    );
    out
}

/// Escapes text for HTML (element content and quoted attributes).
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters (a terminal escape in an output) are shown, not passed on.
            c if c.is_control() && c != '\n' && c != '\t' => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// At most [`MAX_TEXT`] bytes of `text`, escaped, with a note when it was cut.
fn esc_cut(text: &str) -> String {
    if text.len() <= MAX_TEXT {
        return esc(text);
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… [{} more bytes not shown]", esc(&text[..end]), text.len() - end)
}

fn status_word(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Success => "success",
        RunStatus::Partial => "partial",
        RunStatus::Failed => "failed",
        RunStatus::AwaitingApproval => "awaiting_approval",
    }
}

fn step_word(status: StepStatus) -> &'static str {
    pev_store::step_status_str(status)
}

fn header(out: &mut String, input: &Input<'_>) {
    let result = input.result;
    let _ = writeln!(
        out,
        "<header><h1>{}</h1><p class=\"verdict s-{w}\">{w}</p><p class=\"meta\">run <code>{}</code> · \
         started {} · workspace <code>{}</code> · {} step(s) · {} tool call(s) · {}</p></header>",
        esc(&result.goal),
        esc(&result.run_id),
        esc(&input.record.created_at),
        esc(&input.record.workspace),
        result.steps.len(),
        result.usage.tool_calls,
        duration(result.duration_ms),
        w = status_word(result.status),
    );
}

fn reasons(out: &mut String, result: &RunResult) {
    if result.reasons.is_empty() {
        out.push_str("<section><h2>Verdict</h2><p>Every step done, every check passed: the evidence is below.</p></section>\n");
    } else {
        out.push_str("<section><h2>Why it is not success</h2><ul class=\"reasons\">");
        for reason in &result.reasons {
            let code = serde_json::to_value(reason.code)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let step = reason
                .step
                .as_deref()
                .map(|s| format!(" <a href=\"#step-{}\">{}</a>", anchor(s), esc(s)))
                .unwrap_or_default();
            let _ =
                write!(out, "<li><code>{}</code>{step}: {}</li>", esc(&code), esc(&reason.message));
        }
        out.push_str("</ul></section>\n");
    }
    if !result.warnings.is_empty() {
        out.push_str("<section><h2>Warnings</h2><ul class=\"warnings\">");
        for w in &result.warnings {
            let _ = write!(out, "<li>{}</li>", esc(w));
        }
        out.push_str("</ul></section>\n");
    }
}

/// An id usable in an `href` and an `id` attribute.
fn anchor(id: &str) -> String {
    id.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect()
}

/// The plan as an SVG graph: a column per depth (the longest chain of dependencies before a
/// step), an arrow per dependency or reference, each step coloured by its status. Plans over
/// 400 steps get a list instead (a graph that large is not read).
fn graph(out: &mut String, plan: &Plan, results: &[StepResult]) {
    if plan.steps.is_empty() {
        return;
    }
    let status: HashMap<&str, StepStatus> =
        results.iter().map(|s| (s.id.as_str(), s.status)).collect();
    let index: HashMap<&str, usize> =
        plan.steps.iter().enumerate().map(|(i, s)| (s.id.as_str(), i)).collect();
    let deps: Vec<Vec<usize>> = plan
        .steps
        .iter()
        .map(|s| {
            let mut d: Vec<usize> = s
                .depends_on
                .iter()
                .map(|id| id.as_str())
                .chain(s.refs.iter().map(|r| r.reference.step.as_str()))
                .filter_map(|id| index.get(id).copied())
                .collect();
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect();
    out.push_str("<section><h2>Plan</h2>");
    if plan.steps.len() > 400 {
        let _ = writeln!(
            out,
            "<p>{} steps (too many to draw; each is listed below).</p></section>",
            plan.steps.len()
        );
        return;
    }
    // Depth by repeated relaxation (no recursion; a cycle, which lint refuses, just stops).
    let mut depth = vec![0usize; plan.steps.len()];
    for _ in 0..plan.steps.len() {
        let mut moved = false;
        for (i, d) in deps.iter().enumerate() {
            let want = d.iter().map(|&j| depth[j] + 1).max().unwrap_or(0);
            if want > depth[i] && want < plan.steps.len() {
                depth[i] = want;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    let mut row_of = vec![0usize; plan.steps.len()];
    let mut rows: HashMap<usize, usize> = HashMap::new();
    for (i, &d) in depth.iter().enumerate() {
        let r = rows.entry(d).or_insert(0);
        row_of[i] = *r;
        *r += 1;
    }
    let (w, h, gap_x, gap_y) = (170usize, 34usize, 60usize, 14usize);
    let columns = depth.iter().max().copied().unwrap_or(0) + 1;
    let max_rows = rows.values().max().copied().unwrap_or(1);
    let width = columns * (w + gap_x);
    let height = max_rows * (h + gap_y) + gap_y;
    let pos = |i: usize| (depth[i] * (w + gap_x) + 10, row_of[i] * (h + gap_y) + gap_y);
    let _ = write!(
        out,
        "<svg class=\"dag\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"the plan's steps and their dependencies\">"
    );
    out.push_str("<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#888\"/></marker></defs>");
    for (i, d) in deps.iter().enumerate() {
        for &j in d {
            let (x1, y1) = pos(j);
            let (x2, y2) = pos(i);
            let _ = write!(
                out,
                "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"edge\" marker-end=\"url(#arrow)\"/>",
                x1 + w,
                y1 + h / 2,
                x2,
                y2 + h / 2
            );
        }
    }
    for (i, step) in plan.steps.iter().enumerate() {
        let (x, y) = pos(i);
        let word = status.get(step.id.as_str()).map_or("not_run", |s| step_word(*s));
        let label: String = step.id.as_str().chars().take(22).collect();
        let _ = write!(
            out,
            "<a href=\"#step-{}\"><g class=\"node n-{word}\"><title>{}: {}</title><rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" rx=\"6\"/><text x=\"{}\" y=\"{}\">{}</text></g></a>",
            anchor(step.id.as_str()),
            esc(step.id.as_str()),
            word,
            x + 8,
            y + h / 2 + 5,
            esc(&label)
        );
    }
    out.push_str("</svg></section>\n");
}

fn revisions(out: &mut String, versions: &[(u32, Value, String, String)]) {
    if versions.len() < 2 {
        return;
    }
    out.push_str("<section><h2>Plan revisions</h2><ol class=\"revisions\">");
    for (version, plan, reason, at) in versions {
        let steps = plan.get("steps").and_then(Value::as_array).map_or(0, Vec::len);
        let _ = write!(
            out,
            "<li value=\"{version}\">{} · {steps} step(s) · {}</li>",
            esc(at),
            esc(reason)
        );
    }
    out.push_str("</ol></section>\n");
}

/// Milliseconds since the epoch of a journal time.
fn millis(at: &str) -> Option<i64> {
    i64::try_from(pev_protocol::event::epoch_ms(at)?).ok()
}

/// A Gantt chart of the steps that have times, one bar each from start to end, with the model
/// calls made for each step drawn inside its lane (and the planner's in a lane of their own).
fn timeline(out: &mut String, steps: &[StepResult], calls: &[pev_store::ModelCallRecord]) {
    let spans: Vec<(&StepResult, i64, i64)> = steps
        .iter()
        .filter_map(|s| {
            let start = millis(s.started_at.as_deref()?)?;
            let end = s.ended_at.as_deref().and_then(millis).unwrap_or(start);
            Some((s, start, end.max(start)))
        })
        .collect();
    let call_spans: Vec<(&pev_store::ModelCallRecord, i64, i64)> = calls
        .iter()
        .filter_map(|c| {
            let start = millis(&c.started_at)?;
            Some((c, start, start + i64::try_from(c.duration_ms).unwrap_or(0)))
        })
        .collect();
    if spans.is_empty() && call_spans.is_empty() {
        return;
    }
    let ends = spans.iter().map(|s| (s.1, s.2)).chain(call_spans.iter().map(|c| (c.1, c.2)));
    let first = ends.clone().map(|s| s.0).min().unwrap_or(0);
    let last = ends.map(|s| s.1).max().unwrap_or(first);
    let total = (last - first).max(1) as f64;
    let _ = write!(
        out,
        "<section><h2>Timeline</h2><p class=\"meta\">{} from the first step's start to the last one's end</p><div class=\"gantt\">",
        duration((last - first) as u64)
    );
    let bar = |start: i64, end: i64| {
        let left = (start - first) as f64 / total * 100.0;
        let width = ((end - start) as f64 / total * 100.0).max(0.3);
        format!("left:{left:.3}%;width:{width:.3}%")
    };
    let call_bars = |step: Option<&str>| {
        let mut bars = String::new();
        for (call, start, end) in call_spans.iter().filter(|c| c.0.step_id.as_deref() == step) {
            let _ = write!(
                bars,
                "<span class=\"bar call r-{}\" style=\"{}\" title=\"{} {} · {} ms\"></span>",
                esc(&call.role),
                bar(*start, *end),
                esc(&call.role),
                esc(&call.request_model),
                end - start
            );
        }
        bars
    };
    if call_spans.iter().any(|c| c.0.step_id.is_none()) {
        let _ = write!(
            out,
            "<div class=\"lane\"><span class=\"lane-id\">(no step)</span>{}</div>",
            call_bars(None)
        );
    }
    for (step, start, end) in spans.iter().take(2_000) {
        let _ = write!(
            out,
            "<div class=\"lane\"><span class=\"lane-id\">{}</span><span class=\"bar n-{}\" style=\"{}\" title=\"{} ms\"></span>{}</div>",
            esc(&step.id),
            step_word(step.status),
            bar(*start, *end),
            end - start,
            call_bars(Some(&step.id))
        );
    }
    out.push_str("</div></section>\n");
}

fn steps(out: &mut String, input: &Input<'_>, plan: &Plan) {
    let result = input.result;
    let tools: HashMap<&str, Option<&str>> =
        plan.steps.iter().map(|s| (s.id.as_str(), s.tool.as_deref())).collect();
    let titles: HashMap<&str, String> =
        plan.steps.iter().map(|s| (s.id.as_str(), s.label().to_owned())).collect();
    out.push_str("<section><h2>Steps</h2>");
    for step in &result.steps {
        let word = step_word(step.status);
        let tool = tools
            .get(step.id.as_str())
            .copied()
            .flatten()
            .map(|t| format!(" · <code>{}</code>", esc(t)))
            .unwrap_or_default();
        let title = titles
            .get(step.id.as_str())
            .filter(|t| **t != step.id)
            .map(|t| format!(" — {}", esc(t)))
            .unwrap_or_default();
        let timing = match (
            step.started_at.as_deref().and_then(millis),
            step.ended_at.as_deref().and_then(millis),
        ) {
            (Some(a), Some(b)) => format!(" · {}", duration((b - a).max(0) as u64)),
            _ => String::new(),
        };
        let open = if step.status == StepStatus::Done { "" } else { " open" };
        let _ = write!(
            out,
            "<details class=\"step\" id=\"step-{}\"{open}><summary><span class=\"badge n-{word}\">{word}</span> <b>{}</b>{title}{tool} · {} attempt(s){timing}</summary>",
            anchor(&step.id),
            esc(&step.id),
            step.attempts
        );
        if let Some(error) = &step.error {
            let _ = write!(out, "<p class=\"error\">{}</p>", esc(error));
        }
        if !step.evidence.is_empty() {
            out.push_str("<h4>Evidence</h4><ul>");
            for e in &step.evidence {
                let _ = write!(out, "<li>{}</li>", esc(e));
            }
            out.push_str("</ul>");
        }
        if !step.assertions.is_empty() {
            out.push_str("<h4>Assertions</h4><ul class=\"checks\">");
            for a in &step.assertions {
                let mark = if a.passed { "✓" } else { "✗" };
                let class = if a.passed { "pass" } else { "fail" };
                let _ = write!(
                    out,
                    "<li class=\"{class}\">{mark} <code>{}</code> {}</li>",
                    esc(&a.kind),
                    esc(&a.detail)
                );
            }
            out.push_str("</ul>");
        }
        judge(out, input.events, &step.id);
        let calls: Vec<_> =
            input.record.tool_calls.iter().filter(|c| c.step_id == step.id).collect();
        if !calls.is_empty() {
            out.push_str("<h4>Tool calls</h4>");
            for call in calls {
                let state = match call.status {
                    ToolCallStatus::Finished => "ok",
                    ToolCallStatus::Failed => "failed",
                    ToolCallStatus::Recovered => "recovered on resume",
                    ToolCallStatus::Started => "unfinished",
                };
                let args = serde_json::to_string_pretty(&call.arguments).unwrap_or_default();
                let _ = write!(
                    out,
                    "<details class=\"call\"><summary><code>{}</code> {state} · attempt {} · {}</summary><pre>{}</pre>",
                    esc(&call.tool),
                    call.attempt,
                    call.duration_ms.map_or_else(String::new, duration),
                    esc_cut(&args)
                );
                if let Some(output) = &call.output {
                    let text = match output {
                        Value::String(s) => s.clone(),
                        other => serde_json::to_string_pretty(other).unwrap_or_default(),
                    };
                    let _ = write!(
                        out,
                        "<details><summary>output ({} bytes)</summary><pre>{}</pre></details>",
                        text.len(),
                        esc_cut(&text)
                    );
                }
                if let Some(error) = &call.error {
                    let _ = write!(out, "<pre class=\"error\">{}</pre>", esc_cut(error));
                }
                out.push_str("</details>");
            }
        }
        if let Some(output) = &step.output {
            let text = serde_json::to_string_pretty(output).unwrap_or_default();
            let _ = write!(
                out,
                "<details><summary>step output</summary><pre>{}</pre></details>",
                esc_cut(&text)
            );
        }
        out.push_str("</details>");
    }
    out.push_str("</section>\n");
}

fn postconditions(out: &mut String, result: &RunResult) {
    if result.postconditions.is_empty() && result.final_check.is_none() {
        return;
    }
    out.push_str("<section><h2>Postconditions and the final re-check</h2><ul class=\"checks\">");
    for p in &result.postconditions {
        let (mark, class) = if p.satisfied { ("✓", "pass") } else { ("✗", "fail") };
        let _ = write!(
            out,
            "<li class=\"{class}\">{mark} {} — {}",
            esc(&p.description),
            esc(&p.evidence)
        );
        if let Some(judge) = &p.judge {
            let text = serde_json::to_string(judge).unwrap_or_default();
            let _ = write!(out, "<br><small>judge: {}</small>", esc(&text));
        }
        out.push_str("</li>");
    }
    out.push_str("</ul>");
    if let Some(check) = &result.final_check {
        let _ = write!(
            out,
            "<p>{} assertion(s) run again on the final workspace; {} no longer held.</p>",
            check.rechecked,
            check.regressed.len()
        );
        for r in &check.regressed {
            let text = serde_json::to_string(r).unwrap_or_default();
            let _ = write!(out, "<pre class=\"error\">{}</pre>", esc(&text));
        }
    }
    out.push_str("</section>\n");
}

fn files(out: &mut String, input: &Input<'_>) {
    if input.result.file_mutations.is_empty() {
        return;
    }
    out.push_str("<section><h2>Files changed</h2>");
    for m in &input.result.file_mutations {
        let stored = input.record.mutations.iter().find(|r| r.mutation.path == m.path);
        let step = stored
            .map(|s| {
                format!(" · step <a href=\"#step-{}\">{}</a>", anchor(&s.step_id), esc(&s.step_id))
            })
            .unwrap_or_default();
        let no_op = if m.no_op { " · <b>unchanged (no-op write)</b>" } else { "" };
        let _ = write!(
            out,
            "<details class=\"file\" open><summary><code>{}</code> {} → {} bytes · <span class=\"add\">+{}</span> <span class=\"del\">−{}</span>{step}{no_op}</summary>",
            esc(&m.path),
            m.bytes_before,
            m.bytes_after,
            m.lines_added,
            m.lines_removed
        );
        let text = |sha: &Option<String>| {
            sha.as_deref()
                .and_then(|s| (input.blob)(s))
                .map(|b| String::from_utf8_lossy(&b).into_owned())
        };
        match stored {
            Some(s) => {
                let (before, after) = (
                    text(&s.before_sha256).unwrap_or_default(),
                    text(&s.after_sha256).unwrap_or_default(),
                );
                let lines = pev_verify::diff_lines(&before, &after);
                out.push_str("<pre class=\"diff\">");
                for line in lines.iter().take(MAX_DIFF_LINES) {
                    let (class, sign) = match line.tag {
                        DiffTag::Insert => ("add", '+'),
                        DiffTag::Delete => ("del", '-'),
                        DiffTag::Equal => ("ctx", ' '),
                    };
                    let _ = write!(out, "<span class=\"{class}\">{sign}{}</span>", esc(&line.text));
                }
                if lines.len() > MAX_DIFF_LINES {
                    let _ = write!(out, "… {} more lines", lines.len() - MAX_DIFF_LINES);
                }
                out.push_str("</pre>");
            }
            None => out.push_str("<p class=\"meta\">no contents were kept for this file</p>"),
        }
        out.push_str("</details>");
    }
    out.push_str("</section>\n");
}

/// What the judge was asked about a step and what it answered, attempt by attempt.
fn judge(out: &mut String, events: &[pev_protocol::event::Event], step: &str) {
    use pev_protocol::event::EventBody;
    let mut first = true;
    for event in events {
        let EventBody::JudgeDecided {
            step: id,
            attempt,
            confidence,
            outcome,
            feedback,
            answers,
            ..
        } = &event.body
        else {
            continue;
        };
        if id != step {
            continue;
        }
        if first {
            out.push_str("<h4>Judge</h4>");
            first = false;
        }
        let class = if outcome == "passed" { "pass" } else { "fail" };
        let _ = write!(
            out,
            "<p class=\"judge\">attempt {attempt}: <b class=\"{class}\">{}</b> (confidence {confidence:.2}){}</p><ul class=\"checks\">",
            esc(outcome),
            if feedback.is_empty() { String::new() } else { format!(": {}", esc(feedback)) }
        );
        for a in answers {
            let (mark, class) = if a.yes { ("yes", "pass") } else { ("no", "fail") };
            let _ = write!(
                out,
                "<li class=\"{class}\">{} — <b>{mark}</b> ({:.2})</li>",
                esc(&a.question),
                a.confidence
            );
        }
        out.push_str("</ul>");
    }
}

fn usage(out: &mut String, result: &RunResult, calls: &[pev_store::ModelCallRecord]) {
    let u = &result.usage;
    let _ = writeln!(
        out,
        "<section><h2>Usage</h2><table><tr><th>model calls</th><th>input tokens</th><th>output tokens</th><th>cache read</th><th>cost</th><th>tool calls</th><th>wall time</th></tr>\
         <tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>${:.4}</td><td>{}</td><td>{}</td></tr></table></section>",
        u.llm_calls,
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cost_usd,
        u.tool_calls,
        duration(result.duration_ms)
    );
    if calls.is_empty() {
        return;
    }
    // Per role, in the order the roles first called.
    let mut roles: Vec<(&str, [u64; 5], f64, bool)> = Vec::new();
    for c in calls {
        let i = match roles.iter().position(|r| r.0 == c.role) {
            Some(i) => i,
            None => {
                roles.push((&c.role, [0; 5], 0.0, true));
                roles.len() - 1
            }
        };
        let r = &mut roles[i];
        r.1[0] += 1;
        r.1[1] += c.input_tokens;
        r.1[2] += c.output_tokens;
        r.1[3] += c.duration_ms;
        r.1[4] += u64::from(c.error_type.is_some());
        match c.cost_usd {
            Some(usd) => r.2 += usd,
            None if c.error_type.is_none() => r.3 = false,
            None => {}
        }
    }
    out.push_str(
        "<h4>Per role</h4><table class=\"roles\"><tr><th>role</th><th>calls</th><th>failed</th><th>input tokens</th><th>output tokens</th><th>cost</th><th>time in calls</th></tr>",
    );
    for (role, n, usd, priced) in roles {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(role),
            n[0],
            n[4],
            n[1],
            n[2],
            if priced { format!("${usd:.4}") } else { format!("${usd:.4} (unpriced calls)") },
            duration(n[3])
        );
    }
    out.push_str("</table>");
}

fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

const STYLE: &str = "\
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0 auto;max-width:1200px;padding:24px;color:#1d1d1f;background:#fff}\
h1{font-size:22px;margin:0 0 6px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}h4{margin:10px 0 4px}\
code,pre{font:12.5px ui-monospace,SFMono-Regular,Menlo,monospace}pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:480px;white-space:pre-wrap;word-break:break-word}\
.meta{color:#666}.verdict{display:inline-block;font-weight:700;font-size:16px;padding:3px 12px;border-radius:12px;color:#fff}\
.s-success{background:#1a7f37}.s-partial{background:#b7791f}.s-failed{background:#cf222e}.s-awaiting_approval{background:#6e40c9}\
.reasons li{margin:3px 0}.warnings li{color:#8a6100}.error{color:#cf222e}\
.badge{display:inline-block;min-width:78px;text-align:center;border-radius:10px;padding:0 6px;color:#fff;font-size:12px}\
.n-done{background:#1a7f37;fill:#dafbe1}.n-failed{background:#cf222e;fill:#ffebe9}.n-blocked{background:#b7791f;fill:#fff8c5}\
.n-pending,.n-not_run{background:#8c959f;fill:#f6f8fa}.n-in_progress{background:#0969da;fill:#ddf4ff}.n-skipped{background:#afb8c1;fill:#f6f8fa}\
.dag{display:block;overflow:visible;max-width:100%;height:auto}.dag rect{stroke:#57606a;stroke-width:1}.dag text{font:12px ui-monospace,monospace;fill:#1d1d1f}.edge{stroke:#888;stroke-width:1.2}\
.gantt{border:1px solid #ddd;padding:6px}.lane{position:relative;height:18px;margin:2px 0 2px 160px}.lane-id{position:absolute;left:-160px;width:150px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font:12px ui-monospace,monospace}\
.bar{position:absolute;top:2px;height:14px;border-radius:3px}.bar.call{top:6px;height:6px;background:#0969da;opacity:.75}.bar.r-verifier{background:#6e40c9}.bar.r-planner{background:#bf8700}.pass{color:#1a7f37}.fail{color:#cf222e}\
details.step{border:1px solid #ddd;border-radius:6px;margin:6px 0;padding:4px 10px}details.call{margin:4px 0 4px 12px}summary{cursor:pointer}\
.checks .pass{color:#1a7f37}.checks .fail{color:#cf222e}.diff .add{color:#1a7f37;background:#e6ffec;display:block}.diff .del{color:#cf222e;background:#ffebe9;display:block}.diff .ctx{color:#57606a;display:block}\
.add{color:#1a7f37}.del{color:#cf222e}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:4px 10px;text-align:right}\
footer{margin-top:32px;color:#666;font-size:12px}";

#[cfg(test)]
mod tests;
