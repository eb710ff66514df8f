//! The planner: a model writes the plan (CONTRACTS.md §1) for a goal, and the harness refuses any
//! plan it would refuse from a person.
//!
//! One round is: structured output against the plan's JSON Schema ([`request_json`]), then the
//! same parse as `pev run` ([`parse_plan`] on the JSON text, so aliases and unknown fields are
//! treated identically), then [`pev_lint::lint`] under the run's policy. A plan with lint errors
//! (or a risk score at the policy's threshold, or a parse problem) goes back to the model with
//! each finding's code, step, message and fix, and the model writes it again. Lint warnings do
//! not block; they are returned with the plan.
//!
//! **Tries.** `max_tries` bounds the model calls of one `plan`/`replan`, whatever they were for:
//! an answer that is not schema-valid JSON and a plan that fails lint both use up a call. With
//! the default 3, a model may write invalid JSON once and a plan with a cycle once and still
//! succeed on its third call; a fourth is never made. [`PlanOutcome::tries`] counts the plans
//! that were linted, [`PlanOutcome::model_calls`] every call.
//!
//! **Replans** ask for the remaining steps only. The done steps are kept by the engine and never
//! re-run, so their ids are reserved: a returned step that reuses one is refused with feedback.
//! The new steps may depend on done steps and refer to their results; to lint that correctly the
//! plan is linted together with stand-ins for the done steps (id, title and tool), and findings
//! about the stand-ins are dropped. The returned plan holds the new steps only.
//!
//! The person's goal is authoritative: whatever the model writes as `goal`, the returned plan
//! carries the goal it was given, so that the verdict (e.g. `no_effects`) is judged against what
//! was asked, not against the model's restatement.

mod history;
mod prompt;
mod workspace;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use pev_lint::{CompiledPolicy, LintOptions};
use pev_protocol::parse::{Format, ParseError, ParsedPlan, PlanIssue, parse_plan};
use pev_protocol::schema::{SchemaKind, schema_of};
use pev_protocol::{Finding, LintCode, LintStatus, Plan, Step};
use pev_providers::structured::{StructuredOptions, request_json};
use pev_providers::{ChatRequest, ContentBlock, Message, ModelClient, ProviderError, TokenUsage};
use pev_tools::ToolDefinition;
use serde_json::Value;

pub use history::{DoneStep, Failure};
pub use workspace::{SummaryEntry, WorkspaceSummary};

/// How the planner asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannerOptions {
    /// Model calls per `plan`/`replan`, structured-output retries and lint retries together
    /// (0 counts as 1).
    pub max_tries: u32,
    /// The answer's token limit (a plan is long).
    pub max_tokens: u32,
}

impl Default for PlannerOptions {
    fn default() -> Self {
        Self { max_tries: 3, max_tokens: 8192 }
    }
}

/// What every plan and replan is written for: the person's goal, the workspace as it is now,
/// the tools the executor may call and the run's policy.
#[derive(Debug, Clone, Copy)]
pub struct PlanContext<'a> {
    pub goal: &'a str,
    pub workspace: &'a WorkspaceSummary,
    /// The tools a plan may use, under their plan names (`file.patch`): the planner writes plans,
    /// and a plan names tools by plan name. It calls none of them.
    pub tools: &'a [ToolDefinition],
    pub policy: &'a CompiledPolicy,
}

/// An accepted plan.
#[derive(Debug, Clone)]
pub struct PlanOutcome {
    /// The plan (for a replan: the remaining steps only), with the caller's goal.
    pub plan: Plan,
    /// Plans written and linted, the accepted one included.
    pub tries: u32,
    /// Model calls in all (a structured-output retry is a call but not a try).
    pub model_calls: u32,
    /// Tokens of the successful structured-output rounds (a round that ends in
    /// `InvalidStructuredOutput` reports none; the budget's ledger has every call).
    pub usage: TokenUsage,
    /// Lint warnings of the accepted plan (step indices are the returned plan's).
    pub lint_warnings: Vec<Finding>,
}

/// Why no plan came back.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PlanError {
    /// Every try was used and the last plan was still refused.
    #[error(
        "the planner wrote no acceptable plan in {model_calls} model call{}: {}",
        if *.model_calls == 1 { "" } else { "s" },
        summary(.findings, .note.as_deref())
    )]
    Invalid {
        /// The last plan's blocking findings (a single `SCHEMA_INVALID` when the last answer was
        /// not a valid JSON plan at all).
        findings: Vec<Finding>,
        /// Why the plan was refused beyond its findings (a risk score over the threshold).
        note: Option<String>,
        tries: u32,
        model_calls: u32,
    },
    /// The budget cannot pay for another planner call.
    #[error("budget exhausted while planning: {0}")]
    Budget(String),
    /// The model could not be reached or answered unusably.
    #[error("the planner model failed: {0}")]
    Provider(ProviderError),
}

/// The first findings of a refusal, for the error's message.
fn summary(findings: &[Finding], note: Option<&str>) -> String {
    let mut parts: Vec<String> =
        findings.iter().take(3).map(|f| format!("{} {}", f.code, f.msg)).collect();
    if findings.len() > 3 {
        parts.push(format!("and {} more", findings.len().saturating_sub(3)));
    }
    if let Some(note) = note {
        parts.push(note.to_owned());
    }
    parts.join("; ")
}

/// Writes plans with a model.
pub struct Planner {
    client: Arc<dyn ModelClient>,
    model: String,
    options: PlannerOptions,
}

impl std::fmt::Debug for Planner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Planner")
            .field("provider", &self.client.provider())
            .field("model", &self.model)
            .field("options", &self.options)
            .finish()
    }
}

/// What one `plan`/`replan` checks answers against.
struct Round<'a> {
    goal: &'a str,
    model: &'a str,
    policy: &'a CompiledPolicy,
    done: &'a [DoneStep],
    previous: Option<&'a Plan>,
}

/// Why one answer was refused.
struct Rejection {
    findings: Vec<Finding>,
    note: Option<String>,
}

impl Planner {
    pub fn new(client: Arc<dyn ModelClient>, model: String, options: PlannerOptions) -> Self {
        Self { client, model, options }
    }

    /// A plan for the context's goal.
    pub async fn plan(&self, ctx: &PlanContext<'_>) -> Result<PlanOutcome, PlanError> {
        let round = Round {
            goal: ctx.goal,
            model: &self.model,
            policy: ctx.policy,
            done: &[],
            previous: None,
        };
        let first = prompt::plan_message(ctx.goal, ctx.workspace);
        self.run(prompt::system_prompt(ctx.tools, ctx.policy), first, &round).await
    }

    /// A plan of the remaining steps after `failure`, keeping the `done` steps of `previous`.
    pub async fn replan(
        &self,
        ctx: &PlanContext<'_>,
        done: &[DoneStep],
        failure: &Failure,
        previous: &Plan,
    ) -> Result<PlanOutcome, PlanError> {
        let round = Round {
            goal: ctx.goal,
            model: &self.model,
            policy: ctx.policy,
            done,
            previous: Some(previous),
        };
        let first = prompt::replan_message(ctx.goal, ctx.workspace, done, failure, previous);
        self.run(prompt::system_prompt(ctx.tools, ctx.policy), first, &round).await
    }

    /// Asks, checks, and asks again with the findings, within `max_tries` model calls.
    async fn run(
        &self,
        system: String,
        first: String,
        round: &Round<'_>,
    ) -> Result<PlanOutcome, PlanError> {
        let schema = schema_of(SchemaKind::Plan);
        let max_calls = self.options.max_tries.max(1);
        let mut messages = vec![Message::user(first)];
        let mut usage = TokenUsage::default();
        let mut model_calls = 0u32;
        let mut tries = 0u32;
        loop {
            let mut request = ChatRequest::new(self.model.clone(), messages.clone());
            request.system = Some(system.clone());
            request.max_tokens = self.options.max_tokens;
            let options = StructuredOptions {
                max_tries: max_calls.saturating_sub(model_calls).max(1),
                what: "plan".to_owned(),
            };
            let (value, used, calls) =
                match request_json(self.client.as_ref(), request, &schema, options).await {
                    Ok(answer) => answer,
                    Err(ProviderError::InvalidStructuredOutput {
                        attempts, last_error, ..
                    }) => {
                        let finding = Finding::plan(LintCode::SchemaInvalid, "", last_error);
                        return Err(PlanError::Invalid {
                            findings: vec![finding],
                            note: None,
                            tries,
                            model_calls: model_calls.saturating_add(attempts),
                        });
                    }
                    Err(ProviderError::BudgetExhausted(message)) => {
                        return Err(PlanError::Budget(message));
                    }
                    Err(e) => return Err(PlanError::Provider(e)),
                };
            model_calls = model_calls.saturating_add(calls);
            tries = tries.saturating_add(1);
            usage.add(&used);
            let text = serde_json::to_string(&value).unwrap_or_default();
            match round.check(&text) {
                Ok((plan, lint_warnings)) => {
                    return Ok(PlanOutcome { plan, tries, model_calls, usage, lint_warnings });
                }
                Err(Rejection { findings, note }) => {
                    if model_calls >= max_calls {
                        return Err(PlanError::Invalid { findings, note, tries, model_calls });
                    }
                    messages.push(Message::assistant(vec![ContentBlock::text(text)]));
                    messages
                        .push(Message::user(prompt::feedback_message(&findings, note.as_deref())));
                }
            }
        }
    }
}

impl Round<'_> {
    /// Parses and lints one answer: the plan and its warnings, or why it is refused.
    fn check(&self, text: &str) -> Result<(Plan, Vec<Finding>), Rejection> {
        let parsed = parse_plan(text, Format::Json).map_err(parse_rejection)?;
        self.check_reserved_ids(&parsed.plan)?;
        let stand_ins = self.stand_ins();
        let offset = stand_ins.len();
        let result = if offset == 0 {
            pev_lint::lint(&parsed, self.policy, LintOptions::default())
        } else {
            let combined = combine(&parsed, stand_ins);
            let mut result = pev_lint::lint(&combined, self.policy, LintOptions::default());
            result.errors = unshift_all(result.errors, offset);
            result.warnings = unshift_all(result.warnings, offset);
            result
        };
        if result.status == LintStatus::Error {
            // The status can be `error` with no error finding: the warnings' risk score reached
            // the policy's threshold. Then the warnings are what must go.
            let note = result.errors.is_empty().then(|| {
                format!(
                    "The plan's risk score {} reaches the policy's limit {}: remove the causes \
                     of these warnings.",
                    result.risk_score, self.policy.policy.fail_risk_threshold
                )
            });
            let findings = if result.errors.is_empty() { result.warnings } else { result.errors };
            return Err(Rejection { findings, note });
        }
        let mut plan = parsed.plan;
        plan.goal = self.goal.to_owned();
        mark_planner(&mut plan, self.model);
        Ok((plan, result.warnings))
    }

    /// A replan's steps may not reuse the id of a done step.
    fn check_reserved_ids(&self, plan: &Plan) -> Result<(), Rejection> {
        if self.done.is_empty() {
            return Ok(());
        }
        let reserved: HashSet<&str> = self.done.iter().map(|d| d.id.as_str()).collect();
        let findings: Vec<Finding> = plan
            .steps
            .iter()
            .enumerate()
            .filter(|(_, step)| reserved.contains(step.id.as_str()))
            .map(|(i, step)| {
                Finding::step(
                    LintCode::DuplicateStepId,
                    (i, step.id.as_str()),
                    format!("/steps/{i}/id"),
                    format!(
                        "step id `{}` belongs to a step that is already done; done steps are \
                         kept and never run again, so write only the remaining steps, with new \
                         ids (they may depend on `{}`).",
                        step.id, step.id
                    ),
                )
            })
            .collect();
        if findings.is_empty() { Ok(()) } else { Err(Rejection { findings, note: None }) }
    }

    /// Stand-ins for the done steps (id, title, tool), so that the new steps' dependencies and
    /// references to them lint as they will run.
    fn stand_ins(&self) -> Vec<Step> {
        let previous: HashMap<&str, &Step> = self
            .previous
            .map(|p| p.steps.iter().map(|s| (s.id.as_str(), s)).collect())
            .unwrap_or_default();
        self.done
            .iter()
            .map(|done| {
                let tool = previous.get(done.id.as_str()).and_then(|s| s.tool.clone());
                Step {
                    id: done.id.clone(),
                    title: Some(done.title.clone()),
                    tool,
                    ..Step::default()
                }
            })
            .collect()
    }
}

/// A parse failure as findings for the model.
fn parse_rejection(error: ParseError) -> Rejection {
    let findings = match error {
        ParseError::Schema(issues) => issues
            .into_iter()
            .map(|issue| {
                let mut finding =
                    Finding::plan(LintCode::SchemaInvalid, issue.pointer, issue.message);
                finding.step = issue.step;
                finding
            })
            .collect(),
        syntax @ ParseError::Syntax { .. } => {
            vec![Finding::plan(LintCode::SchemaInvalid, "", syntax.to_string())]
        }
    };
    Rejection { findings, note: None }
}

/// The plan with the stand-ins put before its steps (and its set-aside issues moved with them).
fn combine(parsed: &ParsedPlan, stand_ins: Vec<Step>) -> ParsedPlan {
    let offset = stand_ins.len();
    let mut plan = parsed.plan.clone();
    let mut steps = stand_ins;
    steps.append(&mut plan.steps);
    plan.steps = steps;
    let issues = parsed
        .issues
        .iter()
        .map(|issue| match issue {
            PlanIssue::InvalidAssertion { step, pointer, message } => PlanIssue::InvalidAssertion {
                step: step.map(|i| i.saturating_add(offset)),
                pointer: shift_pointer(pointer, offset, true),
                message: message.clone(),
            },
        })
        .collect();
    ParsedPlan { plan, issues }
}

/// Findings of the combined plan as findings of the returned plan: those about stand-ins are
/// dropped, the others' step indices and paths moved back.
fn unshift_all(findings: Vec<Finding>, offset: usize) -> Vec<Finding> {
    findings
        .into_iter()
        .filter_map(|mut finding| {
            if let Some(index) = finding.step {
                finding.step = Some(index.checked_sub(offset)?);
            }
            finding.path = shift_pointer(&finding.path, offset, false);
            Some(finding)
        })
        .collect()
}

/// `/steps/K/…` with K moved by `offset` (up when `up`, else down; a pointer that would go
/// below 0 is left as it is).
fn shift_pointer(pointer: &str, offset: usize, up: bool) -> String {
    let Some(rest) = pointer.strip_prefix("/steps/") else { return pointer.to_owned() };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (number, tail) = rest.split_at(digits);
    let Ok(index) = number.parse::<usize>() else { return pointer.to_owned() };
    let moved = if up { index.checked_add(offset) } else { index.checked_sub(offset) };
    match moved {
        Some(moved) => format!("/steps/{moved}{tail}"),
        None => pointer.to_owned(),
    }
}

/// Records which model wrote the plan in `meta.planner`, unless the plan says already.
fn mark_planner(plan: &mut Plan, model: &str) {
    match &mut plan.meta {
        None => plan.meta = Some(serde_json::json!({ "planner": model })),
        Some(Value::Object(meta)) => {
            meta.entry("planner").or_insert_with(|| Value::String(model.to_owned()));
        }
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests;
