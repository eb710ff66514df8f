//! Reference resolution: replaces `${step.result.a.b}` / `{{step.result.a.b}}` in a step's
//! parameters with values from the outputs of steps that are done (CONTRACTS §1).
//!
//! A string that is exactly one reference takes the referenced value with its JSON type, so
//! `"${count.result.n}"` becomes the number `3`, not the text `"3"`. References inside longer
//! strings become text: strings as they are, everything else as compact JSON. A reference that
//! cannot be resolved is an error that names the reference, the JSON pointer of the parameter
//! and what was wrong; it is never replaced by an empty string, because a command or a file
//! written with a silently empty value is worse than a step that fails and says why.

use std::fmt::Write as _;

use pev_protocol::reference::{Reference, Segment, Template, push_escaped};
use serde_json::{Map, Value};

/// How many of an object's keys a missing-key error lists.
const MAX_KEYS_LISTED: usize = 10;

/// Why a step's parameters could not be resolved: the reference (as `${…}` or `{{…}}`), the
/// JSON pointer of the parameter holding it (e.g. `/parameters/edits/0/new`) and what was wrong.
/// The problem is boxed so that `Result<_, ResolveError>` stays small on the success path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: reference {reference}: {problem}")]
pub struct ResolveError {
    pub reference: String,
    pub pointer: String,
    pub problem: Box<Problem>,
}

/// What was wrong with a reference. `at` is the part of the reference resolved so far, where
/// resolution stopped (e.g. `read-css.result.entries`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The step is unknown, or has not finished successfully.
    #[error("step `{step}` is unknown or not done")]
    StepNotDone { step: String },
    /// An object has no such key.
    #[error("`{at}` has no key `{key}`{}", list_keys(available, *total))]
    MissingKey {
        at: String,
        key: String,
        /// Up to ten of the object's keys, in order.
        available: Vec<String>,
        /// How many keys the object has.
        total: usize,
    },
    /// An array index past the end.
    #[error("index {index} is out of range: `{at}` has {len} items")]
    IndexOutOfRange { at: String, index: String, len: usize },
    /// A segment that is not a decimal index, applied to an array.
    #[error("`{at}` is an array of {len} items; `{segment}` is not a decimal index")]
    NotAnIndex { at: String, segment: String, len: usize },
    /// A path segment applied to a string, number, bool or null.
    #[error("`{at}` is {kind}, which has no `{segment}`")]
    NotIndexable {
        at: String,
        segment: String,
        /// "a string", "a number", "a bool" or "null".
        kind: &'static str,
    },
}

/// The tail of a missing-key message: the keys that do exist.
fn list_keys(available: &[String], total: usize) -> String {
    if total == 0 {
        return "; it is an empty object".to_owned();
    }
    let mut out = String::from("; keys: ");
    for (i, key) in available.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(key);
    }
    if total > available.len() {
        let _ = write!(out, " (and {} more)", total - available.len());
    }
    out
}

/// Replaces every reference in the values of `params` (recursively; object keys are left as
/// they are) with the referenced output. `outputs(id)` is the output of step `id` when it is
/// done, `None` otherwise.
///
/// The outputs' lifetime `'v` is named rather than elided: elided, `Fn(&str) -> Option<&Value>`
/// would tie the value to the id it is looked up with, and only `'static` outputs could satisfy
/// it, so `&|id| outputs_map.get(id)` would not compile.
pub fn resolve_parameters<'v>(
    params: &Map<String, Value>,
    outputs: &dyn Fn(&str) -> Option<&'v Value>,
) -> Result<Map<String, Value>, ResolveError> {
    let mut pointer = String::from("/parameters");
    resolve_map(params, outputs, &mut pointer)
}

fn resolve_map<'v>(
    map: &Map<String, Value>,
    outputs: &dyn Fn(&str) -> Option<&'v Value>,
    pointer: &mut String,
) -> Result<Map<String, Value>, ResolveError> {
    let mut out = Map::with_capacity(map.len());
    for (key, value) in map {
        let len = pointer.len();
        pointer.push('/');
        push_escaped(pointer, key);
        let resolved = resolve_value(value, outputs, pointer)?;
        pointer.truncate(len);
        out.insert(key.clone(), resolved);
    }
    Ok(out)
}

fn resolve_value<'v>(
    value: &Value,
    outputs: &dyn Fn(&str) -> Option<&'v Value>,
    pointer: &mut String,
) -> Result<Value, ResolveError> {
    match value {
        Value::String(s) => resolve_string(s, outputs, pointer),
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                let _ = write!(pointer, "/{i}");
                out.push(resolve_value(item, outputs, pointer)?);
                pointer.truncate(len);
            }
            Ok(Value::Array(out))
        }
        Value::Object(map) => Ok(Value::Object(resolve_map(map, outputs, pointer)?)),
        other => Ok(other.clone()),
    }
}

fn resolve_string<'v>(
    s: &str,
    outputs: &dyn Fn(&str) -> Option<&'v Value>,
    pointer: &str,
) -> Result<Value, ResolveError> {
    // Fast path: most strings cannot hold a reference, and need no parsing.
    if !s.contains("${") && !s.contains("{{") {
        return Ok(Value::String(s.to_owned()));
    }
    let template = Template::parse(s);
    if let Some(reference) = template.as_single_ref() {
        return lookup(reference, outputs, pointer).cloned();
    }
    if !template.has_refs() {
        // `${HOME}`, `{{ name }}` and the like are not references: the text stays as written.
        return Ok(Value::String(s.to_owned()));
    }
    let mut text = String::with_capacity(s.len());
    for segment in &template.segments {
        match segment {
            Segment::Literal(literal) => text.push_str(literal),
            Segment::Ref(reference) => match lookup(reference, outputs, pointer)? {
                Value::String(v) => text.push_str(v),
                // Value's Display is compact JSON.
                v => {
                    let _ = write!(text, "{v}");
                }
            },
        }
    }
    Ok(Value::String(text))
}

/// The value `reference` points at.
fn lookup<'v>(
    reference: &Reference,
    outputs: &dyn Fn(&str) -> Option<&'v Value>,
    pointer: &str,
) -> Result<&'v Value, ResolveError> {
    let error = |problem: Problem| ResolveError {
        reference: reference.to_string(),
        pointer: pointer.to_owned(),
        problem: Box::new(problem),
    };
    let step = reference.step.as_str();
    let Some(mut current) = outputs(step) else {
        return Err(error(Problem::StepNotDone { step: step.to_owned() }));
    };
    for (depth, segment) in reference.path.iter().enumerate() {
        current = match current {
            Value::Object(map) => match map.get(segment) {
                Some(next) => next,
                None => {
                    return Err(error(Problem::MissingKey {
                        at: written_prefix(reference, depth),
                        key: segment.to_owned(),
                        available: map.keys().take(MAX_KEYS_LISTED).cloned().collect(),
                        total: map.len(),
                    }));
                }
            },
            Value::Array(items) => {
                if segment.is_empty() || !segment.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(error(Problem::NotAnIndex {
                        at: written_prefix(reference, depth),
                        segment: segment.to_owned(),
                        len: items.len(),
                    }));
                }
                // An index too large for usize is out of range like any other.
                match segment.parse::<usize>().ok().and_then(|i| items.get(i)) {
                    Some(next) => next,
                    None => {
                        return Err(error(Problem::IndexOutOfRange {
                            at: written_prefix(reference, depth),
                            index: segment.to_owned(),
                            len: items.len(),
                        }));
                    }
                }
            }
            scalar => {
                return Err(error(Problem::NotIndexable {
                    at: written_prefix(reference, depth),
                    segment: segment.to_owned(),
                    kind: kind_of(scalar),
                }));
            }
        };
    }
    Ok(current)
}

/// `step.result` followed by the first `depth` path segments: where resolution stopped.
fn written_prefix(reference: &Reference, depth: usize) -> String {
    let mut out = format!("{}.result", reference.step);
    for segment in reference.path.iter().take(depth) {
        out.push('.');
        out.push_str(segment);
    }
    out
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a bool",
        Value::Null => "null",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
