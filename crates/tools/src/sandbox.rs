//! The workspace sandbox: every file a plan, a model or an assertion names is reached through a
//! capability on the workspace root, never through an ambient path.
//!
//! A [`Workspace`] holds a `cap_std::fs::Dir` opened once on the root. Paths are first normalised
//! lexically (absolute paths, a NUL byte, and `..` past the root are refused before any system
//! call), then handed to cap-std, which resolves them component by component *at each open* and
//! refuses a symlink that leads outside. There is no check-then-open with `std::fs` on a joined
//! path anywhere in this crate, so a symlink swapped in after an earlier check is still caught:
//! the check *is* the open.
//!
//! The verifier reuses these helpers (`read`, `exists`, `metadata`, `sha256`, `list`), so an
//! assertion and a tool can never disagree about what a path means.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::SandboxError;

/// What a directory entry is. Symlinks are reported as such, never followed by a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

impl EntryKind {
    pub(crate) fn of(ft: cap_std::fs::FileType) -> Self {
        if ft.is_symlink() {
            Self::Symlink
        } else if ft.is_dir() {
            Self::Dir
        } else if ft.is_file() {
            Self::File
        } else {
            Self::Other
        }
    }
}

/// What the sandbox tells about one path (following symlinks that stay inside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    pub kind: EntryKind,
    pub bytes: u64,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteReport {
    /// The file did not exist before.
    pub created: bool,
}

/// A sandboxed workspace directory. Cheap to clone: clones share one open directory handle.
#[derive(Clone)]
pub struct Workspace {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) dir: Dir,
    root: PathBuf,
    /// Writes are allowed only beneath this directory (relative, normalised): a child run's
    /// scope. `None`: anywhere in the workspace.
    write_scope: Option<PathBuf>,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace").field("root", &self.inner.root).finish()
    }
}

/// Distinguishes temporary files of concurrent writes in one process.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Chunk size for streaming reads (hashing, file.read).
pub(crate) const READ_CHUNK: usize = 64 * 1024;

impl Workspace {
    /// Open the workspace rooted at `root`. This is the one place that uses ambient authority:
    /// everything after goes through the directory handle.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, SandboxError> {
        let given = root.as_ref();
        let root = std::fs::canonicalize(given)
            .map_err(|source| SandboxError::Open { root: given.to_path_buf(), source })?;
        let dir = Dir::open_ambient_dir(&root, ambient_authority())
            .map_err(|source| SandboxError::Open { root: root.clone(), source })?;
        Ok(Self { inner: Arc::new(Inner { dir, root, write_scope: None }) })
    }

    /// The same workspace, with writes allowed only beneath `scope` (a directory relative to
    /// the root; `""` or `.` asks for no narrowing: this workspace's own scope). Reads stay workspace-wide. A scope inside
    /// the current one narrows it; one that leaves it is refused.
    pub fn scoped(&self, scope: &str) -> Result<Self, SandboxError> {
        let rel = lexical(scope)?;
        if is_root(&rel) {
            // No scope asked: the same as this one (a child without a scope, under a scoped
            // parent, keeps its parent's).
            return Ok(self.clone());
        }
        if let Some(current) = &self.inner.write_scope
            && !rel.starts_with(current)
        {
            return Err(SandboxError::OutOfScope {
                path: scope.to_owned(),
                scope: current.display().to_string(),
            });
        }
        let dir =
            self.inner.dir.try_clone().map_err(|e| SandboxError::from_io("open", scope, e))?;
        if !is_root(&rel) {
            // The scope is where the child works: it exists before any command runs in it.
            dir.create_dir_all(&rel).map_err(|e| SandboxError::from_io("create", scope, e))?;
            // A scope that is (or passes through) a symlink would let writes land elsewhere.
            let real =
                dir.canonicalize(&rel).map_err(|e| SandboxError::from_io("resolve", scope, e))?;
            if real != rel {
                return Err(SandboxError::InvalidPath {
                    path: scope.to_owned(),
                    reason: "a scope may not be or pass through a symlink",
                });
            }
        }
        let write_scope = (!is_root(&rel)).then_some(rel);
        Ok(Self { inner: Arc::new(Inner { dir, root: self.inner.root.clone(), write_scope }) })
    }

    /// `rel` with the deepest part of it that exists resolved (symlinks followed, inside the
    /// workspace), the rest as written: where a write to `rel` would land. `None` when that
    /// cannot be told (a component that is not a directory, an error).
    fn resolved(&self, rel: &Path) -> Option<PathBuf> {
        let mut existing = rel.to_path_buf();
        let mut rest: Vec<std::ffi::OsString> = Vec::new();
        loop {
            if is_root(&existing) {
                break;
            }
            match self.inner.dir.canonicalize(&existing) {
                Ok(real) => {
                    existing = real;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    rest.push(existing.file_name()?.to_owned());
                    if !existing.pop() {
                        break;
                    }
                }
                Err(_) => return None,
            }
        }
        for part in rest.into_iter().rev() {
            existing.push(part);
        }
        Some(existing)
    }

    /// The directory writes are confined to, relative to the root (`None`: the whole
    /// workspace).
    pub fn write_scope(&self) -> Option<&Path> {
        self.inner.write_scope.as_deref()
    }

    /// The absolute directory commands may write in: the root, or the write scope beneath it.
    pub fn write_root(&self) -> PathBuf {
        match &self.inner.write_scope {
            Some(scope) => self.inner.root.join(scope),
            None => self.inner.root.clone(),
        }
    }

    /// The canonical absolute path of the root: the cwd and `HOME` of `shell.exec`.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Normalise `path` without touching the file system: the relative path cap-std will
    /// resolve, or the reason it may not be used. The empty path is the root.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, SandboxError> {
        lexical(path)
    }

    /// Open a regular file for reading.
    pub fn open_read(&self, path: &str) -> Result<std::fs::File, SandboxError> {
        let rel = lexical(path)?;
        if is_root(&rel) {
            return Err(SandboxError::IsDirectory { path: path.to_owned() });
        }
        // Look before opening, so that a FIFO or a device is refused rather than blocking the
        // read forever; look again at what was opened, which is what counts if the path was
        // swapped in between (the swap can only cause a refusal, never an escape).
        let before =
            self.inner.dir.metadata(&rel).map_err(|e| SandboxError::from_io("stat", path, e))?;
        regular_file(path, &before)?;
        let file = self.inner.dir.open(&rel).map_err(|e| SandboxError::from_io("open", path, e))?;
        let meta = file.metadata().map_err(|e| SandboxError::from_io("stat", path, e))?;
        regular_file(path, &meta)?;
        Ok(file.into_std())
    }

    /// The whole content of a file.
    pub fn read(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        let mut file = self.open_read(path)?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf).map_err(|e| SandboxError::from_io("read", path, e))?;
        Ok(buf)
    }

    /// Kind and size of what `path` names, following symlinks that stay inside.
    pub fn metadata(&self, path: &str) -> Result<FileInfo, SandboxError> {
        let rel = lexical(path)?;
        let meta = if is_root(&rel) {
            self.inner.dir.dir_metadata()
        } else {
            self.inner.dir.metadata(&rel)
        }
        .map_err(|e| SandboxError::from_io("stat", path, e))?;
        Ok(FileInfo { kind: EntryKind::of(meta.file_type()), bytes: meta.len() })
    }

    /// Whether `path` names something. A path that leaves the workspace is an error, not
    /// "absent": `file_not_exists` must not pass on `../secret`.
    pub fn exists(&self, path: &str) -> Result<bool, SandboxError> {
        match self.metadata(path) {
            Ok(_) => Ok(true),
            Err(SandboxError::NotFound { .. } | SandboxError::NotDirectory { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The hex SHA-256 of a file's content, or `None` when it does not exist.
    pub fn sha256(&self, path: &str) -> Result<Option<String>, SandboxError> {
        let mut file = match self.open_read(path) {
            Ok(f) => f,
            Err(SandboxError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            let n = file.read(&mut buf).map_err(|e| SandboxError::from_io("read", path, e))?;
            let Some(chunk) = buf.get(..n) else { break };
            if chunk.is_empty() {
                break;
            }
            hasher.update(chunk);
        }
        Ok(Some(hex(&hasher.finalize())))
    }

    /// Removes the temporary files an interrupted [`Workspace::write`] of `path` left beside it
    /// (`.<name>.pev-tmp-<pid>-<n>`), and returns how many it removed. Called on resume, for a
    /// write that was under way when the process died; the write itself is atomic, so these are
    /// only litter, never half of the target.
    pub fn remove_stale_temps(&self, path: &str) -> Result<usize, SandboxError> {
        let rel = lexical(path)?;
        let Some(name) = rel.file_name() else { return Ok(0) };
        let prefix = format!(".{}.pev-tmp-", short_name(name));
        let parent = rel.parent().unwrap_or(Path::new(""));
        let dir = &self.inner.dir;
        let listing = if is_root(parent) { dir.entries() } else { dir.read_dir(parent) };
        let entries = match listing {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(SandboxError::from_io("list", path, e)),
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            if file_name.to_string_lossy().starts_with(&prefix)
                && entry.file_type().is_ok_and(|t| t.is_file())
            {
                let stale = parent.join(&file_name);
                dir.remove_file(&stale).map_err(|e| SandboxError::from_io("remove", path, e))?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Removes the file at `path` (a symlink itself, never what it points to), through the
    /// directory handle: a path that leaves the workspace, or names `.pev`, is refused, and
    /// nothing outside the workspace (the process's own directory included) can be touched.
    /// A file that is already absent is not an error; a directory is.
    pub fn remove_file(&self, path: &str) -> Result<(), SandboxError> {
        let rel = lexical(path)?;
        if rel.file_name().is_none() {
            return Err(SandboxError::InvalidPath {
                path: path.to_owned(),
                reason: "it names the workspace root, not a file",
            });
        }
        let dir = &self.inner.dir;
        // The directory the file is in, resolved (a symlinked directory on the way may lead
        // elsewhere in the workspace, never out of it); the file's own name is not followed.
        let parent = rel.parent().unwrap_or(Path::new(""));
        let parent = if is_root(parent) {
            PathBuf::new()
        } else {
            match dir.canonicalize(parent) {
                Ok(p) => p,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(SandboxError::from_io("resolve", path, e)),
            }
        };
        let target = parent.join(rel.file_name().unwrap_or_default());
        if is_reserved(&target) {
            return Err(SandboxError::Reserved { path: path.to_owned() });
        }
        if let Some(scope) = &self.inner.write_scope
            && !self
                .resolved(&parent)
                .is_some_and(|p| p.join(rel.file_name().unwrap_or_default()).starts_with(scope))
        {
            return Err(SandboxError::OutOfScope {
                path: path.to_owned(),
                scope: scope.display().to_string(),
            });
        }
        match dir.symlink_metadata(&target) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(SandboxError::from_io("stat", path, e)),
            Ok(meta) if meta.is_dir() => {
                return Err(SandboxError::IsDirectory { path: path.to_owned() });
            }
            Ok(_) => {}
        }
        dir.remove_file(&target).map_err(|e| SandboxError::from_io("remove", path, e))
    }

    /// Replace (or create) a file with `bytes`, atomically: the content goes to a temporary file
    /// beside the target, which is then renamed over it. Parent directories are created inside
    /// the sandbox. Writing to a symlink that stays inside writes the file it points to; an
    /// existing file keeps its permissions.
    ///
    /// The data is not fsynced: the journal protects against a killed process, for which the
    /// rename is already atomic, and an fsync per write would dominate a step's cost.
    pub fn write(&self, path: &str, bytes: &[u8]) -> Result<WriteReport, SandboxError> {
        let rel = lexical(path)?;
        let Some(name) = rel.file_name() else {
            return Err(SandboxError::InvalidPath {
                path: path.to_owned(),
                reason: "it names the workspace root, not a file",
            });
        };
        let dir = &self.inner.dir;
        let (target, permissions) = match dir.canonicalize(&rel) {
            // A symlink elsewhere in the workspace that leads into `.pev`.
            Ok(target) if is_reserved(&target) => {
                return Err(SandboxError::Reserved { path: path.to_owned() });
            }
            Ok(target) => {
                let meta =
                    dir.metadata(&target).map_err(|e| SandboxError::from_io("stat", path, e))?;
                if meta.is_dir() {
                    return Err(SandboxError::IsDirectory { path: path.to_owned() });
                }
                (target, Some(meta.permissions()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let is_link = dir.symlink_metadata(&rel).is_ok_and(|m| m.file_type().is_symlink());
                if is_link {
                    return Err(SandboxError::DanglingSymlink { path: path.to_owned() });
                }
                (rel.clone(), None)
            }
            Err(e) => return Err(SandboxError::from_io("resolve", path, e)),
        };
        // Checked on the resolved target, so a symlink inside the scope that leads out of it
        // is refused too: a file's own link, or a directory on the way to a new file.
        if let Some(scope) = &self.inner.write_scope
            && !self.resolved(&target).is_some_and(|t| t.starts_with(scope))
        {
            return Err(SandboxError::OutOfScope {
                path: path.to_owned(),
                scope: scope.display().to_string(),
            });
        }
        let parent = target.parent().unwrap_or(Path::new(""));
        if permissions.is_none() && !is_root(parent) {
            dir.create_dir_all(parent).map_err(|e| {
                // "Exists but is not a directory": a file or a dangling symlink in the way.
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    SandboxError::NotDirectory { path: path.to_owned() }
                } else {
                    SandboxError::from_io("create", path, e)
                }
            })?;
        }
        let tmp = parent.join(format!(
            ".{}.pev-tmp-{}-{}",
            short_name(name),
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let created = permissions.is_none();
        let result = (|| {
            let mut file = dir.open_with(&tmp, OpenOptions::new().write(true).create_new(true))?;
            file.write_all(bytes)?;
            if let Some(perms) = permissions {
                file.set_permissions(perms)?;
            }
            drop(file);
            dir.rename(&tmp, dir, &target)
        })();
        if let Err(e) = result {
            // Best effort: the temporary file is ours and useless now.
            let _ = dir.remove_file(&tmp);
            return Err(SandboxError::from_io("write", path, e));
        }
        Ok(WriteReport { created })
    }
}

/// Normalise a path from a plan or a model into a relative path below the root.
pub(crate) fn lexical(path: &str) -> Result<PathBuf, SandboxError> {
    if path.contains('\0') {
        return Err(SandboxError::InvalidPath {
            path: path.to_owned(),
            reason: "it contains a NUL byte",
        });
    }
    let mut out = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::Prefix(_) | Component::RootDir => {
                return Err(SandboxError::Escape { path: path.to_owned() });
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return Err(SandboxError::Escape { path: path.to_owned() });
                }
            }
            Component::Normal(part) => out.push(part),
        }
    }
    if is_reserved(&out) {
        return Err(SandboxError::Reserved { path: path.to_owned() });
    }
    Ok(out)
}

/// The directory under the workspace root that holds pev's journal.
pub(crate) const RESERVED_DIR: &str = ".pev";

/// Whether a root-relative path is, or is inside, [`RESERVED_DIR`].
pub(crate) fn is_reserved(rel: &Path) -> bool {
    matches!(rel.components().next(), Some(Component::Normal(first)) if first == RESERVED_DIR)
}

/// Only regular files are read: a directory is a clear error, a FIFO or device could block.
fn regular_file(path: &str, meta: &cap_std::fs::Metadata) -> Result<(), SandboxError> {
    if meta.is_dir() {
        Err(SandboxError::IsDirectory { path: path.to_owned() })
    } else if !meta.is_file() {
        Err(SandboxError::NotAFile { path: path.to_owned() })
    } else {
        Ok(())
    }
}

pub(crate) fn is_root(rel: &Path) -> bool {
    rel.as_os_str().is_empty()
}

/// A file name shortened for the temporary file's name, so that it stays under the usual
/// 255-byte limit.
fn short_name(name: &std::ffi::OsStr) -> String {
    name.to_string_lossy().chars().take(64).collect()
}

/// Lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len().saturating_mul(2));
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

#[cfg(test)]
#[path = "sandbox_tests.rs"]
mod tests;
