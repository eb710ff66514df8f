//! The plan a loop-mode model keeps for itself, and the tools it keeps it with: the plan's types
//! (`ModelPlan`, its steps and postconditions, the revisions `plan_create` made), the typed
//! arguments of `plan_create`, `plan_show`, `step_update` and `postcondition_verify` (their JSON
//! Schemas, sent to the model, are derived from these structs so the two cannot drift), and the
//! compact text rendering the model reads back.
//!
//! What the tools *do* lives in `plan_state`; this file is the vocabulary.

use std::fmt::Write as _;

use pev_protocol::Assertion;
use pev_providers::ToolSpec;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const PLAN_CREATE: &str = "plan_create";
pub const PLAN_SHOW: &str = "plan_show";
pub const STEP_UPDATE: &str = "step_update";
pub const POSTCONDITION_VERIFY: &str = "postcondition_verify";

/// How much of a piece of evidence the rendered plan shows: the plan is re-sent often (every
/// update, every refusal), so a pasted log must not grow it without bound.
const EVIDENCE_SHOWN: usize = 200;

/// Where a step of the model's plan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    InProgress,
    Done,
    Blocked,
}

impl StepStatus {
    /// Done or blocked: nothing more is owed on the step for the gate.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Done | Self::Blocked)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InProgress => "in_progress",
            Self::Done => "done",
            Self::Blocked => "blocked",
        }
    }
}

/// One step of the model's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelStep {
    pub id: String,
    pub title: String,
    pub status: StepStatus,
    /// What the model says shows the step is done (required to mark it done).
    pub evidence: Option<String>,
    /// Why the step cannot be done (required to mark it blocked).
    pub blocked_reason: Option<String>,
    /// Checked by the harness when the step is marked done; the update is refused if one fails.
    pub assertions: Vec<Assertion>,
}

/// Who established that a postcondition holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifiedBy {
    /// Its assertions passed when the harness ran them.
    Harness,
    /// It has no assertions: only the model's evidence text stands behind it, so the driver
    /// reports it as unverified by the harness.
    Claim,
}

/// One postcondition of the model's plan: something that must hold when the task is done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPostcondition {
    /// `p1`, `p2`, … in plan order.
    pub id: String,
    pub description: String,
    pub assertions: Vec<Assertion>,
    pub verified: bool,
    pub verified_by: Option<VerifiedBy>,
    pub evidence: Option<String>,
}

/// The plan as the model last wrote it, with the progress recorded since.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPlan {
    pub objective: String,
    pub steps: Vec<ModelStep>,
    pub postconditions: Vec<ModelPostcondition>,
}

impl ModelPlan {
    pub fn step(&self, id: &str) -> Option<&ModelStep> {
        self.steps.iter().find(|s| s.id == id)
    }
}

/// A step a rewrite left out on purpose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DroppedStep {
    /// The id of a step of the current plan.
    pub id: String,
    /// Why the step is no longer needed.
    pub reason: String,
}

/// One accepted `plan_create` call: the plan as it was created (carried-over progress included)
/// and the steps it dropped. The first revision is number 1 and drops nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRevision {
    pub number: u32,
    pub plan: ModelPlan,
    pub dropped: Vec<DroppedStep>,
}

/// One step as `plan_create` takes it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepArgs {
    /// A short stable id (letters, digits, `-`, `_`). Default: `s1`, `s2`, … by position. Keep
    /// the ids of the current plan's steps when rewriting it.
    #[serde(default)]
    pub id: Option<String>,
    /// What the step does, in a few words.
    pub title: String,
    /// Checks the harness runs when you mark the step done; the update is refused if one fails.
    #[serde(default)]
    pub assertions: Vec<Assertion>,
}

/// One postcondition as `plan_create` takes it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostconditionArgs {
    /// What must hold when the whole task is done.
    pub description: String,
    /// Checks the harness runs on postcondition_verify. Without any, the postcondition counts
    /// as claimed, not verified.
    #[serde(default)]
    pub assertions: Vec<Assertion>,
}

/// Arguments of `plan_create`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanCreateArgs {
    /// What the whole task must achieve.
    pub objective: String,
    /// The steps, in order.
    pub steps: Vec<StepArgs>,
    /// What must hold at the end, each checked with postcondition_verify.
    #[serde(default)]
    pub postconditions: Vec<PostconditionArgs>,
    /// Steps of the current plan this rewrite leaves out, each with a reason. Every step of the
    /// current plan must be kept (same id) or listed here.
    #[serde(default)]
    pub dropped: Vec<DroppedStep>,
}

/// Arguments of `plan_show` (none).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanShowArgs {}

/// Arguments of `step_update`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepUpdateArgs {
    /// The step's id.
    pub id: String,
    /// The new status. At most one step may be in_progress.
    pub status: StepStatus,
    /// Required for done: what shows the step is done (what you changed and how you checked
    /// it). The step's assertions are run as well.
    #[serde(default)]
    pub evidence: Option<String>,
    /// Required for blocked: why the step cannot be done.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Which postcondition: its id (`p1`) or its 1-based position (`1`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum PostconditionRef {
    Index(u32),
    Id(String),
}

/// Arguments of `postcondition_verify`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostconditionVerifyArgs {
    /// The postcondition's id (`p1`) or its position (1 for the first).
    pub id: PostconditionRef,
    /// What shows it holds. Its assertions, if any, are run as well.
    pub evidence: String,
}

/// The JSON Schema of an argument struct, self-contained (sub-schemas inlined, no `$schema`
/// key), which is the form model APIs accept.
pub(crate) fn schema_for<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

/// The plan tools as the model is offered them.
pub fn plan_tool_specs() -> Vec<ToolSpec> {
    let spec = |name: &str, description: &str, input_schema: Value| ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema,
    };
    vec![
        spec(
            PLAN_CREATE,
            "Create the plan for the task, or rewrite it: an objective, ordered steps (each may \
             carry assertions the harness checks when the step is marked done) and \
             postconditions. A rewrite must keep every step of the current plan (same id; done \
             steps stay done) or list it in `dropped` with a reason, and every postcondition \
             (same description; new ones may be added).",
            schema_for::<PlanCreateArgs>(),
        ),
        spec(PLAN_SHOW, "Show the current plan and its progress.", schema_for::<PlanShowArgs>()),
        spec(
            STEP_UPDATE,
            "Set a step's status: pending, in_progress (at most one at a time), done (evidence \
             required; the step's assertions are run and the update is refused if one fails) or \
             blocked (a reason required).",
            schema_for::<StepUpdateArgs>(),
        ),
        spec(
            POSTCONDITION_VERIFY,
            "Verify a postcondition with evidence: the harness runs its assertions and marks it \
             verified only if they pass.",
            schema_for::<PostconditionVerifyArgs>(),
        ),
    ]
}

/// The plan as the model reads it:
///
/// ```text
/// Objective: …
/// Steps:
/// [x] 1. read: Read the file — evidence
/// [~] 2. patch: Patch it (in progress)
/// [ ] 3. test: Run the tests [checks: command_succeeds]
/// [!] 4. deploy: Deploy — blocked: no credentials
/// Postconditions:
/// [✓] p1. Tests pass — evidence (checked by the harness)
/// [✗] p2. Docs updated — not verified
/// ```
pub fn render_plan(plan: &ModelPlan) -> String {
    let mut out = String::with_capacity(256);
    let _ = writeln!(out, "Objective: {}", plan.objective);
    out.push_str("Steps:\n");
    for (i, step) in plan.steps.iter().enumerate() {
        let n = i.saturating_add(1);
        let mark = match step.status {
            StepStatus::Pending => "[ ]",
            StepStatus::InProgress => "[~]",
            StepStatus::Done => "[x]",
            StepStatus::Blocked => "[!]",
        };
        let _ = write!(out, "{mark} {n}. {}: {}", step.id, step.title);
        match step.status {
            StepStatus::Done => {
                let evidence = step.evidence.as_deref().unwrap_or_default();
                let _ = write!(out, " — {}", clip(evidence, EVIDENCE_SHOWN));
            }
            StepStatus::InProgress => out.push_str(" (in progress)"),
            StepStatus::Blocked => {
                let reason = step.blocked_reason.as_deref().unwrap_or_default();
                let _ = write!(out, " — blocked: {}", clip(reason, EVIDENCE_SHOWN));
            }
            StepStatus::Pending => {}
        }
        if !step.assertions.is_empty() && step.status != StepStatus::Done {
            let kinds: Vec<&str> = step.assertions.iter().map(Assertion::kind).collect();
            let _ = write!(out, " [checks: {}]", kinds.join(", "));
        }
        out.push('\n');
    }
    if !plan.postconditions.is_empty() {
        out.push_str("Postconditions:\n");
        for post in &plan.postconditions {
            let evidence = clip(post.evidence.as_deref().unwrap_or_default(), EVIDENCE_SHOWN);
            match (post.verified, post.verified_by) {
                (true, Some(VerifiedBy::Claim)) => {
                    let _ = writeln!(
                        out,
                        "[✓] {}. {} — {evidence} (claimed, not checked)",
                        post.id, post.description
                    );
                }
                (true, _) => {
                    let _ = writeln!(
                        out,
                        "[✓] {}. {} — {evidence} (checked by the harness)",
                        post.id, post.description
                    );
                }
                (false, _) => {
                    let _ = writeln!(out, "[✗] {}. {} — not verified", post.id, post.description);
                }
            }
        }
    }
    out
}

/// `text` on one line, cut to at most `limit` chars with an ellipsis.
pub fn clip(text: &str, limit: usize) -> String {
    let one_line = text.trim().replace(['\n', '\r'], " ");
    if one_line.chars().count() <= limit {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(limit).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
#[path = "plan_tools_tests.rs"]
mod tests;
