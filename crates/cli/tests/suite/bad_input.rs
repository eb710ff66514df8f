//! Bad input: each is exit 2 with one clear message naming the file (or, for a plan that does
//! not match the schema, SCHEMA_INVALID findings in the chosen format), never a panic.

use super::support::{CLEAN_PLAN, dir_with, fixture, pev, pev_in, run};

/// Exit 2, nothing on stdout, exactly one line on stderr; returns that line.
fn one_error(r: &super::support::Run) -> &str {
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(r.stdout, "", "{r:?}");
    assert_eq!(r.stderr.lines().count(), 1, "one message: {r:?}");
    assert!(!r.stderr.contains("panicked"), "{r:?}");
    r.stderr.trim_end()
}

#[test]
fn a_missing_plan() {
    let dir = dir_with(&[]);
    let r = pev_in(dir.path(), &["lint", "x.json"]);
    assert_eq!(one_error(&r), "pev: error: cannot read plan `x.json`: No such file or directory");
}

#[test]
fn a_directory() {
    let dir = dir_with(&[]);
    std::fs::create_dir(dir.path().join("plans")).expect("mkdir");
    let r = pev_in(dir.path(), &["lint", "plans"]);
    assert_eq!(
        one_error(&r),
        "pev: error: cannot read plan `plans`: it is a directory, not a file"
    );
}

#[test]
fn an_empty_file_and_a_blank_one() {
    let dir = dir_with(&[("empty.json", ""), ("blank.yaml", "  \n\n")]);
    let r = pev_in(dir.path(), &["lint", "empty.json"]);
    assert_eq!(
        one_error(&r),
        "pev: error: plan `empty.json` is empty: expected a JSON or YAML plan"
    );
    let r = pev_in(dir.path(), &["lint", "blank.yaml"]);
    assert_eq!(
        one_error(&r),
        "pev: error: plan `blank.yaml` is empty: expected a JSON or YAML plan"
    );
}

#[test]
fn invalid_json_names_line_and_column() {
    let dir = dir_with(&[("x.json", "{\n  \"goal\": \"g\",\n  \"steps\": [\n}\n")]);
    let r = pev_in(dir.path(), &["lint", "x.json"]);
    let msg = one_error(&r);
    assert!(msg.starts_with("pev: error: x.json:4:1: invalid JSON: "), "{msg}");
}

#[test]
fn invalid_yaml_names_line_and_column() {
    let dir = dir_with(&[("x.yaml", "goal: g\nsteps:\n  - id: a\n   bad: [\n")]);
    let r = pev_in(dir.path(), &["lint", "x.yaml"]);
    let msg = one_error(&r);
    assert!(msg.starts_with("pev: error: x.yaml:4:4: invalid YAML: "), "{msg}");
}

#[test]
fn a_schema_error_is_reported_as_findings_with_path_and_expected_type() {
    let plan = "{\n  \"goal\": \"g\",\n  \"steps\": [\n    {\"id\": \"a\", \"depends_on\": \"b\"}\n  ]\n}\n";
    let dir = dir_with(&[("x.json", plan)]);

    let r = pev_in(dir.path(), &["lint", "x.json", "--format", "json"]);
    assert_eq!(r.code, 2, "{r:?}");
    let result = r.json();
    assert_eq!(result["status"], "error");
    let finding = &result["errors"][0];
    assert_eq!(finding["code"], "SCHEMA_INVALID");
    assert_eq!(finding["path"], "/steps/0/depends_on");
    assert_eq!(finding["step"], 0);
    assert!(
        finding["msg"].as_str().is_some_and(|m| m.contains("expected a sequence")),
        "{finding}"
    );

    let r = pev_in(dir.path(), &["lint", "x.json"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stdout.contains("error[SCHEMA_INVALID] step 0: "), "{}", r.stdout);
    assert!(r.stdout.contains("expected a sequence"), "{}", r.stdout);
    assert!(r.stdout.contains("  at /steps/0/depends_on (line 4)"), "{}", r.stdout);
}

#[test]
fn a_plan_that_is_not_an_object() {
    let dir = dir_with(&[("x.yaml", "- just\n- a list\n")]);
    let r = pev_in(dir.path(), &["lint", "x.yaml", "--format", "json"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(r.json()["errors"][0]["code"], "SCHEMA_INVALID");
    assert!(r.json()["errors"][0]["msg"].as_str().is_some_and(|m| m.contains("object")));
}

#[test]
fn a_file_over_the_size_limit() {
    let dir = dir_with(&[("big.json", CLEAN_PLAN)]);
    let r =
        run(pev().current_dir(dir.path()).env("PEV_MAX_INPUT_BYTES", "64"), &["lint", "big.json"]);
    assert_eq!(
        one_error(&r),
        "pev: error: cannot read plan `big.json`: it is larger than the 64-byte limit"
    );
    // Standard input is held to the same limit while it is read.
    let r = run(pev().env("PEV_MAX_INPUT_BYTES", "64").write_stdin(CLEAN_PLAN), &["lint", "-"]);
    assert_eq!(
        one_error(&r),
        "pev: error: cannot read plan `<stdin>`: it is larger than the 64-byte limit"
    );
    // Under the limit, the same file is fine.
    let r = run(
        pev().current_dir(dir.path()).env("PEV_MAX_INPUT_BYTES", "100000"),
        &["lint", "big.json"],
    );
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn a_file_that_is_not_utf8() {
    let dir = dir_with(&[]);
    std::fs::write(dir.path().join("x.json"), b"{\n  \"goal\": \"caf\xe9\"}").expect("write");
    let r = pev_in(dir.path(), &["lint", "x.json"]);
    assert_eq!(
        one_error(&r),
        "pev: error: cannot read plan `x.json`: it is not UTF-8 text (invalid byte at line 2, column 15)"
    );
}

#[test]
fn an_unknown_policy_key_is_named() {
    let dir =
        dir_with(&[("p.json", CLEAN_PLAN), ("policy.yaml", "allow_tools: []\nallow_toolz: [x]\n")]);
    let r = pev_in(dir.path(), &["lint", "p.json", "--policy", "policy.yaml"]);
    let msg = one_error(&r);
    assert!(msg.starts_with("pev: error: invalid policy policy.yaml"), "{msg}");
    assert!(msg.contains("unknown field `allow_toolz`"), "{msg}");
}

#[test]
fn an_invalid_policy_regex_is_named() {
    let policy = "deny_tokens_regex: [\"sk_[a-z]+\", \"(unclosed\"]\n";
    let dir = dir_with(&[("p.json", CLEAN_PLAN), ("policy.yaml", policy)]);
    let r = pev_in(dir.path(), &["lint", "p.json", "--policy", "policy.yaml"]);
    let msg = one_error(&r);
    assert!(
        msg.contains("policy.yaml: deny_tokens_regex[1] `(unclosed` is not a valid regex"),
        "{msg}"
    );
}

#[test]
fn a_missing_policy_file() {
    let dir = dir_with(&[("p.json", CLEAN_PLAN)]);
    let r = pev_in(dir.path(), &["lint", "p.json", "--policy", "nope.yaml"]);
    let msg = one_error(&r);
    assert!(msg.starts_with("pev: error: cannot read policy `nope.yaml`: "), "{msg}");
}

#[test]
fn a_rego_module_that_does_not_parse_is_named() {
    let rego = "package p\n\nviolations contains v if {\n    v := {\"msg\": \"a\" \"b\"}\n}\n";
    let dir = dir_with(&[
        ("p.json", CLEAN_PLAN),
        ("bad.rego", rego),
        ("policy.yaml", "rego: [bad.rego]\n"),
    ]);
    let r = pev_in(dir.path(), &["lint", "p.json", "--policy", "policy.yaml"]);
    let msg = one_error(&r);
    assert!(msg.contains("bad.rego:4:"), "{msg}");
}

#[test]
fn fail_risk_out_of_range_or_not_a_number() {
    let dir = dir_with(&[("p.json", CLEAN_PLAN)]);
    for (value, says) in [
        ("1.5", "1.5 is not between 0 and 1"),
        ("-0.1", "-0.1 is not between 0 and 1"),
        ("high", "`high` is not a number"),
    ] {
        let r = pev_in(dir.path(), &["lint", "p.json", &format!("--fail-risk={value}")]);
        assert_eq!(r.code, 2, "{r:?}");
        assert_eq!(r.stdout, "");
        assert!(r.stderr.contains(says), "{value}: {}", r.stderr);
        assert!(r.stderr.contains("--fail-risk"), "{}", r.stderr);
    }
}

#[test]
fn policy_notes_go_to_stderr() {
    // plan-lint's bundled policy has risk_weights keys that name no lint code.
    let policy = fixture("../../../lint/tests/fixtures/plan_lint/policy.yaml");
    let dir = dir_with(&[("p.json", CLEAN_PLAN)]);
    let policy = policy.to_string_lossy().into_owned();
    let r = pev_in(dir.path(), &["lint", "p.json", "--policy", &policy, "--format", "json"]);
    assert!(r.stderr.lines().all(|l| l.starts_with("pev: note: ")), "{}", r.stderr);
    assert!(r.stderr.contains("names no lint code and is ignored"), "{}", r.stderr);
    let _ = r.json();
}

/// Issue 18: a store URL is not a path. Taken for one, `postgresql:///db?host=…` made a
/// `postgresql:` directory tree in the current directory. A scheme pev has no journal for is
/// refused (exit 2); a Postgres journal that cannot be reached is an error; nothing is created
/// either way, and a password is never printed.
#[test]
fn a_store_url_is_refused_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    // A scheme pev has no journal for is refused before anything is opened; a Postgres journal
    // that cannot be reached is an error naming it, password withheld.
    for (args, url, said) in [
        (vec!["runs", "--json"], "sqlite:journal.db", "not a journal pev knows"),
        (vec!["runs"], "mysql://pev:s3cret@h/pev", "not a journal pev knows"),
        (
            vec!["runs"],
            "postgresql:///db?host=/nonexistent-socket-dir",
            "cannot open journal postgres",
        ),
        (
            vec!["show", "last"],
            "postgres://pev:s3cret@127.0.0.1:1/pev",
            "cannot open journal postgres",
        ),
    ] {
        let mut all = args.clone();
        all.extend(["--store", url]);
        let mut cmd = pev();
        cmd.current_dir(dir.path());
        let r = run(&mut cmd, &all);
        assert_eq!(r.code, 2, "{args:?} {url}: {r:?}");
        assert!(r.stderr.contains(said), "{}", r.stderr);
        assert!(!r.stderr.contains("s3cret"), "{}", r.stderr);
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("read").collect();
    assert!(left.is_empty(), "created: {left:?}");
}
