//! The finalization gate: what happens when the model ends its turn without a tool call (its
//! final answer). With the gate on, an answer given while the work is incomplete is refused: the
//! model gets the rendered plan and the list of what is missing, and a cap on refusals ends the
//! loop (the driver turns that into `partial`, never a silent pass). With the gate off the first
//! answer is accepted, and still counted as premature when the work was incomplete, so an eval
//! can show what slips through.
//!
//! "Incomplete" means: no plan while the goal looks multi-step (see [`goal_is_multi_step`]), a
//! step that is neither done nor blocked, or a postcondition not verified.
//!
//! Also here: the reminder injected after a run of rounds without a plan or todo update.

use std::collections::HashSet;

use super::plan_tools::{ModelPlan, StepStatus, render_plan};

/// What the gate decided about one final answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The loop ends with this answer. `premature`: the work was incomplete (gate off).
    Accept { premature: bool },
    /// Sent to the model as a user message; the loop goes on.
    Refuse(String),
    /// The refusal cap is reached: the loop ends without an answer. The text is the
    /// interruption message.
    Exhausted(String),
}

/// The gate's state over one loop.
#[derive(Debug, Clone)]
pub struct FinalGate {
    enabled: bool,
    max_refusals: u32,
    multi_step: bool,
    pub refusals: u32,
    pub premature: u32,
}

impl FinalGate {
    pub fn new(enabled: bool, max_refusals: u32, goal: &str) -> Self {
        Self {
            enabled,
            max_refusals,
            multi_step: goal_is_multi_step(goal),
            refusals: 0,
            premature: 0,
        }
    }

    /// Whether the goal was judged to need a plan.
    pub fn multi_step(&self) -> bool {
        self.multi_step
    }

    /// Decide on a final answer given with `plan` as it stands.
    pub fn on_final_answer(&mut self, plan: Option<&ModelPlan>) -> Decision {
        let missing = missing(plan, self.multi_step);
        if missing.is_empty() {
            return Decision::Accept { premature: false };
        }
        self.premature = self.premature.saturating_add(1);
        if !self.enabled {
            return Decision::Accept { premature: true };
        }
        self.refusals = self.refusals.saturating_add(1);
        if self.refusals >= self.max_refusals {
            return Decision::Exhausted(format!(
                "the finalization gate refused {} final answers: {}",
                self.refusals,
                missing.join("; ")
            ));
        }
        Decision::Refuse(refusal_message(plan, &missing, self.refusals, self.max_refusals))
    }
}

impl FinalGate {
    /// A `stop` hook blocked a final answer the plan would have let through: it counts as a
    /// refusal (so the cap still ends the loop), with the hook's reason as what is missing.
    pub fn on_stop_blocked(&mut self, reason: &str) -> Decision {
        self.refusals = self.refusals.saturating_add(1);
        if self.refusals >= self.max_refusals {
            return Decision::Exhausted(format!(
                "the finalization gate refused {} final answers; the last was blocked by the \
                 stop hook: {reason}",
                self.refusals
            ));
        }
        Decision::Refuse(format!(
            "Final answer refused ({} of {}; at {} the run ends unfinished): the stop hook \
             blocked it: {reason}\nAddress that with the tools, then give your final answer.",
            self.refusals, self.max_refusals, self.max_refusals
        ))
    }
}

/// What keeps the task from being finished, one line per item; empty when nothing does.
pub fn missing(plan: Option<&ModelPlan>, multi_step: bool) -> Vec<String> {
    let Some(plan) = plan else {
        return if multi_step {
            vec![
                "no plan: this goal has several parts, so call plan_create with its steps and \
                 postconditions, then carry them out"
                    .to_owned(),
            ]
        } else {
            Vec::new()
        };
    };
    let mut out = Vec::new();
    for step in &plan.steps {
        match step.status {
            StepStatus::Pending => {
                out.push(format!("step `{}` ({}) is pending", step.id, step.title));
            }
            StepStatus::InProgress => {
                out.push(format!("step `{}` ({}) is still in progress", step.id, step.title));
            }
            StepStatus::Done | StepStatus::Blocked => {}
        }
    }
    for post in plan.postconditions.iter().filter(|p| !p.verified) {
        out.push(format!(
            "postcondition {} ({}) is not verified: call postcondition_verify with evidence",
            post.id, post.description
        ));
    }
    out
}

/// The user message that refuses a final answer.
pub fn refusal_message(
    plan: Option<&ModelPlan>,
    missing: &[String],
    refusals: u32,
    max_refusals: u32,
) -> String {
    let plan = plan.map_or_else(
        || "Current plan: none.\n".to_owned(),
        |p| format!("Current plan:\n{}", render_plan(p)),
    );
    format!(
        "Final answer refused ({refusals} of {max_refusals}; at {max_refusals} the run ends \
         unfinished): the task is not finished.\nWhat is missing:\n- {}\nDo the remaining work \
         with the tools and record it (step_update with evidence, postcondition_verify), or mark \
         a step blocked with a reason if it truly cannot be done. Then give your final \
         answer.\n\n{plan}",
        missing.join("\n- ")
    )
}

/// The reminder appended to the tool results after `rounds` rounds without a plan or todo
/// update.
pub fn reminder_message(rounds: u32, plan: Option<&ModelPlan>) -> String {
    let plan = plan.map_or_else(
        || "There is no plan yet: for a task of several parts, call plan_create.".to_owned(),
        render_plan,
    );
    format!(
        "Reminder: {rounds} rounds without a plan or todo update. Keep your progress recorded: \
         step_update (in_progress when you start a step, done with evidence when it is \
         finished), plan_create to rewrite the plan, todo_write for the todo list.\n\n{plan}"
    )
}

/// Words that join two clauses of a goal. Split on after lower-casing.
const CLAUSE_SEPARATORS: &[&str] =
    &[". ", "! ", "? ", "\n", ";", " and then ", " then ", " and ", " also ", " after that "];

/// Whether `goal` asks for more than one thing, so a model working without a plan has not shown
/// it did them all. Deliberately simple, and biased towards "yes" (the cost of a false yes is
/// one plan_create call):
///
/// - it has two or more clauses of at least two words each, the clauses being split at sentence
///   ends, new lines, `;` and the joiners "and", "then", "also", "after that" ("fix the parser
///   and update the docs"; but "add tests for foo and bar" is one clause, since "bar" alone is
///   not one);
/// - or it names two or more distinct files (a word with `/` or a `name.ext` extension).
pub fn goal_is_multi_step(goal: &str) -> bool {
    // Abbreviations end in a dot that does not end a sentence.
    let lower =
        goal.to_lowercase().replace("e.g.", "eg").replace("i.e.", "ie").replace("etc.", "etc");
    let mut pieces = vec![lower.as_str()];
    for sep in CLAUSE_SEPARATORS {
        pieces = pieces.into_iter().flat_map(|p| p.split(sep)).collect();
    }
    let clauses = pieces.iter().filter(|p| p.split_whitespace().count() >= 2).count();
    if clauses >= 2 {
        return true;
    }
    let files: HashSet<&str> = goal
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| "`'\"()[]{}<>,;:!?".contains(c)))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| looks_like_file(w))
        .collect();
    files.len() >= 2
}

/// `src/main.rs`, `README.md`, `site/`: a path or a name with a short extension that starts with
/// a letter (so "1.5" is not a file), and is not two single letters ("e.g", "i.e").
fn looks_like_file(word: &str) -> bool {
    if word.contains("://") {
        return false;
    }
    if word.len() > 1 && word.contains('/') {
        return true;
    }
    match word.rsplit_once('.') {
        Some((name, ext)) => {
            !name.is_empty()
                && (1..=5).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && (name.len() >= 2 || ext.len() >= 2)
        }
        None => false,
    }
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
