//! SENSITIVE_DATA_EXPOSURE: data read from a sensitive source reaching an external sink through
//! step references.
//!
//! Taint is data flow, not ordering: a step is tainted when its tool is one of the policy's
//! `sensitive_sources` (default `db.*`, `sql.*`, `file.read`) or when one of its references reads
//! a tainted step; `depends_on` alone carries nothing. Taint spreads breadth first over the
//! "is read by" graph built once from every step's references, so each step is visited once,
//! cycles end, and the path back to the source is the shortest one. A step whose tool is one of
//! the `external_sinks` (default `notify.*`, `http.request`, `email.*`, `payments.*`) gets one
//! finding per reference that reads a tainted step, at that reference's pointer, naming the sink,
//! the source and, when the data went through other steps, the chain.
//!
//! A sink step that a person approves before it runs (`requires_approval`, or a tool in the
//! policy's `approve_tools`) is the reviewed route the fix asks for, and is not reported; the
//! approval itself is reported as APPROVAL_REQUIRED elsewhere.

use pev_protocol::{Finding, LintCode, ParamRef, Step};

use crate::Ctx;
use crate::policy::any_match;

/// Marks "no step" in the index arrays.
const NONE: usize = usize::MAX;
/// How many intermediate steps a message lists before eliding the rest.
const CHAIN_SHOWN: usize = 4;

pub(crate) fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let steps = &ctx.plan.steps;
    let n = steps.len();
    let target = |j: usize, r: &ParamRef| {
        ctx.index.get(r.reference.step.as_str()).copied().filter(|&t| t != j)
    };

    // Readers of each step, in compressed rows: readers[offsets[t]..offsets[t + 1]].
    let mut offsets = vec![0usize; n + 1];
    for (j, step) in steps.iter().enumerate() {
        for r in &step.refs {
            if let Some(t) = target(j, r) {
                offsets[t + 1] += 1;
            }
        }
    }
    for t in 0..n {
        offsets[t + 1] += offsets[t];
    }
    let mut fill = offsets.clone();
    let mut readers = vec![0usize; offsets[n]];
    for (j, step) in steps.iter().enumerate() {
        for r in &step.refs {
            if let Some(t) = target(j, r) {
                readers[fill[t]] = j;
                fill[t] += 1;
            }
        }
    }

    // Breadth-first taint from every source; `parent` is the tainted step it read first.
    let mut source = vec![NONE; n];
    let mut parent = vec![NONE; n];
    let mut hops = vec![0usize; n];
    let mut queue = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        if step.tool.as_deref().is_some_and(|t| any_match(&ctx.policy.sensitive_sources, t)) {
            source[i] = i;
            queue.push(i);
        }
    }
    let mut head = 0;
    while let Some(&t) = queue.get(head) {
        head += 1;
        for &j in &readers[offsets[t]..offsets[t + 1]] {
            if source[j] == NONE {
                source[j] = source[t];
                parent[j] = t;
                hops[j] = hops[t] + 1;
                queue.push(j);
            }
        }
    }
    if queue.is_empty() {
        return;
    }

    let taint = Taint { steps, source: &source, parent: &parent, hops: &hops };
    for (j, step) in steps.iter().enumerate() {
        let Some(tool) = step.tool.as_deref() else { continue };
        if !any_match(&ctx.policy.external_sinks, tool) {
            continue;
        }
        if step.requires_approval || any_match(&ctx.policy.approve_tools, tool) {
            continue;
        }
        for r in &step.refs {
            let Some(t) = target(j, r) else { continue };
            if source[t] == NONE {
                continue;
            }
            let msg = format!(
                "external sink `{tool}` receives {} from {}; send only what is needed through a \
                 reviewed step, or require approval",
                r.reference,
                taint.describe(t)
            );
            let path = format!("/steps/{j}{}", r.pointer);
            out.push(Finding::step(
                LintCode::SensitiveDataExposure,
                (j, step.id.as_str()),
                path,
                msg,
            ));
        }
    }
}

/// The result of the taint pass, for messages.
struct Taint<'a> {
    steps: &'a [Step],
    source: &'a [usize],
    parent: &'a [usize],
    hops: &'a [usize],
}

impl Taint<'_> {
    fn id(&self, i: usize) -> &str {
        self.steps.get(i).map_or("?", |s| s.id.as_str())
    }

    /// "sensitive source step 'a' (db.query)" plus ", via 'b' → 'c'" when `t` is not the source.
    fn describe(&self, t: usize) -> String {
        let src = self.source[t];
        let tool = self.steps.get(src).and_then(|s| s.tool.as_deref()).unwrap_or("?");
        let mut text = format!("sensitive source step '{}' (`{tool}`)", self.id(src));
        if t != src {
            // Walk back from `t` at most CHAIN_SHOWN steps; the walk is bounded, whatever the
            // chain's length.
            let mut via = Vec::new();
            let mut at = t;
            while at != src && at != NONE && via.len() < CHAIN_SHOWN {
                via.push(format!("'{}'", self.id(at)));
                at = self.parent[at];
            }
            via.reverse();
            let elided = self.hops[t] > via.len();
            text.push_str(", via ");
            if elided {
                text.push_str(&format!("… ({} steps) → ", self.hops[t]));
            }
            text.push_str(&via.join(" → "));
        }
        text
    }
}
