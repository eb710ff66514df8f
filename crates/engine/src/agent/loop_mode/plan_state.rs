//! What the plan tools do: `plan_create` (with the rewrite rule), `plan_show`, `step_update` and
//! `postcondition_verify`, applied to the loop's [`PlanBook`]. Each call answers with text the
//! model reads; a refusal is an `Err` the loop sends back as an `is_error` tool result, worded
//! so the model can act on it.
//!
//! Evidence is checked, not only required: where a step or postcondition carries assertions the
//! harness runs them (`pev_verify::check`, on the workspace) before it accepts the update, and
//! tells the model what it saw when one fails.
//!
//! `content_changed` needs a hash of the file from before the work. Two baselines are kept: the
//! hash of each such path the first time any `plan_create` names it (the baseline of
//! postconditions, and of a step that is never marked in progress), and the hash when a step
//! first goes `in_progress` (the baseline of that step's own assertions). A plan written after
//! the work was done therefore cannot see its own changes as changes.
//!
//! A step whose title asks to change named files is held to them (the plan-execution mismatch
//! rule, `pev_verify::mismatch`): marking it done is refused while none of those files has
//! changed, by the loop's journaled calls or by their content since the step's baseline, and
//! the refusal names the files expected and the files changed.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use pev_protocol::assertion::AssertionResult;
use pev_tools::ToolContext;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::evidence::{StepTargets, baseline, changed_path, failures, passes, run_checks};
use super::plan_tools::{
    DroppedStep, ModelPlan, ModelPostcondition, ModelStep, PLAN_CREATE, PLAN_SHOW,
    POSTCONDITION_VERIFY, PlanCreateArgs, PlanRevision, PostconditionRef, PostconditionVerifyArgs,
    STEP_UPDATE, StepStatus, StepUpdateArgs, VerifiedBy, render_plan,
};

/// A plan of more steps than this is a log, not a plan.
pub const MAX_STEPS: usize = 50;
pub const MAX_POSTCONDITIONS: usize = 20;
const MAX_ID_LEN: usize = 64;

/// What step_update and postcondition_verify answer when there is no plan yet.
pub const NO_PLAN: &str = "there is no plan yet: call plan_create first";

/// Evidence that says nothing: a word of assent is not evidence.
const PLACEHOLDERS: &[&str] =
    &["done", "ok", "okay", "complete", "completed", "finished", "yes", "n/a", "na", "none", "-"];

/// A plan tool's answer: the text for the model, `Err` for a refusal (`is_error`).
pub type Reply = Result<String, String>;

/// The model's plan and everything the plan tools remember about it. Serialisable, so that a
/// process that answers one call at a time (`pev mcp`) can keep it in the journal between calls.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PlanBook {
    pub plan: Option<ModelPlan>,
    pub revisions: Vec<PlanRevision>,
    /// Path → its sha256 (`None`: absent) the first time a plan named it in `content_changed`.
    first_seen: HashMap<String, Option<String>>,
    /// Step id → path → sha256 when the step first went in progress.
    started: HashMap<String, HashMap<String, Option<String>>>,
    /// Where the evidence accepted so far was taken, for the final re-check.
    marks: EvidenceMarks,
    /// How many tool calls the journal held at the last plan tool call (see `note_position`).
    position: Option<u64>,
    /// The files each step's title names, held against what the loop changed.
    targets: StepTargets,
    /// On a continued loop (resume): files as the interrupted session saw them at this point
    /// (see `ToolGate::recorded_hashes`); their baselines are taken from here, not from the
    /// workspace, which already holds what came later.
    recorded: HashMap<String, Option<String>>,
    /// Child runs delegated so far (`delegate`), in order: id, verdict (`success`, …), and the
    /// step that was in progress when it was delegated.
    children: Vec<(String, String, Option<String>)>,
}

/// What the final re-check needs of the evidence the plan tools accepted: the before-hashes
/// each step's `content_changed` compared against, and how many tool calls the journal held
/// when each step was marked done and each postcondition verified (the calls after that mark
/// are the ones that may have undone it).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct EvidenceMarks {
    /// The baseline of postconditions (and of steps never marked in progress).
    pub first_seen: HashMap<String, Option<String>>,
    /// Step id → the before-hashes its assertions were checked against when it was marked done.
    pub step_before: HashMap<String, HashMap<String, Option<String>>>,
    /// Step id → journal position when it was marked done.
    pub step_at: HashMap<String, u64>,
    /// Postcondition description → journal position when it was verified.
    pub postcondition_at: HashMap<String, u64>,
    /// Step id → what its assertions showed when it was marked done.
    pub step_results: HashMap<String, Vec<AssertionResult>>,
    /// Postcondition description → what its assertions showed when it was verified.
    pub postcondition_results: HashMap<String, Vec<AssertionResult>>,
}

/// Whether `name` is one of the tools a [`PlanBook`] answers.
pub fn is_plan_tool(name: &str) -> bool {
    matches!(name, PLAN_CREATE | PLAN_SHOW | STEP_UPDATE | POSTCONDITION_VERIFY)
}

impl PlanBook {
    /// Answer one plan tool call.
    pub async fn call(&mut self, tool: &str, input: Value, ctx: &ToolContext) -> Reply {
        match tool {
            PLAN_CREATE => self.create(parse(tool, input)?, ctx),
            PLAN_SHOW => Ok(self.show()),
            STEP_UPDATE => self.update_step(parse(tool, input)?, ctx).await,
            POSTCONDITION_VERIFY => self.verify_postcondition(parse(tool, input)?, ctx).await,
            other => Err(format!("{other} is not a plan tool")),
        }
    }

    /// Records how many tool calls the journal holds now; evidence accepted by the next plan
    /// tool call is marked with it.
    pub fn note_position(&mut self, position: Option<u64>) {
        self.position = position;
    }

    /// Records the files the loop's journaled calls have changed so far, in order.
    pub fn note_changes(&mut self, changed: Vec<String>) {
        self.targets.note_changes(changed);
    }

    /// Records what a continued loop's files were at this point of the interrupted session.
    pub fn note_recorded(&mut self, recorded: HashMap<String, Option<String>>) {
        self.recorded = recorded;
    }

    /// The evidence marks, for the final re-check.
    /// Notes a child run's verdict (`delegate`), attributed to the step in progress.
    pub fn note_child(&mut self, child_run: &str, status: &str) {
        let current = self.plan.as_ref().and_then(|p| {
            p.steps.iter().find(|s| s.status == StepStatus::InProgress).map(|s| s.id.clone())
        });
        self.children.push((child_run.to_owned(), status.to_owned(), current));
    }

    /// Why `evidence` for step `id` cannot stand on the children delegated for it: the last
    /// child delegated while the step was in progress, or while no step was, did not succeed
    /// (a child delegated outside any step may be any step's work), or the evidence names a
    /// child that did not.
    fn child_objection(&self, id: &str, evidence: &str) -> Option<String> {
        let last = self
            .children
            .iter()
            .rev()
            .find(|(_, _, step)| step.is_none() || step.as_deref() == Some(id));
        if let Some((child, status, _)) = last.filter(|(_, status, _)| status != "success") {
            return Some(format!(
                "the last child run delegated for it, {child}, ended {status}: a sub-agent's \
                 report is not evidence; only a child run that ended success is"
            ));
        }
        self.children
            .iter()
            .find(|(child, status, _)| status != "success" && evidence.contains(child.as_str()))
            .map(|(child, status, _)| {
                format!(
                    "the evidence cites child run {child}, which ended {status}: only a child \
                     run that ended success is evidence"
                )
            })
    }

    pub fn marks(&self) -> EvidenceMarks {
        EvidenceMarks { first_seen: self.first_seen.clone(), ..self.marks.clone() }
    }

    /// The rendered plan, or how to make one.
    pub fn show(&self) -> String {
        match &self.plan {
            Some(plan) => render_plan(plan),
            None => "No plan yet. Call plan_create with the objective, the steps and the \
                     postconditions."
                .to_owned(),
        }
    }

    fn create(&mut self, args: PlanCreateArgs, ctx: &ToolContext) -> Reply {
        let old = self.plan.as_ref();
        let mut problems = Vec::new();

        let ids: Vec<String> = args
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| match s.id.as_deref().map(str::trim) {
                Some(id) if !id.is_empty() => id.to_owned(),
                _ => format!("s{}", i.saturating_add(1)),
            })
            .collect();
        let new_ids: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let dropped_ids: HashSet<&str> = args.dropped.iter().map(|d| d.id.trim()).collect();

        // The rule that matters most first: nothing of the old plan disappears silently.
        if let Some(old) = old {
            let missing: Vec<String> = old
                .steps
                .iter()
                .filter(|s| {
                    !new_ids.contains(s.id.as_str()) && !dropped_ids.contains(s.id.as_str())
                })
                .map(|s| format!("`{}`", s.id))
                .collect();
            if !missing.is_empty() {
                problems.push(format!(
                    "the new plan leaves out step(s) {} of the current plan: keep each one (same \
                     id) or list it in `dropped` with a reason",
                    missing.join(", ")
                ));
            }
            // Postconditions are what "done" means for the goal: a rewrite may add some, never
            // lose one (dropping the hard step and the check that needed it would be a pass).
            let lost: Vec<String> = old
                .postconditions
                .iter()
                .filter(|o| {
                    !args
                        .postconditions
                        .iter()
                        .any(|n| n.description.trim() == o.description.trim())
                })
                .map(|o| format!("{} ({})", o.id, o.description))
                .collect();
            if !lost.is_empty() {
                problems.push(format!(
                    "the new plan leaves out postcondition(s) {} of the current plan: a rewrite \
                     may add postconditions but must keep every one (same description)",
                    lost.join(", ")
                ));
            }
        }
        if args.objective.trim().is_empty() {
            problems.push("the objective is empty".to_owned());
        }
        if args.steps.is_empty() {
            problems.push("a plan needs at least one step".to_owned());
        }
        if args.steps.len() > MAX_STEPS {
            problems.push(format!("{} steps is too many (at most {MAX_STEPS})", args.steps.len()));
        }
        if args.postconditions.len() > MAX_POSTCONDITIONS {
            problems.push(format!(
                "{} postconditions is too many (at most {MAX_POSTCONDITIONS})",
                args.postconditions.len()
            ));
        }
        let mut seen = HashSet::new();
        for (i, (id, step)) in ids.iter().zip(&args.steps).enumerate() {
            let n = i.saturating_add(1);
            if !valid_id(id) {
                problems.push(format!(
                    "step {n}: the id `{id}` is not valid (use 1-{MAX_ID_LEN} letters, digits, \
                     `-`, `_` or `.`)"
                ));
            }
            if !seen.insert(id.as_str()) {
                problems.push(format!("step {n}: the id `{id}` is used twice"));
            }
            if step.title.trim().is_empty() {
                problems.push(format!("step {n} (`{id}`): the title is empty"));
            }
        }
        for (i, post) in args.postconditions.iter().enumerate() {
            if post.description.trim().is_empty() {
                problems.push(format!(
                    "postcondition {}: the description is empty",
                    i.saturating_add(1)
                ));
            }
        }
        let mut dropped_seen = HashSet::new();
        for drop in &args.dropped {
            let id = drop.id.trim();
            if old.is_none_or(|p| p.step(id).is_none()) {
                problems.push(format!("dropped step `{id}` is not a step of the current plan"));
            }
            if new_ids.contains(id) {
                problems.push(format!("step `{id}` is both kept and dropped"));
            }
            if drop.reason.trim().is_empty() {
                problems.push(format!("dropped step `{id}` needs a reason"));
            }
            if !dropped_seen.insert(id) {
                problems.push(format!("step `{id}` is dropped twice"));
            }
        }
        if !problems.is_empty() {
            return Err(format!("plan_create refused:\n- {}", problems.join("\n- ")));
        }

        let steps: Vec<ModelStep> = ids
            .into_iter()
            .zip(args.steps)
            .map(|(id, step)| {
                // Only a finished step keeps its progress: whatever else was under way is
                // planned afresh.
                let done = old.and_then(|p| p.step(&id)).filter(|s| s.status == StepStatus::Done);
                ModelStep {
                    status: if done.is_some() { StepStatus::Done } else { StepStatus::Pending },
                    evidence: done.and_then(|s| s.evidence.clone()),
                    blocked_reason: None,
                    title: step.title.trim().to_owned(),
                    assertions: step.assertions,
                    id,
                }
            })
            .collect();
        let postconditions: Vec<ModelPostcondition> = args
            .postconditions
            .into_iter()
            .enumerate()
            .map(|(i, post)| {
                let description = post.description.trim().to_owned();
                // The same postcondition with the same checks stays verified.
                let same = old.and_then(|p| {
                    p.postconditions.iter().find(|o| {
                        o.verified
                            && o.description == description
                            && o.assertions == post.assertions
                    })
                });
                ModelPostcondition {
                    id: format!("p{}", i.saturating_add(1)),
                    description,
                    assertions: post.assertions,
                    verified: same.is_some(),
                    verified_by: same.and_then(|o| o.verified_by),
                    evidence: same.and_then(|o| o.evidence.clone()),
                }
            })
            .collect();
        let dropped: Vec<DroppedStep> = args
            .dropped
            .into_iter()
            .map(|d| DroppedStep { id: d.id.trim().to_owned(), reason: d.reason.trim().to_owned() })
            .collect();
        let plan = ModelPlan { objective: args.objective.trim().to_owned(), steps, postconditions };

        let paths = plan
            .steps
            .iter()
            .flat_map(|s| &s.assertions)
            .chain(plan.postconditions.iter().flat_map(|p| &p.assertions))
            .filter_map(changed_path);
        for path in paths {
            if !self.first_seen.contains_key(path)
                && let Some(hash) = baseline(&self.recorded, ctx, path)
            {
                self.first_seen.insert(path.to_owned(), hash);
            }
        }

        for step in &plan.steps {
            self.targets.on_plan((&step.id, &step.title, &step.assertions), (ctx, &self.recorded));
        }

        let number = u32::try_from(self.revisions.len()).unwrap_or(u32::MAX).saturating_add(1);
        let mut reply = if number == 1 {
            format!(
                "Plan created (revision 1): {} steps, {} postconditions.",
                plan.steps.len(),
                plan.postconditions.len()
            )
        } else {
            format!(
                "Plan rewritten (revision {number}): {} steps, {} postconditions.",
                plan.steps.len(),
                plan.postconditions.len()
            )
        };
        for drop in &dropped {
            let _ = write!(reply, "\nDropped `{}`: {}", drop.id, drop.reason);
        }
        let _ = write!(reply, "\n\n{}", render_plan(&plan));
        self.revisions.push(PlanRevision { number, plan: plan.clone(), dropped });
        self.plan = Some(plan);
        Ok(reply)
    }

    async fn update_step(&mut self, args: StepUpdateArgs, ctx: &ToolContext) -> Reply {
        let Some(plan) = self.plan.as_ref() else {
            return Err(format!("step_update refused: {NO_PLAN}"));
        };
        let asked = args.id.trim();
        let Some(index) = find_step(plan, asked) else {
            let ids: Vec<&str> = plan.steps.iter().map(|s| s.id.as_str()).collect();
            return Err(format!(
                "step_update refused: unknown step `{asked}`; the plan's steps are: {}",
                ids.join(", ")
            ));
        };
        let resolved = plan.steps.get(index).map(|s| s.id.clone()).unwrap_or_default();
        let id = resolved.as_str();
        let was = plan.steps.get(index).map_or(StepStatus::Pending, |s| s.status);
        let reply = match args.status {
            StepStatus::Pending => format!("Step `{id}` is now pending."),
            StepStatus::InProgress => {
                if let Some(other) =
                    plan.steps.iter().find(|s| s.status == StepStatus::InProgress && s.id != id)
                {
                    return Err(format!(
                        "step_update refused: step `{}` is already in progress; mark it done, \
                         blocked or pending before starting `{id}` (at most one step may be in \
                         progress)",
                        other.id
                    ));
                }
                if !self.started.contains_key(id) {
                    let hashes = plan
                        .steps
                        .get(index)
                        .into_iter()
                        .flat_map(|s| &s.assertions)
                        .filter_map(changed_path)
                        .filter_map(|p| baseline(&self.recorded, ctx, p).map(|h| (p.to_owned(), h)))
                        .collect();
                    self.started.insert(id.to_owned(), hashes);
                    self.targets.on_start(id, (ctx, &self.recorded));
                }
                format!("Step `{id}` is now in progress.")
            }
            StepStatus::Blocked => {
                if args.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
                    return Err(format!(
                        "step_update refused: a reason is required to mark step `{id}` blocked: \
                         say what stops it"
                    ));
                }
                format!("Step `{id}` is now blocked.")
            }
            StepStatus::Done => {
                let evidence = args.evidence.as_deref().unwrap_or_default();
                if !is_evidence(evidence) {
                    return Err(format!(
                        "step_update refused: evidence is required to mark step `{id}` done: say \
                         what you changed and how you checked it"
                    ));
                }
                if let Some(objection) = self.child_objection(id, evidence) {
                    return Err(format!(
                        "step_update refused: step `{id}` stays {}: {objection}\nDo the work \
                         (yourself or with another child run), then mark the step done again.",
                        was.as_str()
                    ));
                }
                let assertions = plan.steps.get(index).map(|s| s.assertions.clone());
                let assertions = assertions.unwrap_or_default();
                let mut before = self.first_seen.clone();
                if let Some(started) = self.started.get(id) {
                    before.extend(started.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                let results = run_checks(&assertions, ctx, Some(id), &before).await;
                if let Some(failed) = failures(&assertions, &results) {
                    return Err(format!(
                        "step_update refused: step `{id}` stays {}: {failed}\nFix the work, then \
                         mark the step done again.",
                        was.as_str()
                    ));
                }
                let title = plan.steps.get(index).map_or("", |s| s.title.as_str());
                if let Some(found) = self.targets.mismatch(id, title, ctx) {
                    return Err(format!(
                        "step_update refused: step `{id}` stays {}: {}\nChange the file the step \
                         names; if the step should change another file, rewrite the plan \
                         (plan_create) to say so, then mark the step done again.",
                        was.as_str(),
                        found.message()
                    ));
                }
                if let Some(at) = self.position {
                    self.marks.step_at.insert(id.to_owned(), at);
                }
                self.marks.step_before.insert(id.to_owned(), before);
                let reply = format!("Step `{id}` is done.{}", passes(&results));
                self.marks.step_results.insert(id.to_owned(), results);
                reply
            }
        };
        let plan = self.plan.as_mut().ok_or_else(|| NO_PLAN.to_owned())?;
        let step = plan.steps.get_mut(index).ok_or_else(|| format!("unknown step `{id}`"))?;
        step.status = args.status;
        step.blocked_reason = None;
        match args.status {
            StepStatus::Done => step.evidence = args.evidence.map(|e| e.trim().to_owned()),
            StepStatus::Blocked => step.blocked_reason = args.reason.map(|r| r.trim().to_owned()),
            StepStatus::Pending | StepStatus::InProgress => step.evidence = None,
        }
        Ok(format!("{reply}\n\n{}", render_plan(plan)))
    }

    async fn verify_postcondition(
        &mut self,
        args: PostconditionVerifyArgs,
        ctx: &ToolContext,
    ) -> Reply {
        let Some(plan) = self.plan.as_ref() else {
            return Err(format!("postcondition_verify refused: {NO_PLAN}"));
        };
        let Some(index) = find_postcondition(plan, &args.id) else {
            let ids: Vec<&str> = plan.postconditions.iter().map(|p| p.id.as_str()).collect();
            let ids = if ids.is_empty() { "none".to_owned() } else { ids.join(", ") };
            let asked = match &args.id {
                PostconditionRef::Index(n) => n.to_string(),
                PostconditionRef::Id(s) => s.clone(),
            };
            return Err(format!(
                "postcondition_verify refused: unknown postcondition `{asked}`; the plan's \
                 postconditions are: {ids}"
            ));
        };
        let Some(post) = plan.postconditions.get(index) else {
            return Err(format!("postcondition_verify refused: {NO_PLAN}"));
        };
        let label = format!("{} ({})", post.id, post.description);
        if !is_evidence(&args.evidence) {
            return Err(format!(
                "postcondition_verify refused: evidence is required to verify {label}: say what \
                 shows it holds"
            ));
        }
        let assertions = post.assertions.clone();
        let results = run_checks(&assertions, ctx, None, &self.first_seen).await;
        let failed = failures(&assertions, &results);
        let plan = self.plan.as_mut().ok_or_else(|| NO_PLAN.to_owned())?;
        let post = plan.postconditions.get_mut(index).ok_or_else(|| NO_PLAN.to_owned())?;
        if let Some(failed) = failed {
            post.verified = false;
            post.verified_by = None;
            return Err(format!(
                "postcondition_verify refused: {label} is not verified: {failed}\nFix the work, \
                 then verify it again."
            ));
        }
        post.verified = true;
        post.evidence = Some(args.evidence.trim().to_owned());
        let reply = if assertions.is_empty() {
            post.verified_by = Some(VerifiedBy::Claim);
            format!(
                "Postcondition {label} recorded as claimed: it has no assertions, so the harness \
                 could not check it and reports it as not verified by the harness."
            )
        } else {
            post.verified_by = Some(VerifiedBy::Harness);
            if let Some(at) = self.position {
                self.marks.postcondition_at.insert(post.description.clone(), at);
            }
            self.marks.postcondition_results.insert(post.description.clone(), results.clone());
            format!("Postcondition {label} is verified.{}", passes(&results))
        };
        Ok(format!("{reply}\n\n{}", render_plan(plan)))
    }
}

/// Deserialise a plan tool's arguments; a mismatch names where it is (`steps[1].assertions[0]`)
/// and what serde saw, so the model can fix that one field.
pub(crate) fn parse<T: DeserializeOwned>(tool: &str, input: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(input).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            format!("invalid arguments for {tool}: {inner}")
        } else {
            format!("invalid arguments for {tool} at {path}: {inner}")
        }
    })
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Evidence that is more than nothing or a word of assent.
fn is_evidence(text: &str) -> bool {
    let text = text.trim().trim_end_matches(['.', '!']).trim();
    !text.is_empty() && !PLACEHOLDERS.iter().any(|p| p.eq_ignore_ascii_case(text))
}

/// The step the model means by `wanted`: its id; else, when no id matches, its id in another
/// case if only one step has it, or its position in the plan (`"1"`, `"step 2"`, `"#3"`), which
/// models write where an id is expected. A name that could mean two steps means none.
fn find_step(plan: &ModelPlan, wanted: &str) -> Option<usize> {
    if let Some(i) = plan.steps.iter().position(|s| s.id == wanted) {
        return Some(i);
    }
    let mut folded =
        plan.steps.iter().enumerate().filter(|(_, s)| s.id.eq_ignore_ascii_case(wanted));
    if let (Some((i, _)), None) = (folded.next(), folded.next()) {
        return Some(i);
    }
    let number = wanted.trim_start_matches('#');
    let number = number
        .get(..4)
        .filter(|p| p.eq_ignore_ascii_case("step"))
        .map_or(number, |_| number.get(4..).unwrap_or_default())
        .trim();
    let n: usize = number.parse().ok()?;
    let i = n.checked_sub(1)?;
    (i < plan.steps.len()).then_some(i)
}

fn find_postcondition(plan: &ModelPlan, wanted: &PostconditionRef) -> Option<usize> {
    let by_index = |n: u32| {
        let i = usize::try_from(n).ok()?.checked_sub(1)?;
        (i < plan.postconditions.len()).then_some(i)
    };
    match wanted {
        PostconditionRef::Index(n) => by_index(*n),
        PostconditionRef::Id(id) => {
            let id = id.trim();
            plan.postconditions
                .iter()
                .position(|p| p.id.eq_ignore_ascii_case(id))
                .or_else(|| id.parse().ok().and_then(by_index))
        }
    }
}

#[cfg(test)]
#[path = "plan_state_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "plan_state_mismatch_tests.rs"]
mod mismatch_tests;
