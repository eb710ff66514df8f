//! The repository's example plans run with `--scratch` as examples/README.md promises: the
//! outcome, reasons and exit code of each, the change made in the scratch copy (whose place is
//! printed), and the examples tree left exactly as it was, with no `.pev` journal in it.
//!
//! The child's TMPDIR is a temp dir of the test, so the scratch copies go away with it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use super::run_support::{Outcome, at_step, run_level};
use super::support::{pev, repo_root, run};

/// Every file under `dir` (relative path → bytes), and whether any `.pev` exists there.
fn snapshot(dir: &Path) -> (BTreeMap<PathBuf, Vec<u8>>, bool) {
    fn walk(root: &Path, dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>, pev: &mut bool) {
        for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let path = entry.path();
            if entry.file_name() == ".pev" {
                *pev = true;
            }
            if path.is_dir() {
                walk(root, &path, files, pev);
            } else {
                let rel = path.strip_prefix(root).expect("under root").to_path_buf();
                files.insert(rel, std::fs::read(&path).expect("read"));
            }
        }
    }
    let mut files = BTreeMap::new();
    let mut pev = false;
    walk(dir, dir, &mut files, &mut pev);
    (files, pev)
}

/// `pev run examples/<plan> --workspace examples/<workspace> --scratch --json EXTRA` from the
/// repository root; returns the outcome and the scratch copy of the workspace.
fn run_example(plan: &str, workspace: &str, extra: &[&str]) -> (Outcome, PathBuf, TempDir) {
    let root = repo_root();
    let examples = root.join("examples");
    let (before, pev_before) = snapshot(&examples);
    assert!(!pev_before, "examples/ holds a .pev before the test: clean it up");
    let tmp = tempfile::tempdir().expect("temp dir");
    let plan = format!("examples/{plan}");
    let workspace = format!("examples/{workspace}");
    let mut args =
        vec!["run", plan.as_str(), "--workspace", workspace.as_str(), "--scratch", "--json"];
    args.extend_from_slice(extra);
    let r = run(pev().current_dir(&root).env("TMPDIR", tmp.path()), &args);
    let (after, pev_after) = snapshot(&examples);
    assert!(!pev_after, "the run left a .pev in examples/");
    assert!(before == after, "the run changed files under examples/");

    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("scratch copy"))
        .unwrap_or_else(|| panic!("the scratch copy is not named: {}", r.stderr));
    let copy = PathBuf::from(line.rsplit(" at ").next().expect("a path").trim());
    assert!(copy.starts_with(tmp.path()), "{copy:?} is under TMPDIR");
    assert!(copy.join(".pev/pev.db").exists(), "the journal is in the copy");
    (Outcome::from(r), copy, tmp)
}

#[test]
fn dark_green_succeeds_on_a_scratch_copy() {
    let (out, copy, _tmp) = run_example("dark-green/plan.json", "dark-green/site", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.status(), "success");
    assert_eq!(out.reasons(), vec![]);
    assert_eq!(out.result()["goal_actions_executed"], true);
    let m = &out.result()["file_mutations"];
    assert_eq!(m.as_array().map(Vec::len), Some(1), "{m}");
    assert_eq!(m[0]["path"], "style.css");
    assert_eq!((m[0]["lines_added"].as_u64(), m[0]["lines_removed"].as_u64()), (Some(1), Some(1)));
    assert_eq!(m[0]["bytes_before"], m[0]["bytes_after"]);
    let css = std::fs::read_to_string(copy.join("style.css")).expect("css");
    assert!(css.contains("background: #013220;"), "{css}");
    let original = std::fs::read_to_string(repo_root().join("examples/dark-green/site/style.css"))
        .expect("original css");
    assert!(original.contains("background: #ffffff;"), "the original is untouched");
}

#[test]
fn discovery_only_is_an_honest_partial() {
    let (out, _copy, _tmp) = run_example("discovery-only/plan.json", "dark-green/site", &[]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.status(), "partial");
    assert_eq!(out.result()["goal_actions_executed"], false);
    assert_eq!(out.reasons(), vec![run_level("no_effects")]);
    assert_eq!(out.result()["file_mutations"], serde_json::json!([]));
    for id in ["list-site", "read-css", "read-html"] {
        assert_eq!(out.step_status(id), "done", "{id}");
    }
}

#[test]
fn failing_assertion_fails_and_stops_the_next_step() {
    let (out, copy, _tmp) =
        run_example("failing-assertion/plan.json", "failing-assertion/site", &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.status(), "failed");
    let reasons = out.reasons();
    assert_eq!(reasons[0], at_step("assertion_failed", "patch-css"), "{reasons:?}");
    assert!(reasons.contains(&run_level("steps_not_run")), "{reasons:?}");
    assert_eq!(out.step_status("check-html"), "pending");
    let failed: Vec<_> =
        out.assertions("patch-css").into_iter().filter(|(_, passed, _)| !passed).collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].2.contains("#006400"), "{failed:?}");
    // The harness still says what changed on disk.
    assert_eq!(out.result()["file_mutations"][0]["path"], "style.css");
    let css = std::fs::read_to_string(copy.join("style.css")).expect("css");
    assert!(css.contains("#013220"), "{css}");
}

#[test]
fn parallel_runs_its_four_parts_at_once_and_joins_them() {
    let (out, copy, _tmp) =
        run_example("parallel/plan.json", "parallel/workspace", &["--jobs", "4"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.status(), "success");
    let parts = ["part-1", "part-2", "part-3", "part-4"];
    let last_start = parts.iter().map(|p| out.at("step.started", p)).max().expect("starts");
    let first_end = parts.iter().map(|p| out.at("step.finished", p)).min().expect("ends");
    assert!(last_start < first_end, "the parts overlap: {last_start} vs {first_end}");
    let summary = std::fs::read_to_string(copy.join("out/summary.txt")).expect("summary");
    assert_eq!(summary, "exit codes: 0 0 0 0\npart-1\npart-2\npart-3\npart-4\n");
}
