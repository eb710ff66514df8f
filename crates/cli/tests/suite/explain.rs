//! `pev lint --explain CODE` for every code, `all`, and an unknown code.

use pev_protocol::{Level, LintCode};

use super::support::{pev, run};

#[test]
fn every_code_is_explained_with_level_severity_meaning_and_fix() {
    for code in LintCode::ALL {
        let r = run(&mut pev(), &["lint", "--explain", code.as_str()]);
        assert_eq!(r.code, 0, "{code}: {r:?}");
        let level = match code.default_level() {
            Level::Error => "error",
            Level::Warning => "warning",
        };
        let severity = format!("{:?}", code.severity()).to_lowercase();
        assert!(
            r.stdout.starts_with(&format!("{code}: {level}, {severity} severity\n")),
            "{code}: {}",
            r.stdout
        );
        assert!(r.stdout.contains(code.explain()), "{code}: {}", r.stdout);
        assert!(r.stdout.contains(&format!("fix: {}", code.fix())), "{code}: {}", r.stdout);
        assert_eq!(r.stderr, "");
    }
}

#[test]
fn codes_are_case_insensitive() {
    let r = run(&mut pev(), &["lint", "--explain", "tool_deny"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("TOOL_DENY: error, high severity"), "{}", r.stdout);
}

#[test]
fn all_lists_every_code_in_contract_order() {
    let r = run(&mut pev(), &["lint", "--explain", "all"]);
    assert_eq!(r.code, 0, "{r:?}");
    let heads: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.is_empty())
        .filter_map(|l| l.split(':').next())
        .collect();
    let expected: Vec<&str> = LintCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(heads, expected);
}

#[test]
fn an_unknown_code_is_exit_2_with_a_hint() {
    let r = run(&mut pev(), &["lint", "--explain", "NOT_A_CODE"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(r.stdout, "");
    assert_eq!(
        r.stderr,
        "pev: error: unknown lint code `NOT_A_CODE` (`pev lint --explain all` lists every code)\n"
    );
}
