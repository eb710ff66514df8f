//! JSON Schemas derived from the types (`pev schema plan|lint|policy`), never written by hand.

use serde_json::Value;

use crate::{LintResult, Plan, Policy};

/// The documents pev can print a schema for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaKind {
    Plan,
    Lint,
    Policy,
}

/// The JSON Schema of one of pev's documents.
pub fn schema_of(kind: SchemaKind) -> Value {
    let schema = match kind {
        SchemaKind::Plan => schemars::schema_for!(Plan),
        SchemaKind::Lint => schemars::schema_for!(LintResult),
        SchemaKind::Policy => schemars::schema_for!(Policy),
    };
    schema.to_value()
}
