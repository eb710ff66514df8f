//! Which files are tests and test configuration by the conventions of the common ecosystems,
//! and, for files that only partly configure tests (`pyproject.toml`, `setup.cfg`,
//! `package.json`), which part of them is the oracle.
//!
//! Inferred conservatively: a path is an oracle by convention only when its name or a directory
//! on its way says so in the ecosystem's own terms (`tests/`, `test_*.py`, `*_test.go`,
//! `*.spec.ts`, `__tests__/`, `src/test/`, `spec/`, `testdata/`, `benches/`, `conftest.py`,
//! jest/vitest/pytest/tox configuration). Source files, READMEs and build files are never
//! oracles by convention; a project's own checks beyond these are declared (`[oracle] protect`).

/// Directory names whose files are tests or test data, wherever they are.
const TEST_DIRS: &[(&str, &str)] = &[
    ("tests", "a file under a tests/ directory"),
    ("test", "a file under a test/ directory"),
    ("__tests__", "a file under a __tests__/ directory (Jest)"),
    ("testdata", "Go test data (testdata/)"),
    ("spec", "a file under a spec/ directory (RSpec)"),
    ("benches", "a Rust benchmark (benches/)"),
];

/// Directory names that shadow a test runner's own package when they are on the path.
const SHADOWS: &[&str] = &["unittest", "pytest", "_pytest", "nose2", "doctest"];

/// Whole files that configure how tests run.
const CONFIG_FILES: &[(&str, &str)] = &[
    ("conftest.py", "pytest configuration (conftest.py)"),
    ("pytest.ini", "pytest configuration (pytest.ini)"),
    ("tox.ini", "tox configuration (tox.ini)"),
    ("noxfile.py", "nox configuration (noxfile.py)"),
    (".coveragerc", "coverage configuration (.coveragerc)"),
    ("phpunit.xml", "PHPUnit configuration"),
    (".rspec", "RSpec configuration (.rspec)"),
    (".npmrc", "npm configuration (.npmrc: node-options changes how `npm test` runs)"),
    ("sitecustomize.py", "Python start-up code (sitecustomize.py runs before any test)"),
    ("usercustomize.py", "Python start-up code (usercustomize.py runs before any test)"),
    (".nycrc", "nyc configuration"),
    (".nycrc.json", "nyc configuration"),
    ("karma.conf.js", "Karma configuration"),
    ("cypress.config.js", "Cypress configuration"),
    ("cypress.config.ts", "Cypress configuration"),
    ("playwright.config.js", "Playwright configuration"),
    ("playwright.config.ts", "Playwright configuration"),
];

/// Prefixes of test-runner configuration files with any extension (`jest.config.js`,
/// `vitest.config.mts`, `.mocharc.yml`).
const CONFIG_PREFIXES: &[(&str, &str)] = &[
    ("jest.config.", "Jest configuration"),
    ("jest.setup.", "Jest setup"),
    ("vitest.config.", "Vitest configuration"),
    ("vitest.setup.", "Vitest setup"),
    (".mocharc.", "Mocha configuration"),
    ("babel.config.", "Babel configuration (how tests are compiled)"),
];

/// Extensions of source files a test may be written in (for `*.test.*` / `*.spec.*`).
const SCRIPT_EXTS: &[&str] =
    &["js", "jsx", "ts", "tsx", "mjs", "cjs", "mts", "cts", "vue", "svelte"];

/// Files of which only a part configures tests: that part is their oracle.
const PARTIAL_FILES: &[(&str, &str)] = &[
    (
        "pyproject.toml",
        "the test sections of pyproject.toml ([tool.pytest…], [tool.coverage…], [tool.tox…])",
    ),
    ("setup.cfg", "the test sections of setup.cfg ([tool:pytest], [coverage:…])"),
    ("package.json", "the test settings of package.json (scripts.test, jest, vitest, mocha)"),
];

/// Why `path` (a normalised workspace path, `/`-separated) is an oracle by convention, if it is.
pub fn convention(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let dirs: Vec<&str> = path.split('/').collect();
    let dirs = dirs.split_last().map_or(&[][..], |(_, d)| d);
    if let Some((_, why)) = CONFIG_FILES.iter().find(|(n, _)| *n == name) {
        return Some(why);
    }
    if let Some((_, why)) = CONFIG_PREFIXES.iter().find(|(p, _)| name.starts_with(p)) {
        return Some(why);
    }
    if let Some((_, why)) = PARTIAL_FILES.iter().find(|(n, _)| *n == name) {
        return Some(why);
    }
    // Java and Kotlin: src/test/…
    if dirs.windows(2).any(|w| w == ["src", "test"]) {
        return Some("a file under src/test/ (Maven/Gradle tests)");
    }
    if let Some((_, why)) = TEST_DIRS.iter().find(|(d, _)| dirs.contains(d)) {
        return Some(why);
    }
    // A package named like a test runner shadows it (`unittest/__main__.py` that prints OK).
    if dirs.iter().any(|d| SHADOWS.contains(d)) {
        return Some("a package that shadows a test runner (unittest, pytest, …)");
    }
    let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
    match ext {
        "py" if stem.starts_with("test_") || stem.ends_with("_test") => {
            return Some("a Python test module (test_*.py, *_test.py)");
        }
        "go" if stem.ends_with("_test") => return Some("a Go test file (*_test.go)"),
        "rb" if stem.ends_with("_spec") || stem.ends_with("_test") => {
            return Some("a Ruby test file (*_spec.rb, *_test.rb)");
        }
        "java" | "kt" if stem.ends_with("Test") || stem.ends_with("Tests") => {
            return Some("a JUnit test class (*Test.java)");
        }
        _ => {}
    }
    if SCRIPT_EXTS.contains(&ext) {
        let inner = stem.rsplit_once('.').map(|(_, k)| k);
        if matches!(inner, Some("test" | "spec")) {
            return Some("a JavaScript/TypeScript test file (*.test.*, *.spec.*)");
        }
        // What `node --test` runs by default besides those.
        if stem == "test"
            || stem.ends_with("-test")
            || stem.ends_with("_test")
            || stem.starts_with("test-")
        {
            return Some(
                "a test file `node --test` runs (test.js, *-test.js, *_test.js, test-*.js)",
            );
        }
    }
    None
}

/// Whether only part of the file at `path` is an oracle (see [`oracle_view`]).
pub fn is_partial(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    PARTIAL_FILES.iter().any(|(n, _)| *n == name)
}

/// The part of `content` that is the oracle: the whole content for most files; for the files
/// that only partly configure tests, the test sections (a change elsewhere in them, a new
/// dependency say, is not a change of the oracle).
pub fn oracle_view(path: &str, content: &[u8]) -> Vec<u8> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let text = String::from_utf8_lossy(content);
    match name {
        "pyproject.toml" => pyproject_view(&text),
        "setup.cfg" => {
            sections(&text, |h| h == "tool:pytest" || h.starts_with("coverage:") || h == "pytest")
        }
        "package.json" => package_json_view(&text),
        _ => content.to_vec(),
    }
}

/// The text of the INI/TOML sections whose header `keep` accepts, headers included.
fn sections(text: &str, keep: impl Fn(&str) -> bool) -> Vec<u8> {
    let mut out = String::new();
    let mut on = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') && t.ends_with(']') {
            let header = t.trim_matches(|c| c == '[' || c == ']').trim().trim_matches('"');
            on = keep(header);
        }
        if on {
            out.push_str(t);
            out.push('\n');
        }
    }
    out.into_bytes()
}

/// The test tables of a pyproject.toml (`tool.pytest`, `tool.coverage`, `tool.tox`, `tool.nox`,
/// `tool.hatch.envs.test`), read as TOML whatever the spelling (`[tool."pytest".ini_options]`,
/// dotted keys under `[tool]`, a comment after a header), as canonical JSON; the whole text when
/// it does not parse (then any change counts).
fn pyproject_view(text: &str) -> Vec<u8> {
    if text.trim().is_empty() {
        return b"{}".to_vec();
    }
    let Ok(doc) = text.parse::<toml::Table>() else { return text.as_bytes().to_vec() };
    let tool = doc.get("tool").and_then(toml::Value::as_table);
    let mut view = serde_json::Map::new();
    for key in ["pytest", "coverage", "tox", "nox"] {
        if let Some(v) = tool.and_then(|t| t.get(key)) {
            view.insert(key.to_owned(), serde_json::to_value(v).unwrap_or_default());
        }
    }
    let hatch_test =
        tool.and_then(|t| t.get("hatch")).and_then(|h| h.get("envs")).and_then(|e| e.get("test"));
    if let Some(v) = hatch_test {
        view.insert("hatch.envs.test".to_owned(), serde_json::to_value(v).unwrap_or_default());
    }
    serde_json::to_vec(&view).unwrap_or_default()
}

/// `scripts.test*`, `jest`, `vitest`, `mocha`, `ava` of a package.json, as canonical JSON; the
/// whole text when it does not parse (then any change counts).
fn package_json_view(text: &str) -> Vec<u8> {
    // A file that does not exist yet (or is empty) has no test settings.
    let text = if text.trim().is_empty() { "{}" } else { text };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return text.as_bytes().to_vec();
    };
    let mut view = serde_json::Map::new();
    for key in ["jest", "vitest", "mocha", "ava", "c8", "nyc"] {
        if let Some(v) = value.get(key) {
            view.insert(key.to_owned(), v.clone());
        }
    }
    if let Some(scripts) = value.get("scripts").and_then(serde_json::Value::as_object) {
        for (k, v) in
            scripts.iter().filter(|(k, _)| k.starts_with("test") || k.starts_with("pretest"))
        {
            view.insert(format!("scripts.{k}"), v.clone());
        }
    }
    serde_json::to_vec(&view).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_and_test_configuration_of_each_ecosystem_are_oracles() {
        for path in [
            "tests/test_calc.py",
            "pkg/tests/helpers.py",
            "test_calc.py",
            "calc_test.py",
            "conftest.py",
            "tests/conftest.py",
            "pytest.ini",
            "tox.ini",
            "pyproject.toml",
            "setup.cfg",
            "src/sum.test.js",
            "src/sum.spec.ts",
            "src/__tests__/sum.js",
            "jest.config.js",
            "vitest.config.mts",
            "package.json",
            "calc_test.go",
            "testdata/golden.txt",
            "tests/integration.rs",
            "benches/speed.rs",
            "src/test/java/CalcTest.java",
            "spec/calc_spec.rb",
            "CalcTest.java",
            "src/test.js",
            "sum_test.js",
            "sum-test.mjs",
            "test-sum.cjs",
            ".npmrc",
        ] {
            assert!(convention(path).is_some(), "{path} should be an oracle");
        }
    }

    #[test]
    fn source_files_and_look_alikes_are_not() {
        for path in [
            "src/calc.py",
            "calc.py",
            "testing.py",
            "src/contest.py",
            "latest_results.py",
            "src/sum.js",
            "src/attest/x.js",
            "src/latest.js",
            "src/testing.js",
            "src/contest-entry.js",
            "main.go",
            "README.md",
            "Cargo.toml",
            "src/lib.rs",
            "src/main/java/Calc.java",
            "lib/calc.rb",
            "docs/testing.md",
        ] {
            assert_eq!(convention(path), None, "{path} should not be an oracle");
        }
    }

    #[test]
    fn only_the_test_sections_of_pyproject_are_its_oracle() {
        let before = b"[project]\nname = \"calc\"\ndependencies = []\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\n";
        let dep = b"[project]\nname = \"calc\"\ndependencies = [\"attrs\"]\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\n";
        let skip = b"[project]\nname = \"calc\"\ndependencies = []\n\n[tool.pytest.ini_options]\naddopts = \"-q -k 'not add'\"\n";
        assert_eq!(oracle_view("pyproject.toml", before), oracle_view("pyproject.toml", dep));
        assert_ne!(oracle_view("pyproject.toml", before), oracle_view("pyproject.toml", skip));
        // Spellings TOML reads as the same table change the view too.
        for sneaky in [
            "[project]\nname = \"calc\"\n\n[tool.\"pytest\".ini_options]\naddopts = \"--collect-only\"\n",
            "[project]\nname = \"calc\"\n\n[tool]\npytest.ini_options.addopts = \"--collect-only\"\n",
            "[project]\nname = \"calc\"\n\n[tool.pytest.ini_options] # c\naddopts = \"--collect-only\"\n",
        ] {
            assert_ne!(
                oracle_view("pyproject.toml", before),
                oracle_view("pyproject.toml", sneaky.as_bytes()),
                "{sneaky}"
            );
        }
        assert_eq!(
            oracle_view("package.json", b""),
            oracle_view("package.json", br#"{"name":"calc"}"#)
        );
        assert!(is_partial("sub/pyproject.toml"));
        assert!(!is_partial("tests/test_calc.py"));
    }

    #[test]
    fn only_the_test_settings_of_package_json_are_its_oracle() {
        let before =
            br#"{"name":"m","scripts":{"test":"node --test","build":"tsc"},"dependencies":{}}"#;
        let dep = br#"{"name":"m","scripts":{"test":"node --test","build":"tsc -p ."},"dependencies":{"x":"1"}}"#;
        let neuter = br#"{"name":"m","scripts":{"test":"true","build":"tsc"},"dependencies":{}}"#;
        assert_eq!(oracle_view("package.json", before), oracle_view("package.json", dep));
        assert_ne!(oracle_view("package.json", before), oracle_view("package.json", neuter));
        assert_eq!(oracle_view("tests/a.py", b"x"), b"x".to_vec());
    }
}
