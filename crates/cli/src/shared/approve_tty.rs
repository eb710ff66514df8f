//! Asking a person on the terminal whether a step may run (`requires_approval`, or a tool in the
//! policy's `approve_tools`).
//!
//! The request (step, title, tool, the resolved arguments, why approval is needed) goes to stderr
//! and the answer is read from the terminal: `/dev/tty` first, because stdin may be the plan
//! itself (`pev run -`), else stdin when it is a terminal. `y`/`yes` approves and `n`/`no`
//! refuses; anything else asks again, three times at most, then counts as no. End of input or a
//! read error defers: nobody can answer now, so the run stops `awaiting_approval` and
//! `pev approve` can answer later. The dialogue itself is [`ask`], over any reader and writer,
//! so the tests drive it without a terminal.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::sync::Arc;

use pev_engine::{Approval, ApprovalRequest, Approver};

use crate::view::run_view::LiveView;
use crate::view::style::{Style, clean, truncate};

/// How many times an unclear answer is asked again before it counts as no.
const MAX_ASKS: usize = 3;

/// The most lines of pretty-printed arguments shown; the rest is counted.
const MAX_ARGUMENT_LINES: usize = 40;

/// The longest answer line read (a terminal line; anything longer is not `y` anyway).
const MAX_ANSWER_BYTES: u64 = 1024;

/// Asks on the terminal, hiding the live view's bars while it does.
pub struct TtyApprover {
    live: Option<Arc<LiveView>>,
    style: Style,
}

impl TtyApprover {
    /// `live`: the live view whose bars must not garble the prompt, if one is drawn.
    pub fn new(live: Option<Arc<LiveView>>, style: Style) -> Self {
        TtyApprover { live, style }
    }

    fn ask_terminal(&self, request: &ApprovalRequest) -> Approval {
        // The prompt goes to stderr when a person sees it there, else to the terminal itself.
        let tty = OpenOptions::new().read(true).write(true).open("/dev/tty");
        let stderr = io::stderr();
        match tty {
            Ok(mut tty) => {
                let Ok(reader) = tty.try_clone() else { return Approval::Defer };
                let mut input = BufReader::new(reader);
                if stderr.is_terminal() {
                    ask(request, &mut input, &mut stderr.lock(), &self.style)
                } else {
                    ask(request, &mut input, &mut tty, &self.style)
                }
            }
            Err(_) if io::stdin().is_terminal() => {
                ask(request, &mut io::stdin().lock(), &mut stderr.lock(), &self.style)
            }
            Err(_) => Approval::Defer,
        }
    }
}

impl Approver for TtyApprover {
    fn decide(&self, request: &ApprovalRequest) -> Approval {
        match &self.live {
            Some(live) => live.suspend(|| self.ask_terminal(request)),
            None => self.ask_terminal(request),
        }
    }
}

/// The request as shown to the person: step, title, tool, why, and the arguments.
pub fn render_request(request: &ApprovalRequest, style: &Style) -> String {
    let s = style;
    let mut out = String::new();
    let step = clean(&request.step);
    let _ = write!(out, "{} step {}", s.yellow(&s.bold("approval needed:")), s.bold(&step));
    if request.title != request.step && !request.title.is_empty() {
        let _ = write!(out, " ({})", clean(&request.title));
    }
    out.push('\n');
    if let Some(tool) = &request.tool {
        let _ = writeln!(out, "  {} {}", s.dim("tool:"), clean(tool));
    }
    if !request.reason.is_empty() {
        let _ = writeln!(out, "  {} {}", s.dim("why: "), clean(&request.reason));
    }
    let pretty = serde_json::to_string_pretty(&request.arguments).unwrap_or_default();
    if !request.arguments.is_null() && !pretty.is_empty() {
        let _ = writeln!(out, "  {}", s.dim("arguments:"));
        let total = pretty.lines().count();
        for line in pretty.lines().take(MAX_ARGUMENT_LINES) {
            let _ = writeln!(out, "    {}", truncate(&clean(line), 200));
        }
        if total > MAX_ARGUMENT_LINES {
            let more = total - MAX_ARGUMENT_LINES;
            let _ = writeln!(out, "    {}", s.dim(&format!("… {more} more lines")));
        }
    }
    out
}

/// The dialogue: shows the request on `out`, reads answers from `input`.
pub fn ask(
    request: &ApprovalRequest,
    input: &mut impl BufRead,
    out: &mut impl Write,
    style: &Style,
) -> Approval {
    // A prompt that cannot be shown cannot be answered knowingly: defer to `pev approve`.
    if out.write_all(render_request(request, style).as_bytes()).is_err() {
        return Approval::Defer;
    }
    let step = clean(&request.step);
    let mut line = Vec::new();
    for _ in 0..MAX_ASKS {
        let shown = write!(out, "approve step {step}? [y/n] ").and_then(|()| out.flush());
        if shown.is_err() {
            return Approval::Defer;
        }
        line.clear();
        match Read::by_ref(input).take(MAX_ANSWER_BYTES).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => {
                let _ = writeln!(out, "\nno answer: the run will wait for `pev approve`");
                return Approval::Defer;
            }
            Ok(_) => {}
        }
        let answer = String::from_utf8_lossy(&line).trim().to_ascii_lowercase();
        match answer.as_str() {
            "y" | "yes" => return Approval::Yes,
            "n" | "no" => return Approval::No,
            _ => {
                let _ = writeln!(out, "please answer y (yes) or n (no)");
            }
        }
    }
    let _ = writeln!(out, "no clear answer: step {step} is not approved");
    Approval::No
}

#[cfg(test)]
#[path = "approve_tty_tests.rs"]
mod tests;
