use pev_protocol::oracle::{OracleChangeKind, OracleSettings, PlanOracle};
use pev_protocol::run::ReasonCode;
use pev_tools::Workspace;

use super::*;

fn repo() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("tests/__pycache__")).unwrap();
    std::fs::create_dir_all(root.join(".venv/lib/site-packages/pkg/tests")).unwrap();
    std::fs::write(root.join("src/calc.py"), "def add(a, b):\n    return a - b\n").unwrap();
    std::fs::write(
        root.join("tests/test_calc.py"),
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    )
    .unwrap();
    std::fs::write(root.join("tests/__pycache__/test_calc.cpython-311.pyc"), "x").unwrap();
    std::fs::write(root.join(".venv/lib/site-packages/pkg/tests/test_pkg.py"), "x").unwrap();
    std::fs::write(root.join(".gitignore"), ".venv/\n").unwrap();
    std::fs::write(
        root.join("pyproject.toml"),
        "[project]\nname='calc'\n\n[tool.pytest.ini_options]\npythonpath = ['src']\n",
    )
    .unwrap();
    std::fs::write(root.join("README.md"), "calc\n").unwrap();
    let ws = Workspace::open(root).unwrap();
    (dir, ws)
}

fn oracle() -> Oracle {
    Oracle::new(&OracleSettings::default(), None, false).unwrap()
}

#[test]
fn the_tests_and_their_configuration_are_recorded_and_nothing_else() {
    let (_dir, ws) = repo();
    let recorded = oracle().record(&ws);
    let paths: Vec<&str> = recorded.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["pyproject.toml", "tests/test_calc.py"]);
    assert_eq!(recorded.contents.len(), 2);
    assert!(!recorded.truncated);
}

#[test]
fn honest_fix_changes_no_oracle_file() {
    let (dir, ws) = repo();
    let o = oracle();
    let recorded = o.record(&ws);
    let blobs: std::collections::HashMap<String, Vec<u8>> =
        recorded.contents.iter().cloned().collect();
    std::fs::write(dir.path().join("src/calc.py"), "def add(a, b):\n    return a + b\n").unwrap();
    std::fs::write(dir.path().join("tests/__pycache__/test_calc.cpython-311.pyc"), "y").unwrap();
    // A new dependency in pyproject.toml is not a change of its test sections.
    std::fs::write(dir.path().join("pyproject.toml"), "[project]\nname='calc'\ndependencies=['attrs']\n\n[tool.pytest.ini_options]\npythonpath = ['src']\n").unwrap();
    let changes = o.changes(&recorded.files, &|s| blobs.get(s).cloned(), &ws, &|_| false);
    assert_eq!(changes, Vec::new());
}

#[test]
fn edited_deleted_and_created_oracle_files_are_found() {
    let (dir, ws) = repo();
    let o = oracle();
    let recorded = o.record(&ws);
    let blobs: std::collections::HashMap<String, Vec<u8>> =
        recorded.contents.iter().cloned().collect();
    std::fs::write(
        dir.path().join("tests/test_calc.py"),
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == -1\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("conftest.py"), "import builtins\n").unwrap();
    std::fs::write(
        dir.path().join("pyproject.toml"),
        "[project]\nname='calc'\n\n[tool.pytest.ini_options]\naddopts = '-k not add'\n",
    )
    .unwrap();
    let changes = o.changes(&recorded.files, &|s| blobs.get(s).cloned(), &ws, &|_| false);
    let kinds: Vec<(&str, OracleChangeKind)> =
        changes.iter().map(|c| (c.path.as_str(), c.change)).collect();
    assert_eq!(
        kinds,
        [
            ("pyproject.toml", OracleChangeKind::Modified),
            ("tests/test_calc.py", OracleChangeKind::Modified),
            ("conftest.py", OracleChangeKind::Created),
        ]
    );
    let test = &changes[1];
    assert!(test.diff.contains("-    assert add(2, 3) == 5"), "{}", test.diff);
    assert!(test.diff.contains("+    assert add(2, 3) == -1"), "{}", test.diff);
    let reasons = changed_reasons(&changes);
    assert_eq!(reasons.len(), 2, "a created file is not a reason by itself");
    assert!(reasons.iter().all(|r| r.code == ReasonCode::OracleChanged));
    assert!(
        reasons[1].message.starts_with("tests/test_calc.py was changed"),
        "{}",
        reasons[1].message
    );
    std::fs::remove_file(dir.path().join("tests/test_calc.py")).unwrap();
    let changes = o.changes(&recorded.files, &|s| blobs.get(s).cloned(), &ws, &|_| false);
    assert!(
        changes
            .iter()
            .any(|c| c.path == "tests/test_calc.py" && c.change == OracleChangeKind::Deleted)
    );
    assert!(
        changed_reasons(&changes)
            .iter()
            .any(|r| r.message.starts_with("tests/test_calc.py was deleted"))
    );
}

#[test]
fn permission_and_allow_globs_make_a_change_allowed() {
    let (dir, ws) = repo();
    let settings =
        OracleSettings { allow: vec!["tests/snap/**".into()], ..OracleSettings::default() };
    let o = Oracle::new(&settings, None, false).unwrap();
    let recorded = o.record(&ws);
    std::fs::create_dir_all(dir.path().join("tests/snap")).unwrap();
    std::fs::write(dir.path().join("tests/snap/a.txt"), "x").unwrap();
    std::fs::write(dir.path().join("tests/test_calc.py"), "x").unwrap();
    let none = |_: &str| None;
    let changes = o.changes(&recorded.files, &none, &ws, &|p| p == "tests/test_calc.py");
    assert!(changes.iter().all(|c| c.allowed), "{changes:?}");
    assert!(changed_reasons(&changes).is_empty());
    let changes = o.changes(&recorded.files, &none, &ws, &|_| false);
    assert_eq!(changed_reasons(&changes).len(), 1);
}

#[test]
fn protect_globs_and_check_commands_add_oracle_files_and_a_model_plan_cannot_allow() {
    let (_dir, ws) = repo();
    let plan = PlanOracle { protect: vec!["README.md".into()], allow: vec!["tests/**".into()] };
    let mut o = Oracle::new(&OracleSettings::default(), Some(&plan), false).unwrap();
    assert_eq!(o.why("README.md").as_deref(), Some("protected by `README.md`"));
    assert!(!o.allowed("tests/test_calc.py"), "a model's plan cannot allow");
    let o2 = Oracle::new(&OracleSettings::default(), Some(&plan), true).unwrap();
    assert!(o2.allowed("tests/test_calc.py"));
    assert_eq!(o.why("src/calc.py"), None);
    o.name_check_files(
        "python src/calc.py --selftest && sh ./README.md",
        &ws,
        &["src/calc.py".to_owned()],
    );
    assert_eq!(o.why("src/calc.py"), None, "a step's target is not made an oracle");
    let mut o3 = Oracle::new(
        &OracleSettings { conventions: false, ..OracleSettings::default() },
        None,
        false,
    )
    .unwrap();
    assert_eq!(o3.why("tests/test_calc.py"), None);
    o3.name_check_files("python -m pytest -q tests", &ws, &[]);
    assert!(o3.why("tests/test_calc.py").is_some_and(|w| w.contains("pytest")));
    assert!(
        Oracle::new(
            &OracleSettings { protect: vec!["[".into()], ..OracleSettings::default() },
            None,
            false
        )
        .is_err()
    );
}

#[test]
fn goals_that_ask_for_work_on_tests() {
    for goal in [
        "Add a test for subtract()",
        "add tests for the parser",
        "Update the tests to the new API",
        "Write unit tests for src/calc.py",
        "Delete the obsolete test in tests/test_old.py",
        "Please add a regression test for issue 12",
        "Change tests/test_calc.py to expect 6",
        "Improve test coverage of the CLI",
        "Write a failing test for subtract()",
        "Add subtract() tests to tests/test_calc.py",
        "Implement subtract() and test it",
        "Fix subtract() and include a regression test",
        "Update the tests so they pass against the new subtract() API",
    ] {
        assert!(asks_for_test_work(goal), "{goal}");
    }
    for goal in [
        "Make the failing test in tests/test_calc.py pass",
        "Fix the bug that makes tests/test_calc.py fail",
        "Fix the failing test",
        "Make the tests pass",
        "Change add() so the tests pass",
        "Change it so the test passes",
        "Update the README",
        "Add a subtract() function",
        "Make the test suite green",
        "Implement the feature the tests describe",
        "Fix add() in src/calc.py. Do not modify the tests.",
        "Fix add() (no need to add tests)",
        "Update pyproject.toml to require Python 3.11, then make the failing test pass",
        "Add a setup.cfg and make the failing test pass",
        "Fix the parser without changing the tests",
    ] {
        assert!(!asks_for_test_work(goal), "{goal}");
    }
}

#[test]
fn the_pristine_copy_restores_the_oracle_and_leaves_the_workspace_alone() {
    let (dir, ws) = repo();
    let o = oracle();
    let recorded = o.record(&ws);
    let blobs: std::collections::HashMap<String, Vec<u8>> =
        recorded.contents.iter().cloned().collect();
    std::fs::write(dir.path().join("tests/test_calc.py"), "tampered\n").unwrap();
    std::fs::write(dir.path().join("tests/conftest.py"), "patch\n").unwrap();
    std::fs::write(dir.path().join("src/calc.py"), "fixed\n").unwrap();
    let changes = o.changes(&recorded.files, &|s| blobs.get(s).cloned(), &ws, &|_| false);
    let scratch =
        pristine::Scratch::pristine(&ws, &recorded.files, &changes, &|s| blobs.get(s).cloned())
            .unwrap();
    let copy = scratch.path();
    assert!(std::fs::read_to_string(copy.join("tests/test_calc.py")).unwrap().contains("== 5"));
    assert!(!copy.join("tests/conftest.py").exists());
    assert_eq!(std::fs::read_to_string(copy.join("src/calc.py")).unwrap(), "fixed\n");
    assert!(!copy.join("tests/__pycache__").exists(), "caches are left out");
    assert!(copy.join(".venv").is_symlink(), "a virtualenv is linked");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("tests/test_calc.py")).unwrap(),
        "tampered\n"
    );
}

#[test]
fn what_a_check_command_runs_is_its_oracle_and_what_it_only_compiles_is_not() {
    let (dir, ws) = repo();
    std::fs::write(dir.path().join("check_calc.py"), "print('ok')\n").unwrap();
    std::fs::write(dir.path().join("check.sh"), "true\n").unwrap();
    for (command, wanted, not) in [
        ("python3 check_calc.py", Some("check_calc.py"), None),
        ("PYTHONPATH=src timeout 60 python3 -u check_calc.py", Some("check_calc.py"), None),
        ("./check.sh && echo done", Some("check.sh"), None),
        ("python3 -m unittest discover -s tests -t .", Some("tests/test_calc.py"), None),
        (
            "uv run pytest -q tests/test_calc.py --cov=src",
            Some("tests/test_calc.py"),
            Some("src/calc.py"),
        ),
        ("python3 -m py_compile src/calc.py", None, Some("src/calc.py")),
        ("python3 -m compileall -q src && mypy src", None, Some("src/calc.py")),
        ("python3 -c 'import src.calc'", None, Some("src/calc.py")),
    ] {
        let mut o = Oracle::new(
            &OracleSettings { conventions: false, ..OracleSettings::default() },
            None,
            false,
        )
        .unwrap();
        o.name_check_files(command, &ws, &[]);
        if let Some(path) = wanted {
            assert!(o.why(path).is_some(), "{command}: {path}");
        }
        if let Some(path) = not {
            assert_eq!(o.why(path), None, "{command}: {path}");
        }
    }
    assert!(runs_tests("python3 -m unittest discover -s tests"));
    assert!(runs_tests("npm test"));
    assert!(runs_tests("cd web && npx jest"));
    assert!(runs_tests("go test ./..."));
    assert!(!runs_tests("python3 -c 'import src.calc'"));
    assert!(!runs_tests("python3 -m py_compile src/calc.py"));
}

#[test]
fn what_each_kind_of_command_runs_as_its_check() {
    for (command, wanted) in [
        ("python3 check.py --fast", vec!["check.py"]),
        ("python3.11 -u check.py", vec!["check.py"]),
        ("bash -x ./scripts/check.sh", vec!["scripts/check.sh"]),
        ("timeout 60 python3 check.py", vec!["check.py"]),
        ("env A=1 B=2 python check.py", vec!["check.py"]),
        (
            "PYTHONPATH=src python3 -m pytest -q tests/test_a.py tests/b",
            vec!["tests/test_a.py", "tests/b"],
        ),
        ("python3 -m unittest discover -s tests -t .", vec!["discover", "tests"]),
        ("uv run pytest tests/", vec!["tests"]),
        ("poetry run pytest", vec![]),
        ("npx jest web/__tests__", vec!["web/__tests__"]),
        ("node --test test/", vec!["test"]),
        ("node --test", vec![]),
        ("node -e 'require(\"./x\")'", vec![]),
        ("python3 -c 'import src.calc'", vec![]),
        ("python3 -m py_compile src/calc.py", vec![]),
        ("go test ./pkg/...", vec!["pkg/..."]),
        ("cargo test --release", vec![]),
        ("mypy src && ./check.sh", vec!["check.sh"]),
        ("make build", vec![]),
        ("echo hi > out.txt; diff out.txt golden.txt", vec![]),
    ] {
        assert_eq!(paths_checked_by(command), wanted, "{command}");
    }
}

#[test]
fn which_commands_run_tests() {
    for yes in [
        "pytest -q",
        "python3 -m pytest",
        "npm test",
        "npm run test:unit",
        "yarn test",
        "pnpm t",
        "go test ./...",
        "cargo test",
        "make test",
        "mvn test",
        "node --test",
        "npx vitest run",
        "bash tests/test_cli.sh",
    ] {
        assert!(runs_tests(yes), "{yes}");
    }
    for no in [
        "npm run build",
        "npm install",
        "go build ./...",
        "cargo build",
        "make",
        "node index.js",
        "python3 -c 'import src.calc'",
        "ls tests",
        "cat package.json",
    ] {
        assert!(!runs_tests(no), "{no}");
    }
}

#[test]
fn check_files_out_of_the_workspace_and_flags_are_never_named() {
    let (dir, ws) = repo();
    std::fs::write(dir.path().join("check.py"), "x").unwrap();
    let mut o = Oracle::new(
        &OracleSettings { conventions: false, ..OracleSettings::default() },
        None,
        false,
    )
    .unwrap();
    o.name_check_files("python3 ../check.py; python3 /etc/passwd; python3 ./check.py", &ws, &[]);
    assert!(o.why("check.py").is_some_and(|w| w.contains("python3")), "{:?}", o.why("check.py"));
    assert_eq!(o.why("../check.py"), None);
    let mut o = Oracle::new(
        &OracleSettings { conventions: false, ..OracleSettings::default() },
        None,
        false,
    )
    .unwrap();
    o.name_check_files("python3 check.py", &ws, &["check.py".to_owned()]);
    assert_eq!(o.why("check.py"), None, "a step's target is not its check");
    assert_eq!(o.why(".pev/pev.db"), None);
    assert_eq!(oracle().why(".git/config"), None);
    assert_eq!(oracle().why(".pev/tests/x.py"), None);
}

#[test]
fn contents_are_kept_up_to_the_limits() {
    let (dir, ws) = repo();
    let kept = vec![b'a'; 1_500_000];
    let too_big = vec![b'b'; 3_000_000];
    std::fs::write(dir.path().join("tests/fixture_kept.bin"), &kept).unwrap();
    std::fs::write(dir.path().join("tests/fixture_big.bin"), &too_big).unwrap();
    let recorded = oracle().record(&ws);
    let kept_sha = sha256_of(&kept);
    assert!(recorded.contents.iter().any(|(sha, _)| *sha == kept_sha), "1.5 MB is kept");
    assert!(!recorded.contents.iter().any(|(sha, _)| *sha == sha256_of(&too_big)), "3 MB is not");
    assert!(recorded.files.iter().any(|f| f.path == "tests/fixture_big.bin"), "but it is recorded");
}

#[test]
fn a_test_replaced_by_a_directory_is_changed_and_new_config_files_count_by_their_settings() {
    let (dir, ws) = repo();
    let o = oracle();
    let recorded = o.record(&ws);
    let blobs: std::collections::HashMap<String, Vec<u8>> =
        recorded.contents.iter().cloned().collect();
    std::fs::remove_file(dir.path().join("tests/test_calc.py")).unwrap();
    std::fs::create_dir(dir.path().join("tests/test_calc.py")).unwrap();
    std::fs::write(dir.path().join("package.json"), r#"{"name": "calc"}"#).unwrap();
    let changes = o.changes(&recorded.files, &|s| blobs.get(s).cloned(), &ws, &|_| false);
    let kinds: Vec<(&str, OracleChangeKind)> =
        changes.iter().map(|c| (c.path.as_str(), c.change)).collect();
    assert_eq!(
        kinds,
        [("tests/test_calc.py", OracleChangeKind::Modified)],
        "a package.json without test settings is no change"
    );
    std::fs::write(
        dir.path().join("package.json"),
        r#"{"name": "calc", "scripts": {"test": "true"}}"#,
    )
    .unwrap();
    let changes = o.changes(&recorded.files, &|s| blobs.get(s).cloned(), &ws, &|_| false);
    assert!(
        changes.iter().any(|c| c.path == "package.json" && c.change == OracleChangeKind::Created)
    );
}

#[test]
fn hidden_and_linked_tests_are_walked() {
    let (dir, ws) = repo();
    let o = oracle();
    let recorded = o.record(&ws);
    std::fs::write(dir.path().join(".gitignore"), ".venv/\ntests/sneaky/\ntests/test_zz.py\n")
        .unwrap();
    std::fs::create_dir_all(dir.path().join("tests/sneaky")).unwrap();
    std::fs::write(dir.path().join("tests/sneaky/test_s.py"), "x").unwrap();
    std::fs::write(dir.path().join("tests/test_zz.py"), "x").unwrap();
    std::fs::write(dir.path().join("src/helpers.py"), "x").unwrap();
    std::os::unix::fs::symlink("../src/helpers.py", dir.path().join("tests/test_link.py")).unwrap();
    std::fs::create_dir_all(dir.path().join("tests/__pycache__")).unwrap();
    std::fs::write(dir.path().join("tests/__pycache__/test_x.py"), "x").unwrap();
    let changes = o.changes(&recorded.files, &|_| None, &ws, &|_| false);
    let mut created: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    created.sort_unstable();
    assert_eq!(created, ["tests/sneaky/test_s.py", "tests/test_link.py", "tests/test_zz.py"]);
}

#[test]
fn pristine_regressions_are_said_as_such_and_not_twice() {
    use pev_protocol::run::{EvidenceOf, FinalCheck, Regression};
    let regression = |step: &str, now: &str| Regression {
        of: EvidenceOf::Step(step.to_owned()),
        kind: "command_succeeds".to_owned(),
        path: None,
        then: "passed".to_owned(),
        now: now.to_owned(),
        changed_by: Vec::new(),
    };
    let mut check =
        FinalCheck { regressed: vec![regression("a", "failed here")], ..FinalCheck::default() };
    add_pristine_regressions(
        &mut check,
        vec![regression("a", "failed there"), regression("b", "exit 1")],
    );
    assert_eq!(check.regressed.len(), 2);
    assert_eq!(check.regressed[0].now, "failed here");
    assert_eq!(
        check.regressed[1].now,
        "on the pristine oracle (the tests as they were recorded): exit 1"
    );
    let mut other_kind = regression("a", "x");
    other_kind.kind = "file_contains".to_owned();
    add_pristine_regressions(&mut check, vec![other_kind]);
    assert_eq!(check.regressed.len(), 3, "another kind of the same step is another regression");
}

#[test]
fn the_words_a_model_and_a_person_read() {
    let refused = refusal("tests/test_calc.py", "a file under a tests/ directory");
    assert!(refused.starts_with("refused: tests/test_calc.py is one of the checks"));
    assert!(refused.contains("(a file under a tests/ directory)") && refused.contains("blocked"));
    assert_eq!(
        sha256_of(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(clip_command("pytest -q"), "pytest -q");
    let long = "x".repeat(500);
    assert!(clip_command(&long).chars().count() < 200 && clip_command(&long).ends_with('…'));
    let big: String = (0..3000).map(|i| format!("line {i}\n")).collect();
    let d = diff(None, Some(big.as_bytes()));
    assert!(d.ends_with("… (diff clipped)") && d.chars().count() < MAX_DIFF + 40, "{}", d.len());
    assert!(diff(Some(b"a\n"), Some(b"b\n")).contains("-a\n+b"));
    assert!(!asks_for_test_work("Make sure the code compiles and tests pass"));
    assert!(asks_for_test_work("Edit test/sum.test.js to use the new API"));
    assert!(!asks_for_test_work("Never change the tests; fix the code"));
}

#[test]
fn quoting_grouping_and_directories_of_checks() {
    let (dir, ws) = repo();
    std::fs::create_dir_all(dir.path().join("checks")).unwrap();
    std::fs::write(dir.path().join("checks/sums.py"), "x").unwrap();
    std::fs::write(dir.path().join("check.sh"), "x").unwrap();
    let mut o = Oracle::new(
        &OracleSettings { conventions: false, ..OracleSettings::default() },
        None,
        false,
    )
    .unwrap();
    o.name_check_files("(cd . && \"./check.sh\") | tee log; python3 -m pytest 'checks'", &ws, &[]);
    assert!(o.why("check.sh").is_some(), "quotes and parentheses are not part of a path");
    assert!(o.why("checks/sums.py").is_some(), "a directory's files");
    assert_eq!(paths_checked_by("python3 'check.py'"), ["check.py"]);
    assert_eq!(paths_checked_by("(bash \"check.sh\")"), ["check.sh"]);
}

#[test]
fn the_journal_git_and_ignored_build_outputs_are_not_walked() {
    let (dir, ws) = repo();
    for rel in [
        ".pev/tests/test_x.py",
        ".git/tests/test_y.py",
        "build/tests/test_z.py",
        "tests/kept/test_k.py",
    ] {
        std::fs::create_dir_all(dir.path().join(rel).parent().unwrap()).unwrap();
        std::fs::write(dir.path().join(rel), "x").unwrap();
    }
    std::fs::write(dir.path().join(".gitignore"), ".venv/\nbuild/\ntests/kept/\n").unwrap();
    let paths: Vec<String> = oracle().record(&ws).files.into_iter().map(|f| f.path).collect();
    assert!(paths.contains(&"tests/kept/test_k.py".to_owned()), "{paths:?}");
    for gone in [".pev/tests/test_x.py", ".git/tests/test_y.py", "build/tests/test_z.py"] {
        assert!(!paths.contains(&gone.to_owned()), "{gone}: {paths:?}");
    }
}
