//! JSON Schemas derived from the types (`pev schema plan|lint|policy`), never written by hand.

use serde_json::Value;

use crate::run::RunResult;
use crate::{LintResult, Plan, Policy};

/// The documents pev can print a schema for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaKind {
    Plan,
    Lint,
    Policy,
    /// The run result of CONTRACTS.md §4.
    Result,
}

/// The JSON Schema of one of pev's documents.
pub fn schema_of(kind: SchemaKind) -> Value {
    let schema = match kind {
        SchemaKind::Plan => schemars::schema_for!(Plan),
        SchemaKind::Lint => schemars::schema_for!(LintResult),
        SchemaKind::Policy => schemars::schema_for!(Policy),
        SchemaKind::Result => schemars::schema_for!(RunResult),
    };
    schema.to_value()
}
