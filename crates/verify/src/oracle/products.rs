//! Build products are not work: files a test run, a compiler or a package manager leaves
//! (`__pycache__/*.pyc`, `node_modules/.cache`, `target/`) are neither a step's effects nor
//! changes the mismatch rule or a report counts, and never oracle files. They are what the
//! workspace's `.gitignore` files ignore (the root's, each directory's on the way to a path, and
//! `.git/info/exclude`), the caches no project keeps as source (`CACHE_DIRS`, `*.pyc`) always,
//! and the usual output directories (`target/`, `coverage/`) when there is no `.gitignore`.
//! A command's changes to them are not recorded as the step's changes.
//!
//! The `.gitignore` reading follows git's rules for what projects write in practice: `#`
//! comments, `!` negation (the last matching line wins), a leading or inner `/` anchors a
//! pattern to its file's directory, a trailing `/` matches directories only, `*`, `?`, `[…]`
//! and `**`. A path inside an ignored directory is ignored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use glob::{MatchOptions, Pattern};

/// Caches no project keeps as source: build products in every workspace (a directory of this
/// name anywhere).
const CACHE_DIRS: &[&str] = &[
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    ".tox",
    ".nox",
    ".venv",
    "node_modules",
    ".npm",
    ".pnpm-store",
    ".yarn",
    ".parcel-cache",
    ".turbo",
    ".nyc_output",
    ".eggs",
    ".gradle",
];
/// Build outputs by name, which a project might also use for sources (a package called
/// `coverage`): products only in a workspace without a `.gitignore` to say so.
const OUTPUT_DIRS: &[&str] = &["target", "coverage", "venv", ".cache", ".next", ".nuxt"];
const CACHE_SUFFIXES: &[&str] = &[".pyc", ".pyo", ".class", ".o", ".DS_Store", ".coverage"];

const OPTIONS: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

/// One line of a `.gitignore`.
#[derive(Debug, Clone)]
struct Rule {
    pattern: Pattern,
    negated: bool,
    dir_only: bool,
    /// Matched against the path relative to the file's directory (else against each name).
    anchored: bool,
}

/// The rules of one directory's `.gitignore`, with the directory (`""` for the root).
#[derive(Debug, Clone, Default)]
struct RuleSet {
    rules: Vec<Rule>,
}

/// What counts as a build product in one workspace.
#[derive(Debug)]
pub struct BuildProducts {
    root: PathBuf,
    /// Directory (relative, `""` for the root) → its `.gitignore` rules, read on first need.
    sets: Mutex<HashMap<String, RuleSet>>,
    exclude: RuleSet,
    /// The workspace has a `.gitignore` at its root: it says what its outputs are.
    has_gitignore: bool,
}

impl BuildProducts {
    /// The rules of the workspace at `root` (its `.gitignore` files are read as they are needed).
    pub fn new(root: &Path) -> Self {
        let exclude = std::fs::read_to_string(root.join(".git/info/exclude"))
            .map(|t| parse(&t))
            .unwrap_or_default();
        let has_gitignore = root.join(".gitignore").is_file();
        Self { root: root.to_path_buf(), sets: Mutex::new(HashMap::new()), exclude, has_gitignore }
    }

    /// No `.gitignore` at all: only the common caches.
    pub fn defaults() -> Self {
        Self {
            root: PathBuf::new(),
            sets: Mutex::new(HashMap::new()),
            exclude: RuleSet::default(),
            has_gitignore: false,
        }
    }

    /// Whether the file at `path` (a normalised workspace path) is a build product.
    pub fn is_product(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let Some((name, dirs)) = parts.split_last() else { return false };
        if dirs.iter().any(|d| CACHE_DIRS.contains(d))
            || CACHE_SUFFIXES.iter().any(|s| name.ends_with(s))
        {
            return true;
        }
        if !self.has_gitignore && dirs.iter().any(|d| OUTPUT_DIRS.contains(d)) {
            return true;
        }
        if self.root.as_os_str().is_empty() {
            return false;
        }
        // A directory that is ignored hides everything in it (git does not look inside).
        for depth in 1..=parts.len() {
            let is_dir = depth < parts.len();
            if self.ignored(&parts[..depth], is_dir) {
                return true;
            }
        }
        false
    }

    /// Whether `path` lies in a cache no project keeps as source (`__pycache__`, `.venv`,
    /// `node_modules`) or is a compiled file (`*.pyc`), whatever `.gitignore` says.
    pub fn is_cache_path(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let Some((name, dirs)) = parts.split_last() else { return false };
        dirs.iter().any(|d| CACHE_DIRS.contains(d))
            || CACHE_SUFFIXES.iter().any(|s| name.ends_with(s))
    }

    /// Whether the directory at `path` is (or lies in) such a cache.
    pub fn is_cache_dir(&self, path: &str) -> bool {
        path.split('/').any(|d| CACHE_DIRS.contains(&d))
    }

    /// Whether a walk skips the directory at `path`: a cache, or a directory `.gitignore`
    /// ignores.
    pub fn skips_dir(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        if parts.iter().any(|d| CACHE_DIRS.contains(d))
            || (!self.has_gitignore && parts.iter().any(|d| OUTPUT_DIRS.contains(d)))
        {
            return true;
        }
        !self.root.as_os_str().is_empty()
            && (1..=parts.len()).any(|d| self.ignored(&parts[..d], true))
    }

    /// Whether the entry `parts` (a directory when `is_dir`) is ignored by the rules of its
    /// ancestors' `.gitignore` files (deeper files win, the last matching line of a file wins).
    fn ignored(&self, parts: &[&str], is_dir: bool) -> bool {
        let mut verdict =
            match_set(&self.exclude, &parts.join("/"), parts.last().copied().unwrap_or(""), is_dir);
        for base in 0..parts.len() {
            let dir = parts[..base].join("/");
            let set = self.set(&dir);
            let rel = parts[base..].join("/");
            if let Some(v) = match_set(&set, &rel, parts.last().copied().unwrap_or(""), is_dir) {
                verdict = Some(v);
            }
        }
        verdict.unwrap_or(false)
    }

    fn set(&self, dir: &str) -> RuleSet {
        let mut sets = match self.sets.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        sets.entry(dir.to_owned())
            .or_insert_with(|| {
                let file = if dir.is_empty() {
                    self.root.join(".gitignore")
                } else {
                    self.root.join(dir).join(".gitignore")
                };
                std::fs::read_to_string(file).map(|t| parse(&t)).unwrap_or_default()
            })
            .clone()
    }
}

/// `Some(true)` ignored, `Some(false)` re-included, `None` no rule matched.
fn match_set(set: &RuleSet, rel: &str, name: &str, is_dir: bool) -> Option<bool> {
    let mut verdict = None;
    for rule in &set.rules {
        if rule.dir_only && !is_dir {
            continue;
        }
        let hit = if rule.anchored {
            rule.pattern.matches_with(rel, OPTIONS)
        } else {
            rule.pattern.matches_with(name, OPTIONS)
        };
        if hit {
            verdict = Some(!rule.negated);
        }
    }
    verdict
}

fn parse(text: &str) -> RuleSet {
    let mut rules = Vec::new();
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (negated, line) = match line.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, line.strip_prefix('\\').unwrap_or(line)),
        };
        let (dir_only, line) = match line.strip_suffix('/') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let anchored = line.contains('/');
        let line = line.strip_prefix('/').unwrap_or(line);
        // `**/x` matches at any depth: as an unanchored name when nothing else follows.
        let (anchored, line) = match line.strip_prefix("**/") {
            Some(rest) if !rest.contains('/') => (false, rest),
            _ => (anchored, line),
        };
        if line.is_empty() {
            continue;
        }
        if let Ok(pattern) = Pattern::new(line) {
            rules.push(Rule { pattern, negated, dir_only, anchored });
        }
    }
    RuleSet { rules }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_caches_are_products_without_a_gitignore() {
        let p = BuildProducts::defaults();
        assert!(p.is_product("tests/__pycache__/test_calc.cpython-311.pyc"));
        assert!(p.is_product("src/calc.pyc"));
        assert!(p.is_product("node_modules/.cache/x"));
        assert!(p.is_product("target/debug/app"));
        assert!(p.is_product(".pytest_cache/v/cache/lastfailed"));
        assert!(!p.is_product("src/calc.py"));
        assert!(!p.is_product("tests/test_calc.py"));
        assert!(!p.is_product("docs/target.md"));
    }

    #[test]
    fn gitignore_rules_follow_git() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".gitignore"),
            "# build\n/dist/\n*.log\n!keep.log\nout/\nsrc/gen/*.js\n**/snap\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("pkg")).unwrap();
        std::fs::write(dir.path().join("pkg/.gitignore"), "local.txt\n").unwrap();
        let p = BuildProducts::new(dir.path());
        assert!(p.is_product("dist/app.js"));
        assert!(!p.is_product("lib/dist/app.js"), "/dist/ is anchored to the root");
        assert!(p.is_product("a/b/run.log"));
        assert!(!p.is_product("keep.log"), "negated");
        assert!(p.is_product("x/out/y.txt"), "out/ matches a directory anywhere");
        assert!(!p.is_product("x/out"), "out/ is for directories only");
        assert!(p.is_product("src/gen/a.js"));
        assert!(!p.is_product("src/gen/sub/a.js"), "* does not cross /");
        assert!(p.is_product("deep/er/snap/file"));
        // With a .gitignore, it says what the outputs are: a `coverage` package is source.
        assert!(!p.is_product("src/coverage/report.py"));
        assert!(p.is_product("src/__pycache__/m.pyc"));
        assert!(BuildProducts::defaults().is_product("src/coverage/report.py"));
        assert!(p.is_product("pkg/local.txt"), "a nested .gitignore");
        assert!(!p.is_product("local.txt"), "a nested .gitignore applies below its directory only");
        assert!(!p.is_product("src/calc.py"));
    }
}
