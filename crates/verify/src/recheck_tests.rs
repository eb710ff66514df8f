//! The final re-check: what no longer holds is a regression, what cannot be run again is
//! checked once, and world-only checks run once however many steps asserted them.

use pev_protocol::Assertion;
use pev_protocol::assertion::AssertionResult;
use pev_protocol::run::{EvidenceOf, ReasonCode, Regression};
use serde_json::json;

use super::*;
use crate::test_support::Fixture;

fn assertions(json: serde_json::Value) -> Vec<Assertion> {
    serde_json::from_value(json).unwrap()
}

fn passed(kind: &str, detail: &str) -> AssertionResult {
    AssertionResult { kind: kind.into(), passed: true, detail: detail.into() }
}

#[tokio::test]
async fn evidence_that_still_holds_is_rechecked_and_nothing_regresses() {
    let f = Fixture::new();
    f.write("site/style.css", "body { background: darkgreen; }");
    let of = EvidenceOf::Step("patch".into());
    let list = assertions(json!([
        {"type": "file_contains", "path": "site/style.css", "pattern": "darkgreen"},
        {"type": "file_exists", "path": "site/style.css"}
    ]));
    let earlier = [passed("file_contains", "found"), passed("file_exists", "file")];
    let claim = Claim { of: &of, assertions: &list, earlier: &earlier, env: f.env(Some("patch")) };
    let check = recheck(&[claim]).await;
    assert_eq!(check.rechecked, 2);
    assert!(check.regressed.is_empty(), "{check:?}");
    assert!(check.checked_once.is_empty(), "{check:?}");
}

#[tokio::test]
async fn evidence_undone_after_it_was_gathered_is_a_regression_with_then_and_now() {
    let f = Fixture::new();
    f.write("site/style.css", "body { background: white; }");
    let of = EvidenceOf::Step("patch".into());
    let list = assertions(json!([
        {"type": "file_exists", "path": "site/style.css"},
        {"type": "file_contains", "path": "site/style.css", "pattern": "darkgreen"}
    ]));
    let earlier = [passed("file_exists", "file"), passed("file_contains", "found it at line 1")];
    let claim = Claim { of: &of, assertions: &list, earlier: &earlier, env: f.env(Some("patch")) };
    let check = recheck(&[claim]).await;
    assert_eq!(check.rechecked, 2);
    assert_eq!(check.regressed.len(), 1, "{check:?}");
    let r = &check.regressed[0];
    assert_eq!(r.of, of);
    assert_eq!(r.kind, "file_contains");
    assert_eq!(r.path.as_deref(), Some("site/style.css"));
    assert_eq!(r.then, "found it at line 1");
    assert!(!r.now.is_empty());
    let reason = regression_reason(r);
    assert_eq!(reason.code, ReasonCode::EvidenceRegressed);
    assert_eq!(reason.step.as_deref(), Some("patch"));
    assert!(reason.message.contains("step 'patch'"), "{}", reason.message);
    assert!(
        reason.message.contains("no later call that wrote site/style.css"),
        "{}",
        reason.message
    );
}

#[tokio::test]
async fn an_assertion_that_failed_then_is_not_a_regression() {
    let f = Fixture::new();
    let of = EvidenceOf::Step("s".into());
    let list = assertions(json!([{"type": "file_exists", "path": "missing.txt"}]));
    let earlier =
        [AssertionResult { kind: "file_exists".into(), passed: false, detail: "no".into() }];
    let claim = Claim { of: &of, assertions: &list, earlier: &earlier, env: f.env(Some("s")) };
    let check = recheck(&[claim]).await;
    assert_eq!(check.rechecked, 1);
    assert!(check.regressed.is_empty());
}

#[tokio::test]
async fn without_an_earlier_result_the_evidence_counts_as_having_held() {
    let f = Fixture::new();
    let of = EvidenceOf::Postcondition("hello exists".into());
    let list = assertions(json!([{"type": "file_exists", "path": "hello.txt"}]));
    let claim = Claim { of: &of, assertions: &list, earlier: &[], env: f.env(None) };
    let check = recheck(&[claim]).await;
    assert_eq!(check.regressed.len(), 1);
    assert_eq!(check.regressed[0].then, "passed");
    let reason = regression_reason(&check.regressed[0]);
    assert_eq!(reason.step, None);
    assert!(reason.message.starts_with("postcondition \"hello exists\""), "{}", reason.message);
}

#[tokio::test]
async fn content_changed_compares_the_final_content_with_the_baseline() {
    let mut f = Fixture::new();
    f.write("a.txt", "v0");
    f.snapshot("a.txt");
    let of = EvidenceOf::Step("s".into());
    let list = assertions(json!([{"type": "content_changed", "path": "a.txt"}]));
    let earlier = [passed("content_changed", "changed")];
    // Still changed: holds. Changed back: regressed.
    f.write("a.txt", "v1");
    let claim = Claim { of: &of, assertions: &list, earlier: &earlier, env: f.env(Some("s")) };
    assert!(recheck(&[claim]).await.regressed.is_empty());
    f.write("a.txt", "v0");
    let claim = Claim { of: &of, assertions: &list, earlier: &earlier, env: f.env(Some("s")) };
    let check = recheck(&[claim]).await;
    assert_eq!(check.regressed.len(), 1, "{check:?}");
    assert_eq!(check.regressed[0].kind, "content_changed");
}

#[tokio::test]
async fn what_cannot_be_run_again_is_checked_once_and_not_run() {
    let f = Fixture::new();
    let of = EvidenceOf::Step("deploy".into());
    // The command would create a file if it ran; a content_changed with no baseline.
    let list = assertions(json!([
        {"type": "command_succeeds", "command": "touch ran-again", "repeatable": false},
        {"type": "http_status", "url": "http://127.0.0.1:9/", "repeatable": false},
        {"type": "content_changed", "path": "a.txt"}
    ]));
    let claim = Claim { of: &of, assertions: &list, earlier: &[], env: f.env(Some("deploy")) };
    let check = recheck(&[claim]).await;
    assert_eq!(check.rechecked, 0);
    assert!(check.regressed.is_empty());
    let kinds: Vec<&str> = check.checked_once.iter().map(|c| c.kind.as_str()).collect();
    assert_eq!(kinds, ["command_succeeds", "http_status", "content_changed"]);
    assert!(check.checked_once[0].why.contains("repeatable: false"));
    assert!(check.checked_once[2].why.contains("no hash of a.txt"));
    assert!(!f.root().join("ran-again").exists(), "a non-repeatable command ran again");
}

#[tokio::test]
async fn a_repeatable_command_runs_again_once_for_all_the_steps_that_assert_it() {
    let f = Fixture::new();
    // Each run appends a line: the count shows how often it ran.
    let list = assertions(json!([{"type": "command_succeeds", "command": "echo x >> count"}]));
    let ofs: Vec<EvidenceOf> = (0..5).map(|i| EvidenceOf::Step(format!("s{i}"))).collect();
    let claims: Vec<Claim<'_>> = ofs
        .iter()
        .map(|of| Claim { of, assertions: &list, earlier: &[], env: f.env(None) })
        .collect();
    let check = recheck(&claims).await;
    assert_eq!(check.rechecked, 5);
    let runs = std::fs::read_to_string(f.root().join("count")).unwrap();
    assert_eq!(runs.lines().count(), 1, "the command ran {} times", runs.lines().count());
}

#[tokio::test]
async fn a_failing_command_now_is_a_regression_without_a_path() {
    let f = Fixture::new();
    let of = EvidenceOf::Step("test".into());
    let list = assertions(json!([{"type": "command_succeeds", "command": "test -f built"}]));
    let earlier = [passed("command_succeeds", "exit 0")];
    let claim = Claim { of: &of, assertions: &list, earlier: &earlier, env: f.env(Some("test")) };
    let check = recheck(&[claim]).await;
    assert_eq!(check.regressed.len(), 1);
    assert_eq!(check.regressed[0].path, None);
    let mut r = check.regressed[0].clone();
    r.changed_by = (0..5).map(|i| format!("shell.exec `rm built` (step 'c{i}')")).collect();
    let message = regression_reason(&r).message;
    assert!(message.contains("changed after it by shell.exec `rm built` (step 'c0')"), "{message}");
    assert!(message.contains("and 2 more"), "{message}");
    assert!(!message.contains("'c3'"), "{message}");
}

#[tokio::test]
async fn content_changed_is_judged_per_claim_against_its_own_baseline() {
    // Two steps assert the same content_changed with different baselines: the file now differs
    // from the first's baseline but equals the second's. One result may not serve both.
    let mut first = Fixture::new();
    first.write("a.txt", "v0");
    first.snapshot("a.txt");
    let mut second = Fixture::new();
    second.write("a.txt", "v1");
    second.snapshot("a.txt");
    // Both claims look at `first`'s workspace, which holds v1 now.
    first.write("a.txt", "v1");
    let list = assertions(json!([{"type": "content_changed", "path": "a.txt"}]));
    let (a, b) = (EvidenceOf::Step("a".into()), EvidenceOf::Step("b".into()));
    let env_b = CheckEnv { before: &second.before, ..first.env(Some("b")) };
    let claims = [
        Claim { of: &a, assertions: &list, earlier: &[], env: first.env(Some("a")) },
        Claim { of: &b, assertions: &list, earlier: &[], env: env_b },
    ];
    let check = recheck(&claims).await;
    assert_eq!(check.rechecked, 2);
    let regressed: Vec<&EvidenceOf> = check.regressed.iter().map(|r| &r.of).collect();
    assert_eq!(regressed, [&b]);
    // And in the other order.
    let check = recheck(&[claims[1], claims[0]]).await;
    let regressed: Vec<&EvidenceOf> = check.regressed.iter().map(|r| &r.of).collect();
    assert_eq!(regressed, [&b]);
}

#[test]
fn a_reason_names_up_to_three_later_calls_and_counts_the_rest() {
    let mut r = Regression {
        of: EvidenceOf::Step("s".into()),
        kind: "file_exists".into(),
        path: Some("a.txt".into()),
        then: "file, 1 byte".into(),
        now: "absent".into(),
        changed_by: vec!["c1".into(), "c2".into(), "c3".into()],
    };
    let message = regression_reason(&r).message;
    assert!(message.ends_with("; changed after it by c1, c2, c3"), "{message}");
    r.changed_by.push("c4".into());
    let message = regression_reason(&r).message;
    assert!(message.ends_with("; changed after it by c1, c2, c3 and 1 more"), "{message}");
    r.changed_by.clear();
    let message = regression_reason(&r).message;
    assert!(message.ends_with("; the journal records no later call that wrote a.txt"), "{message}");
    r.path = None;
    let message = regression_reason(&r).message;
    assert!(message.ends_with("fails on the final workspace (absent)"), "{message}");
}

#[test]
fn the_checked_once_warning_says_whose_what_and_why() {
    let once = pev_protocol::run::CheckedOnce {
        path: None,
        of: EvidenceOf::Step("deploy".into()),
        kind: "command_succeeds".into(),
        why: "marked `repeatable: false`".into(),
    };
    assert_eq!(
        checked_once_warning(&once),
        "step 'deploy': command_succeeds was checked once: marked `repeatable: false`"
    );
}
