//! A fixture: a temp dir holding a workspace (`ws/`) and, beside it, a directory the sandbox must
//! never reach (`outside/secret.txt`).

use std::path::{Path, PathBuf};

use pev_tools::{Registry, ToolContext, ToolError, ToolPolicy, Workspace};
use serde_json::Value;

pub const SECRET: &str = "top secret\n";

pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub ctx: ToolContext,
    pub registry: Registry,
}

impl Fixture {
    pub fn new() -> Self {
        Self::with_policy(ToolPolicy::default())
    }

    pub fn with_policy(policy: ToolPolicy) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("ws")).unwrap();
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        std::fs::write(tmp.path().join("outside/secret.txt"), SECRET).unwrap();
        let workspace = Workspace::open(tmp.path().join("ws")).unwrap();
        Self {
            tmp,
            ctx: ToolContext {
                workspace,
                policy,
                sandbox: std::sync::Arc::new(pev_tools::Sandbox::off()),
            },
            registry: Registry::builtin(),
        }
    }

    /// The real path of something in the workspace, for the test's own setup and checks.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join("ws").join(rel)
    }

    pub fn outside(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }

    pub fn write(&self, rel: &str, content: &str) {
        let path = self.path(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    pub fn symlink(&self, target: impl AsRef<Path>, link: &str) {
        std::os::unix::fs::symlink(target, self.path(link)).unwrap();
    }

    pub fn ws(&self) -> &Workspace {
        &self.ctx.workspace
    }

    pub async fn call(&self, tool: &str, args: Value) -> Result<Value, ToolError> {
        let tool = self.registry.get(tool).unwrap();
        tool.call(&self.ctx, args).await
    }

    pub async fn ok(&self, tool: &str, args: Value) -> Value {
        match self.call(tool, args).await {
            Ok(v) => v,
            Err(e) => panic!("{tool} failed: {e:?}"),
        }
    }

    /// The call must fail with an error the model can act on; returns its message.
    pub async fn respond(&self, tool: &str, args: Value) -> String {
        match self.call(tool, args).await {
            Err(ToolError::RespondToModel(m)) => m,
            other => panic!("{tool}: expected RespondToModel, got {other:?}"),
        }
    }

    /// The call must fail fatally; returns its message.
    pub async fn fatal(&self, tool: &str, args: Value) -> String {
        match self.call(tool, args).await {
            Err(ToolError::Fatal(m)) => m,
            other => panic!("{tool}: expected Fatal, got {other:?}"),
        }
    }

    /// The secret outside is untouched.
    pub fn assert_outside_untouched(&self) {
        assert_eq!(std::fs::read_to_string(self.outside().join("secret.txt")).unwrap(), SECRET);
        let names: Vec<_> = std::fs::read_dir(self.outside())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["secret.txt"], "something was created outside the workspace");
    }
}
