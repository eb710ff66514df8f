//! Which step (and attempt) a model call is made for. The engine runs an executor's attempt and
//! a judge's verdict inside [`scoped`]; a model client wrapper reads [`current`] to journal the
//! call under that step without every executor having to pass the step down to its client.
//! Calls made outside a step (the planner's) have no scope.
//!
//! Which run a call is made for is a scope of its own ([`in_run`]): a child run (a delegated
//! step) shares its parent's model clients, and its calls are journaled as the child's. The
//! scheduler runs each step task inside its run's scope, and a child run is driven inside its
//! own; outside any, a call belongs to the run its log is attached to.

use std::future::Future;

/// The step and attempt a call belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallScope {
    pub step: String,
    pub attempt: u32,
}

tokio::task_local! {
    static SCOPE: Option<CallScope>;
    static RUN: String;
}

/// Runs `future` with model calls attributed to run `run_id`.
pub async fn in_run<F: Future>(run_id: String, future: F) -> F::Output {
    RUN.scope(run_id, future).await
}

/// Runs `future` as a run of its own (a child run): attributed to `run_id` and to no step of
/// the run it is called from.
pub async fn in_child_run<F: Future>(run_id: String, future: F) -> F::Output {
    RUN.scope(run_id, SCOPE.scope(None, future)).await
}

/// The run of the task this is called from, if one was named.
pub fn current_run() -> Option<String> {
    RUN.try_with(Clone::clone).ok()
}

/// Runs `future` with model calls attributed to `step`'s `attempt`.
pub async fn scoped<F: Future>(step: &str, attempt: u32, future: F) -> F::Output {
    SCOPE.scope(Some(CallScope { step: step.to_owned(), attempt }), future).await
}

/// The scope of the task this is called from, if any.
pub fn current() -> Option<CallScope> {
    SCOPE.try_with(Clone::clone).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_scope_is_seen_inside_and_not_outside() {
        assert_eq!(current(), None);
        let inside = scoped("a", 2, async { current() }).await;
        assert_eq!(inside, Some(CallScope { step: "a".into(), attempt: 2 }));
        assert_eq!(current(), None);
    }

    #[tokio::test]
    async fn the_innermost_run_wins_and_step_scopes_nest_inside_it() {
        assert_eq!(current_run(), None);
        let (outer, inner, step) = in_run("parent".to_owned(), async {
            let outer = current_run();
            let (inner, step) =
                in_run("child".to_owned(), scoped("s", 1, async { (current_run(), current()) }))
                    .await;
            (outer, inner, step)
        })
        .await;
        assert_eq!(outer.as_deref(), Some("parent"));
        assert_eq!(inner.as_deref(), Some("child"));
        assert_eq!(step.map(|s| s.step), Some("s".to_owned()));
        assert_eq!(current_run(), None);
    }

    #[tokio::test]
    async fn a_child_run_leaves_the_parents_step_behind() {
        let inside = in_run(
            "parent".to_owned(),
            scoped("s", 1, in_child_run("child".to_owned(), async { (current_run(), current()) })),
        )
        .await;
        assert_eq!(inside, (Some("child".to_owned()), None));
    }
}
