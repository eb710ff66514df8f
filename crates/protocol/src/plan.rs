//! The plan: a goal, steps with dependencies, and postconditions (CONTRACTS.md §1).
//!
//! The serde attributes here are the input contract: canonical field names, the aliases that
//! planner models and plan-lint users write (`args`, `step_id`, `dependencies`, `name`,
//! `estimated_complexity`, `objective`, `success_criteria`), and a catch-all `extra` map on every
//! object so that unknown fields are kept (and reported by lint as `UNKNOWN_FIELD`) rather than
//! silently dropped. Use [`crate::parse`] to build a [`Plan`] from text: it also validates step
//! ids, separates invalid assertions, and indexes step references once.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::assertion::Assertion;
use crate::params::Params;
use crate::reference::ParamRef;
use crate::short_str::ShortStr;

/// A step identifier: unique within a plan, made of `[A-Za-z0-9_.-]+`.
// Kept in place up to 23 bytes (`ShortStr`): a large plan holds several ids a step (the step's,
// its `depends_on`, its references'), and as `String`s each was an allocation. (Not a doc
// comment: the doc is the schema's description.)
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct StepId(#[schemars(with = "String", regex(pattern = r"^[A-Za-z0-9_.\-]+$"))] ShortStr);

impl StepId {
    pub fn new(id: impl AsRef<str>) -> Self {
        Self(ShortStr::new(id.as_ref()))
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Whether the id matches `[A-Za-z0-9_.-]+`.
    pub fn is_well_formed(id: &str) -> bool {
        !id.is_empty() && id.bytes().all(is_id_byte)
    }
}

/// The bytes allowed in a step id (and therefore in the id part of a reference).
pub(crate) fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

impl fmt::Display for StepId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for StepId {
    fn from(s: &str) -> Self {
        Self(ShortStr::new(s))
    }
}

/// What the harness does when a step fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnFail {
    /// Cancel what has not started; let running steps finish.
    #[default]
    Abort,
    /// Let independent branches go on.
    Continue,
    /// Try the step again (up to `max_attempts`).
    Retry,
    /// Ask the planner for a new plan for the rest.
    Replan,
}

/// The planner's estimate of a step's difficulty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Complexity {
    Low,
    Medium,
    High,
}

/// A whole plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    /// What the plan is for, in a person's words.
    #[serde(alias = "objective")]
    pub goal: String,
    /// Free context for the planner and executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Free metadata (which planner wrote it, when).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    /// The steps; may be empty (lint warns).
    pub steps: Vec<Step>,
    /// What must hold when the plan is done.
    #[serde(default, alias = "success_criteria", skip_serializing_if = "Vec::is_empty")]
    pub postconditions: Vec<Postcondition>,
    /// How to undo the plan's effects, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_strategy: Option<String>,
    /// Oracle files beyond the inferred ones, and those the run may change (reference §1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle: Option<crate::oracle::PlanOracle>,
    /// Fields this version of pev does not know; kept, and reported by lint.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

/// One step: either a direct tool call (`tool` set) or an instruction for the executor model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Step {
    #[serde(alias = "step_id")]
    pub id: StepId,
    #[serde(default, alias = "name", skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Instructions for the executor model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A tool the harness calls directly, without a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool's arguments; strings may hold `${id.result.path}` references.
    #[serde(default, alias = "args", skip_serializing_if = "Params::is_empty")]
    pub parameters: Params,
    #[serde(default, alias = "dependencies", skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<StepId>,
    #[serde(default)]
    pub on_fail: OnFail,
    /// Judged by the verifier model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acceptance_criteria: Vec<String>,
    /// Checked by the harness.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<Assertion>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_outputs: Vec<String>,
    #[serde(default, alias = "estimated_complexity", skip_serializing_if = "Option::is_none")]
    pub complexity: Option<Complexity>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requires_approval: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// The step is carried out by a sub-agent: a run of its own, with its own plan, budget slice
    /// and verdict (`pev agent`). The step is done only when that run ends `success` and this
    /// step's own assertions pass. Boxed: few steps delegate, and a `Delegation` in every
    /// `Step` would be 88 bytes more per step (9 MB of a 100,000-step plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegate: Option<Box<Delegation>>,
    /// The step's work is the tests themselves ("add a test for subtract()", "update the tests
    /// to the new API"): it may change oracle files. In a plan a model wrote, honoured only when
    /// the goal asks for work on tests (a model cannot grant itself leave to change its checks).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_change_oracle: bool,
    /// `false`: the step's effect must not happen twice (a push, a migration, a payment). After
    /// a crash that interrupted its command or request, which may have run, a resume does not run
    /// it again by itself: the run stops for a person's approval of the step (`pev approve RUN
    /// STEP`). Unset (the default) or `true`: an interrupted command runs again. A step with an
    /// assertion marked `repeatable: false` is treated as not repeatable too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeatable: Option<bool>,
    /// Fields this version of pev does not know; kept, and reported by lint.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
    /// The references found in `parameters`, indexed once by [`crate::parse`] (or
    /// [`Step::index_references`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub refs: Vec<ParamRef>,
}

impl Step {
    /// The title if there is one, else the id: what a person should see.
    /// Whether an interrupted effect of this step may run again without a person's yes: not when
    /// the step, or one of its assertions, is marked `repeatable: false`.
    pub fn repeatable(&self) -> bool {
        self.repeatable != Some(false) && self.assertions.iter().all(Assertion::repeatable)
    }

    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(self.id.as_str())
    }

    /// Walks `parameters` and records every step reference in string values.
    pub fn index_references(&mut self) {
        let mut refs = Vec::new();
        let mut pointer = String::from("/parameters");
        for (key, value) in &self.parameters {
            crate::reference::collect_refs(value, &mut pointer, key, &mut refs);
        }
        self.refs = refs;
    }
}

/// A step handed to a sub-agent (a child run).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Delegation {
    /// The child run's goal.
    pub goal: String,
    /// How the child's models are arranged.
    #[serde(default)]
    pub mode: DelegateMode,
    /// The workspace directory (relative) the child may change; it may read everything. The
    /// whole workspace when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The child's share of the parent's remaining budget (never more than what is left).
    #[serde(default, skip_serializing_if = "BudgetSlice::is_empty")]
    pub budget: BudgetSlice,
}

/// How a child run's models work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DelegateMode {
    /// Planner, executor and judge around the harness.
    #[default]
    Pev,
    /// One model with the plan tools and the finalization gate.
    Loop,
}

impl DelegateMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pev => "pev",
            Self::Loop => "loop",
        }
    }
}

/// Ceilings of a child run, taken from its parent's budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetSlice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Model calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
}

impl BudgetSlice {
    pub fn is_empty(&self) -> bool {
        self.max_usd.is_none() && self.max_tokens.is_none() && self.max_turns.is_none()
    }
}

/// Something that must hold when the plan is done. Input may be a bare string.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(from = "PostconditionInput")]
pub struct Postcondition {
    pub description: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<Assertion>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

/// The two input forms of a postcondition.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum PostconditionInput {
    Text(String),
    Full {
        description: String,
        #[serde(default)]
        assertions: Vec<Assertion>,
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
    },
}

impl From<PostconditionInput> for Postcondition {
    fn from(input: PostconditionInput) -> Self {
        match input {
            PostconditionInput::Text(description) => {
                Self { description, assertions: Vec::new(), extra: BTreeMap::new() }
            }
            PostconditionInput::Full { description, assertions, extra } => {
                Self { description, assertions, extra }
            }
        }
    }
}

impl Plan {
    /// The index of each step id (the first one wins when ids are duplicated).
    pub fn index(&self) -> std::collections::HashMap<&str, usize> {
        let mut map = std::collections::HashMap::with_capacity(self.steps.len());
        for (i, step) in self.steps.iter().enumerate() {
            map.entry(step.id.as_str()).or_insert(i);
        }
        map
    }
}
