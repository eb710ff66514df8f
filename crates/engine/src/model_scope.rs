//! Which step (and attempt) a model call is made for. The engine runs an executor's attempt and
//! a judge's verdict inside [`scoped`]; a model client wrapper reads [`current`] to journal the
//! call under that step without every executor having to pass the step down to its client.
//! Calls made outside a step (the planner's) have no scope.

use std::future::Future;

/// The step and attempt a call belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallScope {
    pub step: String,
    pub attempt: u32,
}

tokio::task_local! {
    static SCOPE: CallScope;
}

/// Runs `future` with model calls attributed to `step`'s `attempt`.
pub async fn scoped<F: Future>(step: &str, attempt: u32, future: F) -> F::Output {
    SCOPE.scope(CallScope { step: step.to_owned(), attempt }, future).await
}

/// The scope of the task this is called from, if any.
pub fn current() -> Option<CallScope> {
    SCOPE.try_with(Clone::clone).ok()
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
}
