//! What a confined process may do: the [`Spec`] the launcher writes and the helper stages read
//! (it crosses the re-exec as JSON in argv), and the user-facing settings it is built from.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How hard pev tries, and what it does when the machine cannot confine a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The strongest confinement this machine offers; what was enforced is recorded and a
    /// weaker-than-full sandbox is a warning of the run.
    #[default]
    Auto,
    /// Refuse to run a command unless the full sandbox is enforced (writes confined by
    /// Landlock, seccomp, and bubblewrap for the read-only journal and a private process tree).
    Require,
    /// No kernel confinement: the working directory, a scrubbed environment and a process group,
    /// as before the sandbox existed. Stated in the run, never silent.
    Off,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Require => "require",
            Self::Off => "off",
        }
    }
}

/// What the network looks like from inside.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Network {
    /// No network. Under bubblewrap a private loopback (so a test server inside one command
    /// works); without it no TCP at all and no UDP.
    #[default]
    Closed,
    /// TCP bind and connect only on these ports (meant for loopback servers that outlive their
    /// step); no UDP. Landlock filters TCP by port, not address.
    Ports { ports: Vec<u16> },
    /// The host's network, unfiltered (policy `sandbox_network: open`).
    Open,
}

impl Network {
    pub fn describe(&self) -> String {
        match self {
            Self::Closed => "closed".into(),
            Self::Ports { ports } => {
                let list: Vec<String> = ports.iter().map(u16::to_string).collect();
                format!("tcp ports {} only", list.join(","))
            }
            Self::Open => "open".into(),
        }
    }
}

/// Resource limits of every process inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// The largest file a command may write (`RLIMIT_FSIZE`).
    pub file_bytes: u64,
    /// The most processes of the user (`RLIMIT_NPROC`); the kernel does not apply it to uid 0.
    pub processes: u64,
}

/// 4 GiB: a build artefact fits, a runaway `yes > file` stops.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// 4096 processes: a parallel build fits, a fork bomb stops (for non-root users).
pub const DEFAULT_MAX_PROCESSES: u64 = 4096;

impl Default for Limits {
    fn default() -> Self {
        Self { file_bytes: DEFAULT_MAX_FILE_BYTES, processes: DEFAULT_MAX_PROCESSES }
    }
}

/// Which layers the launcher decided on (from the probe and the mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layers {
    pub landlock: bool,
    pub seccomp: bool,
    pub bubblewrap: bool,
    /// pev's own namespaces, in bubblewrap's place (see `namespaces.rs`).
    #[serde(default)]
    pub namespaces: bool,
    /// Stage 2 must refuse to run the command if a layer it was asked for did not apply.
    pub strict: bool,
}

/// Everything a helper stage needs; serialised into its argv.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// The program and its arguments.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The whole environment of the command (nothing else is inherited).
    pub env: Vec<(String, String)>,
    /// Directories (or files) a command may write beneath.
    pub writable: Vec<PathBuf>,
    /// Paths inside a writable root that stay read-only (the journal's `.pev/`). Enforced by
    /// bubblewrap only; Landlock cannot carve an exception out of a writable tree.
    pub read_only: Vec<PathBuf>,
    /// Files inside a writable root a command may read but not change, delete or rename (the
    /// run's oracle: its tests). Enforced by bubblewrap only, as `read_only`.
    #[serde(default)]
    pub frozen: Vec<PathBuf>,
    /// Paths a command may not read (secrets in `$HOME`).
    pub hidden: Vec<PathBuf>,
    pub network: Network,
    pub limits: Limits,
    pub layers: Layers,
}
