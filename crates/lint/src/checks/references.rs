//! Cycles and references: `LOOP_DETECTED`, `UNKNOWN_REFERENCE`, `REFERENCE_NOT_DEPENDENCY`.
//!
//! A cycle is a real one in the step graph (depends_on plus references), found by the iterative
//! SCC search of [`crate::graph`]; mentioning two other steps is not a cycle. A reference to a
//! step that exists but is not a stated (transitive) dependency still orders execution, so it is
//! only a warning: plan-lint-format plans have no depends_on at all and must stay usable.

use std::fmt::Write as _;

use pev_protocol::{Finding, LintCode, Plan};

use crate::Ctx;
use crate::graph::{Cycle, Edge, EdgeKind, StepGraph};

/// How many steps of a long cycle the message lists before eliding the rest.
const MAX_LISTED: usize = 12;

pub(crate) fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let plan = ctx.plan;
    let graph = StepGraph::with_index(plan, ctx.index());
    for cycle in graph.cycles() {
        if let Some(finding) = loop_finding(plan, &cycle) {
            out.push(finding);
        }
    }
    unknown_references(plan, &graph, out);
    references_not_dependencies(plan, &graph, out);
}

/// The JSON pointer where `from` states the edge.
fn edge_pointer(plan: &Plan, from: usize, edge: &Edge) -> String {
    match edge.kind {
        EdgeKind::DependsOn => format!("/steps/{from}/depends_on/{}", edge.at),
        EdgeKind::Reference => {
            let inner = plan
                .steps
                .get(from)
                .and_then(|s| s.refs.get(edge.at))
                .map_or("/parameters", |r| r.pointer.as_str());
            format!("/steps/{from}{inner}")
        }
    }
}

fn step_id(plan: &Plan, i: usize) -> &str {
    plan.steps.get(i).map_or("?", |s| s.id.as_str())
}

/// One finding for a cycle, at its first step in plan order.
fn loop_finding(plan: &Plan, cycle: &Cycle) -> Option<Finding> {
    let &(start, first_edge) = cycle.path.first()?;
    let start_id = step_id(plan, start);
    let mut chain = String::from(start_id);
    for (listed, (_, edge)) in cycle.path.iter().enumerate() {
        if listed + 1 == MAX_LISTED && cycle.path.len() > MAX_LISTED {
            let hidden = cycle.path.len() - MAX_LISTED;
            let _ = write!(chain, " -> … ({hidden} more) …");
            if let Some((_, last)) = cycle.path.last() {
                let _ = write!(chain, " -> {}", step_id(plan, last.to));
            }
            break;
        }
        let _ = write!(chain, " -> {}", step_id(plan, edge.to));
    }
    let has = |kind: EdgeKind| cycle.path.iter().any(|(_, e)| e.kind == kind);
    let through = match (has(EdgeKind::DependsOn), has(EdgeKind::Reference)) {
        (true, false) => "through depends_on".to_owned(),
        (false, true) => "through references".to_owned(),
        _ => {
            let mut how = String::from("through depends_on and references: ");
            for (n, (from, edge)) in cycle.path.iter().take(MAX_LISTED).enumerate() {
                let verb = match edge.kind {
                    EdgeKind::DependsOn => "depends_on",
                    EdgeKind::Reference => "references",
                };
                let sep = if n == 0 { "" } else { ", " };
                let _ =
                    write!(how, "{sep}{} {verb} {}", step_id(plan, *from), step_id(plan, edge.to));
            }
            if cycle.path.len() > MAX_LISTED {
                how.push_str(", …");
            }
            how
        }
    };
    let msg = if cycle.path.len() == 1 {
        format!("step `{start_id}` waits for itself: {chain} ({through}); it can never start")
    } else {
        format!(
            "{} steps wait for each other in a cycle: {chain} ({through}); none of them can start",
            cycle.members.len()
        )
    };
    Some(Finding::step(
        LintCode::LoopDetected,
        (start, start_id),
        edge_pointer(plan, start, &first_edge),
        msg,
    ))
}

/// References to ids that are not in the plan, or to the step itself (the graph has already
/// resolved every reference, so this costs nothing per step).
fn unknown_references(plan: &Plan, graph: &StepGraph, out: &mut Vec<Finding>) {
    for d in graph.dangling().iter().filter(|d| d.kind == EdgeKind::Reference) {
        let Some(step) = plan.steps.get(d.step) else { continue };
        let Some(r) = step.refs.get(d.at) else { continue };
        let target = r.reference.step.as_str();
        let msg = if d.own {
            format!(
                "`{}` reads step `{target}`'s own result, which does not exist while it runs",
                r.reference
            )
        } else {
            format!("`{}` refers to step `{target}`, which is not in the plan", r.reference)
        };
        out.push(Finding::step(
            LintCode::UnknownReference,
            (d.step, step.id.as_str()),
            format!("/steps/{}{}", d.step, r.pointer),
            msg,
        ));
    }
}

/// References to existing steps that the step does not (transitively) depend on, once per
/// referenced step, at its first mention.
fn references_not_dependencies(plan: &Plan, graph: &StepGraph, out: &mut Vec<Finding>) {
    let mut search = graph.dep_search();
    let mut missing: Vec<Edge> = Vec::new();
    for (i, step) in plan.steps.iter().enumerate() {
        missing.clear();
        // A depends_on edge to the same target wins in the graph, so a Reference edge already
        // means "not a direct dependency".
        for edge in graph.edges(i) {
            if edge.kind == EdgeKind::Reference && !search.is_transitive_dependency(i, edge.to) {
                missing.push(*edge);
            }
        }
        missing.sort_unstable_by_key(|e| e.at);
        for edge in &missing {
            let Some(r) = step.refs.get(edge.at) else { continue };
            let target = step_id(plan, edge.to);
            out.push(Finding::step(
                LintCode::ReferenceNotDependency,
                (i, step.id.as_str()),
                format!("/steps/{i}{}", r.pointer),
                format!(
                    "`{}` reads step `{target}`, which is not among `{}`'s depends_on (direct or \
                     transitive); add `{target}` to depends_on to state the order",
                    r.reference, step.id
                ),
            ));
        }
    }
}
