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

use pev_protocol::reference::{Reference, Syntax};
use pev_protocol::{Finding, LintCode, Step};

use crate::Ctx;
use crate::graph::Resolver;
use crate::policy::any_match;

/// Marks "no step" in the index arrays.
const NONE: usize = usize::MAX;
/// How many intermediate steps a message lists before eliding the rest.
const CHAIN_SHOWN: usize = 4;

pub(crate) fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    check_with_room(ctx, out, 0);
}

/// [`check`], with room for `room` more findings kept in `out` when it is sized for this
/// check's (so that another check's findings can be put in front of them without a copy).
pub(crate) fn check_with_room(ctx: &Ctx<'_>, out: &mut Vec<Finding>, room: usize) {
    let steps = &ctx.plan.steps;
    let n = steps.len();
    let policy = ctx.policy;
    // The globs are matched once per distinct tool name, not once per step.
    let sources = ctx.tools.classify(|t| any_match(&policy.sensitive_sources, t));
    let sinks = ctx.tools.classify(|t| any_match(&policy.external_sinks, t));
    if !sources.contains(&true) || !sinks.contains(&true) {
        return;
    }

    // Each reference resolved once: targets[ref_start[j]..ref_start[j + 1]] are step j's, in
    // the order of `Step::refs`, NONE for an unknown step or the step itself.
    let mut ref_start = Vec::with_capacity(n + 1);
    let mut targets = Vec::new();
    let mut resolver = Resolver::new(ctx.plan, ctx.index());
    let mut forward = false;
    for (j, step) in steps.iter().enumerate() {
        ref_start.push(targets.len());
        for r in &step.refs {
            // An unknown step, or the step itself, passes nothing on.
            let t = resolver.resolve(r.reference.step.as_str(), j).filter(|&t| t != j);
            let t = t.unwrap_or(NONE);
            forward |= t != NONE && t > j;
            targets.push(t);
        }
    }
    ref_start.push(targets.len());
    let refs_of = |j: usize| &targets[ref_start[j]..ref_start[j + 1]];

    let mut taint = Taint::new(steps);
    for i in 0..n {
        if ctx.tools.lookup(&sources, i).is_some_and(|&b| b) {
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

    // A sink a person approves before it runs (approve_tools) is the reviewed route.
    let unreviewed = ctx
        .tools
        .classify(|t| any_match(&policy.external_sinks, t) && !any_match(&policy.approve_tools, t));
    let sinks: Vec<usize> = (0..n)
        .filter(|&j| ctx.tools.lookup(&unreviewed, j).is_some_and(|&b| b))
        .filter(|&j| steps.get(j).is_some_and(|s| !s.requires_approval))
        .collect();
    let tainted = |t: usize| t != NONE && taint.source[t] != NONE;
    // Counted first, so that the list of findings is sized once rather than grown by copying.
    let count: usize =
        sinks.iter().map(|&j| refs_of(j).iter().filter(|&&t| tainted(t)).count()).sum();
    if count > 0 {
        out.reserve_exact(count + room);
    }

    // Messages and paths are written into one buffer each and copied out at their exact
    // length: grown in place, each of tens of thousands of findings would keep up to twice the
    // room it needs. They are spelled out piece by piece, not formatted, for the same reason.
    let mut msg = String::with_capacity(256);
    let mut path = String::with_capacity(64);
    for &j in &sinks {
        let Some(step) = steps.get(j) else { continue };
        let Some(tool) = step.tool.as_deref() else { continue };
        for (r, &t) in step.refs.iter().zip(refs_of(j)) {
            if !tainted(t) {
                continue;
            }
            msg.clear();
            msg.push_str("external sink `");
            msg.push_str(tool);
            msg.push_str("` receives ");
            push_reference(&mut msg, &r.reference);
            msg.push_str(" from ");
            taint.describe(t, &mut msg);
            msg.push_str("; send only what is needed through a reviewed step, or require approval");
            path.clear();
            let _ = write!(path, "/steps/{j}");
            path.push_str(&r.pointer);
            let at = (j, step.id.as_str());
            out.push(Finding::step(
                LintCode::SensitiveDataExposure,
                at,
                path.as_str(),
                msg.as_str(),
            ));
        }
    }
}

/// Appends `reference` as its `Display` writes it (`${id.result.a.b}`, `{{id.result}}`).
fn push_reference(out: &mut String, reference: &Reference) {
    let (open, close) = match reference.syntax {
        Syntax::Dollar => ("${", "}"),
        Syntax::Mustache => ("{{", "}}"),
    };
    out.push_str(open);
    out.push_str(reference.step.as_str());
    out.push_str(".result");
    for seg in &reference.path {
        out.push('.');
        out.push_str(seg);
    }
    out.push_str(close);
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
        out.push_str("sensitive source step '");
        out.push_str(self.id(src));
        out.push_str("' (`");
        out.push_str(tool);
        out.push_str("`)");
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
            out.push('\'');
            out.push_str(self.id(step));
            out.push('\'');
        }
    }
}
