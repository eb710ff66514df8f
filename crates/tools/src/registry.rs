//! The tool registry: name to tool, the built-ins plus whatever later crates register, and the
//! [`ToolNames`] table of their wire names (kept in step with every registration).
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
use crate::names::{ToolNames, WireName};

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("a tool named `{0}` is already registered")]
    Duplicate(String),
}

/// What a model is told about a tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// The plan name (`file.read`): what plans, the policy and the journal use.
    pub name: &'static str,
    /// The name a model is offered and calls (`file_read`).
    pub wire: WireName,
    pub description: &'static str,
    pub parameters: Value,
    pub effect: Effect,
}

/// Tools by name, iterated in name order so that tool lists sent to a model are stable.
#[derive(Clone, Default)]
pub struct Registry {
    tools: BTreeMap<&'static str, Arc<dyn Tool>>,
    /// The wire names of exactly the tools above.
    names: ToolNames,
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
        let names = ToolNames::new(tools.keys());
        Self { tools, names }
    }

    /// Add a tool; its name must be free.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.name();
        if self.tools.contains_key(name) {
            return Err(RegistryError::Duplicate(name.to_owned()));
        }
        self.tools.insert(name, tool);
        // A new name can take another's wire name (`file_read` next to `file.read`): the whole
        // table is derived again, so both get their suffix.
        self.names = ToolNames::new(self.tools.keys());
        Ok(())
    }

    /// The tool whose plan name is `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// The wire names of the registered tools, both ways.
    pub fn names(&self) -> &ToolNames {
        &self.names
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

    /// The definitions a model is given, in (plan) name order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.iter()
            .filter_map(|t| {
                let wire = self.names.wire(t.name())?.clone();
                Some((t, wire))
            })
            .map(|(t, wire)| ToolDefinition {
                name: t.name(),
                wire,
                description: t.description(),
                parameters: t.parameters_schema(),
                effect: t.effect(),
            })
            .collect()
    }
}
