//! Small text helpers for the details and messages the verifier writes: sizes for people, text
//! clipped at a char boundary, the last lines of a stream.
//!
//! Details end up in terminals, JSON and the journal, so they are kept to one line and bounded:
//! a pattern or a line of output quoted in full could be megabytes.

/// How many characters of a quoted pattern, line or goal a detail keeps.
pub(crate) const CLIP: usize = 160;

/// A size as people read it: `120 bytes`, `1.2 KB`, `3.4 MB`.
pub(crate) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return if bytes == 1 { "1 byte".to_owned() } else { format!("{bytes} bytes") };
    }
    // Precision is irrelevant here; the exact count is shown where it matters.
    #[allow(clippy::cast_precision_loss)]
    let mut value = bytes as f64 / 1024.0;
    let mut unit = UNITS[0];
    for next in UNITS.iter().skip(1) {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    format!("{value:.1} {unit}")
}

/// `text` on one line, at most `max` characters, with `…` when something was cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max.saturating_mul(4)));
    for (count, ch) in text.chars().enumerate() {
        if count == max {
            out.push('…');
            return out;
        }
        out.push(if ch == '\n' || ch == '\r' || ch == '\t' { ' ' } else { ch });
    }
    out
}

/// The last `n` non-empty lines of `text`, joined with ` | `, each clipped.
pub(crate) fn last_lines(text: &str, n: usize) -> String {
    let mut lines: Vec<&str> =
        text.lines().map(str::trim).filter(|l| !l.is_empty()).rev().take(n).collect();
    lines.reverse();
    lines.iter().map(|l| clip(l, CLIP)).collect::<Vec<_>>().join(" | ")
}

/// The 1-based number of the line holding byte `offset` of `text`, and that line.
pub(crate) fn line_at(text: &str, offset: usize) -> (usize, &str) {
    let before = text.get(..offset).unwrap_or(text);
    let number = before.bytes().filter(|b| *b == b'\n').count().saturating_add(1);
    let start = before.rfind('\n').map_or(0, |i| i.saturating_add(1));
    let rest = text.get(start..).unwrap_or_default();
    let line = rest.split('\n').next().unwrap_or_default();
    (number, line.trim_end_matches('\r'))
}

/// A short prefix of a hex digest, enough to tell two apart in a detail.
pub(crate) fn short_hash(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;
