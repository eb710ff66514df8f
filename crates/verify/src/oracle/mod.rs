//! Oracles: a test the run must make pass is the check, not the work. The oracle of a run is the
//! set of files its checks judge it by: tests and test configuration by the conventions of the
//! common ecosystems ([`convention`], kept in `pev-protocol` so the linter can say what it infers), files a check's command names, and what the user or the
//! plan protects. The engine records them (path, hash, content) when the plan is made; from then
//! on pev refuses its own tools' changes to them unless the step may change them, finds every
//! change made by other means (a command without the full sandbox, a client's own edit tool, a
//! person), and, when one was changed, re-checks the evidence on a copy of the final workspace
//! with the oracle as it was ([`pristine`]), as SWE-bench resets the tests before it runs them.
//! A change without permission is `oracle_changed`, and such a run is never `success`.
//!
//! Who may change an oracle file: a glob of the user's `allow` (`pev.toml`, `--allow-oracle`,
//! the plan of `pev run`, which is the user's own), or a step marked `may_change_oracle` (or,
//! in loop mode and MCP, any step) when the goal, in the user's words, asks for work on tests
//! ([`asks_for_test_work`]): a model cannot grant itself leave to change its checks.
//!
//! Build products ([`BuildProducts`]: what `.gitignore` ignores, and the common caches) are
//! neither oracle files nor work.

pub mod hidden;
pub mod pristine;
mod products;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use glob::{MatchOptions, Pattern};
use pev_protocol::oracle::{
    OracleChange, OracleChangeKind, OracleFile, OracleSettings, PlanOracle,
};
use pev_protocol::run::{Reason, ReasonCode};
use pev_tools::Workspace;

pub use pev_protocol::oracle::{convention, is_partial, oracle_view};
pub use products::BuildProducts;

use crate::text::{CLIP, clip};

/// How many files a workspace walk visits before it gives up (the oracle is then what it found).
const MAX_WALK: usize = 50_000;
/// The most oracle files recorded.
pub const MAX_ORACLE_FILES: usize = 5_000;
/// The largest oracle file whose content is kept (to restore it and to show its diff).
pub const MAX_CONTENT: u64 = 2 * 1024 * 1024;
/// The most oracle content kept in all.
const MAX_TOTAL: u64 = 128 * 1024 * 1024;
/// How many characters of a diff a change keeps.
const MAX_DIFF: usize = 4_000;

const GLOB: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: false,
    require_literal_leading_dot: false,
};

/// The oracle rules of one run.
#[derive(Debug, Clone, Default)]
pub struct Oracle {
    conventions: bool,
    protect: Vec<(String, Pattern)>,
    allow: Vec<(String, Pattern)>,
    /// Files a check's command names: path → the command.
    named: BTreeMap<String, String>,
}

impl Oracle {
    /// The rules from the user's settings and the plan's `oracle`. The plan's `allow` counts only
    /// when `plan_allow` (the plan is the user's, or the goal asks for work on tests).
    pub fn new(
        settings: &OracleSettings,
        plan: Option<&PlanOracle>,
        plan_allow: bool,
    ) -> Result<Self, String> {
        let compile = |globs: &mut dyn Iterator<Item = &String>, what: &str| {
            globs
                .map(|g| {
                    let g = g.trim().trim_start_matches("./");
                    Pattern::new(g)
                        .map(|p| (g.to_owned(), p))
                        .map_err(|e| format!("{what}: `{g}` is not a valid glob: {e}"))
                })
                .collect::<Result<Vec<_>, String>>()
        };
        let plan_protect = plan.map(|p| p.protect.as_slice()).unwrap_or_default();
        let plan_allowed =
            plan.filter(|_| plan_allow).map(|p| p.allow.as_slice()).unwrap_or_default();
        let protect = compile(&mut settings.protect.iter().chain(plan_protect), "oracle.protect")?;
        let allow = compile(&mut settings.allow.iter().chain(plan_allowed), "oracle.allow")?;
        Ok(Self { conventions: settings.conventions, protect, allow, named: BTreeMap::new() })
    }

    /// Adds the workspace files (and the files of directories) that `command`, a check's
    /// command, runs as its check: the script an interpreter runs (`python3 check.py`, `bash
    /// check.sh`, `./check.sh`) and the test paths a test runner is given (`pytest
    /// tests/test_calc.py`, `python3 -m unittest discover -s tests`, `node --test test/`).
    /// Files a command only compiles, imports or lints (`python3 -m py_compile src/calc.py`,
    /// `mypy src`, `--cov=src`) are the work, not the check, and so are paths in `targets` (files
    /// the plan's steps are told to change).
    pub fn name_check_files(&mut self, command: &str, ws: &Workspace, targets: &[String]) {
        for word in paths_checked_by(command) {
            if word == "." || word.contains("..") || word.starts_with('/') {
                continue;
            }
            let Ok(meta) = ws.metadata(&word) else { continue };
            let mut files = Vec::new();
            match meta.kind {
                pev_tools::EntryKind::File => files.push(word.clone()),
                pev_tools::EntryKind::Dir => {
                    let products = BuildProducts::new(ws.root());
                    walk(ws.root(), &word, &products, &mut |p| files.push(p.to_owned()));
                }
                _ => {}
            }
            for f in files.into_iter().filter(|f| !targets.contains(f)) {
                self.named.entry(f).or_insert_with(|| clip(command, CLIP));
            }
        }
    }

    /// Why `path` (a normalised workspace path) is an oracle file, if it is.
    pub fn why(&self, path: &str) -> Option<String> {
        if path.starts_with(".pev/") || path.starts_with(".git/") {
            return None;
        }
        if let Some((glob, _)) = self.protect.iter().find(|(_, p)| p.matches_with(path, GLOB)) {
            return Some(format!("protected by `{glob}`"));
        }
        if let Some(command) = self.named.get(path) {
            return Some(format!("named by the check `{command}`"));
        }
        if self.conventions {
            return convention(path).map(str::to_owned);
        }
        None
    }

    /// Whether the user's (or the user's plan's) `allow` lets any step change `path`.
    pub fn allowed(&self, path: &str) -> bool {
        self.allow.iter().any(|(_, p)| p.matches_with(path, GLOB))
    }

    /// The oracle files of the workspace now, with their contents where they are small enough
    /// to keep (`(sha256, bytes)` pairs to store as blobs).
    pub fn record(&self, ws: &Workspace) -> Recorded {
        let products = BuildProducts::new(ws.root());
        let mut out = Recorded::default();
        let mut total = 0u64;
        let mut paths = Vec::new();
        out.truncated = !walk(ws.root(), "", &products, &mut |p| paths.push(p.to_owned()));
        for path in paths {
            let Some(why) = self.why(&path) else { continue };
            if out.files.len() >= MAX_ORACLE_FILES {
                out.truncated = true;
                break;
            }
            let Ok(bytes) = ws.read(&path) else { continue };
            let sha256 = sha256_hex(&bytes);
            let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
            if size <= MAX_CONTENT && total.saturating_add(size) <= MAX_TOTAL {
                total = total.saturating_add(size);
                out.contents.push((sha256.clone(), bytes));
            }
            out.files.push(OracleFile { path, sha256, why });
        }
        out
    }

    /// How the oracle recorded as `files` differs from the workspace now. `pristine` gives a
    /// recorded content by its sha256 (the journal's blobs); `permitted` says whether a change to
    /// a path was allowed (beyond [`Oracle::allowed`], which is applied here too).
    pub fn changes(
        &self,
        files: &[OracleFile],
        pristine: &dyn Fn(&str) -> Option<Vec<u8>>,
        ws: &Workspace,
        permitted: &dyn Fn(&str) -> bool,
    ) -> Vec<OracleChange> {
        let products = BuildProducts::new(ws.root());
        let mut out = Vec::new();
        let recorded: BTreeSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
        for file in files {
            let now = match ws.read(&file.path) {
                Ok(bytes) => Some(bytes),
                Err(_) if ws.exists(&file.path).unwrap_or(true) => {
                    // There but unreadable (a directory now, a symlink out): changed.
                    Some(Vec::new())
                }
                Err(_) => None,
            };
            let before = pristine(&file.sha256);
            let change = match &now {
                None => OracleChangeKind::Deleted,
                Some(bytes) if sha256_hex(bytes) == file.sha256 => continue,
                Some(bytes) => {
                    // A partly-oracle file (pyproject.toml) changed outside its test sections
                    // is not an oracle change.
                    if is_partial(&file.path)
                        && let Some(before) = &before
                        && oracle_view(&file.path, before) == oracle_view(&file.path, bytes)
                    {
                        continue;
                    }
                    OracleChangeKind::Modified
                }
            };
            let allowed = self.allowed(&file.path) || permitted(&file.path);
            out.push(OracleChange {
                path: file.path.clone(),
                change,
                why: file.why.clone(),
                allowed,
                diff: diff(before.as_deref(), now.as_deref()),
            });
        }
        let mut created = Vec::new();
        walk(ws.root(), "", &products, &mut |p| {
            if !recorded.contains(p) {
                created.push(p.to_owned());
            }
        });
        for path in created {
            // A file a check names but the run did not record (a replan's new check) is not
            // known to be new; the tests and protected files are.
            let Some(why) = self.why(&path).filter(|_| !self.named.contains_key(&path)) else {
                continue;
            };
            let now = ws.read(&path).ok();
            // A new package.json or pyproject.toml without test settings changes no check.
            if is_partial(&path)
                && oracle_view(&path, now.as_deref().unwrap_or_default()) == oracle_view(&path, b"")
            {
                continue;
            }
            let allowed = self.allowed(&path) || permitted(&path);
            out.push(OracleChange {
                diff: diff(None, now.as_deref()),
                path,
                change: OracleChangeKind::Created,
                why,
                allowed,
            });
        }
        out
    }
}

/// What [`Oracle::record`] found.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    pub files: Vec<OracleFile>,
    /// `(sha256, content)` of the files small enough to keep.
    pub contents: Vec<(String, Vec<u8>)>,
    /// The workspace had more files than a walk visits, or more oracle files than are kept.
    pub truncated: bool,
}

/// The reasons a run's oracle changes give: one `oracle_changed` per changed or deleted oracle
/// file that no permission covers. A created file is not a reason by itself: the pristine
/// re-check runs without it.
pub fn changed_reasons(changes: &[OracleChange]) -> Vec<Reason> {
    changes
        .iter()
        .filter(|c| !c.allowed && c.change != OracleChangeKind::Created)
        .map(|c| {
            let what = match c.change {
                OracleChangeKind::Deleted => "deleted",
                _ => "changed",
            };
            Reason {
                code: ReasonCode::OracleChanged,
                step: None,
                message: format!(
                    "{} was {what}, but it is what the run is checked by ({}); a passing check \
                     proves nothing when the run changed the check. Restore it (`git checkout -- \
                     {}`, or undo the diff `pev show` prints), fix the code under test instead, or \
                     allow the change ([oracle] allow in pev.toml, --allow-oracle, or a goal that \
                     asks for work on tests)",
                    c.path, c.why, c.path
                ),
            }
        })
        .collect()
}

/// Adds the regressions found on the pristine oracle to `check`, each said as such (one the
/// final re-check already has is not added twice).
pub fn add_pristine_regressions(
    check: &mut pev_protocol::run::FinalCheck,
    found: Vec<pev_protocol::run::Regression>,
) {
    for mut r in found {
        if check.regressed.iter().any(|x| x.of == r.of && x.kind == r.kind && x.path == r.path) {
            continue;
        }
        r.now = format!("on the pristine oracle (the tests as they were recorded): {}", r.now);
        check.regressed.push(r);
    }
}

/// What a model is told when pev's own tool refuses to change an oracle file.
pub fn refusal(path: &str, why: &str) -> String {
    format!(
        "refused: {path} is one of the checks this work is judged by ({why}), and this step may \
         not change it. Make the check pass by fixing the code under test, not the test; if the \
         test itself is wrong, say so and mark the step blocked with the reason instead of \
         editing it."
    )
}

/// Whether `text` (a goal or a step's title, in a person's words) asks for work on the tests
/// themselves: a change verb whose object is a test ("add a test for subtract()", "update the
/// tests to the new API", "write unit tests", "add subtract() tests", "implement subtract() and
/// test it"). "Make the failing test pass", "fix the bug so the tests pass", "fix the failing
/// test", "do not modify the tests" and "add a setup.cfg" do not.
pub fn asks_for_test_work(text: &str) -> bool {
    const VERBS: &[&str] = &[
        "add",
        "write",
        "create",
        "update",
        "extend",
        "rewrite",
        "modify",
        "change",
        "adjust",
        "adapt",
        "port",
        "migrate",
        "refactor",
        "delete",
        "remove",
        "rename",
        "improve",
        "expand",
        "edit",
        "replace",
        "regenerate",
        "cover",
        "implement",
        "include",
        "fix-up",
    ];
    const FILLERS: &[&str] = &[
        "a",
        "an",
        "the",
        "new",
        "more",
        "missing",
        "unit",
        "integration",
        "regression",
        "some",
        "few",
        "additional",
        "extra",
        "its",
        "their",
        "our",
        "my",
        "existing",
        "all",
        "e2e",
        "end-to-end",
        "snapshot",
        "golden",
        "property",
        "property-based",
        "obsolete",
        "outdated",
        "old",
        "this",
        "that",
        "these",
        "those",
        "two",
        "three",
        "several",
        "proper",
        "basic",
        "failing",
        "good",
        "simple",
        "small",
    ];
    /// Words after which the verb's object has ended ("change add() so the tests pass").
    const STOPS: &[&str] = &[
        "so", "that", "until", "because", "to", "in", "into", "of", "for", "and", "or", "then",
        "when", "if", "with", "without", "before", "after", "which", "while",
    ];
    const NEGATIONS: &[&str] = &["not", "don't", "dont", "never", "no", "without", "nor", "avoid"];
    const NOUNS: &[&str] = &[
        "test",
        "tests",
        "testcase",
        "testcases",
        "spec",
        "specs",
        "suite",
        "fixtures",
        "fixture",
        "snapshots",
        "assertions",
        "coverage",
    ];
    let words: Vec<String> = text
        .split(|c: char| c.is_whitespace() || ",;:!?()\"".contains(c))
        .map(|w| w.trim_matches(|c: char| c == '.' || c == '`' || c == '\'').to_lowercase())
        .filter(|w| !w.is_empty())
        .collect();
    let is_noun = |w: &str| {
        NOUNS.contains(&w)
            || ((w.contains('/') || w.contains('.')) && convention(w).is_some() && !is_partial(w))
    };
    for (i, word) in words.iter().enumerate() {
        // "… and test it", "… then test it": test as the verb.
        let test_verb = matches!(word.as_str(), "test" | "tests")
            && i.checked_sub(1)
                .and_then(|j| words.get(j))
                .is_some_and(|p| matches!(p.as_str(), "and" | "then" | "to"))
            && !words
                .get(i + 1)
                .is_some_and(|n| matches!(n.as_str(), "pass" | "passes" | "fail" | "fails"));
        if !VERBS.contains(&word.as_str()) && !test_verb {
            continue;
        }
        // "do not modify the tests", "no need to add tests": a negated verb grants nothing.
        let negated = words[i.saturating_sub(3)..i].iter().any(|w| NEGATIONS.contains(&w.as_str()));
        if negated {
            continue;
        }
        if test_verb {
            return true;
        }
        // The object: the first word after the fillers, or a compound of it and the next
        // ("add subtract() tests", "update parser tests"), up to a stop word.
        let mut after = words.iter().skip(i + 1).skip_while(|w| FILLERS.contains(&w.as_str()));
        let first = after.next().map(String::as_str).unwrap_or("");
        let second = after.next().map(String::as_str).unwrap_or("");
        if STOPS.contains(&first) {
            continue;
        }
        if is_noun(first) || (!FILLERS.contains(&second) && is_noun(second)) {
            return true;
        }
    }
    false
}

/// Whether `command` runs tests (a test runner, a test script): a passing one is evidence the
/// change works only then, not when it merely imports or compiles the code.
pub fn runs_tests(command: &str) -> bool {
    const RUNNERS: &[&str] = &[
        "pytest",
        "py.test",
        "unittest",
        "nose2",
        "tox",
        "nox",
        "jest",
        "vitest",
        "mocha",
        "ava",
        "tap",
        "jasmine",
        "karma",
        "playwright",
        "cypress",
        "rspec",
        "minitest",
        "phpunit",
        "ctest",
        "prove",
        "bats",
    ];
    let words: Vec<&str> =
        command.split(|c: char| c.is_whitespace() || ";&|()".contains(c)).collect();
    words.iter().enumerate().any(|(i, w)| {
        let name = w.rsplit('/').next().unwrap_or(w);
        let next = words.get(i + 1).copied().unwrap_or("");
        RUNNERS.contains(&name)
            || (matches!(
                name,
                "go" | "cargo"
                    | "mvn"
                    | "gradle"
                    | "./gradlew"
                    | "gradlew"
                    | "dotnet"
                    | "swift"
                    | "mix"
                    | "deno"
                    | "bun"
                    | "make"
            ) && matches!(next, "test" | "tests" | "check"))
            || (matches!(name, "npm" | "yarn" | "pnpm")
                && (next == "test"
                    || next == "t"
                    || (next == "run" && words.get(i + 2).is_some_and(|s| s.starts_with("test")))))
            || (name == "node" && next == "--test")
            || convention(w.trim_start_matches("./")).is_some_and(|_| !is_partial(w))
    })
}

/// The paths `command` runs as its check (as written, `./` taken off), for rules that have no
/// workspace at hand (loop mode's mismatch rule): see [`Oracle::name_check_files`].
pub fn paths_checked_by(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    for simple in command.split(['\n', ';', '|', '&']) {
        let words: Vec<&str> = simple
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| c == '\'' || c == '"' || c == '(' || c == ')'))
            .filter(|w| !w.is_empty())
            .collect();
        for p in checked_paths(&words) {
            let p = p.trim_start_matches("./").trim_end_matches('/').to_owned();
            if !p.is_empty() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// The paths one simple command (`words`) runs as a check: see [`Oracle::name_check_files`].
fn checked_paths<'a>(words: &[&'a str]) -> Vec<&'a str> {
    const INTERPRETERS: &[&str] = &[
        "python", "python3", "python2", "node", "bash", "sh", "zsh", "dash", "ruby", "perl", "php",
        "bun", "deno", "tsx", "ts-node",
    ];
    const RUNNERS: &[&str] = &[
        "pytest", "py.test", "nose2", "tox", "jest", "vitest", "mocha", "ava", "tap", "jasmine",
        "rspec", "phpunit", "prove", "bats",
    ];
    const TEST_MODULES: &[&str] = &["pytest", "unittest", "nose2", "doctest"];
    const WRAPPERS: &[&str] =
        &["env", "exec", "time", "timeout", "nice", "npx", "uvx", "pipx", "xvfb-run"];
    let mut rest = words;
    // Leading assignments (`PYTHONPATH=src`), wrappers (`timeout 60`, `npx`), `uv run`.
    loop {
        match rest.split_first() {
            Some((w, tail)) if w.contains('=') && !w.starts_with('-') => rest = tail,
            Some((w, tail)) if WRAPPERS.contains(w) => {
                rest = tail;
                while rest.first().is_some_and(|w| w.starts_with('-') || w.parse::<f64>().is_ok()) {
                    rest = &rest[1..];
                }
            }
            Some((w, tail))
                if matches!(
                    *w,
                    "uv" | "poetry" | "pdm" | "hatch" | "pipenv" | "npm" | "yarn" | "pnpm"
                ) && tail.first().is_some_and(|n| matches!(*n, "run" | "exec")) =>
            {
                rest = &tail[1..];
            }
            _ => break,
        }
    }
    let Some((program, args)) = rest.split_first() else { return Vec::new() };
    let name = program.rsplit('/').next().unwrap_or(program);
    let interpreter = INTERPRETERS.contains(&name)
        || name
            .strip_prefix("python")
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'));
    // `.` is the whole workspace: a check run from it (`-t .`) names no file of it.
    let paths = |args: &[&'a str]| -> Vec<&'a str> {
        args.iter()
            .copied()
            .filter(|a| !a.starts_with('-') && !a.contains('=') && *a != ".")
            .collect()
    };
    if interpreter {
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            match *arg {
                "-m" => {
                    let module = args.get(i + 1).copied().unwrap_or("");
                    // `-s tests` gives its directory as a path like any other.
                    return if TEST_MODULES.contains(&module) {
                        paths(&args[(i + 2).min(args.len())..])
                    } else {
                        Vec::new()
                    };
                }
                "-c" | "-e" | "--eval" | "-p" | "--print" => return Vec::new(),
                // `node --test [paths]`: every path is a test.
                "--test" => return paths(&args[i + 1..]),
                a if a.starts_with('-') => i += 1,
                // The script the interpreter runs is the check.
                script => return vec![script],
            }
        }
        return Vec::new();
    }
    if RUNNERS.contains(&name)
        || (matches!(name, "go" | "cargo") && args.first().is_some_and(|a| *a == "test"))
    {
        return paths(args).into_iter().filter(|a| *a != "test").collect();
    }
    // A script of the workspace run directly (`./check.sh`, `scripts/check`).
    if program.contains('/') {
        return vec![program];
    }
    Vec::new()
}

/// Visits every file under `dir` (relative to `root`, `""` for all), skipping `.git`, `.pev`,
/// build products and symlinks; `false` when the walk stopped at [`MAX_WALK`].
fn walk(root: &Path, dir: &str, products: &BuildProducts, visit: &mut dyn FnMut(&str)) -> bool {
    let mut stack = vec![dir.to_owned()];
    let mut seen = 0usize;
    while let Some(rel) = stack.pop() {
        let Ok(entries) =
            std::fs::read_dir(if rel.is_empty() { root.to_path_buf() } else { root.join(&rel) })
        else {
            continue;
        };
        let mut names: Vec<(String, std::fs::FileType)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| Some((e.file_name().into_string().ok()?, e.file_type().ok()?)))
            .collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in names {
            let path = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            // A .gitignore line does not hide a test: inside a test directory only the caches
            // no project keeps as source are skipped.
            let in_tests = convention(&format!("{path}/x.py")).is_some();
            if kind.is_dir() {
                if rel.is_empty() && (name == ".git" || name == ".pev") {
                    continue;
                }
                if products.skips_dir(&path) && (!in_tests || products.is_cache_dir(&path)) {
                    continue;
                }
                stack.push(path);
            } else if kind.is_file() || kind.is_symlink() {
                // A symlink is visited as the file it names (a test linked to a module that
                // patches the assertions is still a test file).
                seen += 1;
                if seen > MAX_WALK {
                    return false;
                }
                if !products.is_product(&path)
                    || convention(&path).is_some_and(|_| !products.is_cache_path(&path))
                {
                    visit(&path);
                }
            }
        }
    }
    true
}

/// A unified diff from `before` to `after` (`None` = absent), clipped.
pub fn diff(before: Option<&[u8]>, after: Option<&[u8]>) -> String {
    let old = String::from_utf8_lossy(before.unwrap_or_default());
    let new = String::from_utf8_lossy(after.unwrap_or_default());
    let text = similar::TextDiff::from_lines(old.as_ref(), new.as_ref())
        .unified_diff()
        .context_radius(2)
        .to_string();
    if text.chars().count() <= MAX_DIFF {
        return text;
    }
    let mut out: String = text.chars().take(MAX_DIFF).collect();
    out.push_str("\n… (diff clipped)");
    out
}

/// The sha256 of `bytes`, as the journal writes it.
pub fn sha256_of(bytes: &[u8]) -> String {
    sha256_hex(bytes)
}

/// A check's command as a reason quotes it.
pub fn clip_command(command: &str) -> String {
    clip(command, CLIP)
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for b in Sha256::digest(bytes) {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

#[cfg(test)]
#[path = "oracle_tests.rs"]
mod tests;
