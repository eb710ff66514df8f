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

/// How a step comes to wait for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EdgeKind {
    /// Stated in `depends_on`.
    DependsOn,
    /// Implied by a `${id.result…}` / `{{id.result…}}` reference in the parameters.
    Reference,
}

impl EdgeKind {
    /// The word used in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DependsOn => "depends_on",
            Self::Reference => "reference",
        }
    }
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

/// Sentinel for "not visited" / "no label".
const NONE: usize = usize::MAX;

/// The step graph of one plan.
#[derive(Debug, Clone)]
pub struct StepGraph {
    /// All edges of step `i` are `edges[offsets[i]..offsets[i + 1]]`, one per distinct target,
    /// sorted by target; a depends_on edge wins over a reference to the same step.
    offsets: Vec<usize>,
    edges: Vec<Edge>,
    /// The depends_on targets of step `i`, `deps[dep_offsets[i]..dep_offsets[i + 1]]`, sorted and
    /// distinct (a step that depends on itself keeps that self-edge).
    dep_offsets: Vec<usize>,
    deps: Vec<usize>,
    /// The steps waiting for step `i` (reverse of `edges`), for topological order and scheduling.
    rev_offsets: Vec<usize>,
    rev: Vec<usize>,
    labels: TreeLabels,
}

/// Pre/post-order numbers of the "first dependency" forest, for O(1) reachability answers.
///
/// Every step's first depends_on target is its parent; a step is a tree ancestor of another only
/// if it is a transitive dependency of it. A step whose whole dependency closure is its chain of
/// ancestors (each step on the way has at most one dependency) is `exact`: for it the ancestor
/// test is the whole answer. Steps on or behind a depends_on cycle get no label.
#[derive(Debug, Clone, Default)]
struct TreeLabels {
    enter: Vec<usize>,
    exit: Vec<usize>,
    exact: Vec<bool>,
}

impl TreeLabels {
    /// Whether `a` is a proper ancestor of `d`; `None` when either has no label.
    fn is_ancestor(&self, a: usize, d: usize) -> Option<bool> {
        let (ea, xa) = (*self.enter.get(a)?, *self.exit.get(a)?);
        let (ed, xd) = (*self.enter.get(d)?, *self.exit.get(d)?);
        if ea == NONE || ed == NONE {
            return None;
        }
        Some(a != d && ea <= ed && xd <= xa)
    }

    fn is_exact(&self, v: usize) -> bool {
        self.exact.get(v).copied().unwrap_or(false)
    }
}

/// Resolves step ids to indices, trying cheap guesses before the map.
///
/// Plans mostly name the step just before, or the step named last; comparing against those two
/// ids is several times cheaper than a lookup in a 100,000-entry map, which misses the cache on
/// the bucket and again on the key. The guesses are only trusted when ids are unique (the map
/// has one entry per step), because with duplicates the first step of an id must win.
struct Resolver<'p> {
    plan: &'p Plan,
    index: &'p HashMap<&'p str, usize>,
    unique: bool,
    last: usize,
}

impl<'p> Resolver<'p> {
    fn new(plan: &'p Plan, index: &'p HashMap<&'p str, usize>) -> Self {
        Self { plan, index, unique: index.len() == plan.steps.len(), last: NONE }
    }

    fn resolve(&mut self, name: &str, at: usize) -> Option<usize> {
        if self.unique {
            for guess in [at.wrapping_sub(1), self.last] {
                if self.plan.steps.get(guess).is_some_and(|s| s.id.as_str() == name) {
                    self.last = guess;
                    return Some(guess);
                }
            }
        }
        let found = self.index.get(name).copied();
        if let Some(i) = found {
            self.last = i;
        }
        found
    }
}

/// Builds compressed rows from per-row items produced in row order.
fn compress<T>(n: usize, rows: impl Iterator<Item = (usize, T)>) -> (Vec<usize>, Vec<T>) {
    let mut offsets = Vec::with_capacity(n + 1);
    let mut items = Vec::new();
    let mut row = 0;
    offsets.push(0);
    for (r, item) in rows {
        while row < r {
            offsets.push(items.len());
            row += 1;
        }
        items.push(item);
    }
    while offsets.len() <= n {
        offsets.push(items.len());
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
        let mut scratch: Vec<(usize, EdgeKind, usize)> = Vec::new();
        let mut all: Vec<(usize, Edge)> = Vec::new();
        let mut deps: Vec<(usize, usize)> = Vec::new();
        let mut resolver = Resolver::new(plan, index);
        for (i, step) in plan.steps.iter().enumerate() {
            scratch.clear();
            for (k, dep) in step.depends_on.iter().enumerate() {
                if let Some(to) = resolver.resolve(dep.as_str(), i) {
                    scratch.push((to, EdgeKind::DependsOn, k));
                }
            }
            for (k, r) in step.refs.iter().enumerate() {
                if r.reference.step == step.id {
                    continue;
                }
                if let Some(to) = resolver.resolve(r.reference.step.as_str(), i) {
                    scratch.push((to, EdgeKind::Reference, k));
                }
            }
            // Sorting by (target, kind, position) puts the depends_on edge, then the first
            // mention, ahead of the others to the same target; dedup keeps that one.
            scratch.sort_unstable();
            scratch.dedup_by_key(|e| e.0);
            for &(to, kind, at) in &scratch {
                all.push((i, Edge { to, kind, at }));
                if kind == EdgeKind::DependsOn {
                    deps.push((i, to));
                }
            }
        }
        let (offsets, edges) = compress(n, all.into_iter());
        let (dep_offsets, deps) = compress(n, deps.into_iter());

        let mut reverse: Vec<(usize, usize)> = Vec::with_capacity(edges.len());
        for i in 0..n {
            for e in row(&offsets, &edges, i) {
                reverse.push((e.to, i));
            }
        }
        reverse.sort_unstable();
        let (rev_offsets, rev) = compress(n, reverse.into_iter());

        let mut graph = Self {
            offsets,
            edges,
            dep_offsets,
            deps,
            rev_offsets,
            rev,
            labels: TreeLabels::default(),
        };
        graph.labels = graph.tree_labels();
        graph
    }

    /// The number of steps.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What step `i` waits for: one edge per distinct step, depends_on edges preferred.
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

    /// Labels the forest in which each step's parent is its first dependency.
    fn tree_labels(&self) -> TreeLabels {
        let n = self.len();
        let mut children: Vec<(usize, usize)> = Vec::new();
        for v in 0..n {
            if let Some(&p) = self.depends_on(v).first()
                && p != v
            {
                children.push((p, v));
            }
        }
        children.sort_unstable();
        let (child_offsets, kids) = compress(n, children.into_iter());

        let mut labels =
            TreeLabels { enter: vec![NONE; n], exit: vec![NONE; n], exact: vec![false; n] };
        let mut clock = 0;
        let mut stack: Vec<(usize, usize)> = Vec::new();
        for root in (0..n).filter(|&v| self.depends_on(v).is_empty()) {
            labels.enter[root] = clock;
            labels.exact[root] = true;
            clock += 1;
            stack.push((root, 0));
            while let Some(&mut (v, ref mut cursor)) = stack.last_mut() {
                if let Some(&c) = row(&child_offsets, &kids, v).get(*cursor) {
                    *cursor += 1;
                    labels.enter[c] = clock;
                    clock += 1;
                    labels.exact[c] = labels.exact[v] && self.depends_on(c).len() == 1;
                    stack.push((c, 0));
                } else {
                    labels.exit[v] = clock;
                    clock += 1;
                    stack.pop();
                }
            }
        }
        labels
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
        DepSearch { graph: self, stamps: Vec::new(), current: 0, queue: VecDeque::new() }
    }
}

/// Answers "does `from` transitively depend on `to`?" over depends_on edges only (references do
/// not count: they order execution but are not a stated dependency).
///
/// Keeps a visited-stamp buffer between queries, so a query costs what it explores and never
/// clears an n-sized buffer; chains and trees are answered in O(1) from the tree labels.
#[derive(Debug)]
pub struct DepSearch<'g> {
    graph: &'g StepGraph,
    stamps: Vec<u32>,
    current: u32,
    queue: VecDeque<usize>,
}

impl DepSearch<'_> {
    /// Whether there is a non-empty path of depends_on edges from `from` to `to`.
    pub fn is_transitive_dependency(&mut self, from: usize, to: usize) -> bool {
        let g = self.graph;
        if g.depends_on(from).binary_search(&to).is_ok() {
            return true;
        }
        let labels = &g.labels;
        if from != to {
            if labels.is_ancestor(to, from) == Some(true) {
                return true;
            }
            if labels.is_exact(from) {
                return false;
            }
        }
        self.next_stamp();
        self.queue.clear();
        self.queue.extend(g.depends_on(from));
        while let Some(v) = self.queue.pop_front() {
            if v == to {
                return true;
            }
            let Some(stamp) = self.stamps.get_mut(v) else { continue };
            if *stamp == self.current {
                continue;
            }
            *stamp = self.current;
            // An exact step's closure is its ancestor chain: answer for it without walking it.
            if labels.is_exact(v) {
                if labels.is_ancestor(to, v) == Some(true) {
                    return true;
                }
                continue;
            }
            self.queue.extend(g.depends_on(v));
        }
        false
    }

    fn next_stamp(&mut self) {
        if self.stamps.len() != self.graph.len() {
            self.stamps = vec![0; self.graph.len()];
            self.current = 0;
        }
        if self.current == u32::MAX {
            self.stamps.fill(0);
            self.current = 0;
        }
        self.current += 1;
    }
}

#[cfg(test)]
#[path = "graph_tests.rs"]
mod tests;
