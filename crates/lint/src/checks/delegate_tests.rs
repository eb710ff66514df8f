use pev_protocol::parse::{Format, parse_plan};
use pev_protocol::{Finding, Level, LintCode, LintStatus};
use serde_json::{Value, json};

use super::{MAX_PER_STEP, check, read_scope};
use crate::{CompiledPolicy, Ctx, LintOptions};

/// The findings of this check alone for a plan given as JSON (or YAML) text.
fn findings_of(text: &str, format: Format) -> Vec<Finding> {
    let parsed = parse_plan(text, format).unwrap();
    let policy = CompiledPolicy::default();
    let ctx = Ctx::new(&parsed, &policy);
    let mut out = Vec::new();
    check(&ctx, &mut out);
    out
}

fn findings(steps: Vec<Value>) -> Vec<Finding> {
    let plan = json!({"goal": "g", "steps": Value::Array(steps)});
    findings_of(&plan.to_string(), Format::Json)
}

fn with(code: LintCode, found: &[Finding]) -> Vec<Finding> {
    found.iter().filter(|f| f.code == code).cloned().collect()
}

/// A delegated step with a goal, a scope (none when `None`) and depends_on.
fn delegated(id: &str, scope: Option<&str>, deps: &[&str]) -> Value {
    let mut delegate = json!({"goal": format!("do {id}")});
    if let Some(scope) = scope {
        delegate["scope"] = json!(scope);
    }
    json!({"id": id, "depends_on": deps, "delegate": delegate})
}

fn tool_step(id: &str, deps: &[&str], parameters: Value) -> Value {
    let mut step = json!({"id": id, "tool": "file.read", "depends_on": deps});
    step["parameters"] = parameters;
    step
}

/// The (earlier, later) step ids of each overlap finding, with its pointer.
fn overlap_pairs(found: &[Finding]) -> Vec<(String, String)> {
    with(LintCode::DelegateScopeOverlap, found)
        .iter()
        .map(|f| {
            let later = f.step_id.clone().unwrap();
            // The message names the earlier step first.
            let earlier = f.msg.split('`').nth(1).unwrap().to_owned();
            (earlier, later)
        })
        .collect()
}

#[test]
fn plans_without_delegation_give_nothing() {
    let found = findings(vec![
        tool_step("a", &[], json!({"path": "../x"})),
        json!({"id": "b", "description": "do it", "depends_on": ["a"]}),
    ]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_step_with_tool_and_delegate() {
    let mut both = delegated("a", Some("src"), &[]);
    both["tool"] = json!("shell.exec");
    both["parameters"] = json!({"command": "make"});
    let mut described = delegated("b", Some("docs"), &[]);
    described["description"] = json!("context for the child");
    let found = findings(vec![both, described, tool_step("c", &[], json!({"path": "x"}))]);
    let hits = with(LintCode::DelegateWithTool, &found);
    assert_eq!(hits.len(), 1, "{found:?}");
    assert_eq!(hits[0].path, "/steps/0/delegate");
    assert_eq!(hits[0].step, Some(0));
    assert_eq!(hits[0].step_id.as_deref(), Some("a"));
    assert!(hits[0].msg.contains("shell.exec"), "{}", hits[0].msg);
    assert_eq!(found.len(), 1, "{found:?}");
}

#[test]
fn a_blank_goal() {
    let mut steps = Vec::new();
    for (k, goal) in ["", "   ", "\n\t", "fix the parser"].into_iter().enumerate() {
        let mut step = delegated(&format!("s{k}"), Some(&format!("dir{k}")), &[]);
        step["delegate"]["goal"] = json!(goal);
        steps.push(step);
    }
    let found = findings(steps);
    let paths: Vec<String> =
        with(LintCode::DelegateEmptyGoal, &found).into_iter().map(|f| f.path).collect();
    assert_eq!(
        paths,
        ["/steps/0/delegate/goal", "/steps/1/delegate/goal", "/steps/2/delegate/goal"],
        "{found:?}"
    );
    assert_eq!(found.len(), 3, "{found:?}");
}

#[test]
fn scopes_that_escape_the_workspace_or_reach_the_journal() {
    for scope in [
        "../x",
        "..",
        "/abs",
        "/",
        "\\x",
        "C:\\work",
        "c:/work",
        "a/../../b",
        "./../x",
        "a\\..\\..\\b",
        ".pev",
        ".pev/x",
        "./.pev/runs",
        "a/../.pev",
        "src/../.pev/",
        "",
        "   ",
        "~",
        "~/src",
        "src/\0",
    ] {
        let found = findings(vec![delegated("a", Some(scope), &[])]);
        let hits = with(LintCode::DelegateScopeEscapes, &found);
        assert_eq!(hits.len(), 1, "{scope:?}: {found:?}");
        assert_eq!(hits[0].path, "/steps/0/delegate/scope", "{scope:?}");
        assert_eq!(hits[0].step_id.as_deref(), Some("a"));
        assert!(read_scope(scope).is_err(), "{scope:?}");
    }
}

#[test]
fn scopes_inside_the_workspace() {
    for (scope, parts) in [
        (".", vec![]),
        ("./", vec![]),
        ("a/..", vec![]),
        ("src", vec!["src"]),
        ("./src//a/", vec!["src", "a"]),
        ("docs/../src", vec!["src"]),
        ("src\\a", vec!["src", "a"]),
        ("a/.pev", vec!["a", ".pev"]),
        (".pevx", vec![".pevx"]),
        ("..foo", vec!["..foo"]),
        ("a..b/c", vec!["a..b", "c"]),
        ("c:notes", vec!["c:notes"]),
    ] {
        assert_eq!(read_scope(scope), Ok(parts), "{scope:?}");
        let found = findings(vec![delegated("a", Some(scope), &[])]);
        assert!(found.is_empty(), "{scope:?}: {found:?}");
    }
    let found = findings(vec![delegated("a", None, &[])]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn the_escape_message_says_why() {
    let found = findings(vec![
        delegated("a", Some("../x"), &[]),
        delegated("b", Some("/abs"), &[]),
        delegated("c", Some(".pev/x"), &[]),
        delegated("d", Some(""), &[]),
    ]);
    let msgs: Vec<&str> = found.iter().map(|f| f.msg.as_str()).collect();
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(msgs[0].contains("climbs out") && msgs[0].contains("\"../x\""), "{}", msgs[0]);
    assert!(msgs[1].contains("is absolute"), "{}", msgs[1]);
    assert!(msgs[2].contains("`.pev`"), "{}", msgs[2]);
    assert!(msgs[3].contains("blank"), "{}", msgs[3]);
}

#[test]
fn sibling_directories_do_not_overlap() {
    let found = findings(vec![
        delegated("a", Some("src"), &[]),
        delegated("b", Some("src2"), &[]),
        delegated("c", Some("docs/src"), &[]),
        delegated("d", Some("./tests/"), &[]),
    ]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_directory_and_one_inside_it_overlap() {
    let found =
        findings(vec![delegated("a", Some("src"), &[]), delegated("b", Some("src/a"), &[])]);
    assert_eq!(found.len(), 1, "{found:?}");
    let f = &found[0];
    assert_eq!(f.code, LintCode::DelegateScopeOverlap);
    assert_eq!(f.path, "/steps/1/delegate/scope");
    assert_eq!((f.step, f.step_id.as_deref()), (Some(1), Some("b")));
    for needle in ["`a`", "`b`", "\"src\"", "\"src/a\"", "`b`'s is inside `a`'s"] {
        assert!(f.msg.contains(needle), "{needle}: {}", f.msg);
    }

    // The other way round, and spelled differently.
    let found =
        findings(vec![delegated("a", Some("./src/a/"), &[]), delegated("b", Some("src"), &[])]);
    assert_eq!(overlap_pairs(&found), [("a".into(), "b".into())], "{found:?}");
    assert!(found[0].msg.contains("`a`'s is inside `b`'s"), "{}", found[0].msg);
}

#[test]
fn equal_scopes_overlap_even_when_spelled_differently() {
    let found = findings(vec![
        delegated("a", Some("src/lib"), &[]),
        delegated("b", Some("./src//lib/"), &[]),
    ]);
    assert_eq!(overlap_pairs(&found), [("a".into(), "b".into())], "{found:?}");
    assert!(found[0].msg.contains("the same directory"), "{}", found[0].msg);
}

#[test]
fn the_whole_workspace_overlaps_every_scope() {
    // `.` is the whole workspace.
    let found = findings(vec![delegated("a", Some("."), &[]), delegated("b", Some("src"), &[])]);
    assert_eq!(overlap_pairs(&found), [("a".into(), "b".into())], "{found:?}");
    assert_eq!(found[0].path, "/steps/1/delegate/scope");

    // No scope is the whole workspace; the pointer is the delegate object when the later step
    // has no scope.
    let found = findings(vec![delegated("a", Some("src"), &[]), delegated("b", None, &[])]);
    assert_eq!(overlap_pairs(&found), [("a".into(), "b".into())], "{found:?}");
    assert_eq!(found[0].path, "/steps/1/delegate");
    assert!(found[0].msg.contains("no scope"), "{}", found[0].msg);

    let found =
        findings(vec![delegated("a", None, &[]), delegated("b", Some("deep/in/here"), &[])]);
    assert_eq!(overlap_pairs(&found), [("a".into(), "b".into())], "{found:?}");
    assert_eq!(found[0].path, "/steps/1/delegate/scope");

    let found = findings(vec![delegated("a", None, &[]), delegated("b", None, &[])]);
    assert_eq!(overlap_pairs(&found), [("a".into(), "b".into())], "{found:?}");
}

#[test]
fn dependent_steps_with_equal_scopes_do_not_overlap() {
    let found =
        findings(vec![delegated("a", Some("src"), &[]), delegated("b", Some("src"), &["a"])]);
    assert!(found.is_empty(), "{found:?}");
    // The dependency written on the earlier step (a forward depends_on).
    let found =
        findings(vec![delegated("a", Some("src"), &["b"]), delegated("b", Some("src"), &[])]);
    assert!(found.is_empty(), "{found:?}");
    let found = findings(vec![delegated("a", None, &[]), delegated("b", None, &["a"])]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_chain_through_an_intermediate_step_orders_them() {
    // depends_on through a step that is not delegated.
    let found = findings(vec![
        delegated("a", Some("src"), &[]),
        tool_step("m", &["a"], json!({"path": "x"})),
        delegated("b", Some("src"), &["m"]),
    ]);
    assert!(found.is_empty(), "{found:?}");
    // A reference (no depends_on) from the intermediate step to the first.
    let found = findings(vec![
        delegated("a", Some("src"), &[]),
        tool_step("m", &[], json!({"path": "${a.result.path}"})),
        delegated("b", Some("src"), &["m"]),
    ]);
    assert!(found.is_empty(), "{found:?}");
    // Written in reverse plan order: the earlier step waits for the later one.
    let found = findings(vec![
        delegated("b", Some("src"), &["m"]),
        tool_step("m", &[], json!({"path": "{{a.result}}"})),
        delegated("a", Some("src"), &[]),
    ]);
    assert!(found.is_empty(), "{found:?}");
    // Without the link, they overlap.
    let found = findings(vec![
        delegated("a", Some("src"), &[]),
        tool_step("m", &[], json!({"path": "x"})),
        delegated("b", Some("src"), &["m"]),
    ]);
    assert_eq!(overlap_pairs(&found), [("a".into(), "b".into())], "{found:?}");
}

#[test]
fn siblings_after_a_common_step_may_run_together() {
    let found = findings(vec![
        delegated("a", Some("src"), &[]),
        delegated("b", Some("src/x"), &["a"]),
        delegated("c", Some("src/x/y"), &["a"]),
        delegated("d", Some("src"), &["b", "c"]),
    ]);
    assert_eq!(overlap_pairs(&found), [("b".into(), "c".into())], "{found:?}");
    assert_eq!(found[0].path, "/steps/2/delegate/scope");
}

#[test]
fn steps_in_a_cycle_or_with_unknown_dependencies_do_not_panic() {
    // A cycle: each waits for the other (LOOP_DETECTED reports it); they never run together.
    let found =
        findings(vec![delegated("a", Some("src"), &["b"]), delegated("b", Some("src"), &["a"])]);
    assert!(found.is_empty(), "{found:?}");
    // A step that waits for itself, and an unknown dependency.
    let found = findings(vec![
        delegated("a", Some("src"), &["a"]),
        delegated("b", Some("src"), &["ghost"]),
        delegated("a", Some("src"), &[]),
    ]);
    assert_eq!(with(LintCode::DelegateScopeOverlap, &found).len(), 3, "{found:?}");
}

#[test]
fn escaping_scopes_are_not_compared() {
    let found =
        findings(vec![delegated("a", Some("../src"), &[]), delegated("b", Some("src"), &[])]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].code, LintCode::DelegateScopeEscapes);
}

#[test]
fn a_long_chain_across_chunks_has_no_overlap() {
    // 150 delegated steps with the same scope, each after the one before: never two at once.
    let steps: Vec<Value> = (0..150)
        .map(|k| {
            let deps: Vec<String> = if k == 0 { vec![] } else { vec![format!("s{}", k - 1)] };
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            delegated(&format!("s{k}"), Some("src"), &deps)
        })
        .collect();
    assert!(findings(steps).is_empty());
    // The same chain written backwards (each step waits for the next one in plan order).
    let steps: Vec<Value> = (0..150)
        .map(|k| {
            let deps: Vec<String> = if k == 149 { vec![] } else { vec![format!("s{}", k + 1)] };
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            delegated(&format!("s{k}"), None, &deps)
        })
        .collect();
    assert!(findings(steps).is_empty());
}

#[test]
fn pairs_across_chunks_are_found() {
    // Two chains, 0..=99 and 100..=129: step 100 + m has the scope of step 70 + m and nothing
    // orders them; every other pair has disjoint scopes or is ordered.
    let steps: Vec<Value> = (0..130)
        .map(|k| {
            let deps: Vec<String> =
                if k == 0 || k == 100 { vec![] } else { vec![format!("s{}", k - 1)] };
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            let scope = format!("pkg/{}", if k >= 100 { k - 30 } else { k });
            delegated(&format!("s{k}"), Some(&scope), &deps)
        })
        .collect();
    let found = findings(steps);
    let expected: Vec<(String, String)> =
        (0..30).map(|m| (format!("s{}", 70 + m), format!("s{}", 100 + m))).collect();
    assert_eq!(overlap_pairs(&found), expected);
    assert_eq!(found.len(), 30);
    assert!(found.iter().all(|f| f.path.ends_with("/delegate/scope")));
}

#[test]
fn a_step_is_reported_against_a_bounded_number_of_others() {
    // 70 independent delegated steps over the whole workspace: every pair overlaps.
    let steps: Vec<Value> = (0..70).map(|k| delegated(&format!("s{k}"), None, &[])).collect();
    let found = findings(steps);
    let expected: usize = (0..70).map(|q: usize| q.min(MAX_PER_STEP)).sum();
    assert_eq!(found.len(), expected);
    // Findings come in step order, each later step against the earliest ones.
    let last: Vec<(String, String)> = overlap_pairs(&found).split_off(expected - MAX_PER_STEP);
    let want: Vec<(String, String)> =
        (0..MAX_PER_STEP).map(|k| (format!("s{k}"), "s69".to_owned())).collect();
    assert_eq!(last, want);
    let notes: Vec<&Finding> = found.iter().filter(|f| f.msg.contains("only the first")).collect();
    // Steps s5..s69 overlap more than MAX_PER_STEP earlier steps; each says so once.
    assert_eq!(notes.len(), 70 - (MAX_PER_STEP + 1));
    // s4 overlaps exactly MAX_PER_STEP earlier steps: no note.
    assert!(
        found
            .iter()
            .filter(|f| f.step_id.as_deref() == Some("s4"))
            .all(|f| !f.msg.contains("only the first"))
    );
}

#[test]
fn budgets_that_cannot_be_met() {
    let cases = [
        (json!({"max_usd": 0}), None, "/budget/max_usd"),
        (json!({"max_usd": -1.5}), None, "/budget/max_usd"),
        (json!({"max_tokens": 0}), None, "/budget/max_tokens"),
        (json!({"max_turns": 0}), None, "/budget/max_turns"),
        (json!({"max_turns": 0}), Some("loop"), "/budget/max_turns"),
        (json!({"max_turns": 1}), None, "/budget/max_turns"),
        (json!({"max_turns": 1}), Some("pev"), "/budget/max_turns"),
    ];
    for (budget, mode, pointer) in cases {
        let mut step = delegated("a", Some("src"), &[]);
        step["delegate"]["budget"] = budget.clone();
        if let Some(mode) = mode {
            step["delegate"]["mode"] = json!(mode);
        }
        let found = findings(vec![step]);
        assert_eq!(found.len(), 1, "{budget} {mode:?}: {found:?}");
        assert_eq!(found[0].code, LintCode::DelegateBudgetUnmeetable);
        assert_eq!(found[0].path, format!("/steps/0/delegate{pointer}"));
    }
    let mut step = delegated("a", Some("src"), &[]);
    step["delegate"]["budget"] = json!({"max_usd": 0, "max_tokens": 0, "max_turns": 1});
    assert_eq!(findings(vec![step]).len(), 3);
}

#[test]
fn budgets_that_can_be_met() {
    for (budget, mode) in [
        (json!({}), None),
        (json!({"max_usd": 0.01, "max_tokens": 1, "max_turns": 2}), None),
        (json!({"max_turns": 1}), Some("loop")),
        (json!({"max_usd": 1e300}), Some("pev")),
    ] {
        let mut step = delegated("a", Some("src"), &[]);
        step["delegate"]["budget"] = budget.clone();
        if let Some(mode) = mode {
            step["delegate"]["mode"] = json!(mode);
        }
        let found = findings(vec![step]);
        assert!(found.is_empty(), "{budget} {mode:?}: {found:?}");
    }
}

#[test]
fn non_finite_dollar_limits() {
    // JSON cannot write them (and YAML's `.nan` reaches the plan as no limit), but a plan built
    // in code can hold them.
    for usd in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0] {
        let plan = json!({"goal": "g", "steps": [delegated("a", Some("src"), &[])]});
        let mut parsed = parse_plan(&plan.to_string(), Format::Json).unwrap();
        parsed.plan.steps[0].delegate.as_mut().unwrap().budget.max_usd = Some(usd);
        let policy = CompiledPolicy::default();
        let mut found = Vec::new();
        check(&Ctx::new(&parsed, &policy), &mut found);
        assert_eq!(found.len(), 1, "{usd}: {found:?}");
        assert_eq!(found[0].code, LintCode::DelegateBudgetUnmeetable);
        assert_eq!(found[0].path, "/steps/0/delegate/budget/max_usd");
    }
}

#[test]
fn the_codes_are_errors_of_the_whole_lint() {
    let mut both = delegated("a", Some("../x"), &[]);
    both["tool"] = json!("file.read");
    both["delegate"]["goal"] = json!("");
    both["delegate"]["budget"] = json!({"max_turns": 0});
    let plan =
        json!({"goal": "g", "steps": [both, delegated("b", None, &[]), delegated("c", None, &[])]});
    let parsed = parse_plan(&plan.to_string(), Format::Json).unwrap();
    let result = crate::lint(&parsed, &CompiledPolicy::default(), LintOptions::default());
    assert_eq!(result.status, LintStatus::Error);
    for code in [
        LintCode::DelegateWithTool,
        LintCode::DelegateEmptyGoal,
        LintCode::DelegateScopeEscapes,
        LintCode::DelegateScopeOverlap,
        LintCode::DelegateBudgetUnmeetable,
    ] {
        assert_eq!(code.default_level(), Level::Error, "{code}");
        assert!(result.errors.iter().any(|f| f.code == code), "{code}: {result:?}");
        assert_eq!(code.as_str().parse::<LintCode>().ok(), Some(code));
        assert_eq!(code.as_str().to_lowercase().parse::<LintCode>().ok(), Some(code));
    }
}

#[test]
fn odd_scopes_never_panic() {
    let scopes = [
        "é/../..",
        "\u{0}",
        "////",
        "\\\\",
        ".\\.\\",
        "a/b/c/d/e/f/g/h/../../../../../../../../..",
        "😀/😀",
        ":",
        "C:",
        "..\\..",
        "a/./b/./../c",
        " ",
        "\t/x",
    ];
    let mut steps = Vec::new();
    for (k, scope) in scopes.iter().enumerate() {
        steps.push(delegated(&format!("s{k}"), Some(scope), &[]));
        let _ = read_scope(scope);
    }
    let long = "a/".repeat(5000);
    steps.push(delegated("long", Some(&long), &[]));
    steps.push(delegated("long2", Some(&format!("{long}b")), &[]));
    let found = findings(steps);
    // The long one shows a cut scope.
    let f = found.iter().find(|f| f.step_id.as_deref() == Some("long2")).unwrap();
    assert!(f.msg.len() < 1000, "{}", f.msg);
}
