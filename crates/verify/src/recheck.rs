//! The final re-check: evidence is point-in-time, a verdict is about the result. When a run is
//! over, every assertion of every done step (and, in loop mode, of every postcondition the model
//! verified along the way) runs again against the workspace as the run left it. An assertion
//! that passed when its evidence was gathered and fails now is a [`Regression`]: a later step,
//! a later call of the model, or something outside the run undid the work, and the run may not
//! claim `success` on the strength of evidence that no longer holds.
//!
//! Not everything can be run again. A `command_succeeds` or `http_status` the plan marks
//! `repeatable: false` has side effects of its own; a `content_changed` whose before-hash was
//! never recorded (a step reused from the cache) has nothing to compare against. Those are
//! listed as [`CheckedOnce`], so the result says which evidence is only as old as its step.
//!
//! Checks that depend only on the world (a file's content, a command, a socket) are run once
//! per distinct assertion, however many steps asserted it.

use std::collections::HashMap;

use pev_protocol::Assertion;
use pev_protocol::assertion::AssertionResult;
use pev_protocol::run::{CheckedOnce, EvidenceOf, FinalCheck, Reason, ReasonCode, Regression};

use crate::CheckEnv;
use crate::assert::{before_hash, check};
use crate::text::{CLIP, clip};

/// How many of a regression's later calls a reason names.
const NAMED_CALLS: usize = 3;

/// One holder's evidence, to run again.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    pub of: &'a EvidenceOf,
    pub assertions: &'a [Assertion],
    /// What each assertion showed when the evidence was gathered, in the same order. An
    /// assertion without an earlier result counts as having held: claims are made only for done
    /// steps and verified postconditions.
    pub earlier: &'a [AssertionResult],
    /// Where the assertions run: the step's outputs and its before-hashes.
    pub env: CheckEnv<'a>,
}

/// Runs every claim's assertions again and reports what no longer holds. `changed_by` is left
/// empty: which later call undid a piece of evidence is the journal's to say.
pub async fn recheck(claims: &[Claim<'_>]) -> FinalCheck {
    let mut out = FinalCheck::default();
    // Results of checks that depend only on the world, by the assertion's JSON.
    let mut seen: HashMap<String, AssertionResult> = HashMap::new();
    for claim in claims {
        for (i, assertion) in claim.assertions.iter().enumerate() {
            if let Some(why) = not_repeatable(assertion, &claim.env) {
                out.checked_once.push(CheckedOnce {
                    of: claim.of.clone(),
                    kind: assertion.kind().to_owned(),
                    why,
                    path: assertion.path().map(str::to_owned),
                });
                continue;
            }
            let key =
                world_only(assertion).then(|| serde_json::to_string(assertion).ok()).flatten();
            let now = match key.as_ref().and_then(|k| seen.get(k)) {
                Some(result) => result.clone(),
                None => {
                    let result = check(assertion, &claim.env).await;
                    if let Some(k) = key {
                        seen.insert(k, result.clone());
                    }
                    result
                }
            };
            out.rechecked = out.rechecked.saturating_add(1);
            let then = claim.earlier.get(i);
            let held = then.is_none_or(|r| r.passed);
            if held && !now.passed {
                out.regressed.push(Regression {
                    of: claim.of.clone(),
                    kind: now.kind,
                    path: assertion.path().map(str::to_owned),
                    then: then.map_or_else(|| "passed".to_owned(), |r| r.detail.clone()),
                    now: now.detail,
                    changed_by: Vec::new(),
                });
            }
        }
    }
    out
}

/// Why `assertion` is not run again, if it is not.
fn not_repeatable(assertion: &Assertion, env: &CheckEnv<'_>) -> Option<String> {
    if !assertion.repeatable() {
        return Some(
            "marked `repeatable: false` (it has effects of its own): not run again; its evidence \
             is from when its step finished"
                .to_owned(),
        );
    }
    if let Assertion::ContentChanged { path, .. } = assertion
        && before_hash(env, path).is_none()
    {
        return Some(format!(
            "no hash of {path} from before the work was recorded (a step reused from the cache): \
             nothing to compare the final content against"
        ));
    }
    None
}

/// Whether the assertion's result depends only on the world, not on whose it is (its step's
/// output, its before-hashes).
fn world_only(assertion: &Assertion) -> bool {
    !matches!(
        assertion,
        Assertion::ContentChanged { .. }
            | Assertion::OutputContains { .. }
            | Assertion::ExitCodeEq { .. }
    )
}

/// The reason a regression gives: which evidence no longer holds, what it saw then and now,
/// and the later calls that may have undone it.
pub fn regression_reason(regression: &Regression) -> Reason {
    let step = regression.of.step().map(str::to_owned);
    let what = match &regression.of {
        EvidenceOf::Step(id) => format!("step '{id}''s evidence"),
        EvidenceOf::Postcondition(d) => format!("postcondition \"{}\"", clip(d, CLIP)),
    };
    let by = match regression.changed_by.as_slice() {
        [] => match &regression.path {
            Some(path) => format!("; the journal records no later call that wrote {path}"),
            None => String::new(),
        },
        calls if calls.len() > NAMED_CALLS => {
            let named = calls.get(..NAMED_CALLS).unwrap_or(calls);
            let rest = calls.len().saturating_sub(NAMED_CALLS);
            format!("; changed after it by {} and {rest} more", named.join(", "))
        }
        calls => format!("; changed after it by {}", calls.join(", ")),
    };
    Reason {
        code: ReasonCode::EvidenceRegressed,
        step,
        message: format!(
            "{what} no longer holds: {} held when it was checked ({}) but fails on the final \
             workspace ({}){by}",
            regression.kind,
            clip(&regression.then, CLIP),
            clip(&regression.now, CLIP),
        ),
    }
}

/// The warning for evidence that was checked only once.
pub fn checked_once_warning(once: &CheckedOnce) -> String {
    format!("{}: {} was checked once: {}", once.of, once.kind, once.why)
}

#[cfg(test)]
#[path = "recheck_tests.rs"]
mod tests;
