//! `pev lint --explain CODE`: what a lint code means, how bad it is by default, and the fix.
//! `--explain all` lists every code, in the order of CONTRACTS.md §5.

use std::io::{self, Write};

use pev_protocol::{Level, LintCode, Severity};

/// The code named on the command line is not one pev knows.
#[derive(Debug)]
pub struct UnknownCode(pub String);

impl std::fmt::Display for UnknownCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown lint code `{}` (`pev lint --explain all` lists every code)", self.0)
    }
}

/// The codes `name` asks for: one, or all of them for `all`.
pub fn codes(name: &str) -> Result<Vec<LintCode>, UnknownCode> {
    if name.trim().eq_ignore_ascii_case("all") {
        return Ok(LintCode::ALL.to_vec());
    }
    name.trim().parse::<LintCode>().map(|c| vec![c]).map_err(|_| UnknownCode(name.to_owned()))
}

/// Writes the explanation of each code, separated by blank lines.
pub fn write(codes: &[LintCode], out: &mut dyn Write) -> io::Result<()> {
    for (i, code) in codes.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(
            out,
            "{code}: {}, {} severity",
            level_word(code.default_level()),
            severity_word(code.severity())
        )?;
        writeln!(out, "  {}", code.explain())?;
        writeln!(out, "  fix: {}", code.fix())?;
    }
    Ok(())
}

pub fn level_word(level: Level) -> &'static str {
    match level {
        Level::Error => "error",
        Level::Warning => "warning",
    }
}

fn severity_word(severity: Severity) -> &'static str {
    match severity {
        Severity::Low => "low",
        Severity::Medium => "medium",
        Severity::High => "high",
    }
}
