//! pev's kernel sandbox: a spec in, a confined process out.
//!
//! A [`Sandbox`] is made once per run from [`Settings`] (mode, network, limits) and a probe of
//! the machine; [`Sandbox::launch`] turns a command into a `std::process::Command` that, when
//! spawned, runs it confined. The confinement happens in a re-executed helper (the embedding
//! binary calls [`helper_main`] first thing), so pev needs no `unsafe` and no `pre_exec`:
//!
//! ```text
//! pev ─► [bwrap: pid/mount(/net) namespaces, .pev read-only, secrets hidden]
//!          └─► helper `supervise` (subreaper; reports the exit over a socket; kills the tree)
//!                └─► helper `exec`: rlimits, capabilities dropped, no_new_privs,
//!                                   Landlock (fs, tcp, signal scope), seccomp ─► exec command
//! ```
//!
//! Landlock, seccomp and rlimits apply whenever the kernel has them; bubblewrap is layered on
//! top when it is on PATH and works, for what Landlock cannot do (a read-only `.pev/` inside the
//! writable workspace, a private process tree and network). [`Enforced`] says what a run got;
//! nothing falls back silently. The same launcher can confine MCP servers and hooks.

mod bwrap;
mod confine;
mod helper;
mod leftovers;
mod namespaces;
mod probe;
mod process;
mod spec;
mod supervise;

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use serde::{Deserialize, Serialize};

pub use helper::{HELPER_ARG, helper_main};
pub use namespaces::NAMESPACES_VAR;
pub use probe::{Bubblewrap, Probe, cgroup_v2, probe};
pub use spec::{
    DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_PROCESSES, Layers, Limits, Mode, Network, Spec,
};

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    pub mode: Mode,
    pub network: Network,
    pub limits: Limits,
}

/// How much of the sandbox is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// No kernel confinement.
    None,
    /// Landlock and seccomp, without bubblewrap: writes outside the workspace are refused, but
    /// `.pev/` is writable by commands and processes share pev's pid and network namespaces.
    Partial,
    /// Landlock, seccomp and bubblewrap.
    Full,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Partial => "partial",
            Self::Full => "full",
        }
    }
}

/// What a run's commands are confined by: journaled once per run, shown by `pev show`, and
/// attached to every `shell.exec` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforced {
    pub mode: Mode,
    pub level: Level,
    /// E.g. `landlock v7`, `seccomp`, `rlimits`, `bubblewrap 0.8.0`.
    pub mechanisms: Vec<String>,
    pub network: String,
    /// `read-only` or `writable by commands`.
    pub journal: String,
    /// What is not enforced, and why.
    pub gaps: Vec<String>,
}

impl Enforced {
    /// One line: `full (landlock v7, seccomp, rlimits, bubblewrap 0.8.0); network closed; journal hidden from commands`.
    pub fn summary(&self) -> String {
        if self.mode == Mode::Off {
            return "off (sandbox = \"off\"): no kernel confinement".into();
        }
        let mechanisms = if self.mechanisms.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.mechanisms.join(", "))
        };
        format!(
            "{}{mechanisms}; network {}; journal {}",
            self.level.as_str(),
            self.network,
            self.journal
        )
    }

    /// The sandbox is weaker than the strongest pev knows.
    pub fn is_weaker_than_full(&self) -> bool {
        self.level < Level::Full
    }
}

/// Why a command was not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// A command ready to spawn, and pev's end of its control socket.
#[derive(Debug)]
pub struct Launch {
    /// Spawn this (stdin is already the control socket; set stdout and stderr).
    pub command: Command,
    /// Read the command's exit from here (`exit <code>` / `signal <n>`); write `kill` (or drop
    /// it) to end the command and everything it started.
    pub control: UnixStream,
}

/// Secrets under `$HOME` a command may not read, where the mechanism can hide them.
pub const HIDDEN_IN_HOME: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".config",
    ".gnupg",
    ".netrc",
    ".pgpass",
    ".pg_service.conf",
    ".docker",
    ".kube",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".local/share/keyrings",
    ".password-store",
    // Shell and REPL histories and start-up files, where keys are pasted or exported.
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".node_repl_history",
    ".lesshst",
    ".viminfo",
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zprofile",
];

/// The sandbox of one run.
#[derive(Debug)]
pub struct Sandbox {
    settings: Settings,
    helper: Option<PathBuf>,
    /// The probe and what it decided, made on first need: a caller that never runs a command
    /// (`pev gate` checking file assertions, `pev show`) spawns no probe processes.
    decided: OnceLock<Decided>,
    hidden: Vec<PathBuf>,
    /// Directories no command may read or change (the journal's, besides `WORKSPACE/.pev`).
    protected: Vec<PathBuf>,
    /// A private copy of the helper, made when the helper binary lies in a writable root (a pev
    /// built inside the workspace): a command must not be able to replace what the next
    /// command's confinement runs.
    helper_copy: Mutex<Option<PathBuf>>,
    /// Files commands may read but not change (the run's oracle), set by [`Sandbox::freeze`].
    frozen: Mutex<Vec<PathBuf>>,
    /// Supervisors still holding background processes; ended by [`Sandbox::shutdown`].
    lingering: Mutex<Vec<Box<dyn Send + std::fmt::Debug>>>,
}

/// What the machine offers and what the sandbox enforces with it.
#[derive(Debug)]
struct Decided {
    probe: Probe,
    enforced: Enforced,
    tmp: Option<PathBuf>,
}

impl Decided {
    fn new(settings: &Settings, has_helper: bool, probe: Probe) -> Self {
        let enforced = decide(settings, has_helper, &probe);
        let tmp = (enforced.level > Level::None).then(make_tmp).flatten();
        Self { probe, enforced, tmp }
    }
}

static NEXT_TMP: AtomicU64 = AtomicU64::new(0);

/// The mechanism name of pev's own namespaces (in [`Enforced::mechanisms`]).
const PEV_NAMESPACES: &str = "namespaces (user, mount, ipc, net)";

impl Sandbox {
    /// The sandbox that probes the machine (with `helper`, the binary that runs
    /// [`helper_main`]) and decides when first asked: by [`Self::enforced`], [`Self::launch`]
    /// or any other question whose answer depends on the machine.
    pub fn new(settings: Settings, helper: Option<PathBuf>) -> Self {
        Self::undecided(settings, helper)
    }

    /// Decide from a given probe (tests, and callers that probe once for many runs).
    pub fn with_probe(settings: Settings, helper: Option<PathBuf>, probe: Probe) -> Self {
        let sandbox = Self::undecided(settings, helper);
        let decided = Decided::new(&sandbox.settings, sandbox.helper.is_some(), probe);
        // A new cell: it takes the value.
        let _ = sandbox.decided.set(decided);
        sandbox
    }

    fn undecided(settings: Settings, helper: Option<PathBuf>) -> Self {
        let hidden = hidden_paths_in(&|name: &str| std::env::var_os(name).map(PathBuf::from));
        Self {
            settings,
            helper,
            decided: OnceLock::new(),
            hidden,
            protected: Vec::new(),
            helper_copy: Mutex::new(None),
            frozen: Mutex::new(Vec::new()),
            lingering: Mutex::new(Vec::new()),
        }
    }

    fn decided(&self) -> &Decided {
        self.decided.get_or_init(|| {
            let probe = if self.settings.mode == Mode::Off {
                Probe::default()
            } else {
                probe::probe(self.helper.as_deref())
            };
            Decided::new(&self.settings, self.helper.is_some(), probe)
        })
    }

    /// A sandbox that confines nothing (`sandbox = "off"`).
    pub fn off() -> Self {
        Self::with_probe(
            Settings { mode: Mode::Off, ..Settings::default() },
            None,
            Probe::default(),
        )
    }

    pub fn enforced(&self) -> &Enforced {
        &self.decided().enforced
    }

    pub fn probe(&self) -> &Probe {
        &self.decided().probe
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Keep `dir` (or a file) out of every command's reach (a journal given with `--store`):
    /// hidden under bubblewrap.
    pub fn protect(&mut self, dir: PathBuf) {
        if !self.protected.contains(&dir) {
            self.protected.push(dir);
        }
    }

    /// Hide `path` from every command, wherever it is (a shared journal's unix socket
    /// directory: connecting to a socket needs no write access, so read-only is not enough).
    /// Covered under bubblewrap, like the secrets in `$HOME`.
    pub fn hide(&mut self, path: PathBuf) {
        if !self.hidden.contains(&path) {
            self.hidden.push(path);
        }
    }

    /// Let commands read `files` but not change, delete or rename them (a run's tests: the
    /// check, not the work). Replaces the earlier set; enforced under bubblewrap (a full
    /// sandbox), where each is bound read-only onto itself.
    pub fn freeze(&self, files: Vec<PathBuf>) {
        let mut frozen = match self.frozen.lock() {
            Ok(f) => f,
            Err(poisoned) => poisoned.into_inner(),
        };
        *frozen = files;
    }

    /// What [`Sandbox::freeze`] froze.
    pub fn frozen(&self) -> Vec<PathBuf> {
        match self.frozen.lock() {
            Ok(f) => f.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// What [`Sandbox::hide`] and the secrets list hide.
    pub fn hidden(&self) -> &[PathBuf] {
        &self.hidden
    }

    /// Commands run unconfined (mode off, or nothing available in `auto`).
    pub fn is_off(&self) -> bool {
        self.enforced().level == Level::None
    }

    /// The per-run temporary directory (`TMPDIR` of every command), when confined.
    pub fn tmp(&self) -> Option<&Path> {
        self.decided().tmp.as_deref()
    }

    /// Prepare `argv` to run confined in `workspace`, with exactly `env` (plus `TMPDIR`).
    /// Refused under `require` when the sandbox is not full, and when there is nothing to
    /// confine with (the caller runs the command itself when [`Self::is_off`]).
    pub fn launch(
        &self,
        workspace: &Path,
        argv: Vec<String>,
        env: Vec<(String, String)>,
    ) -> Result<Launch, Refused> {
        self.launch_in(workspace, workspace, argv, env)
    }

    /// [`Self::launch`] with writes confined to `write_root` (the workspace, or a directory
    /// beneath it: a delegated child's scope); the command still runs in, and reads, the
    /// workspace.
    pub fn launch_in(
        &self,
        workspace: &Path,
        write_root: &Path,
        argv: Vec<String>,
        mut env: Vec<(String, String)>,
    ) -> Result<Launch, Refused> {
        let Decided { probe, enforced, tmp } = self.decided();
        if self.settings.mode == Mode::Require && enforced.level < Level::Full {
            return Err(Refused(format!(
                "sandbox = \"require\" but this machine cannot enforce the full sandbox: {}. The \
                 command was not run. Install bubblewrap, or set sandbox = \"auto\" to run with \
                 what is available.",
                enforced.gaps.join("; ")
            )));
        }
        let Some(helper) = &self.helper else {
            return Err(Refused("the sandbox is off; run the command unconfined".into()));
        };
        let Some(tmp) = tmp else {
            return Err(Refused(format!(
                "cannot create the run's private temporary directory in {}; the command was not \
                 run",
                std::env::temp_dir().display()
            )));
        };
        let write_root = within(workspace, write_root)?;
        env.retain(|(k, _)| k != "TMPDIR");
        env.push(("TMPDIR".into(), tmp.display().to_string()));
        let bubblewrap = probe.bubblewrap.as_ref().filter(|_| self.uses_bubblewrap());
        let writable = vec![write_root, tmp.clone()];
        let helper = self.safe_helper(helper, &writable)?;
        let read_only: Vec<PathBuf> = std::iter::once(workspace.join(".pev"))
            .chain(self.protected.iter().cloned())
            .filter(|path| path.exists() && writable.iter().any(|w| path.starts_with(w)))
            .collect();
        let frozen: Vec<PathBuf> = self
            .frozen()
            .into_iter()
            .filter(|path| writable.iter().any(|w| path.starts_with(w)))
            .collect();
        let spec = Spec {
            argv,
            cwd: workspace.to_path_buf(),
            env: env.clone(),
            writable,
            read_only,
            frozen,
            hidden: self.hidden.iter().filter(|h| !workspace.starts_with(h)).cloned().collect(),
            network: self.settings.network.clone(),
            limits: self.settings.limits,
            layers: Layers {
                landlock: probe.landlock_abi.is_some(),
                seccomp: probe.seccomp,
                bubblewrap: bubblewrap.is_some(),
                namespaces: bubblewrap.is_none() && self.uses_namespaces(),
                strict: self.settings.mode == Mode::Require,
            },
        };
        let text = serde_json::to_string(&spec).map_err(|e| Refused(e.to_string()))?;
        let mut command = match bubblewrap {
            Some(bwrap) => {
                let mut command = Command::new(&bwrap.path);
                command.args(bwrap::args(&spec, probe.root, &absolute(&helper)));
                command.arg("--").arg(&helper);
                command
            }
            None => Command::new(&helper),
        };
        command.args([HELPER_ARG, "supervise"]).arg(&text);
        let (ours, theirs) = UnixStream::pair().map_err(|e| Refused(format!("socketpair: {e}")))?;
        command
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(workspace)
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)));
        Ok(Launch { command, control: ours })
    }

    /// The helper to run: itself, or a private copy when it lies beneath a writable root.
    fn safe_helper(&self, helper: &Path, writable: &[PathBuf]) -> Result<PathBuf, Refused> {
        let canonical = helper.canonicalize().unwrap_or_else(|_| helper.to_path_buf());
        if !writable.iter().any(|w| canonical.starts_with(w.canonicalize().unwrap_or(w.clone()))) {
            return Ok(helper.to_path_buf());
        }
        let mut copy = self.helper_copy.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(path) = copy.as_ref() {
            return Ok(path.clone());
        }
        let dir = make_private_dir(leftovers::HELPER_PREFIX)
            .ok_or_else(|| Refused("cannot create a private directory for the helper".into()))?;
        let path = dir.join("pev-sandbox-helper");
        std::fs::copy(&canonical, &path).map_err(|e| {
            Refused(format!(
                "the sandbox helper {} is inside the workspace and cannot be copied out of a \
                 command's reach: {e}",
                helper.display()
            ))
        })?;
        *copy = Some(path.clone());
        Ok(path)
    }

    fn uses_bubblewrap(&self) -> bool {
        self.enforced().mechanisms.iter().any(|m| m.starts_with("bubblewrap"))
    }

    fn uses_namespaces(&self) -> bool {
        self.enforced().mechanisms.iter().any(|m| m == PEV_NAMESPACES)
    }

    /// Keep `handle` (a supervisor still holding background processes) until the run ends.
    pub fn linger(&self, handle: Box<dyn Send + std::fmt::Debug>) {
        self.lingering.lock().unwrap_or_else(PoisonError::into_inner).push(handle);
    }

    /// End every background process still running (dropping each handle closes its socket,
    /// and the supervisor kills what it holds).
    pub fn shutdown(&self) {
        let handles =
            std::mem::take(&mut *self.lingering.lock().unwrap_or_else(PoisonError::into_inner));
        drop(handles);
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.shutdown();
        // (Never probes: an undecided sandbox made no directory.)
        if let Some(tmp) = self.decided.get().and_then(|d| d.tmp.as_ref()) {
            let _ = std::fs::remove_dir_all(tmp);
        }
        let copy = self.helper_copy.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(dir) = copy.as_ref().and_then(|p| p.parent()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// `path` made absolute against the current directory (bubblewrap binds absolute paths).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A new private directory for the run's `TMPDIR`.
fn make_tmp() -> Option<PathBuf> {
    make_private_dir(leftovers::TMP_PREFIX)
}

/// A new directory in the system temp dir, mode 0700, created (never reused: an existing path,
/// a symlink planted by someone else included, makes it try another name). Named
/// `PREFIX-BOOT.NS.PID-N-NANOS` ([`leftovers`]); the first one a process makes starts the removal
/// of those that ended processes left.
fn make_private_dir(prefix: &str) -> Option<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static SWEPT: std::sync::Once = std::sync::Once::new();
    let base = std::env::temp_dir();
    SWEPT.call_once(|| leftovers::sweep_in_background(base.clone()));
    let owner = leftovers::owner_tag();
    for _ in 0..16 {
        let n = NEXT_TMP.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!("{prefix}-{owner}-{n}-{nanos:08x}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Some(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
    }
    None
}

/// What a command may not read, from the environment read through `env` (the process's own in
/// [`Sandbox::with_probe`]): the secrets under `$HOME` and the
/// credential files the environment names, those that exist, each once. A relative path in
/// the environment is ignored (it would name a file relative to wherever a command runs).
fn hidden_paths_in(env: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<PathBuf> {
    let var = |name: &str| env(name).filter(|p| p.is_absolute());
    let mut out: Vec<PathBuf> = match var("HOME") {
        Some(home) => HIDDEN_IN_HOME.iter().map(|name| home.join(name)).collect(),
        None => Vec::new(),
    };
    out.extend(credential_files(&var));
    out.retain(|p| p.exists());
    out.dedup();
    out
}

/// PostgreSQL's credential and service files wherever the environment points them (a shared
/// journal's password among them), beyond `~/.pgpass` and `~/.pg_service.conf`.
fn credential_files(var: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        ["PGPASSFILE", "PGSERVICEFILE"].iter().filter_map(|v| var(v)).collect();
    if let Some(dir) = var("PGSYSCONFDIR") {
        out.push(dir.join("pg_service.conf"));
    }
    out.push(PathBuf::from("/etc/postgresql-common/pg_service.conf"));
    out
}

/// The sandbox a run gets from the settings and the probe.
pub fn decide(settings: &Settings, has_helper: bool, probe: &Probe) -> Enforced {
    let network = settings.network.describe();
    if settings.mode == Mode::Off {
        return Enforced {
            mode: Mode::Off,
            level: Level::None,
            mechanisms: Vec::new(),
            network: "unrestricted".into(),
            journal: "writable by commands".into(),
            gaps: vec![
                "sandbox = \"off\": commands run with the workspace as working directory, a \
                 scrubbed environment and a process group, and no kernel confinement"
                    .into(),
            ],
        };
    }
    let mut gaps = Vec::new();
    let mut mechanisms = Vec::new();
    if !has_helper {
        gaps.push("no sandbox helper binary".into());
    }
    let landlock = has_helper && probe.landlock_abi.is_some();
    let seccomp = has_helper && probe.seccomp;
    if let Some(abi) = probe.landlock_abi.filter(|_| landlock) {
        mechanisms.push(format!("landlock v{abi}"));
        if abi < 4 && settings.network != Network::Open {
            gaps.push(format!("Landlock ABI {abi} cannot filter TCP (needs 4)"));
        }
        if abi < 6 {
            gaps.push(format!("Landlock ABI {abi} cannot scope signals (needs 6)"));
        }
    } else if has_helper {
        gaps.push("Landlock is not available: writes outside the workspace are not refused".into());
    }
    if seccomp {
        mechanisms.push("seccomp".into());
    } else if has_helper {
        gaps.push("seccomp is not available".into());
    }
    if has_helper {
        mechanisms.push("rlimits".into());
    }
    let bubblewrap = has_helper && probe.bubblewrap.is_some();
    // Without bubblewrap, pev's own namespaces where the kernel allows them.
    let namespaces = has_helper && !bubblewrap && probe.namespaces;
    if let Some(b) = probe.bubblewrap.as_ref().filter(|_| bubblewrap) {
        mechanisms.push(b.version.clone());
    } else if namespaces {
        mechanisms.push(PEV_NAMESPACES.into());
        gaps.push(
            "bubblewrap is not installed; pev's own namespaces hide .pev/, the secrets and the \
             host's sockets and make every mount read-only but the workspace and TMPDIR, but \
             commands share pev's process namespace (they see host processes; Landlock keeps \
             them from signalling any) and see the host's /dev and /proc (read-only)"
                .into(),
        );
    } else {
        gaps.push(
            "bubblewrap is not available and pev's own namespaces cannot be made here (`pev \
             doctor` says why): .pev/ is writable \
             by commands, they share pev's process and network namespaces and reach the \
             host's unix sockets, and they can change the mode, owner and times of the user's \
             files outside the workspace (Landlock does not cover those)"
                .into(),
        );
    }
    let bubblewrap = bubblewrap || namespaces;
    let level = match (landlock && seccomp, bubblewrap) {
        (true, true) => Level::Full,
        (true, false) | (false, true) => Level::Partial,
        (false, false) => Level::None,
    };
    let network = if level == Level::None { "unrestricted".into() } else { network };
    Enforced {
        mode: settings.mode,
        level,
        mechanisms,
        network,
        journal: if bubblewrap {
            "hidden from commands".into()
        } else {
            "writable by commands".into()
        },
        gaps,
    }
}

/// The directory a command may write: `write_root` as it is now, which must still lie inside the
/// workspace. A delegated child's scope was checked for symlinks when it was made, but the
/// parent's own commands may write the workspace and could since have swapped the scope (or a
/// directory above it) for a symlink to `$HOME`: the child's sandbox would then bind, and
/// Landlock allow, the symlink's target. Resolved here, the scope is refused instead. (A swap
/// between this check and the sandbox's own bind remains possible while a parent's command runs
/// beside the child.)
fn within(workspace: &Path, write_root: &Path) -> Result<PathBuf, Refused> {
    if write_root == workspace {
        return Ok(write_root.to_path_buf());
    }
    let resolve = |p: &Path| {
        p.canonicalize().map_err(|e| {
            Refused(format!("cannot resolve {}: {e}; the command was not run", p.display()))
        })
    };
    let (root, scope) = (resolve(workspace)?, resolve(write_root)?);
    if scope.starts_with(&root) {
        Ok(scope)
    } else {
        Err(Refused(format!(
            "the write scope {} resolves to {}, outside the workspace {} (a symlink?); the \
             command was not run",
            write_root.display(),
            scope.display(),
            root.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    #[test]
    fn postgres_credentials_are_hidden_wherever_the_environment_points() {
        let env = |name: &str| match name {
            "PGPASSFILE" => Some(PathBuf::from("/srv/secrets/pgpass")),
            "PGSERVICEFILE" => Some(PathBuf::from("/srv/secrets/services")),
            "PGSYSCONFDIR" => Some(PathBuf::from("/srv/pg")),
            _ => None,
        };
        let found = super::credential_files(&env);
        for path in ["/srv/secrets/pgpass", "/srv/secrets/services", "/srv/pg/pg_service.conf"] {
            assert!(found.contains(&PathBuf::from(path)), "{path}: {found:?}");
        }
        assert!(super::credential_files(&|_| None).iter().all(|p| p.starts_with("/etc")));
    }

    /// Rule: the secrets under `$HOME` and the credential files the environment names are
    /// hidden when they exist, each once; a relative `HOME` or file name is not followed.
    #[test]
    fn secrets_under_home_and_named_credentials_are_hidden_when_they_exist() {
        let top = tempfile::tempdir().unwrap();
        let home = top.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(home.join(".aws")).unwrap();
        let pgpass = top.path().join("pgpass");
        std::fs::write(&pgpass, "*:*:*:*:secret").unwrap();
        let (h, p) = (home.clone(), pgpass.clone());
        let env = move |name: &str| match name {
            "HOME" => Some(h.clone()),
            "PGPASSFILE" | "PGSERVICEFILE" => Some(p.clone()),
            _ => None,
        };
        let found = super::hidden_paths_in(&env);
        for path in [home.join(".ssh"), home.join(".aws"), pgpass] {
            assert_eq!(found.iter().filter(|f| **f == path).count(), 1, "{path:?}: {found:?}");
        }
        // What does not exist is not listed (`.gnupg`, `.netrc`, … were not made).
        assert!(found.iter().all(|f| f.exists()), "{found:?}");
        let relative = |name: &str| (name == "HOME").then(|| PathBuf::from("home"));
        assert!(super::hidden_paths_in(&relative).iter().all(|f| !f.starts_with("home")));
    }

    /// Rule: [`super::Sandbox::new`] probes the machine on the first question that needs it,
    /// once, and never for a caller that asks none (the stop gate checking file assertions
    /// spawns no process; issue 32). The helper here only records that it ran.
    #[test]
    fn the_probe_runs_once_and_only_when_asked() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ran = dir.path().join("ran");
        let helper = dir.path().join("helper");
        let script = format!("#!/bin/sh\necho x >> '{}'\necho '{{}}'\n", ran.display());
        std::fs::write(&helper, script).unwrap();
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let runs = || std::fs::read_to_string(&ran).map_or(0, |s| s.lines().count());
        let settings = super::Settings { mode: super::Mode::Auto, ..super::Settings::default() };
        let sandbox = super::Sandbox::new(settings.clone(), Some(helper.clone()));
        assert_eq!(runs(), 0, "made without probing");
        let _ = sandbox.enforced();
        let _ = sandbox.is_off();
        assert_eq!(runs(), 1, "probed once, on the first question");
        drop(sandbox);
        drop(super::Sandbox::new(settings, Some(helper)));
        assert_eq!(runs(), 1, "a sandbox asked nothing, dropped, probes nothing");
    }
}

#[cfg(test)]
#[path = "launch_tests.rs"]
mod launch_tests;
