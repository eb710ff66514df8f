//! `pev lint --format text`: the lint result for people.
//!
//! A header with the plan, the status and the risk score; then each finding as
//! `error[CODE] step 2 `id` (Title): message`, the JSON path with its line when known, and the
//! one-line fix; then a count. Colour is used only when the caller says the terminal wants it.

use std::io::{self, Write};

use pev_protocol::{Finding, LintCode, LintResult, LintStatus, Plan};

use pev_lint::locate::Locations;

/// What the text report needs besides the result.
pub struct Report<'a> {
    pub name: &'a str,
    pub result: &'a LintResult,
    /// The parsed plan, for step titles (absent when the plan did not match the schema).
    pub plan: Option<&'a Plan>,
    pub locations: &'a Locations,
    pub threshold: f64,
    pub color: bool,
}

const RED: &str = "\x1b[1;31m";
const YELLOW: &str = "\x1b[1;33m";
const GREEN: &str = "\x1b[1;32m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

impl Report<'_> {
    fn paint(&self, style: &'static str, text: &str) -> String {
        if self.color { format!("{style}{text}{RESET}") } else { text.to_owned() }
    }

    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let r = self.result;
        let status = match r.status {
            LintStatus::Pass => self.paint(GREEN, "pass"),
            LintStatus::Warn => self.paint(YELLOW, "warn"),
            LintStatus::Error => self.paint(RED, "error"),
        };
        writeln!(
            out,
            "{}: {status} (risk score {:.2}, fails at {:.2})",
            self.paint(BOLD, self.name),
            r.risk_score,
            self.threshold
        )?;
        for f in &r.errors {
            writeln!(out)?;
            self.finding(out, f, "error", RED)?;
        }
        for f in &r.warnings {
            writeln!(out)?;
            self.finding(out, f, "warning", YELLOW)?;
        }
        writeln!(out)?;
        let (e, w) = (r.errors.len(), r.warnings.len());
        writeln!(out, "{}, {}", plural(e, "error"), plural(w, "warning"))
    }

    fn finding(
        &self,
        out: &mut dyn Write,
        f: &Finding,
        level: &str,
        colour: &'static str,
    ) -> io::Result<()> {
        let head = self.paint(colour, &format!("{level}[{}]", f.code));
        let mut subject = String::new();
        if let Some(i) = f.step {
            subject.push_str(&format!(" step {i}"));
            let step = self.plan.and_then(|p| p.steps.get(i));
            let id = f.step_id.as_deref().or(step.map(|s| s.id.as_str()));
            if let Some(id) = id {
                subject.push_str(&format!(" `{id}`"));
            }
            if let Some(title) = step.and_then(|s| s.title.as_deref()) {
                subject.push_str(&format!(" ({title})"));
            }
        }
        let subject = if subject.is_empty() { subject } else { self.paint(BOLD, &subject) };
        writeln!(out, "{head}{subject}: {}", f.msg)?;
        // A plan-level finding (empty pointer) is about the whole document; a schema error there
        // (a missing `goal`) still says where, since its fix refers to the path shown.
        if f.path.is_empty() && f.code == LintCode::SchemaInvalid {
            writeln!(out, "  {} the top level of the document", self.paint(DIM, "at"))?;
        } else if !f.path.is_empty() {
            let line = self.locations.get(&f.path).map(|p| format!(" (line {})", p.line));
            // The path as the file spells it: `args` where the plan wrote `args`.
            let path = self.locations.as_written(&f.path).unwrap_or(&f.path);
            writeln!(out, "  {} {}{}", self.paint(DIM, "at"), path, line.unwrap_or_default())?;
        }
        writeln!(out, "  {} {}", self.paint(DIM, "fix:"), f.code.fix())
    }
}

/// `1 step`, `2 steps`.
pub(crate) fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;
