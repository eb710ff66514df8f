//! The spans pev exports, as plain values: what the mapping produces, what the encoder writes
//! and what tests inspect (the in-memory side of an exporter).

/// A trace id (16 bytes) or a span id (8 bytes), as OTLP carries them.
pub type TraceId = [u8; 16];
pub type SpanId = [u8; 8];

/// An attribute's value (the OTLP `AnyValue`s pev uses).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    StrArray(Vec<String>),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Self::Int(i) => Some(*i),
            _ => None,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Self::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Self::Str(s)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Self::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Self {
        Self::Int(i64::from(n))
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Self {
        Self::Double(x)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

/// Attributes in the order they were set.
pub type Attributes = Vec<(String, Value)>;

/// OTLP's span kinds (the two pev uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Work inside pev: the run, a plan, a step, a tool call, a verification.
    Internal,
    /// A call to a model's API.
    Client,
}

/// A span's status: unset, or an error with its message (pev never sets OK: a backend reads
/// unset as fine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Unset,
    Error(String),
}

/// A timestamped event on a span (`gen_ai.evaluation.result`).
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    pub name: String,
    /// Milliseconds since the epoch (the journal's precision).
    pub at_ms: u64,
    pub attributes: Attributes,
}

/// One span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub parent: Option<SpanId>,
    pub name: String,
    pub kind: Kind,
    /// Milliseconds since the epoch, from the journal.
    pub start_ms: u64,
    pub end_ms: u64,
    pub attributes: Attributes,
    pub events: Vec<SpanEvent>,
    pub status: Status,
    /// The journal does not yet hold this span's end (the run, a step or a call still going):
    /// `end_ms` is the latest time the journal knows. A live exporter holds such spans back.
    pub open: bool,
}

impl Span {
    /// The value of attribute `key`, if set.
    pub fn attr(&self, key: &str) -> Option<&Value> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The string value of attribute `key`, if set to a string.
    pub fn str_attr(&self, key: &str) -> Option<&str> {
        self.attr(key).and_then(Value::as_str)
    }
}

/// Lowercase hex of an id, as tracing UIs show it.
pub fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}
