//! Where a failure goes: back to the model as a tool result it can act on, or up to the engine as
//! the end of the step.
//!
//! [`SandboxError`] is what the workspace sandbox reports; the verifier reuses the sandbox and
//! turns these into failed assertions, the tools turn them into [`ToolError`]s. The split between
//! "the model can fix it" and "fatal" is a type, not a string the engine has to interpret.

use std::io;
use std::path::PathBuf;

/// A tool failure, typed by where it goes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The model (or plan author) can fix this: a bad argument, a missing file, patch text that
    /// is not there. It goes back as the tool's result.
    #[error("{0}")]
    RespondToModel(String),
    /// The step ends: an attempt to leave the sandbox, or the workspace itself failing.
    #[error("fatal: {0}")]
    Fatal(String),
}

impl ToolError {
    /// Whether the step must end rather than hand the error back to the model.
    pub fn is_fatal(&self) -> bool {
        matches!(self, Self::Fatal(_))
    }

    /// The message without the `fatal:` prefix.
    pub fn message(&self) -> &str {
        match self {
            Self::RespondToModel(m) | Self::Fatal(m) => m,
        }
    }
}

/// What the workspace sandbox refuses or fails at. Every variant names the path as it was given,
/// so the message makes sense to whoever wrote the plan.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// Absolute paths, `..` past the root, and symlinks that resolve outside.
    #[error("path `{path}` leaves the workspace")]
    Escape { path: String },
    /// A path that cannot name anything (a NUL byte, the root where a file is needed).
    #[error("path `{path}` is not valid: {reason}")]
    InvalidPath { path: String, reason: &'static str },
    /// The workspace's `.pev` directory, which holds pev's journal: a plan that could write
    /// there could rewrite the evidence its outcome is decided on.
    #[error("path `{path}` is inside `.pev`, pev's journal directory, which plans may not touch")]
    Reserved { path: String },
    #[error("`{path}` does not exist")]
    NotFound { path: String },
    /// A write outside the directory this run may change (a delegated child's scope).
    #[error("`{path}` is outside `{scope}`, the only directory this run may change")]
    OutOfScope { path: String, scope: String },
    #[error("`{path}` is a directory")]
    IsDirectory { path: String },
    /// A FIFO, socket or device: reading it could block or never end.
    #[error("`{path}` is not a regular file")]
    NotAFile { path: String },
    #[error("`{path}`: a component of the path is not a directory")]
    NotDirectory { path: String },
    /// A symlink inside the workspace whose target does not exist: writing through it would have
    /// to guess whether to replace the link or create its target, so it is refused.
    #[error("`{path}` is a symlink to a missing file")]
    DanglingSymlink { path: String },
    /// The operating system refused access to a file inside the workspace.
    #[error("permission denied for `{path}`")]
    PermissionDenied { path: String },
    #[error("invalid glob `{glob}`: {reason}")]
    InvalidGlob { glob: String, reason: String },
    /// Any other I/O failure: the workspace itself is in trouble.
    #[error("cannot {op} `{path}`: {source}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot open the workspace `{}`: {source}", root.display())]
    Open {
        root: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl SandboxError {
    /// Classify an I/O error from an operation on `path`.
    ///
    /// cap-std reports an escape (a symlink or `..` resolving outside the root, also when the
    /// kernel's `RESOLVE_BENEATH` says so) as a `PermissionDenied` error it builds itself, with
    /// no OS error code; a real `EACCES` always carries one. That is the only signal cap-std
    /// gives, so it is read here, in one place.
    pub(crate) fn from_io(op: &'static str, path: &str, err: io::Error) -> Self {
        let path = path.to_owned();
        match err.kind() {
            io::ErrorKind::PermissionDenied if err.raw_os_error().is_none() => {
                Self::Escape { path }
            }
            io::ErrorKind::PermissionDenied => Self::PermissionDenied { path },
            io::ErrorKind::NotFound => Self::NotFound { path },
            io::ErrorKind::IsADirectory => Self::IsDirectory { path },
            io::ErrorKind::NotADirectory => Self::NotDirectory { path },
            _ => Self::Io { op, path, source: err },
        }
    }

    /// Whether this ends the step (an escape or a broken workspace) rather than being something
    /// the model can correct.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Self::Escape { .. } | Self::Reserved { .. } | Self::Io { .. } | Self::Open { .. }
        )
    }

    /// An escape attempt.
    pub fn is_escape(&self) -> bool {
        matches!(self, Self::Escape { .. })
    }
}

impl From<SandboxError> for ToolError {
    fn from(err: SandboxError) -> Self {
        if err.is_fatal() {
            Self::Fatal(err.to_string())
        } else {
            Self::RespondToModel(err.to_string())
        }
    }
}
