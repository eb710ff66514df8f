//! From a finding's JSON pointer back to a line and column in the plan's source text.
//!
//! Findings name places by JSON pointer (`/steps/2/tool`); people and SARIF viewers want
//! `line 27`. [`Locations::json`] scans the text once, keeping the current pointer as it goes,
//! and notes the position of only the pointers asked for (and their ancestors, so that a
//! pointer into a value the scanner cannot see, such as a character inside a string, falls back
//! to the nearest enclosing one). An object member is placed at its key, an array element at its
//! value. The plan's input aliases (`args`, `step_id`, `dependencies`, …) are noted under both
//! spellings, because findings use the canonical names while the text may use the alias.
//!
//! The scanner runs only on text that already parsed as JSON, but it assumes nothing: on bytes
//! it does not expect it stops, and what it found so far is still good. It never recurses.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use pev_protocol::reference::push_escaped;

/// A 1-based line and column (columns count Unicode scalar values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

/// The positions found for a set of pointers.
#[derive(Debug, Default)]
pub struct Locations {
    found: HashMap<String, Position>,
    /// Canonical pointer -> the pointer as the text spells it, where an alias makes them differ
    /// (`/steps/2/parameters/command` written as `/steps/2/args/command`).
    written: HashMap<String, String>,
}

impl Locations {
    /// No positions (YAML plans, standard input that is not JSON, …).
    pub fn none() -> Self {
        Self::default()
    }

    /// Scans JSON `text` once for `pointers` and their ancestors.
    pub fn json<'a>(text: &str, pointers: impl IntoIterator<Item = &'a str>) -> Self {
        let wanted = with_ancestors(pointers);
        if wanted.is_empty() {
            return Self::none();
        }
        let mut scan = Scan::new(text, wanted);
        scan.run();
        Self { found: scan.found, written: scan.written }
    }

    /// `pointer` as the plan's text spells it (with its aliases), when that differs.
    pub fn as_written(&self, pointer: &str) -> Option<&str> {
        self.written.get(pointer).map(String::as_str)
    }

    /// Notes that the canonical `pointer` is spelled `raw` in the text.
    pub fn insert_written(&mut self, pointer: &str, raw: &str) {
        if pointer != raw {
            self.written.entry(pointer.to_owned()).or_insert_with(|| raw.to_owned());
        }
    }

    /// Where `pointer` is, or else its nearest ancestor that was found.
    pub fn get(&self, pointer: &str) -> Option<Position> {
        let mut p = pointer;
        loop {
            if let Some(pos) = self.found.get(p) {
                return Some(*pos);
            }
            p = p.get(..p.rfind('/')?)?;
        }
    }

    /// Notes a position found by another scanner (the YAML locator); the first one stays.
    pub fn insert(&mut self, pointer: String, position: Position) {
        self.found.entry(pointer).or_insert(position);
    }
}

/// The pointers and every ancestor of each (`/a/b` gives `/a/b`, `/a` and ``).
pub fn with_ancestors<'a>(pointers: impl IntoIterator<Item = &'a str>) -> HashSet<String> {
    let mut wanted: HashSet<String> = HashSet::new();
    for pointer in pointers {
        let mut p = pointer;
        loop {
            if !wanted.insert(p.to_owned()) {
                break;
            }
            match p.rfind('/') {
                Some(cut) => p = p.get(..cut).unwrap_or(""),
                None => break,
            }
        }
    }
    wanted
}

/// The alias a key may be written as, given where its object is (the canonical pointer of the
/// object and its depth); returns the canonical key.
pub fn canonical_key<'k>(object: &str, depth: usize, key: &'k str) -> &'k str {
    let step_object = depth == 3 && is_indexed(object, "/steps/");
    let assertion_object = depth == 5
        && (object.starts_with("/steps/") || object.starts_with("/postconditions/"))
        && object.contains("/assertions/");
    match (depth, key) {
        (1, "objective") => "goal",
        (1, "success_criteria") => "postconditions",
        (_, "step_id") if step_object => "id",
        (_, "name") if step_object => "title",
        (_, "args") if step_object => "parameters",
        (_, "dependencies") if step_object => "depends_on",
        (_, "estimated_complexity") if step_object => "complexity",
        (_, "assert") if assertion_object => "type",
        _ => key,
    }
}

/// Whether `pointer` is `prefix` followed by one array index.
fn is_indexed(pointer: &str, prefix: &str) -> bool {
    pointer
        .strip_prefix(prefix)
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value starts here.
    Value,
    /// After `{`: a key or `}`.
    KeyOrEnd,
    /// After `,` in an object: a key.
    Key,
    /// After `[`: a value or `]`.
    ElementOrEnd,
    /// After a value: `,`, `}` or `]`.
    AfterValue,
}

/// An open object or array and the lengths of both pointers before its members were added.
struct Frame {
    /// `Some(next index)` for an array.
    index: Option<usize>,
    raw_base: usize,
    canon_base: usize,
}

struct Scan<'t> {
    bytes: &'t [u8],
    pos: usize,
    line: usize,
    column: usize,
    /// The pointer as written in the text, and with the plan's aliases made canonical.
    raw: String,
    canon: String,
    wanted: HashSet<String>,
    found: HashMap<String, Position>,
    written: HashMap<String, String>,
}

impl<'t> Scan<'t> {
    fn new(text: &'t str, wanted: HashSet<String>) -> Self {
        Self {
            bytes: text.as_bytes(),
            pos: 0,
            line: 1,
            column: 1,
            raw: String::new(),
            canon: String::new(),
            wanted,
            found: HashMap::new(),
            written: HashMap::new(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn bump(&mut self) {
        if let Some(&b) = self.bytes.get(self.pos) {
            self.pos += 1;
            if b == b'\n' {
                self.line += 1;
                self.column = 1;
            } else if b & 0xC0 != 0x80 {
                // Count a character at its first byte, not at UTF-8 continuation bytes.
                self.column += 1;
            }
        }
    }

    fn here(&self) -> Position {
        Position { line: self.line, column: self.column }
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.bump();
        }
    }

    /// Notes the current pointers' position if they were asked for.
    fn note(&mut self, at: Position) {
        let same = self.raw == self.canon;
        if !same && self.wanted.contains(self.canon.as_str()) {
            self.written.entry(self.canon.clone()).or_insert_with(|| self.raw.clone());
        }
        for pointer in [&self.raw, &self.canon].into_iter().take(if same { 1 } else { 2 }) {
            if self.wanted.contains(pointer.as_str()) && !self.found.contains_key(pointer) {
                self.found.insert(pointer.clone(), at);
            }
        }
    }

    /// Whether the current value is, or holds, a pointer asked for (the wanted set includes
    /// every ancestor, so a value outside it has nothing inside worth descending into).
    fn is_wanted(&self) -> bool {
        self.wanted.contains(self.raw.as_str())
            || (self.raw != self.canon && self.wanted.contains(self.canon.as_str()))
    }

    /// Skips a whole value (object, array, string or scalar) without tracking pointers.
    fn skip_value(&mut self) {
        match self.peek() {
            Some(b'"') => self.skip_string(),
            Some(b'{' | b'[') => {
                let mut depth = 0usize;
                while let Some(b) = self.peek() {
                    match b {
                        b'"' => {
                            self.skip_string();
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                self.bump();
                                return;
                            }
                        }
                        _ => {}
                    }
                    self.bump();
                }
            }
            _ => self.skip_scalar(),
        }
    }

    /// Skips a string starting at its opening quote.
    fn skip_string(&mut self) {
        self.bump();
        while let Some(b) = self.peek() {
            self.bump();
            match b {
                b'\\' => self.bump(),
                b'"' => return,
                _ => {}
            }
        }
    }

    /// Reads a string starting at its opening quote, decoding escapes; borrowed when it has
    /// none (almost every key).
    fn read_string(&mut self) -> Cow<'t, str> {
        let start = self.pos + 1;
        let plain_end = self.bytes.get(start..).and_then(|rest| {
            let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
            (rest.get(end) == Some(&b'"')).then_some(start + end)
        });
        if let Some(end) = plain_end {
            let text: &'t [u8] = self.bytes;
            // Quotes are ASCII, so both ends are character boundaries of the original text.
            let key = text.get(start..end).map(String::from_utf8_lossy).unwrap_or_default();
            while self.pos <= end {
                self.bump();
            }
            return key;
        }
        self.bump();
        let mut out: Vec<u8> = Vec::new();
        while let Some(b) = self.peek() {
            self.bump();
            match b {
                b'"' => break,
                b'\\' => {
                    let Some(e) = self.peek() else { break };
                    self.bump();
                    let c = match e {
                        b'n' => '\n',
                        b't' => '\t',
                        b'r' => '\r',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'u' => self.read_unicode_escape(),
                        other => char::from(other),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                other => out.push(other),
            }
        }
        Cow::Owned(String::from_utf8_lossy(&out).into_owned())
    }

    /// The character of a `\uXXXX` escape (after the `u`), joining a surrogate pair.
    fn read_unicode_escape(&mut self) -> char {
        let high = self.read_hex4();
        if (0xD800..0xDC00).contains(&high)
            && self.bytes.get(self.pos..self.pos + 2) == Some(b"\\u".as_slice())
        {
            self.bump();
            self.bump();
            let low = self.read_hex4();
            if (0xDC00..0xE000).contains(&low) {
                let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                return char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
            }
        }
        char::from_u32(high).unwrap_or(char::REPLACEMENT_CHARACTER)
    }

    fn read_hex4(&mut self) -> u32 {
        let mut value = 0u32;
        for _ in 0..4 {
            let digit = self.peek().and_then(|b| char::from(b).to_digit(16));
            match digit {
                Some(d) => {
                    value = value * 16 + d;
                    self.bump();
                }
                None => break,
            }
        }
        value
    }

    /// Skips a number, `true`, `false` or `null`.
    fn skip_scalar(&mut self) {
        while let Some(b) = self.peek() {
            if matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
                return;
            }
            self.bump();
        }
    }

    fn run(&mut self) {
        let mut stack: Vec<Frame> = Vec::new();
        let mut state = State::Value;
        // Whether the value about to start was already noted at its key.
        let mut noted = false;
        let total = self.wanted.len();
        loop {
            if self.found.len() >= total {
                return;
            }
            self.skip_whitespace();
            let Some(b) = self.peek() else { return };
            match state {
                State::Value => {
                    if !noted {
                        self.note(self.here());
                    }
                    if !self.is_wanted() {
                        self.skip_value();
                        state = State::AfterValue;
                        continue;
                    }
                    match b {
                        b'{' | b'[' => {
                            self.bump();
                            let is_array = b == b'[';
                            stack.push(Frame {
                                index: is_array.then_some(0),
                                raw_base: self.raw.len(),
                                canon_base: self.canon.len(),
                            });
                            state = if is_array { State::ElementOrEnd } else { State::KeyOrEnd };
                        }
                        b'"' => {
                            self.skip_string();
                            state = State::AfterValue;
                        }
                        _ => {
                            self.skip_scalar();
                            state = State::AfterValue;
                        }
                    }
                }
                State::KeyOrEnd | State::Key => {
                    if b == b'}' {
                        self.bump();
                        self.close(&mut stack);
                        state = State::AfterValue;
                        continue;
                    }
                    if b != b'"' {
                        return;
                    }
                    let Some(frame) = stack.last() else { return };
                    let (raw_base, canon_base) = (frame.raw_base, frame.canon_base);
                    let at = self.here();
                    let key = self.read_string();
                    self.raw.truncate(raw_base);
                    self.canon.truncate(canon_base);
                    let canonical = canonical_key(&self.canon, stack.len(), &key);
                    self.raw.push('/');
                    push_escaped(&mut self.raw, &key);
                    self.canon.push('/');
                    push_escaped(&mut self.canon, canonical);
                    self.note(at);
                    self.skip_whitespace();
                    if self.peek() != Some(b':') {
                        return;
                    }
                    self.bump();
                    noted = true;
                    state = State::Value;
                }
                State::ElementOrEnd => {
                    if b == b']' {
                        self.bump();
                        self.close(&mut stack);
                        state = State::AfterValue;
                        continue;
                    }
                    let Some(frame) = stack.last() else { return };
                    self.push_index(frame.raw_base, frame.canon_base, 0);
                    noted = false;
                    state = State::Value;
                }
                State::AfterValue => {
                    if stack.is_empty() {
                        return;
                    }
                    match b {
                        b',' => {
                            self.bump();
                            let Some(frame) = stack.last_mut() else { return };
                            match frame.index.as_mut() {
                                None => state = State::Key,
                                Some(index) => {
                                    *index += 1;
                                    let (i, raw_base, canon_base) =
                                        (*index, frame.raw_base, frame.canon_base);
                                    self.push_index(raw_base, canon_base, i);
                                    noted = false;
                                    state = State::Value;
                                }
                            }
                        }
                        b'}' | b']' => {
                            self.bump();
                            self.close(&mut stack);
                        }
                        _ => return,
                    }
                }
            }
        }
    }

    fn push_index(&mut self, raw_base: usize, canon_base: usize, index: usize) {
        self.raw.truncate(raw_base);
        self.canon.truncate(canon_base);
        // Writing to a String cannot fail.
        let _ = write!(self.raw, "/{index}");
        let _ = write!(self.canon, "/{index}");
    }

    fn close(&mut self, stack: &mut Vec<Frame>) {
        if let Some(frame) = stack.pop() {
            self.raw.truncate(frame.raw_base);
            self.canon.truncate(frame.canon_base);
        }
    }
}

#[cfg(test)]
#[path = "locate_tests.rs"]
mod tests;
