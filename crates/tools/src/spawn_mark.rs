//! Whether a command had started. A tool that runs a program calls [`spawned`] once the child
//! process exists; whoever made the call can listen through [`scope`]. The engine does, for
//! every call with an exec effect: it leaves a durable mark before the call ("intent") and
//! turns it to "started" from the hook, so that a resume after a kill can tell a command that
//! never started (it may simply run) from one that may have run (issue 31).

use std::future::Future;
use std::sync::Arc;

/// Called once per child process a tool spawns, right after the spawn succeeded.
pub type Hook = Arc<dyn Fn() + Send + Sync>;

tokio::task_local! {
    static HOOK: Hook;
}

/// Runs `fut` with `hook` told of every process a tool spawns within it.
pub async fn scope<F: Future>(hook: Hook, fut: F) -> F::Output {
    HOOK.scope(hook, fut).await
}

/// Tells the current [`scope`]'s hook, if any, that a child process exists.
pub fn spawned() {
    let _ = HOOK.try_with(|hook| hook());
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn the_hook_hears_spawns_inside_its_scope_only() {
        let count = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&count);
        spawned();
        scope(
            Arc::new(move || {
                seen.fetch_add(1, Ordering::SeqCst);
            }),
            async {
                spawned();
                spawned();
            },
        )
        .await;
        spawned();
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }
}
