//! SENSITIVE_DATA_EXPOSURE: data read from a sensitive source reaching an external sink through
//! step references.
//!
//! Taint is data flow, not ordering: a step is tainted when its tool is one of the policy's
//! `sensitive_sources` (default `db.*`, `sql.*`, `file.read`) or when one of its references reads
//! a tainted step; `depends_on` alone carries nothing. Every reference is resolved once. When all
//! references read earlier steps (the usual plan) one pass in plan order settles the taint;
//! otherwise it spreads breadth first over the "is read by" graph, so each step is visited once
//! and cycles end. Nothing recurses.
//!
//! A step whose tool is one of the `external_sinks` (default `notify.*`, `http.request`,
//! `email.*`, `payments.*`) gets one finding per reference that reads a tainted step, at that
//! reference's pointer, naming the sink, the source and, when the data went through other steps,
//! the chain. Taint is deliberately transitive: a value derived from sensitive data (a summary, a
//! formatted message, a command's output run on it) is treated as sensitive.
//!
//! A sink step that a person approves before it runs (`requires_approval`, or a tool in the
//! policy's `approve_tools`) is the reviewed route the fix asks for, and is not reported; the
//! approval itself is reported as APPROVAL_REQUIRED elsewhere.

use std::fmt::Write as _;

use pev_protocol::{Finding, LintCode, Step};

use crate::Ctx;
use crate::policy::any_match;

/// Marks "no step" in the index arrays.
const NONE: usize = usize::MAX;
/// How many intermediate steps a message lists before eliding the rest.
const CHAIN_SHOWN: usize = 4;

pub(crate) fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let steps = &ctx.plan.steps;
    let n = steps.len();
    let policy = ctx.policy;
    let is_source =
        |s: &Step| s.tool.as_deref().is_some_and(|t| any_match(&policy.sensitive_sources, t));
    let is_sink =
        |s: &Step| s.tool.as_deref().is_some_and(|t| any_match(&policy.external_sinks, t));
    if !steps.iter().any(is_source) || !steps.iter().any(is_sink) {
        return;
    }

    // Each reference resolved once: targets[ref_start[j]..ref_start[j + 1]] are step j's, in
    // the order of `Step::refs`, NONE for an unknown step or the step itself.
    let mut ref_start = Vec::with_capacity(n + 1);
    let mut targets = Vec::new();
    let mut resolve = Resolver::new(ctx);
    let mut forward = false;
    for (j, step) in steps.iter().enumerate() {
        ref_start.push(targets.len());
        for r in &step.refs {
            let t = resolve.index(j, r.reference.step.as_str());
            forward |= t != NONE && t > j;
            targets.push(t);
        }
    }
    ref_start.push(targets.len());
    let refs_of = |j: usize| &targets[ref_start[j]..ref_start[j + 1]];

    let mut taint = Taint::new(steps);
    for (i, step) in steps.iter().enumerate() {
        if is_source(step) {
            taint.source[i] = i;
        }
    }
    if forward {
        taint.spread_worklist(&refs_of);
    } else {
        // Every reference reads an earlier step: one pass in plan order settles everything.
        for j in 0..n {
            if taint.source[j] == NONE
                && let Some(&t) = refs_of(j).iter().find(|&&t| t != NONE && taint.source[t] != NONE)
            {
                taint.inherit(j, t);
            }
        }
    }

    // Messages are written into one buffer and copied out at their exact length: grown in
    // place, each of tens of thousands of findings would keep up to twice the room it needs.
    let mut msg = String::with_capacity(256);
    for (j, step) in steps.iter().enumerate() {
        let Some(tool) = step.tool.as_deref() else { continue };
        if !is_sink(step) || step.requires_approval || any_match(&policy.approve_tools, tool) {
            continue;
        }
        for (r, &t) in step.refs.iter().zip(refs_of(j)) {
            if t == NONE || taint.source[t] == NONE {
                continue;
            }
            msg.clear();
            let _ = write!(msg, "external sink `{tool}` receives {} from ", r.reference);
            taint.describe(t, &mut msg);
            msg.push_str("; send only what is needed through a reviewed step, or require approval");
            let path = format!("/steps/{j}{}", r.pointer);
            let at = (j, step.id.as_str());
            out.push(Finding::step(LintCode::SensitiveDataExposure, at, path, msg.as_str()));
        }
    }
}

/// Resolves step ids to indices, trying the previous step and the last answer before the map:
/// plans mostly read the step just before, and comparing two short ids is much cheaper than a
/// lookup in a map of 100,000 ids. The guesses are only trusted when ids are unique, because with
/// duplicates the first step of an id must win.
struct Resolver<'c> {
    ctx: &'c Ctx<'c>,
    unique: bool,
    last: usize,
}

impl<'c> Resolver<'c> {
    fn new(ctx: &'c Ctx<'c>) -> Self {
        Self { ctx, unique: ctx.index.len() == ctx.plan.steps.len(), last: NONE }
    }

    /// The step `id` names, as read from step `from`; NONE when unknown or `from` itself.
    fn index(&mut self, from: usize, id: &str) -> usize {
        let steps = &self.ctx.plan.steps;
        let guess = |i: usize| steps.get(i).is_some_and(|s| s.id.as_str() == id);
        let t = if self.unique && from.checked_sub(1).is_some_and(guess) {
            from - 1
        } else if self.unique && guess(self.last) {
            self.last
        } else {
            self.ctx.index.get(id).copied().unwrap_or(NONE)
        };
        if t != NONE {
            self.last = t;
        }
        if t == from { NONE } else { t }
    }
}

/// Who is tainted, by which source, and through which step.
struct Taint<'a> {
    steps: &'a [Step],
    /// The sensitive source a step's data comes from (itself for a source), or NONE.
    source: Vec<usize>,
    /// The tainted step it read first on the way (NONE for a source).
    parent: Vec<usize>,
    /// How many references from the source to the step.
    hops: Vec<usize>,
}

impl<'a> Taint<'a> {
    fn new(steps: &'a [Step]) -> Self {
        let n = steps.len();
        Self { steps, source: vec![NONE; n], parent: vec![NONE; n], hops: vec![0; n] }
    }

    /// Step `j` reads tainted step `t`.
    fn inherit(&mut self, j: usize, t: usize) {
        self.source[j] = self.source[t];
        self.parent[j] = t;
        self.hops[j] = self.hops[t] + 1;
    }

    /// Breadth first from every source over the "is read by" graph (built in compressed rows),
    /// for plans where some reference reads a later step; cycles end because each step is
    /// tainted once.
    fn spread_worklist<'t>(&mut self, refs_of: &impl Fn(usize) -> &'t [usize]) {
        let n = self.steps.len();
        let mut offsets = vec![0usize; n + 1];
        for j in 0..n {
            for &t in refs_of(j) {
                if t != NONE {
                    offsets[t + 1] += 1;
                }
            }
        }
        for t in 0..n {
            offsets[t + 1] += offsets[t];
        }
        let mut fill = offsets.clone();
        let mut readers = vec![0usize; offsets[n]];
        for j in 0..n {
            for &t in refs_of(j) {
                if t != NONE {
                    readers[fill[t]] = j;
                    fill[t] += 1;
                }
            }
        }
        let mut queue: Vec<usize> = (0..n).filter(|&i| self.source[i] != NONE).collect();
        let mut head = 0;
        while let Some(&t) = queue.get(head) {
            head += 1;
            for &j in &readers[offsets[t]..offsets[t + 1]] {
                if self.source[j] == NONE {
                    self.inherit(j, t);
                    queue.push(j);
                }
            }
        }
    }

    fn id(&self, i: usize) -> &str {
        self.steps.get(i).map_or("?", |s| s.id.as_str())
    }

    /// Appends "sensitive source step 'a' (`db.query`)" and, when `t` is not the source,
    /// ", via 'b' → 'c'"; at most CHAIN_SHOWN steps of a longer chain are named.
    fn describe(&self, t: usize, out: &mut String) {
        let src = self.source[t];
        let tool = self.steps.get(src).and_then(|s| s.tool.as_deref()).unwrap_or("?");
        let _ = write!(out, "sensitive source step '{}' (`{tool}`)", self.id(src));
        if t == src {
            return;
        }
        // The walk back from `t` is bounded, whatever the chain's length.
        let mut via = [NONE; CHAIN_SHOWN];
        let mut len = 0;
        let mut at = t;
        while at != src && at != NONE && len < CHAIN_SHOWN {
            via[len] = at;
            len += 1;
            at = self.parent[at];
        }
        out.push_str(", via ");
        if self.hops[t] > len {
            let _ = write!(out, "… ({} steps) → ", self.hops[t]);
        }
        for (k, &step) in via[..len].iter().rev().enumerate() {
            if k > 0 {
                out.push_str(" → ");
            }
            let _ = write!(out, "'{}'", self.id(step));
        }
    }
}
