//! Reading a plan file (or standard input) into text, with one clear message per way it can fail.
//!
//! Every failure names the file and says what is wrong in words a person can act on: it does not
//! exist, it is a directory, it is too large, it is not UTF-8 (and where), it is empty. The size
//! limit protects the linter from being handed a multi-gigabyte file by mistake; it is 64 MiB,
//! and the hidden `PEV_MAX_INPUT_BYTES` environment variable lowers it for tests.

use std::fmt;
use std::io::Read;
use std::path::Path;

/// The default limit on a plan's size.
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// The argument that means "read standard input".
pub const STDIN: &str = "-";

/// A plan's text and the name to show for it.
#[derive(Debug)]
pub struct Source {
    /// The path as given, or `<stdin>`.
    pub name: String,
    pub is_stdin: bool,
    pub text: String,
}

/// Why a plan could not be read.
#[derive(Debug)]
pub enum InputError {
    Io { name: String, reason: String },
    TooLarge { name: String, limit: u64 },
    NotUtf8 { name: String, line: usize, column: usize },
    Empty { name: String },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { name, reason } => write!(f, "cannot read plan `{name}`: {reason}"),
            Self::TooLarge { name, limit } => write!(
                f,
                "cannot read plan `{name}`: it is larger than the {} limit",
                human_bytes(*limit)
            ),
            Self::NotUtf8 { name, line, column } => write!(
                f,
                "cannot read plan `{name}`: it is not UTF-8 text (invalid byte at line {line}, \
                 column {column})"
            ),
            Self::Empty { name } => {
                write!(f, "plan `{name}` is empty: expected a JSON or YAML plan")
            }
        }
    }
}

impl std::error::Error for InputError {}

/// The size limit: `PEV_MAX_INPUT_BYTES` when it holds a number, else 64 MiB.
/// The longest goal pev accepts (a plan's or `pev agent`'s): it is journaled with the run, its
/// events and every plan version, and shown by every view, so a goal the size of a file would
/// multiply into the journal and the terminal.
pub const MAX_GOAL_BYTES: usize = 64 * 1024;

/// Refuses a goal longer than [`MAX_GOAL_BYTES`], saying how long it is and where to put the
/// rest.
pub fn check_goal(goal: &str) -> Result<(), String> {
    if goal.len() <= MAX_GOAL_BYTES {
        return Ok(());
    }
    Err(format!(
        "the goal is {} bytes; pev accepts goals up to {} KiB (it is journaled with every event \
         of the run and shown by every view): put the details in a file in the workspace and \
         name it in the goal",
        goal.len(),
        MAX_GOAL_BYTES / 1024
    ))
}

pub fn max_bytes(env_value: Option<&str>) -> u64 {
    env_value.and_then(|v| v.trim().parse().ok()).unwrap_or(DEFAULT_MAX_BYTES)
}

/// Reads the plan named by `arg` (`-` for standard input).
pub fn read(arg: &str, limit: u64) -> Result<Source, InputError> {
    let is_stdin = arg == STDIN;
    let name = if is_stdin { "<stdin>".to_owned() } else { arg.to_owned() };
    let io = |e: std::io::Error| InputError::Io { name: name.clone(), reason: describe(&e) };
    let bytes = if is_stdin {
        read_limited(std::io::stdin().lock(), limit, 0).map_err(io)?
    } else {
        let path = Path::new(arg);
        let meta = std::fs::metadata(path).map_err(io)?;
        if meta.is_dir() {
            return Err(InputError::Io { name, reason: "it is a directory, not a file".into() });
        }
        if meta.len() > limit {
            return Err(InputError::TooLarge { name, limit });
        }
        let file = std::fs::File::open(path).map_err(io)?;
        read_limited(file, limit, meta.len()).map_err(io)?
    };
    let Some(bytes) = bytes else {
        return Err(InputError::TooLarge { name, limit });
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let valid = e.as_bytes().get(..e.utf8_error().valid_up_to()).unwrap_or_default();
            let (line, column) = line_column(valid);
            return Err(InputError::NotUtf8 { name, line, column });
        }
    };
    // A byte-order mark is legal in UTF-8 files but not in JSON; editors on Windows add one.
    let text = match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => text,
    };
    if text.trim().is_empty() {
        return Err(InputError::Empty { name });
    }
    Ok(Source { name, is_stdin, text })
}

/// Reads at most `limit` bytes; `None` when there is more. `size` is what the file's metadata
/// says: the buffer starts with room for it and one byte more (so that the read that finds the
/// end needs no more), where growing it by doubling would copy a 28 MB plan five times over
/// and, under mimalloc, keep the copies' pages until the end of the run.
fn read_limited(reader: impl Read, limit: u64, size: u64) -> std::io::Result<Option<Vec<u8>>> {
    let room = usize::try_from(size.min(limit).saturating_add(1)).unwrap_or(0);
    let mut bytes = Vec::with_capacity(room);
    reader.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// The 1-based line and column just after `valid` (the position of the bad byte).
fn line_column(valid: &[u8]) -> (usize, usize) {
    let text = String::from_utf8_lossy(valid);
    let line = text.matches('\n').count() + 1;
    let column = text.rsplit('\n').next().map_or(0, |last| last.chars().count()) + 1;
    (line, column)
}

/// An I/O error in words, without Rust's " (os error 2)" suffix.
pub fn describe(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error ") {
        Some(cut) => text.get(..cut).unwrap_or(&text).to_owned(),
        None => text,
    }
}

fn human_bytes(n: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) { format!("{} MiB", n / MIB) } else { format!("{n}-byte") }
}
