//! Step references: `${step_id.result.a.b}` and `{{step_id.result.a.b}}` inside string parameters.
//!
//! A string is parsed once into a [`Template`]: literal text and typed [`Reference`]s. Text that
//! only looks like a reference (`${HOME}`, `{{ name }}`, a `$` before `{{…}}`) stays literal, so
//! shell variables and other template languages pass through untouched. A reference names a step
//! id, the word `result`, and an optional dotted path into that step's output; a path segment
//! that is all digits indexes an array.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::plan::{StepId, is_id_byte};

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
    pub path: Vec<String>,
    pub syntax: Syntax,
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
        let bytes = text.as_bytes();
        let mut segments = Vec::new();
        let mut literal_start = 0;
        let mut i = 0;
        while i + 1 < bytes.len() {
            let found = match (bytes[i], bytes[i + 1]) {
                (b'$', b'{') => parse_ref(text, i + 2, "}", Syntax::Dollar),
                (b'{', b'{') => parse_ref(text, i + 2, "}}", Syntax::Mustache),
                _ => None,
            };
            match found {
                Some((reference, end)) => {
                    if literal_start < i {
                        segments.push(Segment::Literal(text[literal_start..i].to_owned()));
                    }
                    segments.push(Segment::Ref(reference));
                    i = end;
                    literal_start = end;
                }
                None => i += 1,
            }
        }
        if literal_start < bytes.len() {
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

/// Parses `id.result(.seg)*` starting at `start`, followed by `close`. Spaces are allowed just
/// inside mustache braces (`{{ id.result }}`), as template languages allow.
fn parse_ref(text: &str, start: usize, close: &str, syntax: Syntax) -> Option<(Reference, usize)> {
    let rest = &text[start..];
    let end_rel = rest.find(close)?;
    let mut inner = &rest[..end_rel];
    if syntax == Syntax::Mustache {
        inner = inner.trim_matches(' ');
    }
    // The id may itself contain dots, so find the `.result` that is followed by `.` or the end.
    let mut search_from = 0;
    let (id, path_str) = loop {
        let pos = search_from + inner[search_from..].find(".result")?;
        let after = &inner[pos + ".result".len()..];
        if after.is_empty() || after.starts_with('.') {
            break (&inner[..pos], after.strip_prefix('.').unwrap_or(after));
        }
        search_from = pos + 1;
    };
    if !StepId::is_well_formed(id) {
        return None;
    }
    let path: Vec<String> = if path_str.is_empty() {
        if inner.ends_with('.') {
            return None;
        }
        Vec::new()
    } else {
        let segs: Vec<&str> = path_str.split('.').collect();
        if segs.iter().any(|s| s.is_empty() || !s.bytes().all(is_id_byte)) {
            return None;
        }
        segs.into_iter().map(str::to_owned).collect()
    };
    Some((Reference { step: StepId::new(id), path, syntax }, start + end_rel + close.len()))
}

/// A reference found in a step's parameters, with where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamRef {
    /// JSON pointer within the step, e.g. `/parameters/query` or `/parameters/ids/0`.
    pub pointer: String,
    pub reference: Reference,
    /// The string was exactly this one reference.
    pub whole: bool,
}

/// Walks `value` (found under `key` below `pointer`) and appends the references in its strings.
pub(crate) fn collect_refs(
    value: &Value,
    pointer: &mut String,
    key: &str,
    out: &mut Vec<ParamRef>,
) {
    let len = pointer.len();
    pointer.push('/');
    push_escaped(pointer, key);
    match value {
        Value::String(s) if s.contains("${") || s.contains("{{") => {
            let template = Template::parse(s);
            let whole = template.as_single_ref().is_some();
            for reference in template.references() {
                out.push(ParamRef {
                    pointer: pointer.clone(),
                    reference: reference.clone(),
                    whole,
                });
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                collect_refs(item, pointer, &i.to_string(), out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                collect_refs(v, pointer, k, out);
            }
        }
        _ => {}
    }
    pointer.truncate(len);
}

/// Appends `key` to a JSON pointer with `~` and `/` escaped (RFC 6901).
pub fn push_escaped(pointer: &mut String, key: &str) {
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
