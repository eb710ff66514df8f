//! The pristine oracle: a scratch copy of the final workspace in which every changed oracle
//! file holds what it held when the plan was made (and oracle files the run created are gone),
//! where the run's evidence is checked again. Build caches are left out of the copy, the heavy
//! ignored directories a check runs with (`.venv`, `node_modules`) are linked, not copied, and
//! an ignored `target/` is left for the check to rebuild; everything else is copied. The copy lives in the system's temporary directory and is removed when dropped.

use std::path::{Path, PathBuf};

use pev_protocol::oracle::{OracleChange, OracleChangeKind, OracleFile};
use pev_tools::Workspace;

use super::BuildProducts;

/// Caches left out of the copy altogether (a check rebuilds them); names no project uses for
/// its sources.
const DROPPED: &[&str] = &[
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    ".nyc_output",
    ".parcel-cache",
    ".turbo",
];

/// Build outputs left out of the copy, rebuilt by a check that needs them: big, and written to
/// by the build (a link would let the check write into the real workspace).
const REBUILT: &[&str] = &["target"];

/// Ignored directories a check runs with, linked into the copy rather than copied.
const LINKED: &[&str] = &[".venv", "venv", "env", "node_modules", ".tox", ".nox"];

/// The most files a copy holds; past it the copy is not made.
const MAX_FILES: usize = 50_000;

/// A scratch copy of a workspace, removed when dropped.
#[derive(Debug)]
pub struct Scratch {
    dir: tempfile::TempDir,
    workspace: Workspace,
}

impl Scratch {
    /// A copy of `ws` with `changes` undone: modified and deleted oracle files restored from
    /// `pristine` (their recorded contents, by sha256), created ones removed. Fails with why
    /// when the copy cannot be made or a recorded content is missing.
    pub fn pristine(
        ws: &Workspace,
        files: &[OracleFile],
        changes: &[OracleChange],
        pristine: &dyn Fn(&str) -> Option<Vec<u8>>,
    ) -> Result<Self, String> {
        let scratch = Self::copy(ws)?;
        for change in changes {
            let target = scratch.dir.path().join(&change.path);
            match change.change {
                OracleChangeKind::Created => {
                    let _ = std::fs::remove_file(&target);
                }
                OracleChangeKind::Modified | OracleChangeKind::Deleted => {
                    let recorded = files.iter().find(|f| f.path == change.path);
                    let Some(content) = recorded.and_then(|f| pristine(&f.sha256)) else {
                        return Err(format!(
                            "the recorded content of {} is not kept (too large), so it cannot \
                             be restored",
                            change.path
                        ));
                    };
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| io(&change.path, &e))?;
                    }
                    let _ = std::fs::remove_file(&target);
                    std::fs::write(&target, content).map_err(|e| io(&change.path, &e))?;
                }
            }
        }
        Ok(scratch)
    }

    /// A plain copy of `ws` (build caches left out, heavy ignored directories linked).
    pub fn copy(ws: &Workspace) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("pev-pristine-")
            .tempdir()
            .map_err(|e| format!("cannot create a scratch directory: {e}"))?;
        let products = BuildProducts::new(ws.root());
        let mut count = 0usize;
        copy_tree(ws.root(), dir.path(), "", &products, &mut count)?;
        let workspace = Workspace::open(dir.path())
            .map_err(|e| format!("cannot open the scratch copy: {e}"))?;
        Ok(Self { dir, workspace })
    }

    /// The copy as a workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Copies the directory `from` (outside the workspace: held-out tests) into the copy at
    /// `at` (a relative path), replacing whatever is there.
    pub fn add_dir(&self, from: &Path, at: &str) -> Result<(), String> {
        if at.is_empty() || at.starts_with('/') || at.split('/').any(|c| c == "..") {
            return Err(format!("`at = \"{at}\"` must be a relative path inside the workspace"));
        }
        let target = self.dir.path().join(at);
        let _ = std::fs::remove_dir_all(&target);
        std::fs::create_dir_all(&target).map_err(|e| io(at, &e))?;
        let mut count = 0usize;
        copy_tree(from, &target, "", &BuildProducts::defaults(), &mut count)
    }
}

fn copy_tree(
    from: &Path,
    to: &Path,
    rel: &str,
    products: &BuildProducts,
    count: &mut usize,
) -> Result<(), String> {
    let source = if rel.is_empty() { from.to_path_buf() } else { from.join(rel) };
    let entries = std::fs::read_dir(&source).map_err(|e| io(&source.display().to_string(), &e))?;
    for entry in entries.filter_map(Result::ok) {
        let Ok(name) = entry.file_name().into_string() else { continue };
        let path = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
        if rel.is_empty() && (name == ".pev" || name == ".git") {
            continue;
        }
        let Ok(kind) = entry.file_type() else { continue };
        let src: PathBuf = from.join(&path);
        let dst: PathBuf = to.join(&path);
        *count += 1;
        if *count > MAX_FILES {
            return Err(format!("the workspace has more than {MAX_FILES} files to copy"));
        }
        if kind.is_symlink() {
            if let Ok(target) = std::fs::read_link(&src) {
                let _ = std::os::unix::fs::symlink(target, &dst);
            }
        } else if kind.is_dir() {
            if DROPPED.contains(&name.as_str()) {
                continue;
            }
            if LINKED.contains(&name.as_str()) {
                // A virtualenv, node_modules: what a check runs with, linked (read-only there).
                let _ = std::os::unix::fs::symlink(&src, &dst);
                continue;
            }
            if REBUILT.contains(&name.as_str()) && products.skips_dir(&path) {
                continue;
            }
            // Other ignored directories (vendor/, build/, a generated lib/) are copied: a
            // check may need them.
            std::fs::create_dir_all(&dst).map_err(|e| io(&path, &e))?;
            copy_tree(from, to, &path, products, count)?;
        } else if kind.is_file() {
            std::fs::copy(&src, &dst).map_err(|e| io(&path, &e))?;
        }
    }
    Ok(())
}

fn io(path: &str, e: &std::io::Error) -> String {
    format!("cannot copy {path}: {e}")
}
