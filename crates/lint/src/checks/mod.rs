//! The checks, grouped by what they look at. Each is pure and infallible and pushes its
//! findings in step order: `fn check(ctx, out)` for those that look at the plan as a whole, and
//! a `Pass` (or `check_step`) for those that look at one step at a time, which
//! [`step_checks`] runs together in one walk over the steps (a large plan does not fit in the
//! caches, so each walk over it costs a trip to memory per step).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use pev_protocol::Finding;

use crate::Ctx;

mod delegate;
mod download;
mod fetch_output;
mod flow;
mod injection;
mod interpreters;
mod oracle;
mod paths;
mod references;
mod secrets;
mod shell_parser;
mod shell_syntax;
mod sql;
mod structure;
mod tools;

/// Plans with fewer steps are checked on one thread: a thread costs more than it saves.
const PARALLEL_STEPS: usize = 2048;

/// Runs every check, then the Rego policies; the findings come in the order of the checks.
///
/// A large plan is checked on two threads. This one builds the step index and runs the step
/// graph's checks (`references`), then `flow`, which reuses the memory the graph freed and
/// makes most of a large plan's findings; a helper runs the others, those that need no index
/// first. The findings are then put in the order one thread gives them, in `flow`'s buffer.
pub(crate) fn run_all(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let threads = ctx.plan.steps.len() >= PARALLEL_STEPS
        && std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    run_checks(ctx, out, threads);
}

/// [`run_all`], on two threads when `threads` says so (and one can be started).
fn run_checks(ctx: &Ctx<'_>, out: &mut Vec<Finding>, threads: bool) {
    if !(threads && run_parallel(ctx, out)) {
        structure::check(ctx, out);
        references::check(ctx, out);
        delegate::check(ctx, out);
        for found in step_checks(ctx) {
            out.extend(found);
        }
        flow::check(ctx, out);
    }
    crate::rego::check(ctx, out);
}

/// [`run_all`]'s checks on two threads, their findings appended to `out` in the same order;
/// false (and nothing done) when no thread could be started.
///
/// `structure` and `delegate` read the step index, which the helper's first checks do not
/// need; they go to whichever thread is free first (the helper after its walk over the steps,
/// this thread after `flow`), so that neither waits for the other at the end.
fn run_parallel(ctx: &Ctx<'_>, out: &mut Vec<Finding>) -> bool {
    let next = AtomicUsize::new(0);
    let slots: [OnceLock<Vec<Finding>>; 2] = [OnceLock::new(), OnceLock::new()];
    let take_turns = || {
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let mut found = Vec::new();
            match k {
                0 => structure::check(ctx, &mut found),
                1 => delegate::check(ctx, &mut found),
                _ => return,
            }
            if let Some(slot) = slots.get(k) {
                let _ = slot.set(found);
            }
        }
    };
    let found = std::thread::scope(|scope| {
        let helper = std::thread::Builder::new().name("pev-lint".into());
        let helper = helper.spawn_scoped(scope, || {
            let by_step = step_checks(ctx);
            take_turns();
            by_step
        });
        let Ok(helper) = helper else { return None };
        let mut graph = Vec::new();
        references::check(ctx, &mut graph);
        // The other checks' findings go in front of flow's, in its buffer: room for one per
        // step is only address space until it is used, and saves copying flow's findings.
        let mut flow = Vec::new();
        flow::check_with_room(ctx, &mut flow, ctx.plan.steps.len());
        take_turns();
        match helper.join() {
            Ok(by_step) => Some((graph, flow, by_step)),
            // The helper's checks panicked: the same panic, on this thread.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    let Some((graph, mut flow, by_step)) = found else { return false };
    let [shape, delegated] = slots.map(|slot| slot.into_inner().unwrap_or_default());
    let by_step = by_step.into_iter().flatten();
    let before_flow = out.drain(..).chain(shape).chain(graph).chain(delegated).chain(by_step);
    flow.splice(0..0, before_flow);
    *out = flow;
    true
}

/// The checks that look at one step at a time (`tools`, `oracle`, `secrets`, `sql`,
/// `injection`), in one walk over the steps; their findings, each check's apart, in that order.
fn step_checks(ctx: &Ctx<'_>) -> [Vec<Finding>; 5] {
    let [mut tools_found, mut oracle_found, mut sql_found, mut injection_found] =
        [(); 4].map(|()| Vec::new());
    let tools = tools::Pass::new(ctx);
    let oracle = oracle::Pass::new(ctx, &mut oracle_found);
    let mut secrets = secrets::Pass::new(ctx);
    let mut sql = sql::Pass::new(ctx);
    for (i, step) in ctx.plan.steps.iter().enumerate() {
        tools.step(ctx, i, step, &mut tools_found);
        oracle.step(i, step, &mut oracle_found);
        secrets.step(i, step);
        sql.step(ctx, i, step, &mut sql_found);
        injection::check_step(i, step, &mut injection_found);
    }
    [tools_found, oracle_found, secrets.finish(), sql_found, injection_found]
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
