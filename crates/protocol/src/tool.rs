//! The built-in tools' names and effect classes (CONTRACTS.md §3), known to every layer.
//!
//! The tools themselves live in `pev-tools`; lint and the verifier only need to know what a
//! name does to the world, which is this table.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What running a tool can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    Read,
    Write,
    Exec,
    Network,
}

/// The built-in tools and their effects.
pub const BUILTIN_TOOLS: &[(&str, Effect)] = &[
    ("file.read", Effect::Read),
    ("file.list", Effect::Read),
    ("file.write", Effect::Write),
    ("file.patch", Effect::Write),
    ("shell.exec", Effect::Exec),
    ("http.request", Effect::Network),
];

/// The effect of a built-in tool; `None` for a tool pev does not ship.
pub fn builtin_effect(tool: &str) -> Option<Effect> {
    BUILTIN_TOOLS.iter().find(|(name, _)| *name == tool).map(|(_, e)| *e)
}
