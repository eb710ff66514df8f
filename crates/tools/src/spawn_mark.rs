//! Whether a command had started. A tool that runs a program calls [`spawning`] right before it
//! spawns the child process, and does not spawn it when that says no; whoever made the call
//! listens through [`scope`]. The engine does, for `shell.exec`: it leaves a durable mark before
//! the call ("intent") and turns it to "started" from the hook, before the spawn, so that a
//! resume after a kill can tell a command that never started (it may simply run) from one that
//! may have run (issue 31).

use std::future::Future;
use std::sync::Arc;

/// Called right before each child process a tool spawns; `false` forbids the spawn.
pub type Hook = Arc<dyn Fn() -> bool + Send + Sync>;

tokio::task_local! {
    static HOOK: Hook;
}

/// Runs `fut` with `hook` told of every process a tool spawns within it.
pub async fn scope<F: Future>(hook: Hook, fut: F) -> F::Output {
    HOOK.scope(hook, fut).await
}

/// Tells the current [`scope`]'s hook, if any, that a child process is about to be spawned;
/// `false` when the hook forbids it (it could not record the start). `true` outside a scope.
pub fn spawning() -> bool {
    HOOK.try_with(|hook| hook()).unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn the_hook_hears_spawns_inside_its_scope_only() {
        let count = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&count);
        assert!(spawning(), "outside a scope nothing forbids a spawn");
        let allowed = scope(Arc::new(move || seen.fetch_add(1, Ordering::SeqCst) == 0), async {
            (spawning(), spawning())
        })
        .await;
        assert!(spawning());
        assert_eq!(count.load(Ordering::SeqCst), 2);
        assert_eq!(allowed, (true, false), "the hook's answer is the caller's");
    }
}
