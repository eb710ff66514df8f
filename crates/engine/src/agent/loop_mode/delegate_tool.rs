//! `delegate` in loop mode: the model hands part of its task to a child run (a sub-agent with
//! its own plan, budget slice and verdict, see [`crate::delegation`]). The engine runs it
//! through the tool gate (journaled, linked to this loop's step, its changes counted as this
//! run's) and the model gets the child's *verdict* — status, reasons, changed files — never
//! the child's own account. The plan book holds the model to it: a step cannot be marked done
//! while the last child run delegated during it did not end `success`, nor on evidence that
//! names a child run that did not.

use pev_protocol::{BudgetSlice, DelegateMode, Delegation};
use pev_providers::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;

use super::plan_state::parse;
use super::plan_tools::schema_for;

/// The tool's name, as the model calls it.
pub const DELEGATE: &str = "delegate";

/// `delegate`'s arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegateArgs {
    /// What the sub-agent must achieve: a self-contained goal (it does not see this
    /// conversation).
    pub goal: String,
    /// The workspace directory the sub-agent may change (it may read everything). Omit for the
    /// whole workspace.
    #[serde(default)]
    pub scope: Option<String>,
    /// `pev` (planner, executor and judge; the default) or `loop` (one model like you).
    #[serde(default)]
    pub mode: Option<DelegateMode>,
    /// Its share of your remaining budget (never more than what is left).
    #[serde(default)]
    pub budget: Option<BudgetSlice>,
}

impl DelegateArgs {
    pub fn into_delegation(self) -> Delegation {
        Delegation {
            goal: self.goal,
            mode: self.mode.unwrap_or_default(),
            scope: self.scope.filter(|s| !s.trim().is_empty()),
            budget: self.budget.unwrap_or_default(),
        }
    }
}

/// Reads a `delegate` call's input.
pub fn read(input: serde_json::Value) -> Result<Delegation, String> {
    let args: DelegateArgs = parse(DELEGATE, input)?;
    if args.goal.trim().is_empty() {
        return Err("delegate refused: `goal` is empty; say what the sub-agent must achieve".into());
    }
    Ok(args.into_delegation())
}

pub fn delegate_tool_spec() -> ToolSpec {
    ToolSpec {
        name: DELEGATE.to_owned(),
        description: "Hand part of the task to a sub-agent: a run of its own with its own plan, \
                      budget slice and verification. Returns its verdict as the harness decided \
                      it (success, partial or failed, with reasons and the files it changed); \
                      its own claims are not returned. Only a child that ended success is \
                      evidence that its part is done."
            .to_owned(),
        input_schema: schema_for::<DelegateArgs>(),
    }
}
