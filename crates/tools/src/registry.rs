//! The tool registry: name to tool, the built-ins plus whatever later crates register.
//!
//! Names are unique: registering a second tool under a taken name is an error rather than a
//! silent replacement, so an MCP server cannot shadow `file.write` with its own.

use std::collections::BTreeMap;
use std::sync::Arc;

use pev_protocol::tool::Effect;
use serde::Serialize;
use serde_json::Value;

use crate::Tool;
use crate::builtin;

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("a tool named `{0}` is already registered")]
    Duplicate(String),
}

/// What a model is told about a tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: Value,
    pub effect: Effect,
}

/// Tools by name, iterated in name order so that tool lists sent to a model are stable.
#[derive(Clone, Default)]
pub struct Registry {
    tools: BTreeMap<&'static str, Arc<dyn Tool>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The six built-in tools of CONTRACTS.md §3.
    pub fn builtin() -> Self {
        let mut tools: BTreeMap<&'static str, Arc<dyn Tool>> = BTreeMap::new();
        for tool in builtin::all() {
            tools.insert(tool.name(), tool);
        }
        Self { tools }
    }

    /// Add a tool; its name must be free.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.name();
        if self.tools.contains_key(name) {
            return Err(RegistryError::Duplicate(name.to_owned()));
        }
        self.tools.insert(name, tool);
        Ok(())
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// All tools, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The definitions a model is given, in name order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.iter()
            .map(|t| ToolDefinition {
                name: t.name(),
                description: t.description(),
                parameters: t.parameters_schema(),
                effect: t.effect(),
            })
            .collect()
    }
}
