//! A best-effort line locator for YAML plans: block mappings and sequences, as people and
//! models write plans.
//!
//! YAML's full grammar is large; this follows the part plans use, one line at a time, by
//! indentation: `key: value` lines, `key:` opening a nested block, `- ` items (including a
//! sequence written at its key's indentation), and `- key: value` items. It skips block scalars
//! (`|`, `>`), flow collections spanning lines, comments and document markers. Whatever it
//! cannot follow it leaves out, and [`Locations::get`] then falls back to the nearest ancestor
//! it did place, so a finding at worst points at its step. Positions are the key's column for
//! mapping entries and the `-` for sequence items.

use std::collections::HashSet;
use std::fmt::Write as _;

use pev_protocol::reference::push_escaped;

use crate::locate::{Locations, Position, canonical_key};

/// Scans YAML `text` for `pointers` and their ancestors.
pub fn locations<'a>(text: &str, pointers: impl IntoIterator<Item = &'a str>) -> Locations {
    let wanted = crate::locate::with_ancestors(pointers);
    let mut locations = Locations::none();
    if wanted.is_empty() {
        return locations;
    }
    let mut scan = Scan { wanted: &wanted, out: &mut locations, stack: Vec::new(), pending: None };
    let mut skip_deeper_than: Option<usize> = None;
    let mut flow_depth: i64 = 0;
    for (n, raw_line) in text.lines().enumerate() {
        let line = n + 1;
        let content = raw_line.trim_start_matches(' ');
        let indent = raw_line.len() - content.len();
        if flow_depth > 0 {
            flow_depth += bracket_balance(content);
            continue;
        }
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        if let Some(limit) = skip_deeper_than {
            if indent > limit {
                continue;
            }
            skip_deeper_than = None;
        }
        if content.starts_with("---") || content.starts_with("%") {
            continue;
        }
        if content.starts_with("...") {
            break;
        }
        match scan.line(line, indent, content) {
            After::Nothing => {}
            After::BlockScalar(key_indent) => skip_deeper_than = Some(key_indent),
            After::Flow(balance) => flow_depth = balance,
        }
    }
    locations
}

/// What the rest of a line asks of the lines after it.
enum After {
    Nothing,
    /// A `|` or `>` scalar: lines indented deeper than this are its text.
    BlockScalar(usize),
    /// A flow collection left open by this many brackets.
    Flow(i64),
}

#[derive(Debug)]
struct Frame {
    indent: usize,
    /// `Some(index)` for a sequence.
    index: Option<usize>,
    raw: String,
    canon: String,
}

/// A `key:` or `- ` with nothing after it: the block that follows is its value.
struct Pending {
    indent: usize,
    /// Set by a `- ` item (a sequence nested in it must be indented deeper).
    from_item: bool,
    raw: String,
    canon: String,
}

struct Scan<'w, 'o> {
    wanted: &'w HashSet<String>,
    out: &'o mut Locations,
    stack: Vec<Frame>,
    pending: Option<Pending>,
}

impl Scan<'_, '_> {
    fn note(&mut self, raw: &str, canon: &str, line: usize, column: usize) {
        if self.wanted.contains(canon) {
            self.out.insert_written(canon, raw);
        }
        for p in [raw, canon] {
            if self.wanted.contains(p) {
                self.out.insert(p.to_owned(), Position { line, column });
            }
        }
    }

    /// Handles `content`, which starts at column `indent` (0-based) of line `line`.
    fn line(&mut self, line: usize, indent: usize, content: &str) -> After {
        let mut indent = indent;
        let mut content = content;
        loop {
            if content == "-" || content.starts_with("- ") {
                let Some((raw, canon)) = self.item(line, indent) else { return After::Nothing };
                let rest = content.get(1..).unwrap_or("");
                let trimmed = rest.trim_start_matches(' ');
                if trimmed.is_empty() || trimmed.starts_with('#') {
                    self.pending = Some(Pending { indent, from_item: true, raw, canon });
                    return After::Nothing;
                }
                // The item holds a mapping (or a sequence) starting at this column.
                indent += 1 + (rest.len() - trimmed.len());
                content = trimmed;
                let pending_indent = indent.saturating_sub(1);
                self.pending =
                    Some(Pending { indent: pending_indent, from_item: false, raw, canon });
                continue;
            }
            return match split_key(content) {
                Some((key, value)) => self.entry(line, indent, &key, value),
                None => {
                    self.pending = None;
                    After::Nothing
                }
            };
        }
    }

    /// Opens the pending block as a new frame when a line at `indent` belongs to it.
    fn open_pending(&mut self, indent: usize, is_item: bool) -> bool {
        let Some(p) = self.pending.take() else { return false };
        let opens = indent > p.indent || (is_item && indent == p.indent && !p.from_item);
        if opens {
            let index = is_item.then_some(0);
            self.stack.push(Frame { indent, index, raw: p.raw, canon: p.canon });
        }
        opens
    }

    /// A `- ` at column `indent`; returns the item's pointers.
    fn item(&mut self, line: usize, indent: usize) -> Option<(String, String)> {
        if !self.open_pending(indent, true) {
            while self
                .stack
                .last()
                .is_some_and(|f| f.indent > indent || (f.indent == indent && f.index.is_none()))
            {
                self.stack.pop();
            }
            match self.stack.last_mut() {
                Some(top) if top.indent == indent && top.index.is_some() => {
                    top.index = top.index.map(|i| i + 1);
                }
                None => self.stack.push(Frame {
                    indent,
                    index: Some(0),
                    raw: String::new(),
                    canon: String::new(),
                }),
                // Indented like nothing open: not a shape this locator follows.
                Some(_) => return None,
            }
        }
        let top = self.stack.last()?;
        let i = top.index.unwrap_or(0);
        let (mut raw, mut canon) = (top.raw.clone(), top.canon.clone());
        let _ = write!(raw, "/{i}");
        let _ = write!(canon, "/{i}");
        self.note(&raw, &canon, line, indent + 1);
        Some((raw, canon))
    }

    /// A `key: value` whose key starts at column `indent`.
    fn entry(&mut self, line: usize, indent: usize, key: &str, value: &str) -> After {
        if !self.open_pending(indent, false) {
            while self
                .stack
                .last()
                .is_some_and(|f| f.indent > indent || (f.indent == indent && f.index.is_some()))
            {
                self.stack.pop();
            }
            match self.stack.last() {
                Some(top) if top.indent == indent && top.index.is_none() => {}
                None => self.stack.push(Frame {
                    indent,
                    index: None,
                    raw: String::new(),
                    canon: String::new(),
                }),
                Some(_) => return After::Nothing,
            }
        }
        let depth = self.stack.len();
        let Some(top) = self.stack.last() else { return After::Nothing };
        let (mut raw, mut canon) = (top.raw.clone(), top.canon.clone());
        let canonical = canonical_key(&canon, depth, key);
        raw.push('/');
        push_escaped(&mut raw, key);
        canon.push('/');
        push_escaped(&mut canon, canonical);
        self.note(&raw, &canon, line, indent + 1);

        let value = value.trim();
        if value.is_empty() || value.starts_with('#') {
            self.pending = Some(Pending { indent, from_item: false, raw, canon });
            return After::Nothing;
        }
        if value.starts_with('|') || value.starts_with('>') {
            return After::BlockScalar(indent);
        }
        if value.starts_with('[') || value.starts_with('{') {
            let balance = bracket_balance(value);
            if balance > 0 {
                return After::Flow(balance);
            }
        }
        After::Nothing
    }
}

/// `key: rest` (or `key:`), with the key unquoted; `None` for a line that is not an entry.
fn split_key(content: &str) -> Option<(String, &str)> {
    let first = content.chars().next()?;
    if first == '"' || first == '\'' {
        let close = content.get(1..)?.find(first)? + 1;
        let key = content.get(1..close)?.to_owned();
        let rest = content.get(close + 1..)?.trim_start();
        let rest = rest.strip_prefix(':')?;
        if !(rest.is_empty() || rest.starts_with(' ')) {
            return None;
        }
        return Some((key, rest));
    }
    if matches!(first, '[' | '{' | '#' | '&' | '*' | '!' | '|' | '>') {
        return None;
    }
    let colon = content.find(": ").or_else(|| content.strip_suffix(':').map(str::len))?;
    let key = content.get(..colon)?.trim_end();
    let rest = content.get(colon + 1..).unwrap_or("");
    Some((key.to_owned(), rest))
}

/// Open minus closed brackets on a line, ignoring quoted text.
fn bracket_balance(text: &str) -> i64 {
    let mut balance = 0i64;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{') => balance += 1,
            (None, ']' | '}') => balance -= 1,
            (None, '#') => break,
            _ => {}
        }
    }
    balance
}

#[cfg(test)]
#[path = "locate_yaml_tests.rs"]
mod tests;
