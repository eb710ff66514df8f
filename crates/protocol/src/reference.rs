//! Step references: `${step_id.result.a.b}` and `{{step_id.result.a.b}}` inside string parameters.
//!
//! A string is parsed once into a [`Template`]: literal text and typed [`Reference`]s. Text that
//! only looks like a reference (`${HOME}`, `{{ name }}`, a `$` before `{{…}}`) stays literal, so
//! shell variables and other template languages pass through untouched. A reference names a step
//! id, the word `result`, and an optional dotted path into that step's output; a path segment
//! that is all digits indexes an array.

use std::fmt::Write as _;

use crate::params::ValueRef;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::plan::{StepId, is_id_byte};
use crate::short_str::ShortStr;

/// Which of the two spellings a reference used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Syntax {
    /// `${id.result.path}`
    Dollar,
    /// `{{id.result.path}}`
    Mustache,
}

/// A reference to (part of) another step's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Reference {
    pub step: StepId,
    /// The path below `result`; empty for the whole output.
    #[schemars(with = "Vec<String>")]
    pub path: RefPath,
    pub syntax: Syntax,
}

/// The path of a [`Reference`] below `result`: its segments (`rows`, `0`, `offset`), kept as the
/// one string they were written as (`rows.0.offset`). A segment is never empty and never holds
/// a dot, so the dotted text is the list; one allocation instead of a `Vec` and a `String` per
/// segment, for each of the hundreds of thousands of references a large plan indexes; and none
/// at all up to 23 bytes ([`ShortStr`]), which most paths are. Serialised as the list of
/// segments.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct RefPath(ShortStr);

impl RefPath {
    /// The segments in order.
    pub fn iter(&self) -> std::str::Split<'_, char> {
        let mut segments = self.0.split('.');
        if self.0.is_empty() {
            // `"".split('.')` yields one empty segment; an empty path has none.
            segments.next();
        }
        segments
    }

    pub fn len(&self) -> usize {
        if self.0.is_empty() { 0 } else { self.0.bytes().filter(|&b| b == b'.').count() + 1 }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The segments joined with dots, as written after `result.`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'a> IntoIterator for &'a RefPath {
    type Item = &'a str;
    type IntoIter = std::str::Split<'a, char>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<S: AsRef<str>> FromIterator<S> for RefPath {
    fn from_iter<I: IntoIterator<Item = S>>(segments: I) -> Self {
        let mut text = String::new();
        for (i, segment) in segments.into_iter().enumerate() {
            if i > 0 {
                text.push('.');
            }
            text.push_str(segment.as_ref());
        }
        Self(ShortStr::from(text))
    }
}

impl From<Vec<String>> for RefPath {
    fn from(segments: Vec<String>) -> Self {
        segments.into_iter().collect()
    }
}

impl std::fmt::Debug for RefPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for RefPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for RefPath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<String>::deserialize(deserializer).map(Self::from)
    }
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (open, close) = match self.syntax {
            Syntax::Dollar => ("${", "}"),
            Syntax::Mustache => ("{{", "}}"),
        };
        write!(f, "{open}{}.result", self.step)?;
        for seg in &self.path {
            write!(f, ".{seg}")?;
        }
        f.write_str(close)
    }
}

/// A piece of a parsed string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Literal(String),
    Ref(Reference),
}

/// A string parameter, parsed into literal text and references.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Template {
    pub segments: Vec<Segment>,
}

impl Template {
    /// Parses `text`. Never fails: what is not a well-formed reference is literal text.
    pub fn parse(text: &str) -> Self {
        let mut segments = Vec::new();
        let mut literal_start = 0;
        scan_refs(text, |reference, start, end| {
            if literal_start < start {
                segments.push(Segment::Literal(text[literal_start..start].to_owned()));
            }
            segments.push(Segment::Ref(reference));
            literal_start = end;
        });
        if literal_start < text.len() {
            segments.push(Segment::Literal(text[literal_start..].to_owned()));
        }
        Self { segments }
    }

    /// The references in order of appearance.
    pub fn references(&self) -> impl Iterator<Item = &Reference> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Ref(r) => Some(r),
            Segment::Literal(_) => None,
        })
    }

    /// The reference, when the whole string is exactly one reference (its value keeps its JSON
    /// type on substitution).
    pub fn as_single_ref(&self) -> Option<&Reference> {
        match self.segments.as_slice() {
            [Segment::Ref(r)] => Some(r),
            _ => None,
        }
    }

    pub fn has_refs(&self) -> bool {
        self.segments.iter().any(|s| matches!(s, Segment::Ref(_)))
    }
}

/// Calls `found(reference, start, end)` for each reference in `text`, in order, where
/// `text[start..end]` is the reference as written: the one reading of a string that
/// [`Template::parse`] and the parser's indexing of step references share.
fn scan_refs(text: &str, mut found: impl FnMut(Reference, usize, usize)) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i + 1 < bytes.len() {
        let parsed = match (bytes[i], bytes[i + 1]) {
            (b'$', b'{') => parse_ref(text, i + 2, "}", Syntax::Dollar),
            (b'{', b'{') => parse_ref(text, i + 2, "}}", Syntax::Mustache),
            _ => None,
        };
        match parsed {
            Some((reference, end)) => {
                found(reference, i, end);
                i = end;
            }
            None => i += 1,
        }
    }
}

/// Parses `id.result(.seg)*` starting at `start`, followed by `close`. Spaces are allowed just
/// inside mustache braces (`{{ id.result }}`), as template languages allow.
fn parse_ref(text: &str, start: usize, close: &str, syntax: Syntax) -> Option<(Reference, usize)> {
    let rest = &text[start..];
    let end_rel = find_close(rest, close)?;
    let mut inner = &rest[..end_rel];
    if syntax == Syntax::Mustache {
        inner = inner.trim_matches(' ');
    }
    // The id may itself contain dots, so find the `.result` that is followed by `.` or the end.
    let mut search_from = 0;
    let (id, path_str) = loop {
        let pos = search_from + find_result(&inner[search_from..])?;
        let after = &inner[pos + ".result".len()..];
        if after.is_empty() || after.starts_with('.') {
            break (&inner[..pos], after.strip_prefix('.').unwrap_or(after));
        }
        search_from = pos + 1;
    };
    if !StepId::is_well_formed(id) {
        return None;
    }
    let path = if path_str.is_empty() {
        if inner.ends_with('.') {
            return None;
        }
        RefPath::default()
    } else {
        if path_str.split('.').any(|s| s.is_empty() || !s.bytes().all(is_id_byte)) {
            return None;
        }
        // The segments as written, in place or in one exactly sized allocation.
        RefPath(ShortStr::new(path_str))
    };
    Some((Reference { step: StepId::new(id), path, syntax }, start + end_rel + close.len()))
}

/// Where `close` (`}` or `}}`) first occurs in `rest`, as `str::find` says, found by looking
/// for a `}` (a fast byte search) rather than by a substring searcher built for each string.
fn find_close(rest: &str, close: &str) -> Option<usize> {
    let mut from = 0;
    loop {
        let at = from + rest.get(from..)?.find('}')?;
        if rest.get(at..)?.starts_with(close) {
            return Some(at);
        }
        from = at + 1;
    }
}

/// Where `.result` first occurs in `inner`, as `str::find` says, by way of its dots.
fn find_result(inner: &str) -> Option<usize> {
    let mut from = 0;
    loop {
        let at = from + inner.get(from..)?.find('.')?;
        if inner.get(at..)?.starts_with(".result") {
            return Some(at);
        }
        from = at + 1;
    }
}

/// A reference found in a step's parameters, with where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamRef {
    /// JSON pointer within the step, e.g. `/parameters/query` or `/parameters/ids/0`; in place
    /// up to 23 bytes (most are), without an allocation of its own.
    pub pointer: ShortStr,
    pub reference: Reference,
    /// The string was exactly this one reference.
    pub whole: bool,
}

/// Walks `value` (found under `key` below `pointer`) and appends the references in its strings.
pub(crate) fn collect_refs(
    value: ValueRef<'_>,
    pointer: &mut String,
    key: &str,
    out: &mut Vec<ParamRef>,
) {
    let len = pointer.len();
    pointer.push('/');
    push_escaped(pointer, key);
    collect_below(value, pointer, out);
    pointer.truncate(len);
}

/// [`collect_refs`] for a value whose pointer is already in `pointer`.
fn collect_below(value: ValueRef<'_>, pointer: &mut String, out: &mut Vec<ParamRef>) {
    match value {
        // `scan_refs` looks for `${` and `{{` itself, as fast as a search for them would.
        ValueRef::String(s) => {
            // Straight from the text: a `Template` would copy the literal text around the
            // references, and each reference again into its `ParamRef`.
            let first = out.len();
            let mut whole = false;
            scan_refs(s, |reference, start, end| {
                // The string is exactly one reference (what `Template::as_single_ref` says).
                whole = out.len() == first && start == 0 && end == s.len();
                out.push(ParamRef { pointer: ShortStr::new(pointer), reference, whole: false });
            });
            if whole && let Some(r) = out.get_mut(first) {
                r.whole = true;
            }
        }
        ValueRef::Array(items) => {
            let len = pointer.len();
            for (i, item) in items.iter().enumerate() {
                // Writing to a String cannot fail.
                let _ = write!(pointer, "/{i}");
                collect_below(item, pointer, out);
                pointer.truncate(len);
            }
        }
        ValueRef::Object(map) => {
            for (k, v) in map.iter() {
                collect_refs(v, pointer, k, out);
            }
        }
        _ => {}
    }
}

/// Appends `key` to a JSON pointer with `~` and `/` escaped (RFC 6901).
pub fn push_escaped(pointer: &mut String, key: &str) {
    if !key.bytes().any(|b| b == b'~' || b == b'/') {
        pointer.push_str(key);
        return;
    }
    for c in key.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

#[cfg(test)]
#[path = "reference_tests.rs"]
mod tests;
