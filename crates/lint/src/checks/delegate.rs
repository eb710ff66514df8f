//! Delegated steps (a step carried out by a sub-agent, a child run): `DELEGATE_WITH_TOOL`,
//! `DELEGATE_EMPTY_GOAL`, `DELEGATE_SCOPE_ESCAPES`, `DELEGATE_SCOPE_OVERLAP` and
//! `DELEGATE_BUDGET_UNMEETABLE`.
//!
//! A scope is read lexically from the workspace root, as [`super::paths`] and the sandbox read
//! paths: `.` and empty components are nothing, `..` goes up one, and both `/` and `\` separate
//! components. What is left is a list of components (none: the whole workspace), and two scopes
//! overlap when one list is a prefix of the other, so `src` and `src2` do not, `src` and `src/a`
//! do, and the whole workspace overlaps everything.
//!
//! Two delegated steps may run at the same time when neither waits for the other, transitively,
//! through depends_on or references (the edges of [`crate::graph::StepGraph`]; depends_on alone,
//! what [`crate::graph::DepSearch`] answers, is not enough, since a reference orders steps too).
//! The question is asked of every pair of delegated steps whose scopes overlap, without a
//! transitive closure: the delegated steps are taken 64 at a time, and one pass over the
//! strongly connected components of the graph, dependencies first, gives every step the set of
//! those 64 it waits for as a bit mask (and one pass the other way, the set that waits for it).
//! Which of the 64 overlap a given scope comes from a trie of the scopes' components, in the same
//! bit masks. So a plan pays O(steps + edges) per 64 delegated steps, and nothing recurses.

use std::collections::HashMap;
use std::fmt::Write as _;

use pev_protocol::{DelegateMode, Delegation, Finding, LintCode, Step};

use super::paths;
use crate::Ctx;
use crate::graph::StepGraph;

/// How many overlapping steps one delegated step is reported against; past that, the last
/// finding says that there are more.
pub(super) const MAX_PER_STEP: usize = 4;
/// How many characters of a scope a message quotes.
const SHOWN: usize = 80;
/// pev's journal directory under the workspace root (the sandbox's reserved directory).
const RESERVED_DIR: &str = ".pev";

pub(crate) fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let steps = &ctx.plan.steps;
    if !steps.iter().any(|s| s.delegate.is_some()) {
        return;
    }
    let mut scoped: Vec<Scoped<'_>> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let Some(delegate) = &step.delegate else { continue };
        let at = (i, step.id.as_str());
        if let Some(tool) = &step.tool {
            out.push(Finding::step(
                LintCode::DelegateWithTool,
                at,
                format!("/steps/{i}/delegate"),
                format!(
                    "step `{}` sets both `tool` ({}) and `delegate`; a step is a tool call or a \
                     delegation to a sub-agent, not both",
                    step.id,
                    shown(tool)
                ),
            ));
        }
        if delegate.goal.trim().is_empty() {
            out.push(Finding::step(
                LintCode::DelegateEmptyGoal,
                at,
                format!("/steps/{i}/delegate/goal"),
                format!(
                    "step `{}` delegates with a blank goal; its child run has nothing to do",
                    step.id
                ),
            ));
        }
        match delegate.scope.as_deref() {
            None => scoped.push(Scoped { step: i, parts: Vec::new() }),
            Some(scope) => match read_scope(scope) {
                Ok(parts) => scoped.push(Scoped { step: i, parts }),
                Err(reasons) => out.push(Finding::step(
                    LintCode::DelegateScopeEscapes,
                    at,
                    format!("/steps/{i}/delegate/scope"),
                    format!(
                        "scope {} {}; a scope is a directory inside the workspace (`.` or no \
                         scope for all of it)",
                        shown(scope),
                        reasons.join(", ")
                    ),
                )),
            },
        }
        budget(delegate, at, out);
    }
    overlaps(ctx, &scoped, out);
}

/// A delegated step whose scope is inside the workspace: its normalised components (none for
/// the whole workspace).
struct Scoped<'a> {
    step: usize,
    parts: Vec<&'a str>,
}

/// A scope's normalised components, or why it is not a directory inside the workspace.
pub(super) fn read_scope(scope: &str) -> Result<Vec<&str>, Vec<&'static str>> {
    let mut reasons = Vec::new();
    if scope.trim().is_empty() {
        reasons.push("is blank");
    }
    if paths::is_absolute(scope) {
        reasons.push("is absolute");
    }
    if scope.starts_with('~') {
        reasons.push("starts with `~` (a home directory)");
    }
    if paths::climbs_out(scope) {
        reasons.push("climbs out of the workspace with `..`");
    }
    if scope.contains('\0') {
        reasons.push("holds a NUL byte");
    }
    let mut parts: Vec<&str> = Vec::new();
    for component in scope.split(['/', '\\']) {
        match component {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(component),
        }
    }
    if reasons.is_empty() && parts.first() == Some(&RESERVED_DIR) {
        reasons.push("is inside `.pev`, pev's journal directory");
    }
    if reasons.is_empty() { Ok(parts) } else { Err(reasons) }
}

/// A value quoted for a message (as a Rust string literal), cut to [`SHOWN`] characters.
fn shown(text: &str) -> String {
    let mut cut: String = text.chars().take(SHOWN).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

/// `DELEGATE_BUDGET_UNMEETABLE`, once per limit that can never be met.
fn budget(delegate: &Delegation, at: (usize, &str), out: &mut Vec<Finding>) {
    let (i, id) = at;
    let b = &delegate.budget;
    let mut emit = |field: &str, why: String| {
        out.push(Finding::step(
            LintCode::DelegateBudgetUnmeetable,
            at,
            format!("/steps/{i}/delegate/budget/{field}"),
            format!("step `{id}`'s child run can never be done within its budget: {why}"),
        ));
    };
    if let Some(usd) = b.max_usd.filter(|usd| !usd.is_finite() || *usd <= 0.0) {
        emit("max_usd", format!("max_usd {usd} is not a number above 0"));
    }
    if b.max_tokens == Some(0) {
        emit("max_tokens", "max_tokens is 0".into());
    }
    match b.max_turns {
        Some(0) => emit("max_turns", "max_turns is 0".into()),
        Some(1) if delegate.mode == DelegateMode::Pev => emit(
            "max_turns",
            "max_turns is 1, and a `pev`-mode child needs at least 2 model calls (a planner \
             call and an executor call); raise it, or use mode `loop`"
                .into(),
        ),
        _ => {}
    }
}

/// Marks "no node" / "no parent".
const NONE: usize = usize::MAX;

/// The scopes' components as a trie: node 0 is the workspace root, and every scope is the node
/// at the end of its components.
struct Trie {
    parent: Vec<usize>,
    /// The node of each entry of `scoped`.
    node_of: Vec<usize>,
}

impl Trie {
    fn of(scoped: &[Scoped<'_>]) -> Self {
        let mut parent = vec![NONE];
        let mut children: HashMap<(usize, &str), usize> = HashMap::new();
        let mut node_of = Vec::with_capacity(scoped.len());
        for s in scoped {
            let mut node = 0;
            for &part in &s.parts {
                node = *children.entry((node, part)).or_insert_with(|| {
                    parent.push(node);
                    parent.len() - 1
                });
            }
            node_of.push(node);
        }
        Self { parent, node_of }
    }

    fn len(&self) -> usize {
        self.parent.len()
    }

    /// Calls `f` on `node` and each of its ancestors up to the root.
    fn up(&self, mut node: usize, mut f: impl FnMut(usize)) {
        while node != NONE {
            f(node);
            node = self.parent.get(node).copied().unwrap_or(NONE);
        }
    }

    /// Whether any two scopes overlap (one node at or below another's).
    fn any_overlap(&self) -> bool {
        let mut below = vec![0usize; self.len()];
        for &node in &self.node_of {
            self.up(node, |p| below[p] += 1);
        }
        self.node_of.iter().any(|&node| below.get(node).is_some_and(|&n| n >= 2))
    }
}

/// The strongly connected components of the step graph, dependencies first, with their members.
struct Components {
    comp: Vec<usize>,
    /// The members of component `c` are `members[offsets[c]..offsets[c + 1]]`.
    offsets: Vec<usize>,
    members: Vec<usize>,
}

impl Components {
    fn of(graph: &StepGraph) -> Self {
        let comp = graph.components();
        let count = comp.iter().filter(|&&c| c != NONE).map(|&c| c + 1).max().unwrap_or(0);
        let mut offsets = vec![0usize; count + 1];
        for &c in &comp {
            if let Some(slot) = offsets.get_mut(c.wrapping_add(1)) {
                *slot += 1;
            }
        }
        for c in 0..count {
            offsets[c + 1] += offsets[c];
        }
        let mut next = offsets.clone();
        let mut members = vec![0usize; offsets[count]];
        for (v, &c) in comp.iter().enumerate() {
            if let Some(at) = next.get_mut(c) {
                members[*at] = v;
                *at += 1;
            }
        }
        Self { comp, offsets, members }
    }

    fn count(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    fn members(&self, c: usize) -> &[usize] {
        match (self.offsets.get(c), self.offsets.get(c + 1)) {
            (Some(&s), Some(&e)) => self.members.get(s..e).unwrap_or(&[]),
            _ => &[],
        }
    }

    fn of_step(&self, v: usize) -> usize {
        self.comp.get(v).copied().unwrap_or(NONE)
    }
}

/// `DELEGATE_SCOPE_OVERLAP`: pairs of delegated steps that may run at the same time with
/// overlapping scopes, reported at the later step of each pair, at most [`MAX_PER_STEP`] times
/// per step.
fn overlaps(ctx: &Ctx<'_>, scoped: &[Scoped<'_>], out: &mut Vec<Finding>) {
    if scoped.len() < 2 {
        return;
    }
    let trie = Trie::of(scoped);
    if !trie.any_overlap() {
        return;
    }
    let plan = ctx.plan;
    let graph = StepGraph::with_index(plan, ctx.index());
    let comps = Components::of(&graph);
    let n = graph.len();

    // The chunk's bit of each step (0 for steps outside the chunk), the chunk's steps at or
    // below each trie node, the chunk's steps exactly at each node, and per component the
    // chunk's steps it waits for (`waits`) and that wait for it (`waited`).
    let mut bit_of = vec![0u64; n];
    let mut below = vec![0u64; trie.len()];
    let mut exact = vec![0u64; trie.len()];
    let mut waits = vec![0u64; comps.count()];
    let mut waited = vec![0u64; comps.count()];
    // The pairs found, (later, earlier) as positions in `scoped`, at most MAX_PER_STEP + 1 per
    // later step (one more to know that there are more).
    let mut found: Vec<(usize, usize)> = Vec::new();
    let mut per_step = vec![0usize; scoped.len()];

    for start in (0..scoped.len()).step_by(64) {
        let chunk = scoped.get(start..).unwrap_or(&[]);
        let chunk = chunk.get(..64).unwrap_or(chunk);
        for (k, s) in chunk.iter().enumerate() {
            let bit = 1u64 << k;
            if let Some(b) = bit_of.get_mut(s.step) {
                *b |= bit;
            }
            let node = trie.node_of.get(start + k).copied().unwrap_or(0);
            if let Some(e) = exact.get_mut(node) {
                *e |= bit;
            }
            trie.up(node, |p| below[p] |= bit);
        }
        for c in 0..comps.count() {
            let mut acc = 0u64;
            for &v in comps.members(c) {
                for e in graph.edges(v) {
                    acc |= bit_of.get(e.to).copied().unwrap_or(0);
                    let to = comps.of_step(e.to);
                    if to != c {
                        acc |= waits.get(to).copied().unwrap_or(0);
                    }
                }
            }
            waits[c] = acc;
        }
        for c in (0..comps.count()).rev() {
            let mut acc = 0u64;
            for &v in comps.members(c) {
                for &w in graph.dependents(v) {
                    acc |= bit_of.get(w).copied().unwrap_or(0);
                    let from = comps.of_step(w);
                    if from != c {
                        acc |= waited.get(from).copied().unwrap_or(0);
                    }
                }
            }
            waited[c] = acc;
        }

        for (q, later) in scoped.iter().enumerate().skip(start + 1) {
            if per_step[q] > MAX_PER_STEP {
                continue;
            }
            // Only chunk steps before `later` in plan order.
            let earlier = match q - start {
                k if k < 64 => (1u64 << k) - 1,
                _ => u64::MAX,
            };
            let c = comps.of_step(later.step);
            let related = waits.get(c).copied().unwrap_or(0) | waited.get(c).copied().unwrap_or(0);
            let mut candidates = earlier & !related;
            if candidates == 0 {
                continue;
            }
            let node = trie.node_of.get(q).copied().unwrap_or(0);
            let mut overlapping = below.get(node).copied().unwrap_or(0);
            trie.up(node, |p| overlapping |= exact[p]);
            candidates &= overlapping;
            while candidates != 0 && per_step[q] <= MAX_PER_STEP {
                let k = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                found.push((q, start + k));
                per_step[q] += 1;
            }
        }

        for (k, s) in chunk.iter().enumerate() {
            if let Some(b) = bit_of.get_mut(s.step) {
                *b = 0;
            }
            let node = trie.node_of.get(start + k).copied().unwrap_or(0);
            if let Some(e) = exact.get_mut(node) {
                *e = 0;
            }
            trie.up(node, |p| below[p] = 0);
        }
    }

    found.sort_unstable();
    for pairs in found.chunk_by(|a, b| a.0 == b.0) {
        let more = pairs.len() > MAX_PER_STEP;
        let listed = pairs.get(..MAX_PER_STEP).unwrap_or(pairs);
        for (n, &(q, p)) in listed.iter().enumerate() {
            let (Some(first), Some(second)) = (scoped.get(p), scoped.get(q)) else { continue };
            let more = more && n + 1 == listed.len();
            out.extend(overlap_finding(ctx, first, second, more));
        }
    }
}

/// The scope a delegated step wrote.
fn scope_of(step: &Step) -> Option<&str> {
    step.delegate.as_ref().and_then(|d| d.scope.as_deref())
}

/// The finding for `first` and `second` (later in plan order), at `second`'s scope.
fn overlap_finding(
    ctx: &Ctx<'_>,
    first: &Scoped<'_>,
    second: &Scoped<'_>,
    more: bool,
) -> Option<Finding> {
    let a = ctx.plan.steps.get(first.step)?;
    let b = ctx.plan.steps.get(second.step)?;
    let describe = |scope: Option<&str>| match scope {
        Some(s) => format!("scope {}", shown(s)),
        None => "no scope: the whole workspace".to_owned(),
    };
    let relation = if first.parts == second.parts {
        "they are the same directory".to_owned()
    } else if second.parts.starts_with(&first.parts) {
        format!("`{}`'s is inside `{}`'s", b.id, a.id)
    } else {
        format!("`{}`'s is inside `{}`'s", a.id, b.id)
    };
    let mut msg = format!(
        "delegated steps `{}` ({}) and `{}` ({}) have overlapping scopes ({relation}) and \
         neither waits for the other (through depends_on or references), so their child runs \
         may change the same files at the same time",
        a.id,
        describe(scope_of(a)),
        b.id,
        describe(scope_of(b)),
    );
    if more {
        let _ = write!(
            msg,
            "; more delegated steps overlap `{}`'s scope (only the first {MAX_PER_STEP} are listed)",
            b.id
        );
    }
    let pointer = match scope_of(b) {
        Some(_) => format!("/steps/{}/delegate/scope", second.step),
        None => format!("/steps/{}/delegate", second.step),
    };
    Some(Finding::step(LintCode::DelegateScopeOverlap, (second.step, b.id.as_str()), pointer, msg))
}

#[cfg(test)]
#[path = "delegate_tests.rs"]
mod tests;
