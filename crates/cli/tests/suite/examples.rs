//! The repository's example plans run as the README says, and a richer end-to-end case with
//! every kind of finding the example policy is for, plus a Rego policy through the CLI.

use serde_json::Value;

use super::support::{pev, repo_root, run};

fn codes(result: &Value, key: &str) -> Vec<String> {
    result[key]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f["code"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[test]
fn the_refund_example_fails_with_the_findings_its_comment_promises() {
    let root = repo_root();
    let args = ["lint", "examples/lint/refund.yaml", "--policy", "examples/lint/policy.yaml"];
    let r = run(pev().current_dir(&root), &args);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.starts_with("examples/lint/refund.yaml: error (risk score "), "{}", r.stdout);
    assert!(r.stdout.contains("error[BOUND_VIOLATION] step 2 `refund`: "), "{}", r.stdout);
    // The path as the file spells it (`args`), with its line.
    assert!(r.stdout.contains("  at /steps/2/args/amount (line 22)\n"), "{}", r.stdout);

    let mut json_args = args.to_vec();
    json_args.extend(["--format", "json"]);
    let result = run(pev().current_dir(&root), &json_args).json();
    let errors = codes(&result, "errors");
    for expected in [
        "SENSITIVE_DATA_EXPOSURE",
        "BOUND_VIOLATION",
        "SQL_INJECTION",
        "RAW_SECRET",
        "LOOP_DETECTED",
    ] {
        assert!(errors.iter().any(|c| c == expected), "{expected} missing: {errors:?}");
    }
    assert_eq!(result["status"], "error");
}

#[test]
fn the_dark_green_example_passes() {
    let r = run(
        pev().current_dir(repo_root()),
        &["lint", "examples/lint/dark-green.json", "--format", "json"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let result = r.json();
    assert_eq!(result["status"], "pass");
    assert_eq!(codes(&result, "errors"), Vec::<String>::new());
    assert_eq!(codes(&result, "warnings"), Vec::<String>::new());
}

#[test]
fn plan_lint_finance_rego_policy_through_the_cli() {
    let fixtures = repo_root().join("crates/lint/tests/fixtures/rego");
    let policy = fixtures.join("finance.policy.yaml").to_string_lossy().into_owned();
    let plan = fixtures.join("finance_excessive.json").to_string_lossy().into_owned();
    let r = run(&mut pev(), &["lint", &plan, "--policy", &policy]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains(
            "error[POLICY_VIOLATION] step 1 `pay`: finance_policy.rego: [EXCESSIVE_AMOUNT] "
        ),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("  at /steps/1 (line 5)\n"), "{}", r.stdout);

    let plan = fixtures.join("finance_ok.json").to_string_lossy().into_owned();
    let r = run(&mut pev(), &["lint", &plan, "--policy", &policy, "--format", "json"]);
    let result = r.json();
    assert!(!codes(&result, "errors").iter().any(|c| c == "POLICY_VIOLATION"), "{result}");
}

#[test]
fn help_teaches_each_command_with_examples_and_exit_codes() {
    let r = run(&mut pev(), &["--help"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("lint") && r.stdout.contains("schema"), "{}", r.stdout);
    assert!(r.stdout.contains("Exit codes:"), "{}", r.stdout);
    let r = run(&mut pev(), &["lint", "--help"]);
    assert_eq!(r.code, 0, "{r:?}");
    for needle in [
        "Examples:",
        "pev lint examples/lint/refund.yaml --policy examples/lint/policy.yaml",
        "--explain",
        "--fail-risk",
        "Exit codes:",
        "2  bad input",
    ] {
        assert!(r.stdout.contains(needle), "lint --help lacks {needle:?}:\n{}", r.stdout);
    }
    let r = run(&mut pev(), &["schema", "--help"]);
    assert!(r.stdout.contains("pev schema plan"), "{}", r.stdout);
}
