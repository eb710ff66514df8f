use pev_protocol::{Plan, Step, StepId};
use serde_json::{Map, Value};

use super::*;

/// A plan from `(id, depends_on, referenced ids)`.
fn plan(steps: &[(&str, &[&str], &[&str])]) -> Plan {
    let steps = steps
        .iter()
        .map(|(id, deps, refs)| {
            let mut parameters = Map::new();
            for (k, r) in refs.iter().enumerate() {
                parameters.insert(format!("p{k}"), Value::String(format!("${{{r}.result.x}}")));
            }
            let mut step = Step {
                id: StepId::new(*id),
                depends_on: deps.iter().map(|d| StepId::new(*d)).collect(),
                parameters,
                ..Step::default()
            };
            step.index_references();
            step
        })
        .collect();
    Plan { goal: "g".into(), steps, ..Plan::default() }
}

fn chain(n: usize) -> Plan {
    let steps = (0..n)
        .map(|i| Step {
            id: StepId::new(format!("s{i}")),
            depends_on: if i == 0 { vec![] } else { vec![StepId::new(format!("s{}", i - 1))] },
            ..Step::default()
        })
        .collect();
    Plan { goal: "g".into(), steps, ..Plan::default() }
}

fn path_ids(p: &Plan, c: &Cycle) -> Vec<(String, EdgeKind)> {
    c.path.iter().map(|(from, e)| (p.steps[*from].id.0.clone(), e.kind)).collect()
}

#[test]
fn edges_are_deduplicated_and_prefer_depends_on() {
    let p = plan(&[("a", &[], &[]), ("b", &["a", "a", "zzz"], &["a", "b"])]);
    let g = StepGraph::new(&p);
    assert_eq!(g.len(), 2);
    assert_eq!(g.edges(1), &[Edge { to: 0, kind: EdgeKind::DependsOn, at: 0 }]);
    assert_eq!(g.depends_on(1), &[0]);
    assert_eq!(g.dependents(0), &[1]);
    assert!(g.edges(0).is_empty());
    assert!(g.edges(7).is_empty(), "out of range is empty, not a panic");
}

#[test]
fn reference_edges_point_at_their_ref() {
    let p = plan(&[("a", &[], &[]), ("b", &[], &[]), ("c", &[], &["b", "a"])]);
    let g = StepGraph::new(&p);
    assert_eq!(
        g.edges(2),
        &[
            Edge { to: 1, kind: EdgeKind::Reference, at: 0 },
            Edge { to: 0, kind: EdgeKind::Reference, at: 1 }
        ]
    );
    assert!(g.depends_on(2).is_empty());
}

#[test]
fn two_cycle_is_found_from_the_first_step() {
    let p = plan(&[("x", &[], &[]), ("a", &["b"], &[]), ("b", &["a"], &[])]);
    let g = StepGraph::new(&p);
    let cycles = g.cycles();
    assert_eq!(cycles.len(), 1);
    assert_eq!(cycles[0].members, vec![1, 2]);
    assert_eq!(
        path_ids(&p, &cycles[0]),
        vec![("a".into(), EdgeKind::DependsOn), ("b".into(), EdgeKind::DependsOn)]
    );
    assert_eq!(cycles[0].path.last().map(|(_, e)| e.to), Some(1));
    assert_eq!(g.topological_order(), None);
}

#[test]
fn three_cycle_through_a_reference() {
    let p = plan(&[("a", &["c"], &[]), ("b", &["a"], &[]), ("c", &[], &["b"])]);
    let cycles = StepGraph::new(&p).cycles();
    assert_eq!(cycles.len(), 1);
    assert_eq!(
        path_ids(&p, &cycles[0]),
        vec![
            ("a".into(), EdgeKind::DependsOn),
            ("c".into(), EdgeKind::Reference),
            ("b".into(), EdgeKind::DependsOn)
        ]
    );
}

#[test]
fn self_dependency_is_a_cycle_but_self_reference_is_no_edge() {
    let p = plan(&[("a", &["a"], &[]), ("b", &[], &["b"])]);
    let g = StepGraph::new(&p);
    let cycles = g.cycles();
    assert_eq!(cycles.len(), 1);
    assert_eq!(cycles[0].members, vec![0]);
    assert_eq!(cycles[0].path, vec![(0, Edge { to: 0, kind: EdgeKind::DependsOn, at: 0 })]);
    assert!(g.edges(1).is_empty());
}

#[test]
fn references_to_two_earlier_steps_are_no_cycle() {
    let p = plan(&[("a", &[], &[]), ("b", &[], &[]), ("c", &[], &["a", "b"])]);
    let g = StepGraph::new(&p);
    assert!(g.cycles().is_empty());
    assert_eq!(g.topological_order(), Some(vec![0, 1, 2]));
}

#[test]
fn two_separate_cycles_are_two_findings_in_plan_order() {
    let p = plan(&[
        ("p", &["q"], &[]),
        ("a", &["b"], &[]),
        ("b", &["c"], &[]),
        ("c", &["a"], &[]),
        ("q", &["p"], &[]),
    ]);
    let cycles = StepGraph::new(&p).cycles();
    assert_eq!(
        cycles.iter().map(|c| c.members.clone()).collect::<Vec<_>>(),
        [vec![0, 4], vec![1, 2, 3]]
    );
}

#[test]
fn topological_order_puts_dependencies_first() {
    let p = plan(&[("c", &["b"], &[]), ("a", &[], &[]), ("b", &[], &["a"])]);
    assert_eq!(StepGraph::new(&p).topological_order(), Some(vec![1, 2, 0]));
}

#[test]
fn transitive_dependency_through_a_merge() {
    // d depends on c and b; b depends on a; c is a root. d -> a only via its second dependency.
    let p = plan(&[
        ("a", &[], &[]),
        ("c", &[], &[]),
        ("b", &["a"], &[]),
        ("d", &["c", "b"], &[]),
        ("e", &["d"], &[]),
        ("x", &[], &[]),
    ]);
    let g = StepGraph::new(&p);
    let mut s = g.dep_search();
    assert!(s.is_transitive_dependency(3, 0));
    assert!(s.is_transitive_dependency(4, 0));
    assert!(s.is_transitive_dependency(4, 1));
    assert!(!s.is_transitive_dependency(4, 5));
    assert!(!s.is_transitive_dependency(0, 3), "direction matters");
    assert!(!s.is_transitive_dependency(2, 2), "no step depends on itself without a cycle");
    assert!(!s.is_transitive_dependency(2, 1));
}

#[test]
fn references_are_not_dependencies() {
    let p = plan(&[("a", &[], &[]), ("b", &[], &["a"]), ("c", &["b"], &[])]);
    let g = StepGraph::new(&p);
    let mut s = g.dep_search();
    assert!(!s.is_transitive_dependency(1, 0));
    assert!(!s.is_transitive_dependency(2, 0));
    assert!(s.is_transitive_dependency(2, 1));
}

#[test]
fn reachability_inside_a_dependency_cycle() {
    let p = plan(&[("a", &["b"], &[]), ("b", &["c"], &[]), ("c", &["a"], &[]), ("d", &[], &[])]);
    let g = StepGraph::new(&p);
    let mut s = g.dep_search();
    assert!(s.is_transitive_dependency(0, 2));
    assert!(s.is_transitive_dependency(0, 0));
    assert!(!s.is_transitive_dependency(0, 3));
    assert!(!s.is_transitive_dependency(3, 3));
}

#[test]
fn chain_of_100_000_does_not_overflow_and_answers_fast() {
    let p = chain(100_000);
    let g = StepGraph::new(&p);
    assert!(g.cycles().is_empty());
    let order = g.topological_order().unwrap_or_default();
    assert_eq!(order.len(), 100_000);
    assert_eq!(order.first(), Some(&0));
    let mut s = g.dep_search();
    // Every step against the first, and the reverse: answered from the tree labels.
    for i in 1..100_000 {
        assert!(s.is_transitive_dependency(i, 0));
    }
    assert!(!s.is_transitive_dependency(0, 99_999));
    assert!(s.is_transitive_dependency(99_999, 50_000));
}

#[test]
fn long_cycle_is_found_iteratively() {
    let mut p = chain(100_000);
    p.steps[0].depends_on.push(StepId::new("s99999"));
    let cycles = StepGraph::new(&p).cycles();
    assert_eq!(cycles.len(), 1);
    assert_eq!(cycles[0].members.len(), 100_000);
    assert_eq!(cycles[0].path.len(), 100_000);
}

#[test]
fn merging_chains_use_the_search_and_reuse_its_buffer() {
    // Two chains of 500 joined by a step with two dependencies, then a tail of 500.
    let mut steps: Vec<(String, Vec<String>)> = Vec::new();
    for side in ["l", "r"] {
        for i in 0..500 {
            let deps = if i == 0 { vec![] } else { vec![format!("{side}{}", i - 1)] };
            steps.push((format!("{side}{i}"), deps));
        }
    }
    steps.push(("m".into(), vec!["l499".into(), "r499".into()]));
    for i in 0..500 {
        let dep = if i == 0 { "m".to_owned() } else { format!("t{}", i - 1) };
        steps.push((format!("t{i}"), vec![dep]));
    }
    let p = Plan {
        goal: "g".into(),
        steps: steps
            .iter()
            .map(|(id, deps)| Step {
                id: StepId::new(id.as_str()),
                depends_on: deps.iter().map(|d| StepId::new(d.as_str())).collect(),
                ..Step::default()
            })
            .collect(),
        ..Plan::default()
    };
    let g = StepGraph::new(&p);
    let idx = p.index();
    let mut s = g.dep_search();
    for _ in 0..3 {
        assert!(s.is_transitive_dependency(idx["t499"], idx["r0"]));
        assert!(s.is_transitive_dependency(idx["t499"], idx["l0"]));
        assert!(!s.is_transitive_dependency(idx["l499"], idx["r0"]));
        assert!(!s.is_transitive_dependency(idx["t10"], idx["t20"]));
    }
}
