//! Reachability over depends_on edges, for [`super::StepGraph`]: "does step A (transitively)
//! depend on step B?", asked once per reference by lint and per ready-check by a scheduler.
//!
//! Two layers. Tree labels (pre/post-order numbers of the forest in which every step's parent
//! is its first dependency) answer chains and trees in O(1), which is the common shape of a
//! plan. Anything else is a breadth-first search with a visited-stamp buffer that is reused
//! between queries (a new stamp value instead of clearing n entries), which stops at steps
//! whose closure the labels already describe. There is never an O(n^2) transitive closure.

use std::collections::VecDeque;

use super::{NONE, StepGraph, group, row};

/// Pre/post-order numbers of the "first dependency" forest, for O(1) reachability answers.
///
/// Every step's first depends_on target is its parent; a step is a tree ancestor of another only
/// if it is a transitive dependency of it. A step whose whole dependency closure is its chain of
/// ancestors (each step on the way has at most one dependency) is `exact`: for it the ancestor
/// test is the whole answer. Steps on or behind a depends_on cycle get no label.
#[derive(Debug, Clone, Default)]
pub(super) struct TreeLabels {
    enter: Vec<usize>,
    exit: Vec<usize>,
    exact: Vec<bool>,
}

impl TreeLabels {
    /// Labels the forest in which each step's parent is its first dependency.
    pub(super) fn of(graph: &StepGraph) -> Self {
        let n = graph.len();
        let mut children: Vec<(usize, usize)> = Vec::new();
        for v in 0..n {
            if let Some(&p) = graph.depends_on(v).first()
                && p != v
            {
                children.push((p, v));
            }
        }
        let (child_offsets, kids) = group(n, &children);

        let mut labels =
            TreeLabels { enter: vec![NONE; n], exit: vec![NONE; n], exact: vec![false; n] };
        let mut clock = 0;
        let mut stack: Vec<(usize, usize)> = Vec::new();
        for root in (0..n).filter(|&v| graph.depends_on(v).is_empty()) {
            labels.enter[root] = clock;
            labels.exact[root] = true;
            clock += 1;
            stack.push((root, 0));
            while let Some(&mut (v, ref mut cursor)) = stack.last_mut() {
                if let Some(&c) = row(&child_offsets, &kids, v).get(*cursor) {
                    *cursor += 1;
                    labels.enter[c] = clock;
                    clock += 1;
                    labels.exact[c] = labels.exact[v] && graph.depends_on(c).len() == 1;
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

    /// Whether `a` is a proper ancestor of `d`; `None` when either has no label.
    pub(super) fn is_ancestor(&self, a: usize, d: usize) -> Option<bool> {
        let (ea, xa) = (*self.enter.get(a)?, *self.exit.get(a)?);
        let (ed, xd) = (*self.enter.get(d)?, *self.exit.get(d)?);
        if ea == NONE || ed == NONE {
            return None;
        }
        Some(a != d && ea <= ed && xd <= xa)
    }

    pub(super) fn is_exact(&self, v: usize) -> bool {
        self.exact.get(v).copied().unwrap_or(false)
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

impl<'g> DepSearch<'g> {
    pub(super) fn new(graph: &'g StepGraph) -> Self {
        Self { graph, stamps: Vec::new(), current: 0, queue: VecDeque::new() }
    }

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
