//! Colour for the run views (`pev run`, `pev show`, `pev runs`): whether to use it, and the few
//! ANSI styles pev needs, written by hand so no colour crate is needed.
//!
//! The decision is made once per output stream from `--color auto|always|never`, `NO_COLOR`,
//! `TERM=dumb` and whether the stream is a terminal; the renderers then receive a [`Style`] and
//! never look at the environment themselves, so tests pass the decision in. This module also
//! holds [`clean`], which neutralises control characters in text that came from a plan, a tool
//! or a file: such text must not be able to move the cursor or recolour the user's terminal.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::io::IsTerminal;

use clap::ValueEnum;

/// `--color`: when to colour the output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour when the output is a terminal and neither NO_COLOR nor TERM=dumb says otherwise
    #[default]
    Auto,
    /// Always colour, even into a pipe
    Always,
    /// Never colour
    Never,
}

/// What the environment says about colour, gathered in one place so the decision is testable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColorEnv {
    /// `NO_COLOR` is set to a non-empty value (https://no-color.org).
    pub no_color: bool,
    /// `TERM=dumb`: a terminal that cannot show escape codes.
    pub term_dumb: bool,
    /// The output stream is a terminal.
    pub is_terminal: bool,
}

impl ColorEnv {
    /// Reads `NO_COLOR` and `TERM` from the process environment; `is_terminal` is the stream's.
    pub fn from_process(is_terminal: bool) -> ColorEnv {
        ColorEnv::from_vars(
            std::env::var_os("NO_COLOR").as_deref(),
            std::env::var_os("TERM").as_deref(),
            is_terminal,
        )
    }

    /// The same from given values (for tests, which may not set the environment).
    pub fn from_vars(no_color: Option<&OsStr>, term: Option<&OsStr>, is_terminal: bool) -> Self {
        ColorEnv {
            no_color: no_color.is_some_and(|v| !v.is_empty()),
            term_dumb: term.is_some_and(|t| t == "dumb"),
            is_terminal,
        }
    }
}

const RESET: &str = "\x1b[0m";
const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const CYAN: &str = "\x1b[36m";
const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";

/// Whether to colour one output stream, and the styles to colour it with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
}

impl Style {
    /// No colour at all.
    #[cfg(test)]
    pub fn plain() -> Style {
        Style { color: false }
    }

    /// The decision: `always` and `never` win; `auto` colours a terminal unless `NO_COLOR` or
    /// `TERM=dumb` says not to.
    pub fn decide(choice: ColorChoice, env: ColorEnv) -> Style {
        let color = match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => env.is_terminal && !env.no_color && !env.term_dumb,
        };
        Style { color }
    }

    /// For text printed on standard output (summaries, `pev show`, `pev runs`).
    pub fn for_stdout(choice: ColorChoice) -> Style {
        Style::decide(choice, ColorEnv::from_process(std::io::stdout().is_terminal()))
    }

    /// For text printed on standard error (the live and plain views, the approval prompt).
    pub fn for_stderr(choice: ColorChoice) -> Style {
        Style::decide(choice, ColorEnv::from_process(std::io::stderr().is_terminal()))
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color { format!("{code}{text}{RESET}") } else { text.to_owned() }
    }

    pub fn green(&self, text: &str) -> String {
        self.paint(GREEN, text)
    }

    pub fn red(&self, text: &str) -> String {
        self.paint(RED, text)
    }

    pub fn yellow(&self, text: &str) -> String {
        self.paint(YELLOW, text)
    }

    pub fn cyan(&self, text: &str) -> String {
        self.paint(CYAN, text)
    }

    pub fn dim(&self, text: &str) -> String {
        self.paint(DIM, text)
    }

    pub fn bold(&self, text: &str) -> String {
        self.paint(BOLD, text)
    }

    /// A run status (`success`, `partial`, `failed`, `awaiting_approval`, `running`, …) in the
    /// colour that says whether it is good news.
    pub fn status(&self, status: &str) -> String {
        match status {
            "success" => self.paint(&format!("{BOLD}{GREEN}"), status),
            "failed" => self.paint(&format!("{BOLD}{RED}"), status),
            "partial" | "awaiting_approval" => self.paint(&format!("{BOLD}{YELLOW}"), status),
            _ => self.bold(status),
        }
    }
}

/// `text` with every control character except tab replaced by a visible escape (newline → `⏎`,
/// `ESC` → `\e`, other C0 codes → `^X`, the rest → `\u{..}`), so text from a plan, a tool or a file cannot
/// drive the terminal. Borrowed when there is nothing to replace (the common case).
pub fn clean(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_unsafe(c) {
            out.push(c);
        } else if c == '\n' {
            // Callers print one line per field; a newline inside one stays visible.
            out.push('⏎');
        } else if c == '\x1b' {
            out.push_str("\\e");
        } else if let Some(caret) = u8::try_from(u32::from(c)).ok().filter(|b| *b < 0x20) {
            out.push('^');
            out.push(char::from(caret + b'@'));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
    }
    Cow::Owned(out)
}

/// Control characters (C0 except tab, DEL, C1) and the bidirectional overrides that can make
/// text read differently from what it is.
fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\t') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` cut to at most `max` characters, ending in `…` when cut. Char-boundary safe.
/// The most characters of a goal a view shows (the journal keeps it whole).
pub const GOAL_SHOWN: usize = 300;

pub fn truncate(text: &str, max: usize) -> Cow<'_, str> {
    if text.chars().count() <= max {
        return Cow::Borrowed(text);
    }
    let keep: String = text.chars().take(max.saturating_sub(1)).collect();
    Cow::Owned(format!("{keep}…"))
}

/// A duration for people: `12ms`, `1.2s`, `2m03s`, `1h02m`.
pub fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms % 3_600_000) / 60_000)
    }
}

#[cfg(test)]
#[path = "style_tests.rs"]
mod tests;
