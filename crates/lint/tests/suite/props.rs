//! Property tests: arbitrary input never panics the parser or the linter, and every lint result
//! keeps the contract's invariants (CONTRACTS.md §5).
//!
//! The generators: plan-shaped JSON (random ids with duplicates and bad characters, dependencies
//! among them, parameters spliced from reference, SQL, shell, path and secret fragments, the
//! built-in and policy tools) so that every check really runs; and, for "never panics", a mix of
//! arbitrary JSON, plans and corrupted plans, and of arbitrary text and plans rendered as JSON or
//! YAML (some cut short, spliced or re-indented). Each mix is counted: at least a quarter of its
//! inputs must parse and reach the linter, and at least a tenth must not, so neither the linter
//! nor the parser's error paths can silently drop out of the test. Shell-shaped command strings
//! (quotes, operators, substitutions, here-documents, fetches piped into shells, references),
//! run as `command` or as the script of `bash -c`, must reach the three shell checks. Each parsed
//! plan is linted under the default policy and under a policy with allow/deny lists, bounds,
//! regexes, weights and severity overrides. The case count stays modest (256) so `cargo test` stays fast; the fuzz
//! target (`fuzz/`) is where long runs belong.

use std::path::Path;

use pev_lint::{CompiledPolicy, LintOptions, lint};
use pev_protocol::parse::{Format, ParsedPlan, from_value, parse_plan};
use pev_protocol::{LintCode, LintResult, LintStatus};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value, json};

use super::support::found;

/// A policy that exercises every policy-driven check.
const BUSY_POLICY: &str = r#"
allow_tools: ["file.*", "shell.exec", "db.*", "sql.query_ro", "notify.*", "payments.transfer", "calc.add"]
deny_tools: ["file.delete"]
approve_tools: ["payments.*"]
readonly_tools: ["reports.query"]
bounds:
  payments.transfer.amount: [0.01, 1000]
  file.read.limit: [1, 100000]
  shell.exec.timeout_s: [1, 60]
  calc.add.nested.depth: [0, 3]
deny_tokens_regex:
  - "AWS_SECRET"
  - "(?i)password\\s*="
  - "^sk-[a-z0-9]{8,}$"
  - "[0-9]{13,16}"
  - "DROP TABLE"
max_steps: 8
risk_weights:
  raw_secret: 0.5
  TOOL_DENY: 0.3
  loop_detected: 0.4
fail_risk_threshold: 0.6
severity:
  unknown_tool: error
  unverified_effect: "off"
  approval_required: warning
"#;

/// The default policy and the busy one (compiled per call: cheap next to linting, and it keeps
/// the helper free of shared state).
fn policies() -> [CompiledPolicy; 2] {
    let path = Path::new("props-policy.yaml");
    let busy = CompiledPolicy::parse(BUSY_POLICY, path)
        .and_then(|doc| CompiledPolicy::from_parts(doc, path, Vec::new()));
    match busy {
        Ok(busy) => [CompiledPolicy::default(), busy],
        Err(e) => panic!("the props policy must load: {e}"),
    }
}

/// The contract's invariants on one result.
fn check_invariants(
    parsed: &ParsedPlan,
    policy: &CompiledPolicy,
    result: &LintResult,
) -> Result<(), TestCaseError> {
    let threshold = policy.policy.fail_risk_threshold;
    let risk = result.risk_score;
    prop_assert!((0.0..=1.0).contains(&risk), "risk_score {risk} outside 0..=1");
    prop_assert!(
        ((risk * 100.0).round() / 100.0 - risk).abs() < 1e-12,
        "risk_score {risk} has more than 2 decimals"
    );
    let expected = if !result.errors.is_empty() || risk >= threshold {
        LintStatus::Error
    } else if !result.warnings.is_empty() {
        LintStatus::Warn
    } else {
        LintStatus::Pass
    };
    prop_assert_eq!(result.status, expected, "status disagrees with findings and risk {}", risk);

    let steps = &parsed.plan.steps;
    for finding in result.errors.iter().chain(&result.warnings) {
        prop_assert!(
            finding.path.is_empty() || finding.path.starts_with('/'),
            "{} path {:?} is not a JSON pointer",
            finding.code,
            finding.path
        );
        match finding.step {
            Some(i) => {
                prop_assert!(
                    i < steps.len(),
                    "{} at step {i} of {} steps",
                    finding.code,
                    steps.len()
                );
                if let (Some(id), Some(step)) = (&finding.step_id, steps.get(i)) {
                    prop_assert_eq!(id.as_str(), step.id.as_str(), "{} step_id", finding.code);
                }
            }
            None => prop_assert!(
                finding.step_id.is_none(),
                "{} is plan-level but names step {:?}",
                finding.code,
                finding.step_id
            ),
        }
    }
    Ok(())
}

/// Lints under both policies and checks the invariants.
fn lint_all(parsed: &ParsedPlan) -> Result<(), TestCaseError> {
    for policy in &policies() {
        let result = lint(parsed, policy, LintOptions::default());
        check_invariants(parsed, policy, &result)?;
    }
    Ok(())
}

// ---- arbitrary JSON ----

/// Keys that plans use, so that arbitrary objects sometimes look like plans.
const KEYS: &[&str] = &[
    "goal",
    "objective",
    "steps",
    "id",
    "step_id",
    "tool",
    "args",
    "parameters",
    "depends_on",
    "dependencies",
    "assertions",
    "assert",
    "type",
    "path",
    "pattern",
    "regex",
    "postconditions",
    "success_criteria",
    "description",
    "on_fail",
    "requires_approval",
    "max_attempts",
    "command",
    "query",
    "amount",
    "context",
    "meta",
    "complexity",
    "title",
    "name",
];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "\\PC{0,12}".prop_map(Value::String),
        select(&["a", "b", "${a.result.x}", "{{b.result}}", "file_exists", "abort"][..])
            .prop_map(|s| Value::String(s.to_owned())),
    ];
    let key = prop_oneof![3 => select(KEYS).prop_map(str::to_owned), 1 => "\\PC{0,6}"];
    leaf.prop_recursive(5, 96, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

// ---- plan-shaped JSON ----

const IDS: &[&str] = &["a", "b", "c", "step-1", "step.2", "x_y", "A-9", "a"];
const ODD_IDS: &[&str] = &["", "bad id", "é", "a/b", "${a}", "step-1"];
const TOOLS: &[&str] = &[
    "shell.exec",
    "file.write",
    "file.read",
    "file.patch",
    "file.delete",
    "file.list",
    "db.query_ro",
    "sql.query_ro",
    "sql.query",
    "reports.query",
    "notify.email",
    "http.request",
    "payments.transfer",
    "calc.add",
    "mystery.tool",
    "",
];
const FRAGMENTS: &[&str] = &[
    "${a.result.x}",
    "{{b.result}}",
    "${step-1.result.rows.0}",
    "{{c.result.body}}",
    "${nope.result}",
    "${a.result",
    "{{",
    "}}",
    "${HOME}",
    "SELECT * FROM t WHERE id = '",
    "' OR 1=1 --",
    "DELETE FROM t",
    "SELECT created_at FROM t",
    "DROP TABLE users",
    "; rm -rf /",
    " && ",
    "|| ",
    "`id`",
    "$(whoami)",
    "../../etc/passwd",
    "/etc/shadow",
    "~/.ssh/id_rsa",
    "AKIAQWERTYUIOPASDFGH",
    "password=hunter2hunter2",
    "Bearer abc.def.ghi",
    "-----BEGIN RSA PRIVATE KEY-----",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
    "AWS_SECRET",
    "sk-abcdef123456",
    "4111111111111111",
    "plain text",
    " ",
    "é",
    "\u{0}",
    "\n",
    "quarterlyRevenueSummaryByRegionAndMonths",
];
const PARAM_KEYS: &[&str] = &[
    "path",
    "command",
    "argv",
    "query",
    "amount",
    "content",
    "url",
    "to",
    "message",
    "limit",
    "timeout_s",
    "nested",
    "params",
    "body",
];

fn arb_fragment_string() -> impl Strategy<Value = String> {
    prop::collection::vec(select(FRAGMENTS), 0..4).prop_map(|parts| parts.concat())
}

fn arb_param_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => arb_fragment_string().prop_map(Value::String),
        1 => prop_oneof![Just(-1.0), Just(0.0), Just(0.005), Just(500.0), Just(5000.0), Just(1e300)]
            .prop_map(|f| json!(f)),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(Value::Null),
    ]
}

/// Mostly flat values (where the checks look first), sometimes nested ones.
fn arb_param_value() -> impl Strategy<Value = Value> {
    let nested = arb_param_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((select(PARAM_KEYS), inner), 0..4).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    });
    prop_oneof![4 => arb_param_leaf(), 1 => nested]
}

fn arb_id() -> impl Strategy<Value = String> {
    prop_oneof![8 => select(IDS), 1 => select(ODD_IDS)].prop_map(str::to_owned)
}

fn arb_assertion() -> impl Strategy<Value = Value> {
    prop_oneof![
        arb_fragment_string().prop_map(|p| json!({"type": "file_exists", "path": p})),
        arb_fragment_string().prop_map(
            |p| json!({"type": "file_contains", "path": "a.txt", "pattern": p, "regex": true})
        ),
        Just(json!({"type": "exit_code_eq", "code": 0, "step": "a"})),
        Just(json!({"assert": "output_contains", "pattern": "ok", "step": "nope"})),
        Just(json!({"type": "http_status", "url": "http://example.com", "status": 200})),
        Just(json!({"type": "bogus"})),
        Just(json!({"type": "file_exists"})),
    ]
}

fn arb_step() -> impl Strategy<Value = Value> {
    (
        arb_id(),
        prop::option::of(select(TOOLS)),
        prop::collection::vec((select(PARAM_KEYS), arb_param_value()), 0..4),
        prop::collection::vec(arb_id(), 0..3),
        prop::collection::vec(arb_assertion(), 0..2),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |(id, tool, params, deps, assertions, (use_args, approve, criteria, extra))| {
                let mut step = Map::new();
                step.insert("id".into(), Value::String(id));
                if let Some(tool) = tool {
                    step.insert("tool".into(), Value::String(tool.to_owned()));
                }
                let params: Map<String, Value> =
                    params.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                // plan-lint writes `args`, pev `parameters`: both spellings must behave the same.
                step.insert(
                    if use_args { "args" } else { "parameters" }.into(),
                    Value::Object(params),
                );
                if !deps.is_empty() {
                    step.insert("depends_on".into(), json!(deps));
                }
                if !assertions.is_empty() {
                    step.insert("assertions".into(), Value::Array(assertions));
                }
                if approve {
                    step.insert("requires_approval".into(), Value::Bool(true));
                }
                if criteria {
                    step.insert("acceptance_criteria".into(), json!(["it worked"]));
                }
                if extra {
                    step.insert("dependson".into(), json!(["a"]));
                }
                Value::Object(step)
            },
        )
}

fn arb_plan() -> impl Strategy<Value = Value> {
    (prop::collection::vec(arb_step(), 0..12), any::<bool>(), prop::option::of(arb_assertion()))
        .prop_map(|(steps, objective, post)| {
            let mut plan = Map::new();
            plan.insert(if objective { "objective" } else { "goal" }.into(), json!("do it"));
            plan.insert("steps".into(), Value::Array(steps));
            if let Some(a) = post {
                plan.insert(
                    "postconditions".into(),
                    json!(["done", {"description": "checked", "assertions": [a]}]),
                );
            }
            Value::Object(plan)
        })
}

// ---- plans, corrupted ----

/// One edit that may or may not break a plan: a step, a field or the steps list replaced by
/// arbitrary JSON, a field dropped, or a plan key added. Many edits leave a plan that still
/// parses (unknown fields are kept, malformed assertions set aside), some do not.
fn corrupt(plan: &mut Value, edit: u8, at: usize, junk: Value, key: &str) {
    let Some(obj) = plan.as_object_mut() else { return };
    let steps = obj.get_mut("steps").and_then(Value::as_array_mut);
    match (edit % 6, steps) {
        (0, Some(steps)) if !steps.is_empty() => {
            let i = at % steps.len();
            steps[i] = junk;
        }
        (1, Some(steps)) if !steps.is_empty() => {
            let i = at % steps.len();
            if let Some(step) = steps[i].as_object_mut() {
                step.insert(key.to_owned(), junk);
            }
        }
        (2, Some(steps)) if !steps.is_empty() => {
            let i = at % steps.len();
            if let Some(step) = steps[i].as_object_mut()
                && !step.is_empty()
            {
                let k = step.keys().nth(at % step.len()).cloned().unwrap_or_default();
                step.remove(&k);
            }
        }
        (3, _) => {
            obj.insert("steps".into(), junk);
        }
        (4, _) => {
            let k = obj.keys().nth(at % obj.len().max(1)).cloned().unwrap_or_default();
            obj.remove(&k);
        }
        _ => {
            obj.insert(key.to_owned(), junk);
        }
    }
}

/// [`arb_plan`] with every step id the parser would refuse renamed (`s1`, `s2`, ...), so that
/// the plan parses unless something else is wrong with it.
fn arb_clean_plan() -> impl Strategy<Value = Value> {
    arb_plan().prop_map(|mut plan| {
        let steps = plan.get_mut("steps").and_then(Value::as_array_mut);
        for (i, step) in steps.into_iter().flatten().enumerate() {
            let valid = step["id"].as_str().is_some_and(|id| {
                !id.is_empty()
                    && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
            });
            if !valid {
                step["id"] = json!(format!("s{}", i + 1));
            }
        }
        plan
    })
}

/// A plan-shaped value with one corrupting edit.
fn arb_corrupted_plan() -> impl Strategy<Value = Value> {
    (arb_clean_plan(), any::<u8>(), any::<usize>(), arb_json(), select(KEYS)).prop_map(
        |(mut plan, edit, at, junk, key)| {
            corrupt(&mut plan, edit, at, junk, key);
            plan
        },
    )
}

/// Arbitrary JSON, plans (some with ids the parser refuses) and corrupted plans: the parser's
/// error paths and the linter both run (about half of the inputs parse).
fn arb_json_input() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => arb_json(),
        1 => arb_plan(),
        1 => arb_clean_plan(),
        2 => arb_corrupted_plan(),
    ]
}

/// A plan as text in either format (JSON compact or pretty, YAML block style), sometimes cut
/// short or with a character spliced in.
fn arb_plan_text() -> impl Strategy<Value = String> {
    (arb_clean_plan(), 0u8..3, 0u8..6, any::<usize>(), "\\PC").prop_map(
        |(plan, format, damage, at, splice)| {
            let mut text = match format {
                0 => serde_json::to_string(&plan).unwrap_or_default(),
                1 => serde_json::to_string_pretty(&plan).unwrap_or_default(),
                _ => serde_yaml_ng::to_string(&plan).unwrap_or_default(),
            };
            let cut = text.char_indices().map(|(i, _)| i).nth(at % text.len().max(1));
            match (damage, cut) {
                (0, Some(i)) => text.truncate(i),
                (1, Some(i)) => text.insert_str(i, &splice),
                _ => {}
            }
            text
        },
    )
}

/// How many of `CASES` generated inputs parsed (and were linted) and how many did not.
const CASES: u32 = 256;

/// Runs `case` (which says whether its input parsed) over `CASES` inputs and checks that the
/// generator is doing its job: at least a quarter of the inputs reach the linter, and at least a
/// tenth are refused by the parser.
fn run_counting<S>(name: &str, strategy: &S, case: impl Fn(S::Value) -> Result<bool, TestCaseError>)
where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    use std::sync::atomic::{AtomicUsize, Ordering};

    use proptest::test_runner::TestRunner;

    let parsed = AtomicUsize::new(0);
    let total = AtomicUsize::new(0);
    let mut runner = TestRunner::new(ProptestConfig::with_cases(CASES));
    let outcome = runner.run(strategy, |input| {
        let reached = case(input)?;
        total.fetch_add(1, Ordering::Relaxed);
        if reached {
            parsed.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{name}: {e}");
    }
    let (parsed, total) = (parsed.into_inner(), total.into_inner());
    assert!(total >= CASES as usize, "{name}: only {total} cases ran");
    assert!(
        parsed * 4 >= total,
        "{name}: only {parsed} of {total} inputs parsed and reached the linter"
    );
    assert!(
        (total - parsed) * 10 >= total,
        "{name}: {parsed} of {total} inputs parsed: the parser's error paths hardly ran"
    );
}

#[test]
fn arbitrary_json_never_panics() {
    run_counting("arbitrary JSON", &arb_json_input(), |value| match from_value(value) {
        Ok(parsed) => lint_all(&parsed).map(|()| true),
        Err(_) => Ok(false),
    });
}

#[test]
fn arbitrary_text_never_panics() {
    let text = prop_oneof![1 => "\\PC{0,200}", 2 => arb_plan_text()];
    run_counting("arbitrary text", &text, |text| {
        let mut reached = false;
        for format in [Format::Json, Format::Yaml, Format::sniff(&text)] {
            if let Ok(parsed) = parse_plan(&text, format) {
                lint_all(&parsed)?;
                reached = true;
            }
        }
        Ok(reached)
    });
}

/// Lines that look like YAML plans, shuffled and indented at random.
fn arb_yaml_lines() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            0usize..6,
            select(
                &[
                    "goal: x",
                    "steps:",
                    "- id: a",
                    "  tool: shell.exec",
                    "  args:",
                    "    command: \"${a.result}; ls\"",
                    "  depends_on: [a, b]",
                    "&anchor x",
                    "*anchor",
                    "- {{b.result}}",
                    "? key",
                    "!!binary aGk=",
                    "steps: [",
                    "  - ",
                    "\t",
                ][..],
            ),
        ),
        0..20,
    )
    .prop_map(|lines| {
        lines.iter().map(|(indent, line)| format!("{}{line}\n", " ".repeat(*indent))).collect()
    })
}

/// Plans in YAML block style, with one line re-indented, dropped or doubled.
fn arb_yaml_plan() -> impl Strategy<Value = String> {
    (arb_clean_plan(), 0u8..6, any::<usize>(), 0usize..4).prop_map(|(plan, edit, at, indent)| {
        let text = serde_yaml_ng::to_string(&plan).unwrap_or_default();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if !lines.is_empty() {
            let i = at % lines.len();
            match edit {
                0 => lines[i] = format!("{}{}", " ".repeat(indent), lines[i].trim_start()),
                1 => {
                    lines.remove(i);
                }
                2 => lines.insert(i, lines[i].clone()),
                _ => {}
            }
        }
        lines.iter().map(|l| format!("{l}\n")).collect()
    })
}

#[test]
fn yaml_looking_text_never_panics() {
    let text = prop_oneof![1 => arb_yaml_lines(), 2 => arb_yaml_plan()];
    run_counting("YAML-looking text", &text, |text| match parse_plan(&text, Format::Yaml) {
        Ok(parsed) => lint_all(&parsed).map(|()| true),
        Err(_) => Ok(false),
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn plan_shaped_json_keeps_the_invariants(value in arb_plan()) {
        let text = serde_json::to_string(&value).expect("a JSON value serialises");
        let from_text = parse_plan(&text, Format::Json);
        match from_value(value) {
            Ok(parsed) => {
                // Reading the text (which takes the direct path when it can) and reading the
                // value (the staged path) must give the same plan and the same set-aside issues.
                match &from_text {
                    Ok(direct) => {
                        prop_assert_eq!(&direct.plan, &parsed.plan, "the two parse paths disagree");
                        prop_assert_eq!(&direct.issues, &parsed.issues, "the two parse paths disagree");
                    }
                    Err(e) => prop_assert!(false, "text failed where value parsed: {:?}", e),
                }
                lint_all(&parsed)?;
            }
            Err(_) => prop_assert!(from_text.is_err(), "text parsed where value failed"),
        }
    }
}

// ---- shell-shaped commands ----

/// Pieces of shell syntax that the command reader must take apart: quotes, escapes, operators,
/// substitutions, here-documents, fetches and shells, and step references.
const SHELL_PIECES: &[&str] = &[
    "curl -fsSL https://x.test/i.sh",
    "wget -qO- https://x.test/i.sh",
    "curl -o i.sh https://x.test/i.sh",
    " | ",
    " | sh",
    " | sudo bash -s",
    " | jq .",
    "sh i.sh",
    "sh -c \"$(",
    "bash <(",
    "$(",
    ")",
    "\"",
    "'",
    "`",
    "\\",
    " && ",
    "; ",
    " || ",
    " & ",
    "\n",
    "cd app",
    "make test",
    "# ",
    "2>&1",
    " > out",
    "<<EOF\n",
    "EOF\n",
    "$((1+2))",
    "${HOME}",
    "${a.result.x}",
    "{{a.result}}",
    "é",
    " ",
];

fn arb_shell_command() -> impl Strategy<Value = String> {
    prop::collection::vec(select(SHELL_PIECES), 0..12).prop_map(|parts| parts.concat())
}

/// A plan whose second step runs `command`, as a `command` string or as `bash -c`'s script.
fn shell_plan(command: &str, as_argv: bool) -> Value {
    let parameters = if as_argv {
        json!({"argv": ["bash", "-c", command]})
    } else {
        json!({"command": command})
    };
    json!({"goal": "g", "steps": [
        {"id": "a", "tool": "file.list", "parameters": {"path": "."}},
        {"id": "b", "tool": "shell.exec", "depends_on": ["a"], "parameters": parameters},
    ]})
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn shell_shaped_commands_keep_the_invariants(
        command in arb_shell_command(),
        as_argv in any::<bool>(),
    ) {
        let parsed = from_value(shell_plan(&command, as_argv));
        prop_assert!(parsed.is_ok(), "the shell plan must parse: {:?}", parsed.err());
        if let Ok(parsed) = parsed {
            lint_all(&parsed)?;
        }
    }
}

/// As for plans: the shell-shaped generator must reach the shell checks, or it tests nothing.
#[test]
fn shell_shaped_generator_reaches_the_shell_checks() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use std::collections::BTreeSet;

    let mut runner = TestRunner::deterministic();
    let strategy = (arb_shell_command(), any::<bool>());
    let mut seen = BTreeSet::new();
    for _ in 0..256 {
        let (command, as_argv) =
            strategy.new_tree(&mut runner).expect("the strategy generates").current();
        let parsed = from_value(shell_plan(&command, as_argv)).expect("the shell plan parses");
        let result = lint(&parsed, &CompiledPolicy::default(), LintOptions::default());
        seen.extend(result.errors.iter().chain(&result.warnings).map(|f| f.code));
    }
    let expected =
        [LintCode::CommandInjection, LintCode::CommandChained, LintCode::DownloadExecute];
    let missing: Vec<LintCode> = expected.into_iter().filter(|c| !seen.contains(c)).collect();
    assert!(missing.is_empty(), "the generator never triggered {missing:?} (saw {seen:?})");
}

/// The deepest parameters a parser accepts still lint: the walks over values must not overflow.
#[test]
fn deeply_nested_parameters_lint() {
    let depth = 100;
    let inner = format!(
        "{}\"${{a.result.x}}; AKIAQWERTYUIOPASDFGH\"{}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let text = format!(
        r#"{{"goal": "g", "steps": [{{"id": "a", "tool": "shell.exec", "args": {{"command": "ls"}}}},
            {{"id": "b", "tool": "shell.exec", "depends_on": ["a"], "args": {{"command": {inner}}}}}]}}"#
    );
    let parsed = parse_plan(&text, Format::Json).expect("100 levels are within serde_json's limit");
    for policy in &policies() {
        let result = lint(&parsed, policy, LintOptions::default());
        assert!(
            found(&result, LintCode::RawSecret).iter().any(|(step, _)| *step == Some(1)),
            "the key 100 levels down must be found: {result:?}"
        );
    }
}

/// The plan-shaped generator is only worth its time if it reaches the checks: over a fixed-seed
/// sample, every code that the generated fields can trigger must come up at least once.
#[test]
fn plan_shaped_generator_reaches_every_check() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use std::collections::BTreeSet;

    let mut runner = TestRunner::deterministic();
    let strategy = arb_plan();
    let mut seen = BTreeSet::new();
    let mut parsed_count = 0;
    for _ in 0..512 {
        let value = strategy.new_tree(&mut runner).expect("the strategy generates").current();
        let Ok(parsed) = from_value(value) else { continue };
        parsed_count += 1;
        for policy in &policies() {
            let result = lint(&parsed, policy, LintOptions::default());
            seen.extend(result.errors.iter().chain(&result.warnings).map(|f| f.code));
        }
    }
    let expected = [
        LintCode::EmptyPlan,
        LintCode::UnknownField,
        LintCode::DuplicateStepId,
        LintCode::UnknownDependency,
        LintCode::LoopDetected,
        LintCode::UnknownReference,
        LintCode::ReferenceNotDependency,
        LintCode::MaxStepsExceeded,
        LintCode::ToolDeny,
        LintCode::UnknownTool,
        LintCode::BoundViolation,
        LintCode::RawSecret,
        LintCode::SqlWriteInReadonly,
        LintCode::SqlInjection,
        LintCode::CommandInjection,
        LintCode::PathTraversal,
        LintCode::SensitiveDataExposure,
        LintCode::ApprovalRequired,
        LintCode::InvalidAssertion,
        LintCode::UnverifiedEffect,
    ];
    let missing: Vec<LintCode> = expected.into_iter().filter(|c| !seen.contains(c)).collect();
    assert!(parsed_count > 256, "only {parsed_count} of 512 generated plans parsed");
    assert!(missing.is_empty(), "the generator never triggered {missing:?} (saw {seen:?})");
}
