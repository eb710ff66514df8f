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
                parameters: parameters.into(),
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
    c.path.iter().map(|(from, e)| (p.steps[*from].id.as_str().to_owned(), e.kind)).collect()
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

/// A plan from `(id, depends_on)` with owned strings.
fn dep_plan(steps: &[(String, Vec<String>)]) -> Plan {
    let steps = steps
        .iter()
        .map(|(id, deps)| Step {
            id: StepId::new(id.as_str()),
            depends_on: deps.iter().map(|d| StepId::new(d.as_str())).collect(),
            ..Step::default()
        })
        .collect();
    Plan { goal: "g".into(), steps, ..Plan::default() }
}

/// Asserts that the graph of `p` is acyclic in every answer it gives: no cycle, one component
/// per step numbered dependencies first, and a topological order that is a permutation with
/// every step after what it waits for.
fn assert_acyclic(p: &Plan) {
    let order: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
    let g = StepGraph::new(p);
    let n = g.len();
    let cycles = g.cycles();
    assert!(cycles.is_empty(), "false cycle(s) {cycles:?} in a DAG listed as {order:?}");
    let comp = g.components();
    let mut seen = vec![false; n];
    for (v, &c) in comp.iter().enumerate() {
        assert!(c < n, "step {v} got no component (listed as {order:?}): {comp:?}");
        assert!(!seen[c], "two steps share component {c} in a DAG listed as {order:?}");
        seen[c] = true;
        for e in g.edges(v) {
            assert!(comp[e.to] < c, "{v} -> {} numbered out of order in {order:?}", e.to);
        }
    }
    let topo = g.topological_order().unwrap_or_else(|| panic!("no order for {order:?}"));
    assert_eq!(topo.len(), n, "{topo:?}");
    let mut position = vec![usize::MAX; n];
    for (k, &v) in topo.iter().enumerate() {
        assert_eq!(position[v], usize::MAX, "step {v} twice in {topo:?}");
        position[v] = k;
    }
    for v in 0..n {
        for e in g.edges(v) {
            assert!(position[e.to] < position[v], "{v} before {} in {topo:?}", e.to);
        }
    }
}

/// Every ordering of `0..n` (Heap's algorithm, iterative).
fn permutations(n: usize) -> Vec<Vec<usize>> {
    let mut items: Vec<usize> = (0..n).collect();
    let mut out = vec![items.clone()];
    let mut c = vec![0usize; n];
    let mut i = 1;
    while i < n {
        if c[i] < i {
            if i % 2 == 0 {
                items.swap(0, i)
            } else {
                items.swap(c[i], i)
            }
            out.push(items.clone());
            c[i] += 1;
            i = 1;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    out
}

#[test]
fn a_diamond_is_no_cycle_in_any_listing_order() {
    // d waits for b and c, which both wait for a.
    let diamond: [(&str, &[&str]); 4] =
        [("a", &[]), ("b", &["a"]), ("c", &["a"]), ("d", &["b", "c"])];
    let orders = permutations(4);
    assert_eq!(orders.len(), 24);
    for order in orders {
        let listed: Vec<(&str, &[&str])> = order.iter().map(|&k| diamond[k]).collect();
        // Through depends_on, through references, and mixed.
        let deps: Vec<(&str, &[&str], &[&str])> =
            listed.iter().map(|&(id, d)| (id, d, &[][..])).collect();
        assert_acyclic(&plan(&deps));
        let refs: Vec<(&str, &[&str], &[&str])> =
            listed.iter().map(|&(id, d)| (id, &[][..], d)).collect();
        assert_acyclic(&plan(&refs));
        let mixed: Vec<(&str, &[&str], &[&str])> = listed
            .iter()
            .map(|&(id, d)| if id == "d" { (id, &d[..1], &d[1..]) } else { (id, d, &[][..]) })
            .collect();
        assert_acyclic(&plan(&mixed));
    }
}

#[test]
fn the_diamond_listed_dependents_first_has_no_cycle() {
    let p =
        plan(&[("d", &["b", "c"], &[]), ("c", &["a"], &[]), ("b", &["a"], &[]), ("a", &[], &[])]);
    let g = StepGraph::new(&p);
    assert_eq!(g.cycles(), Vec::<Cycle>::new());
    assert_eq!(g.topological_order(), Some(vec![3, 1, 2, 0]));
    assert_acyclic(&p);
}

/// A layered DAG: `layers` layers of `width` steps, each step waiting for the steps of the layer
/// before that a fixed pseudo-random pattern picks (always at least one), so many steps share
/// dependencies (stacked diamonds).
fn layered(layers: usize, width: usize, seed: u64) -> Vec<(String, Vec<String>)> {
    let mut x = seed;
    let mut next = move || {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        x >> 33
    };
    let mut steps = Vec::new();
    for l in 0..layers {
        for w in 0..width {
            let mut deps = Vec::new();
            if l > 0 {
                for u in 0..width {
                    if next() % 2 == 0 || u == w {
                        deps.push(format!("l{}w{u}", l - 1));
                    }
                }
            }
            steps.push((format!("l{l}w{w}"), deps));
        }
    }
    steps
}

#[test]
fn layered_dags_are_no_cycle_in_several_listing_orders() {
    for (layers, width, seed) in [(3, 2, 1), (5, 4, 7), (8, 6, 42), (20, 10, 3)] {
        let steps = layered(layers, width, seed);
        // Dependencies first, dependents first, and a few shuffles.
        assert_acyclic(&dep_plan(&steps));
        let mut reversed = steps.clone();
        reversed.reverse();
        assert_acyclic(&dep_plan(&reversed));
        let mut x = seed;
        for _ in 0..5 {
            let mut shuffled = steps.clone();
            for i in (1..shuffled.len()).rev() {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let j = usize::try_from(x >> 33).unwrap() % (i + 1);
                shuffled.swap(i, j);
            }
            assert_acyclic(&dep_plan(&shuffled));
        }
    }
}

#[test]
fn a_cycle_behind_diamonds_is_reported_exactly() {
    // x -> y -> z -> x is a cycle; x also waits for the diamond's top d, and e waits for the
    // cycle. Listed dependents first, so the search meets finished diamond steps from inside the
    // cycle.
    let p = plan(&[
        ("e", &["z", "d"], &[]),
        ("x", &["y", "d"], &[]),
        ("d", &["b", "c"], &[]),
        ("c", &["a"], &[]),
        ("y", &["z", "c"], &[]),
        ("b", &["a"], &[]),
        ("z", &["x", "b"], &[]),
        ("a", &[], &[]),
    ]);
    let g = StepGraph::new(&p);
    let cycles = g.cycles();
    assert_eq!(cycles.iter().map(|c| c.members.clone()).collect::<Vec<_>>(), [vec![1, 4, 6]]);
    assert_eq!(
        path_ids(&p, &cycles[0]),
        vec![
            ("x".into(), EdgeKind::DependsOn),
            ("y".into(), EdgeKind::DependsOn),
            ("z".into(), EdgeKind::DependsOn)
        ]
    );
    assert_eq!(cycles[0].path.last().map(|(_, e)| e.to), Some(1));
    assert_eq!(g.topological_order(), None);
    // Every step outside the cycle is its own component.
    let comp = g.components();
    for v in [0, 2, 3, 5, 7] {
        assert_eq!(comp.iter().filter(|&&c| c == comp[v]).count(), 1, "step {v}: {comp:?}");
    }
    assert!(comp[1] == comp[4] && comp[4] == comp[6]);
}

#[test]
fn two_cycles_sharing_a_finished_diamond_are_two_findings() {
    // Both cycles wait for the same diamond; a second visit of it must add nothing to either.
    let p = plan(&[
        ("q", &["p", "d"], &[]),
        ("d", &["b", "c"], &[]),
        ("p", &["q"], &[]),
        ("c", &["a"], &[]),
        ("m", &["n"], &["d"]),
        ("b", &["a"], &[]),
        ("n", &["m", "b"], &[]),
        ("a", &[], &[]),
    ]);
    let g = StepGraph::new(&p);
    let cycles = g.cycles();
    assert_eq!(
        cycles.iter().map(|c| c.members.clone()).collect::<Vec<_>>(),
        [vec![0, 2], vec![4, 6]]
    );
    assert_eq!(
        path_ids(&p, &cycles[1]),
        vec![("m".into(), EdgeKind::DependsOn), ("n".into(), EdgeKind::DependsOn)]
    );
}

#[test]
fn a_diamond_inside_a_cycle_gives_the_first_shortest_path() {
    // a waits for b and c, both wait for d, and d waits for a: one component of four steps whose
    // shortest cycles through a are a-b-d and a-c-d; the first found (through b) is reported,
    // and d reached a second time (through c) must not re-route it.
    let p = plan(&[
        ("a", &["b", "c"], &[]),
        ("b", &["d"], &[]),
        ("c", &["d"], &[]),
        ("d", &["a"], &[]),
    ]);
    let cycles = StepGraph::new(&p).cycles();
    assert_eq!(cycles.len(), 1);
    assert_eq!(cycles[0].members, vec![0, 1, 2, 3]);
    assert_eq!(
        path_ids(&p, &cycles[0]),
        vec![
            ("a".into(), EdgeKind::DependsOn),
            ("b".into(), EdgeKind::DependsOn),
            ("d".into(), EdgeKind::DependsOn)
        ]
    );
}

#[test]
fn same_id_is_string_equality() {
    for (a, b, equal) in [
        ("step-000123", "step-000123", true),
        ("step-000123", "step-000124", false),
        ("step-100123", "step-000123", false),
        ("a", "ab", false),
        ("ab", "a", false),
        ("", "", true),
        ("x", "x", true),
    ] {
        assert_eq!(same_id(a, b), equal, "{a:?} vs {b:?}");
    }
}

#[test]
fn the_resolvers_guesses_answer_from_the_steps_not_the_map() {
    // A map that answers wrongly for `s10`: only a guess (the last step found, or a recent
    // distance) can give the right index, and for ids not guessed the map is used.
    let p = chain(20);
    let mut index = p.index();
    index.insert("s10", 0);
    let mut r = Resolver::new(&p, &index);
    // s2 from step 10: not guessed (distance 1 is s9), so the map: right, and distance 8 kept.
    assert_eq!(r.resolve("s2", 10), Some(2));
    // s10 from step 18: distance 8, guessed.
    assert_eq!(r.resolve("s10", 18), Some(10));
    // s10 again from elsewhere: the last step found.
    assert_eq!(r.resolve("s10", 3), Some(10));
    // A fresh resolver with no useful distance asks the map (and gets its wrong answer).
    let mut fresh = Resolver::new(&p, &index);
    assert_eq!(fresh.resolve("s10", 18), Some(0));
}

#[test]
fn group_keeps_pair_order_per_row_and_drops_rows_out_of_range() {
    let (offsets, items) = group(3, &[(0, 5), (2, 7), (3, 8), (0, 6), (9, 1), (2, 4)]);
    assert_eq!(offsets, [0, 2, 2, 4]);
    assert_eq!(items, [5, 6, 7, 4]);
    assert_eq!(row(&offsets, &items, 0), [5, 6]);
    assert!(row(&offsets, &items, 1).is_empty());
    assert_eq!(row(&offsets, &items, 2), [7, 4]);
    assert!(row(&offsets, &items, 3).is_empty());
}

#[test]
fn depends_on_is_sorted_and_an_empty_plan_is_an_empty_graph() {
    let p =
        plan(&[("a", &[], &[]), ("b", &[], &[]), ("c", &[], &[]), ("d", &["c", "a", "b"], &[])]);
    let g = StepGraph::new(&p);
    assert_eq!(g.depends_on(3), [0, 1, 2]);
    assert!(!g.is_empty());
    assert_eq!(g.len(), 4);
    let empty = StepGraph::new(&Plan { goal: "g".into(), ..Plan::default() });
    assert!(empty.is_empty());
    assert_eq!(empty.len(), 0);
}

#[test]
fn dangling_edges_name_the_step_the_kind_and_the_position() {
    let p = plan(&[("a", &[], &[]), ("b", &["a", "ghost"], &["nowhere", "b"])]);
    let g = StepGraph::new(&p);
    let found: Vec<(usize, EdgeKind, usize, bool)> =
        g.dangling().iter().map(|d| (d.step, d.kind, d.at, d.own)).collect();
    assert_eq!(
        found,
        [
            (1, EdgeKind::DependsOn, 1, false),
            (1, EdgeKind::Reference, 0, false),
            (1, EdgeKind::Reference, 1, true)
        ]
    );
}
