//! Text to [`Plan`]: JSON or YAML, with errors a person can act on.
//!
//! Parsing goes in three stages so that each kind of mistake is reported where it is:
//! 1. syntax (JSON or YAML) into a `serde_json::Value`: errors carry line and column;
//! 2. shape, one step at a time: errors carry the JSON pointer of the bad field and serde's
//!    "expected …" wording, and every step's mistakes are collected, not just the first;
//! 3. assertions, one at a time: a malformed assertion does not make the plan unreadable, it is
//!    set aside as a [`PlanIssue`] that lint reports as `INVALID_ASSERTION`.
//!
//! The alias tag key `assert` is rewritten to `type` here, and step references are indexed once.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::assertion::Assertion;
use crate::plan::{Plan, Postcondition, Step, StepId};
use crate::reference::{ParamRef, collect_refs, push_escaped};

#[path = "parse_parallel.rs"]
mod parallel;
#[path = "parse_step.rs"]
mod step;

/// The plan's text format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
}

impl Format {
    /// From a file name's extension; `None` when it says nothing (then [`Format::sniff`]).
    pub fn from_path(path: &str) -> Option<Self> {
        let lower = path.to_ascii_lowercase();
        if lower.ends_with(".json") {
            Some(Self::Json)
        } else if lower.ends_with(".yaml") || lower.ends_with(".yml") {
            Some(Self::Yaml)
        } else {
            None
        }
    }

    /// JSON when the text starts with `{` or `[`, YAML otherwise.
    pub fn sniff(text: &str) -> Self {
        match text.trim_start().as_bytes().first() {
            Some(b'{' | b'[') => Self::Json,
            _ => Self::Yaml,
        }
    }
}

/// A field whose value has the wrong shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaIssue {
    /// The step's index when the field is inside a step.
    pub step: Option<usize>,
    /// JSON pointer to the field, e.g. `/steps/1/depends_on`.
    pub pointer: String,
    /// What was expected and what was found.
    pub message: String,
}

/// Why a text is not a plan at all.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ParseError {
    #[error("invalid {format}{}: {message}", location(*.line, *.column))]
    Syntax { format: &'static str, line: usize, column: usize, message: String },
    #[error("the plan does not match the schema ({} problem{})", .0.len(), if .0.len() == 1 { "" } else { "s" })]
    Schema(Vec<SchemaIssue>),
}

fn location(line: usize, column: usize) -> String {
    if line == 0 { String::new() } else { format!(" at line {line}, column {column}") }
}

/// Something wrong inside an otherwise readable plan, for lint to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanIssue {
    InvalidAssertion { step: Option<usize>, pointer: String, message: String },
}

/// A plan and what was set aside while reading it.
#[derive(Debug, Clone)]
pub struct ParsedPlan {
    pub plan: Plan,
    pub issues: Vec<PlanIssue>,
}

/// Parses a plan from text.
pub fn parse_plan(text: &str, format: Format) -> Result<ParsedPlan, ParseError> {
    if format == Format::Json
        && let Some(parsed) = parse_json_fast(text)
    {
        return Ok(parsed);
    }
    let document = parse_document(text, format)?;
    from_value(document)
}

/// The common case: well-formed JSON whose every field and assertion is valid deserialises
/// straight into a [`Plan`], several times faster than going through a `Value` step by step.
/// Anything else (a syntax error, a bad field, a malformed assertion, the `assert` tag alias,
/// an ill-formed id) returns `None`, and the staged path produces the detailed errors.
///
/// A large plan's steps are read on two threads when the text allows it ([`parallel`]).
fn parse_json_fast(text: &str) -> Option<ParsedPlan> {
    let plan = match parallel::parse(text) {
        Some(plan) => plan,
        None => {
            let mut plan: Plan = serde_json::from_str(text).ok()?;
            let mut finisher = StepFinisher::default();
            for step in &mut plan.steps {
                finisher.finish(step);
            }
            plan
        }
    };
    if !plan.steps.iter().all(|s| StepId::is_well_formed(s.id.as_str())) {
        return None;
    }
    Some(ParsedPlan { plan, issues: Vec::new() })
}

/// Finishes each parsed step: indexes its references (as [`Step::index_references`] does) and
/// trims its small lists and its parameter map to their length. A 100,000-step plan lives
/// through the whole lint, and lists grown one push at a time (references, `depends_on`,
/// assertions) keep room for four where most hold one or two: some 30 MB of the peak.
/// References are collected in a buffer reused from step to step and moved out at their exact
/// size, so they cost no extra allocation.
#[derive(Default)]
struct StepFinisher {
    refs: Vec<ParamRef>,
    pointer: String,
}

impl StepFinisher {
    fn finish(&mut self, step: &mut Step) {
        self.pointer.clear();
        self.pointer.push_str("/parameters");
        for (key, value) in &step.parameters {
            collect_refs(value, &mut self.pointer, key, &mut self.refs);
        }
        step.refs = self.refs.drain(..).collect();
        step.depends_on.shrink_to_fit();
        step.assertions.shrink_to_fit();
    }
}

/// Parses JSON or YAML text into a JSON value, with line and column on error.
pub fn parse_document(text: &str, format: Format) -> Result<Value, ParseError> {
    match format {
        Format::Json => serde_json::from_str(text).map_err(|e| ParseError::Syntax {
            format: "JSON",
            line: e.line(),
            column: e.column(),
            message: strip_location(&e.to_string()),
        }),
        Format::Yaml => {
            // An empty YAML document is `null`; say so in shape terms rather than YAML's.
            serde_yaml_ng::from_str(text).map_err(|e| {
                let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
                ParseError::Syntax {
                    format: "YAML",
                    line,
                    column,
                    message: strip_location(&e.to_string()),
                }
            })
        }
    }
}

/// serde_json and serde_yaml append " at line L column C"; we report those separately.
fn strip_location(message: &str) -> String {
    match message.find(" at line ") {
        Some(pos) => message[..pos].to_owned(),
        None => message.to_owned(),
    }
}

/// Builds a plan from an already parsed document.
pub fn from_value(document: Value) -> Result<ParsedPlan, ParseError> {
    let mut schema = Vec::new();
    let mut issues = Vec::new();
    let found = kind(&document);
    let Value::Object(mut top) = document else {
        return Err(ParseError::Schema(vec![SchemaIssue {
            step: None,
            pointer: String::new(),
            message: format!("expected the plan to be an object, found {found}"),
        }]));
    };

    let raw_steps = match top.remove("steps") {
        Some(Value::Array(items)) => items,
        Some(other) => {
            schema.push(SchemaIssue {
                step: None,
                pointer: "/steps".into(),
                message: format!("expected an array of steps, found {}", kind(&other)),
            });
            Vec::new()
        }
        None => {
            schema.push(SchemaIssue {
                step: None,
                pointer: "/steps".into(),
                message: "missing field `steps` (an array of steps)".into(),
            });
            Vec::new()
        }
    };
    let postcondition_key =
        ["postconditions", "success_criteria"].into_iter().find(|k| top.contains_key(*k));
    let raw_post = postcondition_key.and_then(|k| top.remove(k));
    top.insert("steps".into(), Value::Array(Vec::new()));

    let mut plan = match deserialize_at::<Plan>(Value::Object(top), "") {
        Ok(plan) => Some(plan),
        Err(issue) => {
            schema.push(issue);
            None
        }
    };

    let mut steps = Vec::with_capacity(raw_steps.len());
    let mut finisher = StepFinisher::default();
    for (i, raw) in raw_steps.into_iter().enumerate() {
        let base = format!("/steps/{i}");
        let mut raw = raw;
        let assertions = take_assertions(&mut raw, &base, Some(i), &mut schema, &mut issues);
        match deserialize_at::<Step>(raw, &base) {
            Ok(mut step) => {
                if !StepId::is_well_formed(step.id.as_str()) {
                    schema.push(SchemaIssue {
                        step: Some(i),
                        pointer: format!("{base}/id"),
                        message: format!(
                            "step id {:?} must be non-empty and use only A-Z a-z 0-9 _ . -",
                            step.id.as_str()
                        ),
                    });
                }
                step.assertions = assertions;
                finisher.finish(&mut step);
                steps.push(step);
            }
            Err(mut issue) => {
                issue.step = Some(i);
                schema.push(issue);
            }
        }
    }

    let mut postconditions = Vec::new();
    if let Some(raw_post) = raw_post {
        let key = postcondition_key.unwrap_or("postconditions");
        match raw_post {
            Value::Array(items) => {
                for (j, mut raw) in items.into_iter().enumerate() {
                    let base = format!("/{key}/{j}");
                    let assertions =
                        take_assertions(&mut raw, &base, None, &mut schema, &mut issues);
                    match deserialize_at::<Postcondition>(raw, &base) {
                        Ok(mut post) => {
                            post.assertions = assertions;
                            postconditions.push(post);
                        }
                        Err(mut issue) => {
                            issue.message = format!(
                                "expected a string or an object with `description`: {}",
                                issue.message
                            );
                            schema.push(issue);
                        }
                    }
                }
            }
            other => schema.push(SchemaIssue {
                step: None,
                pointer: format!("/{key}"),
                message: format!("expected an array of postconditions, found {}", kind(&other)),
            }),
        }
    }

    match plan.as_mut() {
        Some(plan) if schema.is_empty() => {
            plan.steps = steps;
            plan.postconditions = postconditions;
        }
        _ => return Err(ParseError::Schema(schema)),
    }
    let plan = plan.unwrap_or_default();
    Ok(ParsedPlan { plan, issues })
}

/// Removes `assertions` from a step or postcondition object and parses each one on its own.
fn take_assertions(
    raw: &mut Value,
    base: &str,
    step: Option<usize>,
    schema: &mut Vec<SchemaIssue>,
    issues: &mut Vec<PlanIssue>,
) -> Vec<Assertion> {
    let Some(obj) = raw.as_object_mut() else { return Vec::new() };
    let items = match obj.remove("assertions") {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            schema.push(SchemaIssue {
                step,
                pointer: format!("{base}/assertions"),
                message: format!("expected an array of assertions, found {}", kind(&other)),
            });
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (k, mut item) in items.into_iter().enumerate() {
        let pointer = format!("{base}/assertions/{k}");
        if let Some(map) = item.as_object_mut() {
            normalise_assertion(map);
        }
        match Assertion::deserialize(&item) {
            Ok(a) => out.push(a),
            Err(e) => {
                issues.push(PlanIssue::InvalidAssertion { step, pointer, message: e.to_string() })
            }
        }
    }
    out
}

/// `{"assert": "file_exists", …}` is the same as `{"type": "file_exists", …}`.
fn normalise_assertion(map: &mut Map<String, Value>) {
    if !map.contains_key("type")
        && let Some(tag) = map.remove("assert")
    {
        map.insert("type".into(), tag);
    }
}

/// Deserialises `value`, reporting the JSON pointer (below `base`) of the first bad field.
fn deserialize_at<T: serde::de::DeserializeOwned>(
    value: Value,
    base: &str,
) -> Result<T, SchemaIssue> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let mut pointer = base.to_owned();
        for seg in err.path().iter() {
            match seg {
                serde_path_to_error::Segment::Seq { index } => {
                    pointer.push('/');
                    pointer.push_str(&index.to_string());
                }
                serde_path_to_error::Segment::Map { key } => {
                    pointer.push('/');
                    push_escaped(&mut pointer, key);
                }
                serde_path_to_error::Segment::Enum { .. }
                | serde_path_to_error::Segment::Unknown => {}
            }
        }
        SchemaIssue { step: None, pointer, message: err.into_inner().to_string() }
    })
}

/// A JSON value's kind, for messages.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
