//! `pev show --conversation RUN [STEP]`: the model conversations of a run as the journal holds
//! them, so a verdict can be traced to what the model saw. Each call prints the messages that
//! were new with it (the system prompt and tools once per conversation), then the answer; long
//! texts and tool results are folded unless `--full`. `--format json` prints every call with
//! its whole request and response.

use std::io::Write;

use pev_engine::agent::conversation::{Exchange, exchanges};
use pev_providers::{ChatResponse, ContentBlock, Message, Role};
use serde_json::json;

use crate::args::values::Common;
use crate::shared::exit::{EXIT_OK, Fail};
use crate::shared::workspace::{store_path, workspace_dir};
use crate::view::style::{Style, clean, duration};

const EXIT_FAILED: u8 = 1;
/// Lines of one text shown before it is folded.
const FOLD_LINES: usize = 12;
/// Characters of one line shown before it is cut.
const LINE_CHARS: usize = 240;

pub(crate) fn show(
    run: &str,
    step: Option<&str>,
    full: bool,
    common: &Common,
    out: &mut dyn Write,
) -> Result<u8, Fail> {
    let workspace = workspace_dir(common.workspace.as_deref())?;
    let db = store_path(common, &workspace)?;
    let store = pev_store::Store::open_existing(&db).map_err(|e| Fail(2, e.to_string()))?;
    let run_id = store.resolve_run(run).map_err(|e| Fail(2, e.to_string()))?;
    let calls = store.model_calls(&run_id).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let all = exchanges(&store, &calls).map_err(|e| Fail(EXIT_FAILED, e))?;
    let chosen: Vec<&Exchange> =
        all.iter().filter(|x| step.is_none_or(|s| x.call.step_id.as_deref() == Some(s))).collect();
    if let Some(step) = step
        && chosen.is_empty()
    {
        let steps: Vec<&str> = {
            let mut s: Vec<&str> = all.iter().filter_map(|x| x.call.step_id.as_deref()).collect();
            s.dedup();
            s
        };
        return Err(Fail(
            2,
            format!(
                "run {run_id} has no model call for step `{step}` (steps with calls: {})",
                if steps.is_empty() { "none".to_owned() } else { steps.join(", ") }
            ),
        ));
    }
    if common.json {
        let doc: Vec<_> = chosen
            .iter()
            .map(|x| json!({"call": x.call, "request": x.request, "response": x.response}))
            .collect();
        let text =
            serde_json::to_string_pretty(&doc).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
        let _ = writeln!(out, "{text}");
        return Ok(EXIT_OK);
    }
    let style = Style::for_stdout(common.color);
    let _ = writeln!(
        out,
        "{} of run {run_id}{}: {} model call(s)",
        style.bold("conversation"),
        step.map(|s| format!(", step {}", clean(s))).unwrap_or_default(),
        chosen.len()
    );
    if chosen.is_empty() {
        let _ = writeln!(out, "(the run made no model call, or was recorded before pev kept them)");
    }
    for x in chosen {
        render(out, x, full, &style);
    }
    Ok(EXIT_OK)
}

fn render(out: &mut dyn Write, x: &Exchange, full: bool, s: &Style) {
    let c = &x.call;
    let mut head = format!("call {} · {}", c.seq, c.role);
    if let Some(step) = &c.step_id {
        head.push_str(&format!(" · step {}", clean(step)));
    }
    if let Some(attempt) = c.attempt {
        head.push_str(&format!(" · attempt {attempt}"));
    }
    head.push_str(&format!(" · {} · {}", clean(&c.request_model), duration(c.duration_ms)));
    if c.error_type.is_none() {
        head.push_str(&format!(" · {} in / {} out", c.input_tokens, c.output_tokens));
    }
    if let Some(reason) = &c.finish_reason {
        head.push_str(&format!(" · {}", clean(reason)));
    }
    let _ = writeln!(out, "\n{}", s.bold(&format!("── {head}")));
    let Some(request) = &x.request else {
        let _ = writeln!(out, "   {}", s.dim("(the request was not kept)"));
        return;
    };
    if x.prior_messages == 0 {
        if let Some(system) = &request.system {
            block(out, &s.dim("system"), system, full, s);
        }
        if !request.tools.is_empty() {
            let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
            let _ = writeln!(out, "   {} {}", s.dim("tools:"), clean(&names.join(", ")));
        }
    }
    for (i, message) in request.messages.iter().enumerate().skip(x.prior_messages) {
        // An assistant turn after the first call is the previous answer, printed there.
        if x.prior_messages > 0 && i == x.prior_messages && message.role == Role::Assistant {
            continue;
        }
        message_lines(out, message, full, s);
    }
    match (&x.response, &c.error_type) {
        (Some(response), _) => answer(out, response, full, s),
        (None, Some(kind)) => {
            let why = c.error.as_deref().unwrap_or_default();
            let _ = writeln!(out, " {} {}", s.red(&format!("⇒ {kind}:")), clean(why));
        }
        (None, None) => {}
    }
}

fn message_lines(out: &mut dyn Write, message: &Message, full: bool, s: &Style) {
    let who = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    for part in &message.content {
        content(out, who, part, full, s);
    }
}

fn answer(out: &mut dyn Write, response: &ChatResponse, full: bool, s: &Style) {
    for part in &response.content {
        content(out, "⇒ assistant", part, full, s);
    }
}

fn content(out: &mut dyn Write, who: &str, part: &ContentBlock, full: bool, s: &Style) {
    match part {
        ContentBlock::Text { text } => block(out, &s.bold(who), text, full, s),
        ContentBlock::ToolUse { id, name, input } => {
            let args = input.to_string();
            let _ = writeln!(
                out,
                "   {} {} {} {}",
                s.bold(who),
                s.cyan(&format!("→ {}", clean(name))),
                fold_line(&args, full),
                s.dim(&format!("({})", clean(id)))
            );
        }
        ContentBlock::ToolResult { tool_use_id, content, is_error } => {
            let label = if *is_error { s.red("← error") } else { s.green("← result") };
            block(
                out,
                &format!("{} {label} {}", s.bold(who), s.dim(&clean(tool_use_id))),
                content,
                full,
                s,
            );
        }
    }
}

/// A labelled text, one line per line, folded after [`FOLD_LINES`] unless `full`.
fn block(out: &mut dyn Write, label: &str, text: &str, full: bool, s: &Style) {
    let lines: Vec<&str> = text.lines().collect();
    let shown = if full { lines.len() } else { lines.len().min(FOLD_LINES) };
    match lines.first() {
        None => {
            let _ = writeln!(out, "   {label} {}", s.dim("(empty)"));
        }
        Some(first) if lines.len() == 1 => {
            let _ = writeln!(out, "   {label} {}", fold_line(first, full));
        }
        Some(_) => {
            let _ = writeln!(out, "   {label}");
            for line in &lines[..shown] {
                let _ = writeln!(out, "     {}", fold_line(line, full));
            }
            if shown < lines.len() {
                let _ = writeln!(
                    out,
                    "     {}",
                    s.dim(&format!("… {} more line(s) (--full shows them)", lines.len() - shown))
                );
            }
        }
    }
}

fn fold_line(line: &str, full: bool) -> String {
    let line = clean(line);
    if full || line.chars().count() <= LINE_CHARS {
        return line.into_owned();
    }
    let keep: String = line.chars().take(LINE_CHARS).collect();
    format!("{keep}… ({} more chars)", line.chars().count() - LINE_CHARS)
}
