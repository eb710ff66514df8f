//! Oracles: the files a run's checks judge it by (its tests and test configuration, and what the
//! user protects), and the checks it never sees. A test the run must make pass is evidence, not
//! work: pev refuses its tools' changes to an oracle file, runs the checks against the oracle as
//! it was when the plan was made, and never calls a run that changed one without permission
//! `success`. These are the settings (the plan's `oracle`, `[oracle]` in `pev.toml`, the CLI's
//! flags) and what a run reports about its oracle (`final_check.oracle`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[path = "oracle_convention.rs"]
mod convention;

pub use convention::{convention, is_partial, oracle_view};

/// What a plan says about its oracle (`"oracle": {"protect": [...], "allow": [...]}`).
/// `protect` only ever adds oracle files. `allow` lets the run change oracle files; in a plan a
/// model wrote (`pev agent`) it is honoured only when the goal itself asks for work on tests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanOracle {
    /// Globs of workspace paths that are oracle files beyond the inferred ones
    /// (`docs/spec.md`, `golden/**`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protect: Vec<String>,
    /// Globs of oracle files the run may change (`tests/snapshots/**`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
}

/// The user's oracle settings: `[oracle]` in `pev.toml` (the workspace's file may only add to
/// `protect` and `hidden`), and `--protect`, `--allow-oracle`, `--hidden-check` on the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OracleSettings {
    /// Infer oracle files by the ecosystems' conventions (`tests/`, `test_*.py`, `*.test.ts`,
    /// `*_test.go`, `conftest.py`, jest/pytest configuration …). Default true.
    #[serde(default = "yes")]
    pub conventions: bool,
    /// Globs of more oracle files.
    #[serde(default)]
    pub protect: Vec<String>,
    /// Globs of oracle files any run may change.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Checks the models never see, run by pev when it decides the verdict.
    #[serde(default)]
    pub hidden: Vec<HiddenCheck>,
}

impl Default for OracleSettings {
    fn default() -> Self {
        Self { conventions: true, protect: Vec::new(), allow: Vec::new(), hidden: Vec::new() }
    }
}

fn yes() -> bool {
    true
}

/// A held-out check: a command run on a scratch copy of the final workspace (with the pristine
/// oracle), with an optional directory of held-out tests, outside the workspace, copied into it
/// first. Neither the models' tools nor the run's commands can read the directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HiddenCheck {
    /// How results and reasons name it (default: "hidden check N"; never the command, which a
    /// model reading a reason could special-case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Run by `sh -c` in the copy, in the run's sandbox; passes on exit 0.
    pub command: String,
    /// A directory outside the workspace with the held-out tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// Where `dir` appears in the copy (a relative path; default: the directory's own name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// Seconds before the command is killed (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
}

impl HiddenCheck {
    /// The name errors about the setting use (the command when it has no name).
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.command)
    }
}

/// One oracle file as the run recorded it when the plan was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OracleFile {
    pub path: String,
    /// sha256 of the whole file when recorded.
    pub sha256: String,
    /// Why it is an oracle: the convention, the glob, or the check that names it.
    pub why: String,
}

/// How an oracle file differs from when the plan was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OracleChangeKind {
    Modified,
    Deleted,
    /// A new file where an oracle file would be (a `conftest.py`, a new test module): the checks
    /// run without it on the pristine oracle.
    Created,
}

/// One changed oracle file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OracleChange {
    pub path: String,
    pub change: OracleChangeKind,
    pub why: String,
    /// The change was allowed (a step or setting that may change it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allowed: bool,
    /// A unified diff from the recorded content to the content now (clipped).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub diff: String,
}

/// What a hidden check showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HiddenResult {
    pub name: String,
    pub passed: bool,
    /// What was seen (exit code and the end of the output). Never shown to a model.
    pub detail: String,
}

/// What the run's verdict knew about its oracle (`final_check.oracle`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OracleCheck {
    /// How many oracle files were recorded when the plan was made.
    pub files: usize,
    /// The first of them, with why each is an oracle (`pev show` lists them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inferred: Vec<OracleFile>,
    /// Oracle files that differ now, allowed or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<OracleChange>,
    /// The evidence was re-checked on a copy of the final workspace with the oracle as it was
    /// recorded (because an oracle file changed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pristine_recheck: bool,
    /// The hidden checks, when the run has some.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<HiddenResult>,
    /// Why the pristine re-check or a hidden check could not run, if one could not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}
