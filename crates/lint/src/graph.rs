//! The step graph: which step waits for which, through `depends_on` and through references.
//!
//! Lint uses it to find real cycles and to tell whether a referenced step is a stated (transitive)
//! dependency; the engine of a later phase reuses it to schedule steps. It is built once per plan
//! into flat index vectors (compressed rows: one offsets vector and one edge vector), so a
//! 100,000-step plan costs a handful of allocations, not one per step.
//!
//! Everything here is iterative: a 100,000-step chain is a 100,000-deep path, and a recursive
//! Tarjan or DFS would overflow the stack on it.
//!
//! Edges point from a step to what it waits for: `a -> b` means `a` depends on (or reads the
//! result of) `b`, so `b` must finish first.

use std::collections::{HashMap, VecDeque};

use pev_protocol::Plan;

#[path = "graph_reach.rs"]
mod reach;

pub use reach::DepSearch;

/// How a step comes to wait for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EdgeKind {
    /// Stated in `depends_on`.
    DependsOn,
    /// Implied by a `${id.result…}` / `{{id.result…}}` reference in the parameters.
    Reference,
}

/// One edge out of a step: the step waits for `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// The index of the step waited for.
    pub to: usize,
    pub kind: EdgeKind,
    /// Where the edge was written in the source step: the position in `depends_on`, or in
    /// `Step::refs` (whose entries carry their JSON pointer).
    pub at: usize,
}

/// A real cycle: a strongly connected component with more than one step, or a step that depends
/// on itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// The steps of the component, in plan order.
    pub members: Vec<usize>,
    /// One cycle through the component's first step, as `(from, edge)` pairs: the first `from`
    /// is `members[0]` and the last edge leads back to it. The shortest such cycle is chosen.
    pub path: Vec<(usize, Edge)>,
}

/// A depends_on entry or reference that gives no edge: it names no step, or (a reference) the
/// step itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dangling {
    /// The index of the step that wrote it.
    pub step: usize,
    pub kind: EdgeKind,
    /// The position in `depends_on` or in `Step::refs`.
    pub at: usize,
    /// A reference to the step's own id (rather than to an id no step has).
    pub own: bool,
}

/// Sentinel for "not visited" / "no label".
const NONE: usize = usize::MAX;

/// The step graph of one plan.
#[derive(Debug, Clone)]
pub struct StepGraph {
    /// All edges of step `i` are `edges[offsets[i]..offsets[i + 1]]`, one per distinct target:
    /// its depends_on edges in written order, then its references to other steps in order of
    /// first mention (a depends_on edge wins over a reference to the same step).
    offsets: Vec<usize>,
    edges: Vec<Edge>,
    /// The depends_on targets of step `i`, `deps[dep_offsets[i]..dep_offsets[i + 1]]`, sorted and
    /// distinct (a step that depends on itself keeps that self-edge).
    dep_offsets: Vec<usize>,
    deps: Vec<usize>,
    /// The steps waiting for step `i` (reverse of `edges`), for topological order and scheduling.
    rev_offsets: Vec<usize>,
    rev: Vec<usize>,
    labels: reach::TreeLabels,
    /// What resolved to no edge, in step order (depends_on before references within a step).
    dangling: Vec<Dangling>,
}

/// Resolves step ids to indices, trying cheap guesses before the map.
///
/// Plans mostly name a step a fixed distance back (the one just before, or the one eight steps
/// back in a generated pipeline), or the same step again; those steps were just visited, so
/// comparing against their ids is several times cheaper than a lookup in a 100,000-entry map,
/// which misses the cache on the bucket and again on the key. The guesses are the last step
/// found and the last few distances that hit. They are only trusted when ids are unique (the
/// map has one entry per step), because with duplicates the first step of an id must win.
pub(crate) struct Resolver<'p> {
    plan: &'p Plan,
    index: &'p HashMap<&'p str, usize>,
    unique: bool,
    last: usize,
    /// Recently useful distances back from the asking step, most recent first.
    distances: [usize; 4],
}

impl<'p> Resolver<'p> {
    pub(crate) fn new(plan: &'p Plan, index: &'p HashMap<&'p str, usize>) -> Self {
        let unique = index.len() == plan.steps.len();
        Self { plan, index, unique, last: NONE, distances: [1, NONE, NONE, NONE] }
    }

    /// The index of the (first) step named `name`, as seen from step `at`.
    pub(crate) fn resolve(&mut self, name: &str, at: usize) -> Option<usize> {
        if self.unique {
            let steps = &self.plan.steps;
            if steps.get(self.last).is_some_and(|s| same_id(s.id.as_str(), name)) {
                return Some(self.last);
            }
            for slot in 0..self.distances.len() {
                let guess = at.wrapping_sub(self.distances[slot]);
                if steps.get(guess).is_some_and(|s| same_id(s.id.as_str(), name)) {
                    self.distances[..=slot].rotate_right(1);
                    self.last = guess;
                    return Some(guess);
                }
            }
        }
        let found = self.index.get(name).copied()?;
        self.last = found;
        // A distance of 0 (a step naming itself) is kept like any other: it is a cycle, rare,
        // and guessing it again is as cheap as any guess.
        if let Some(d) = at.checked_sub(found) {
            self.distances.rotate_right(1);
            self.distances[0] = d;
        }
        Some(found)
    }
}

/// String equality that first compares the last bytes: generated ids (`step-000123`) share
/// their length and prefix, so a wrong guess is usually rejected without a call to memcmp.
fn same_id(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().last() == b.as_bytes().last() && a == b
}

/// Groups `(row, item)` pairs by row with a counting sort: O(n + pairs), and rows keep the
/// pairs' order (sources ascending, as they are produced). Rows out of range are dropped.
fn group(n: usize, pairs: &[(usize, usize)]) -> (Vec<usize>, Vec<usize>) {
    let mut offsets = vec![0usize; n + 1];
    for &(r, _) in pairs {
        if let Some(count) = offsets.get_mut(r + 1) {
            *count += 1;
        }
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    let mut next = offsets.clone();
    let mut items = vec![0usize; offsets[n]];
    for &(r, item) in pairs {
        if r < n {
            items[next[r]] = item;
            next[r] += 1;
        }
    }
    (offsets, items)
}

fn row<'a, T>(offsets: &[usize], items: &'a [T], i: usize) -> &'a [T] {
    match (offsets.get(i), offsets.get(i + 1)) {
        (Some(&s), Some(&e)) => items.get(s..e).unwrap_or(&[]),
        _ => &[],
    }
}

impl StepGraph {
    /// Builds the graph of `plan`, resolving ids with [`Plan::index`].
    pub fn new(plan: &Plan) -> Self {
        Self::with_index(plan, &plan.index())
    }

    /// Builds the graph of `plan` with an id index already at hand (the first step with an id
    /// wins). Dependencies and references to unknown ids are left out, as are references of a
    /// step to its own id: other checks report those.
    pub fn with_index(plan: &Plan, index: &HashMap<&str, usize>) -> Self {
        let n = plan.steps.len();
        let dep_count: usize = plan.steps.iter().map(|s| s.depends_on.len()).sum();
        let ref_count: usize = plan.steps.iter().map(|s| s.refs.len()).sum();
        let mut offsets = Vec::with_capacity(n + 1);
        let mut edges: Vec<Edge> = Vec::with_capacity(dep_count + ref_count);
        let mut dep_offsets = Vec::with_capacity(n + 1);
        let mut deps: Vec<usize> = Vec::with_capacity(dep_count);
        offsets.push(0);
        dep_offsets.push(0);
        let mut dangling = Vec::new();
        let mut resolver = Resolver::new(plan, index);
        // `seen[t] == i` once step i has an edge to t: one edge per target, depends_on first
        // (it is added first), then the first reference. No per-step sort or allocation.
        let mut seen = vec![NONE; n];
        let mut first_time = |to: usize, i: usize| {
            seen.get_mut(to).is_some_and(|mark| std::mem::replace(mark, i) != i)
        };
        for (i, step) in plan.steps.iter().enumerate() {
            let row_start = deps.len();
            for (k, dep) in step.depends_on.iter().enumerate() {
                match resolver.resolve(dep.as_str(), i) {
                    Some(to) => {
                        if first_time(to, i) {
                            edges.push(Edge { to, kind: EdgeKind::DependsOn, at: k });
                            deps.push(to);
                        }
                    }
                    None => dangling.push(Dangling {
                        step: i,
                        kind: EdgeKind::DependsOn,
                        at: k,
                        own: false,
                    }),
                }
            }
            if let Some(row) = deps.get_mut(row_start..) {
                row.sort_unstable();
            }
            for (k, r) in step.refs.iter().enumerate() {
                let own = r.reference.step == step.id;
                let to = if own { None } else { resolver.resolve(r.reference.step.as_str(), i) };
                match to {
                    Some(to) => {
                        if first_time(to, i) {
                            edges.push(Edge { to, kind: EdgeKind::Reference, at: k });
                        }
                    }
                    None => {
                        dangling.push(Dangling { step: i, kind: EdgeKind::Reference, at: k, own })
                    }
                }
            }
            offsets.push(edges.len());
            dep_offsets.push(deps.len());
        }

        let mut reverse: Vec<(usize, usize)> = Vec::with_capacity(edges.len());
        for i in 0..n {
            for e in row(&offsets, &edges, i) {
                reverse.push((e.to, i));
            }
        }
        let (rev_offsets, rev) = group(n, &reverse);

        let mut graph = Self {
            offsets,
            edges,
            dep_offsets,
            deps,
            rev_offsets,
            rev,
            labels: reach::TreeLabels::default(),
            dangling,
        };
        graph.labels = reach::TreeLabels::of(&graph);
        graph
    }

    /// The number of steps.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What step `i` waits for: one edge per distinct step, depends_on edges first.
    pub fn edges(&self, i: usize) -> &[Edge] {
        row(&self.offsets, &self.edges, i)
    }

    /// The steps named in step `i`'s depends_on that exist, sorted and distinct.
    pub fn depends_on(&self, i: usize) -> &[usize] {
        row(&self.dep_offsets, &self.deps, i)
    }

    /// The steps that wait for step `i` (through depends_on or a reference), sorted.
    pub fn dependents(&self, i: usize) -> &[usize] {
        row(&self.rev_offsets, &self.rev, i)
    }

    /// The depends_on entries and references that gave no edge, in step order.
    pub fn dangling(&self) -> &[Dangling] {
        &self.dangling
    }

    /// Strongly connected components (iterative Tarjan): the component number of every step.
    /// Components are numbered in the order Tarjan completes them, which is dependencies first.
    pub fn components(&self) -> Vec<usize> {
        let n = self.len();
        let mut index = vec![NONE; n];
        let mut low = vec![0usize; n];
        let mut on_stack = vec![false; n];
        let mut comp = vec![NONE; n];
        let mut stack: Vec<usize> = Vec::new();
        let mut call: Vec<(usize, usize)> = Vec::new();
        let mut next_index = 0;
        let mut next_comp = 0;
        for root in 0..n {
            if index[root] != NONE {
                continue;
            }
            index[root] = next_index;
            low[root] = next_index;
            next_index += 1;
            stack.push(root);
            on_stack[root] = true;
            call.push((root, 0));
            while let Some(&mut (v, ref mut cursor)) = call.last_mut() {
                if let Some(e) = self.edges(v).get(*cursor) {
                    *cursor += 1;
                    let w = e.to;
                    if index[w] == NONE {
                        index[w] = next_index;
                        low[w] = next_index;
                        next_index += 1;
                        stack.push(w);
                        on_stack[w] = true;
                        call.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                    continue;
                }
                call.pop();
                if low[v] == index[v] {
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp[w] = next_comp;
                        if w == v {
                            break;
                        }
                    }
                    next_comp += 1;
                }
                if let Some(&(parent, _)) = call.last() {
                    low[parent] = low[parent].min(low[v]);
                }
            }
        }
        comp
    }

    /// Every real cycle, ordered by its first step in plan order.
    pub fn cycles(&self) -> Vec<Cycle> {
        let comp = self.components();
        let count = comp.iter().filter(|&&c| c != NONE).map(|&c| c + 1).max().unwrap_or(0);
        let mut size = vec![0usize; count];
        for &c in &comp {
            if let Some(s) = size.get_mut(c) {
                *s += 1;
            }
        }
        let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut order: Vec<usize> = Vec::new();
        for (v, &c) in comp.iter().enumerate() {
            let big = size.get(c).copied().unwrap_or(0) > 1;
            if big || self.depends_on(v).binary_search(&v).is_ok() {
                let list = members.entry(c).or_default();
                if list.is_empty() {
                    order.push(c);
                }
                list.push(v);
            }
        }
        order
            .into_iter()
            .filter_map(|c| members.remove(&c))
            .map(|members| {
                let path = self.cycle_path(&members, &comp);
                Cycle { members, path }
            })
            .collect()
    }

    /// The shortest cycle through `members[0]` that stays inside its component (breadth-first).
    fn cycle_path(&self, members: &[usize], comp: &[usize]) -> Vec<(usize, Edge)> {
        let Some(&start) = members.first() else { return Vec::new() };
        let home = comp.get(start).copied().unwrap_or(NONE);
        let mut came_from: HashMap<usize, (usize, Edge)> = HashMap::new();
        let mut queue = VecDeque::from([start]);
        let mut closing: Option<(usize, Edge)> = None;
        'search: while let Some(v) = queue.pop_front() {
            for e in self.edges(v) {
                if comp.get(e.to).copied() != Some(home) {
                    continue;
                }
                if e.to == start {
                    closing = Some((v, *e));
                    break 'search;
                }
                if let std::collections::hash_map::Entry::Vacant(slot) = came_from.entry(e.to) {
                    slot.insert((v, *e));
                    queue.push_back(e.to);
                }
            }
        }
        let Some(last) = closing else { return Vec::new() };
        let mut path = vec![last];
        let mut at = last.0;
        while at != start {
            let Some(&step) = came_from.get(&at) else { break };
            path.push(step);
            at = step.0;
        }
        path.reverse();
        path
    }

    /// A topological order (every step after all the steps it waits for), or `None` when the
    /// graph has a cycle. Ties are broken by plan order (Kahn's algorithm with a FIFO queue).
    pub fn topological_order(&self) -> Option<Vec<usize>> {
        let n = self.len();
        let mut waiting: Vec<usize> = (0..n).map(|i| self.edges(i).len()).collect();
        let mut queue: VecDeque<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(v) = queue.pop_front() {
            order.push(v);
            for &w in self.dependents(v) {
                if let Some(count) = waiting.get_mut(w) {
                    *count = count.saturating_sub(1);
                    if *count == 0 {
                        queue.push_back(w);
                    }
                }
            }
        }
        (order.len() == n).then_some(order)
    }

    /// A reachability searcher over depends_on edges with its own reusable buffers.
    pub fn dep_search(&self) -> DepSearch<'_> {
        DepSearch::new(self)
    }
}

#[cfg(test)]
#[path = "graph_tests.rs"]
mod tests;
