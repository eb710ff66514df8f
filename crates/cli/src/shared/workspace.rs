//! Where a command works: the workspace directory, the journal it writes (`--store`,
//! `PEV_STORE`, the user's `pev.toml`, else `.pev/pev.db`), the `pev.toml` files, and the lease
//! that keeps two processes from driving one run.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use pev_tools::{ToolContext, ToolPolicy, Workspace};

use crate::args::values::{Common, Place};
use crate::input;
use crate::shared::exit::{EXIT_BAD_INPUT, EXIT_FAILED, Fail};
use crate::shared::sandbox_setup::{self, SandboxPolicy};

/// The workspace directory: `--workspace`, or the current directory.
pub fn workspace_dir(arg: Option<&Path>) -> Result<PathBuf, Fail> {
    let dir = match arg {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| Fail::input(format!("cannot read the current directory: {e}")))?,
    };
    let dir = std::fs::canonicalize(&dir).map_err(|e| {
        Fail::input(format!("workspace {}: {}", dir.display(), input::describe(&e)))
    })?;
    if !dir.is_dir() {
        return Err(Fail::input(format!("workspace {} is not a directory", dir.display())));
    }
    Ok(dir)
}

/// The journal path: `--store`, or `.pev/pev.db` in the workspace.
/// The journal: `--store`, else `PEV_STORE`, else `store` in the user's pev.toml (never the
/// workspace's), else `WORKSPACE/.pev/pev.db`.
pub fn store_path(common: &Common, workspace: &Path) -> Result<pev_store::Location, Fail> {
    if let Some(at) = &common.store {
        return Ok(at.clone());
    }
    if let Some(value) = std::env::var("PEV_STORE").ok().filter(|v| !v.is_empty()) {
        return pev_store::Location::parse(&value)
            .map_err(|why| Fail::input(format!("PEV_STORE: {why}")));
    }
    let vars = |name: &str| {
        matches!(name, "XDG_CONFIG_HOME" | "HOME").then(|| std::env::var(name).ok()).flatten()
    };
    let configured =
        pev_providers::config::Config::user_store(&vars).map_err(|e| Fail::input(e.to_string()))?;
    if let Some(store) = configured {
        let file = match &store.source {
            pev_providers::config::Source::User(path) => path.display().to_string(),
            other => format!("{other:?}"),
        };
        return pev_store::Location::parse(store.value.as_str())
            .map_err(|why| Fail::input(format!("{file}: store: {why}")));
    }
    Ok(pev_store::Location::File(pev_store::default_path(workspace)))
}

/// Holds the run's lease for as long as the returned value lives, so that two processes (on
/// one machine or, with a shared journal, on any) never drive the same run: a `resume` while
/// the run is still going would apply its steps twice. A dead process's lease is released at
/// once, `kill -9` included.
pub(crate) fn lock_run(db: &pev_store::Location, run_id: &str) -> Result<pev_store::Lease, Fail> {
    db.lease(run_id).map_err(|e| match e {
        pev_store::LeaseError::Held { .. } => Fail(EXIT_BAD_INPUT, e.to_string()),
        pev_store::LeaseError::Failed { .. } => Fail(EXIT_FAILED, e.to_string()),
    })
}

/// The workspace's and the user's `pev.toml`, if any. Only the files count (the environment is
/// read just to find the user's file), so a model setting in the environment cannot stop a run
/// that uses no model. A file that cannot be read is an error: hooks that silently failed to
/// load would let through what they guard, and a lost `sandbox = "require"` would loosen the
/// sandbox.
pub(crate) fn file_config(workspace: &Path) -> Result<pev_providers::config::Config, Fail> {
    let vars = |name: &str| {
        matches!(name, "XDG_CONFIG_HOME" | "HOME").then(|| std::env::var(name).ok()).flatten()
    };
    pev_providers::config::Config::load(workspace, &vars).map_err(|e| Fail::input(e.to_string()))
}

/// Where `pev mcp`, `pev gate` and `pev check` work: the workspace is `--workspace`, else
/// `$CLAUDE_PROJECT_DIR`, else the hook payload's `cwd`, else the current directory.
impl Place {
    /// The workspace (`fallback` is the payload's `cwd`), its journal and a tool context.
    pub(crate) fn open(
        &self,
        fallback: Option<&str>,
    ) -> Result<(Arc<ToolContext>, PathBuf), String> {
        let dir = self
            .workspace
            .clone()
            .or_else(|| std::env::var_os("CLAUDE_PROJECT_DIR").map(PathBuf::from))
            .or_else(|| fallback.map(PathBuf::from))
            .or_else(|| std::env::current_dir().ok())
            .ok_or("no workspace: pass --workspace")?;
        let ws = Workspace::open(&dir).map_err(|e| format!("workspace {}: {e}", dir.display()))?;
        let root = ws.root().to_path_buf();
        let db = self.store.clone().unwrap_or_else(|| pev_store::default_path(&root));
        let config = file_config(&root).map_err(|Fail(_, m)| m)?;
        let settings = SandboxPolicy::default().resolve(config.sandbox());
        let sandbox = sandbox_setup::build(settings, Some((&root, &db)), &[]);
        let ctx = ToolContext { workspace: ws, policy: ToolPolicy::default(), sandbox };
        Ok((Arc::new(ctx), db))
    }
}
