//! Shared test fixtures: a temporary workspace with a tool context, recorded step outputs and
//! before-hashes, and a way to check an assertion written as JSON against them.

use std::collections::HashMap;
use std::path::Path;

use pev_protocol::Assertion;
use pev_protocol::assertion::AssertionResult;
use pev_tools::{ToolContext, Workspace};
use serde_json::Value;
use tempfile::TempDir;

use crate::CheckEnv;

/// A temporary workspace and what the checks see of a run in it.
pub(crate) struct Fixture {
    /// Holds the directory that contains the workspace (`ws/`), so tests can put files outside.
    pub(crate) dir: TempDir,
    pub(crate) ctx: ToolContext,
    pub(crate) outputs: HashMap<String, Value>,
    pub(crate) before: HashMap<String, Option<String>>,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        std::fs::write(dir.path().join("secret.txt"), "outside secret").unwrap();
        let ctx = ToolContext::new(Workspace::open(dir.path().join("ws")).unwrap());
        Self { dir, ctx, outputs: HashMap::new(), before: HashMap::new() }
    }

    pub(crate) fn root(&self) -> &Path {
        self.ctx.workspace.root()
    }

    /// Write `content` at `path` inside the workspace (creating directories).
    pub(crate) fn write(&self, path: &str, content: impl AsRef<[u8]>) {
        let full = self.root().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }

    /// Record the sha256 of `path` as it is now, as the engine does before a step.
    pub(crate) fn snapshot(&mut self, path: &str) {
        let hash = self.ctx.workspace.sha256(path).unwrap();
        self.before.insert(path.to_owned(), hash);
    }

    pub(crate) fn env(&self, step: Option<&'static str>) -> CheckEnv<'_> {
        CheckEnv { ctx: &self.ctx, step, outputs: &self.outputs, before: &self.before }
    }

    /// Check the assertion `json` as one of step `s`.
    pub(crate) async fn check(&self, json: Value) -> AssertionResult {
        let assertion: Assertion = serde_json::from_value(json).unwrap();
        crate::check(&assertion, &self.env(Some("s"))).await
    }
}

/// Assert that `result` passed and its detail is exactly `detail`.
#[track_caller]
pub(crate) fn passed(result: &AssertionResult, detail: &str) {
    assert!(result.passed, "expected a pass, got: {}", result.detail);
    assert_eq!(result.detail, detail);
}

/// Assert that `result` failed and its detail is exactly `detail`.
#[track_caller]
pub(crate) fn failed(result: &AssertionResult, detail: &str) {
    assert!(!result.passed, "expected a failure, got a pass: {}", result.detail);
    assert_eq!(result.detail, detail);
}

/// Assert that `result` failed with a detail that contains each of `parts`.
#[track_caller]
pub(crate) fn failed_with(result: &AssertionResult, parts: &[&str]) {
    assert!(!result.passed, "expected a failure, got a pass: {}", result.detail);
    for part in parts {
        assert!(result.detail.contains(part), "{:?} not in detail: {}", part, result.detail);
    }
}
