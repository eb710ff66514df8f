//! `shell.exec`, and [`run_command`] which the verifier's `command_succeeds` reuses: a process in
//! the workspace, with a scrubbed environment, a deadline, and capped output.
//!
//! - The environment is cleared, then only `PATH`, `LANG`, `LC_ALL`, `TERM`, `TZ` and the
//!   policy's `env_allow` names are copied from pev's own environment; `HOME` is the workspace;
//!   the call's `env` comes last. API keys in pev's environment never reach a command.
//! - The child leads its own process group. On timeout (or when the call is cancelled) the whole
//!   group gets SIGKILL, so `sh -c 'server & sleep 99'` leaves nothing behind; then the leader is
//!   reaped.
//! - Each stream keeps at most `max_output_bytes` but is read to the end, so a chatty child never
//!   blocks on a full pipe; the `*_truncated` flags say when bytes were dropped.
//! - A command that exits normally may leave background processes running (a test server for a
//!   later step). If one of them still holds the output pipes, reading stops shortly after the
//!   leader has exited instead of waiting for it.
//! - Unless the run's sandbox is off, the command runs confined by `pev-sandbox` (see
//!   `confined.rs`): there a timeout kills every descendant, `setsid` and double forks included,
//!   and background processes live until the run ends, not past it.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use pev_protocol::tool::Effect;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::task::JoinHandle;

use super::{output, parse_args, schema_for, timeout_from_secs};
use crate::text::decode;
use crate::{BoxFuture, Tool, ToolContext, ToolError};

/// Variables copied from pev's environment into every command, besides the policy's.
pub const FIXED_ENV: &[&str] = &["PATH", "LANG", "LC_ALL", "TERM", "TZ"];
/// `PATH` when pev itself has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// How long to keep reading output after the leader has exited (see the module comment).
pub(crate) const PIPE_GRACE: Duration = Duration::from_millis(500);
/// Bytes read from a pipe at a time.
const PIPE_CHUNK: usize = 64 * 1024;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// A command line for `/bin/sh -c`.
    Shell(String),
    /// A program and its arguments, run directly (no shell, no quoting).
    Argv(Vec<String>),
}

/// A command to run in the workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandSpec {
    pub program: Program,
    pub timeout: Duration,
    /// Set after the allow-listed variables, so it can override them.
    pub env: BTreeMap<String, String>,
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandOutput {
    /// The exit code; `null` when the process was ended by a signal (a timeout included).
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub duration_ms: u64,
    /// The sandbox the command ran in: `full`, `partial`, `none` (nothing to confine with) or
    /// `off` (sandbox = "off").
    pub sandbox: &'static str,
}

impl CommandOutput {
    /// Exited by itself with code 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

/// Arguments of `shell.exec`: exactly one of `command` and `argv`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellExecArgs {
    /// A command line, run by `sh -c` in the workspace root.
    #[serde(default)]
    pub command: Option<String>,
    /// A program and its arguments, run directly (no shell).
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// Seconds before the command and everything it started are killed.
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// Extra environment variables (the environment is otherwise minimal).
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
}

/// The `shell.exec` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShellExec;

impl Tool for ShellExec {
    fn name(&self) -> &'static str {
        "shell.exec"
    }

    fn effect(&self) -> Effect {
        Effect::Exec
    }

    fn description(&self) -> &'static str {
        "Run a command in the workspace root (`command` via sh -c, or `argv` directly) with a \
         minimal environment and a timeout. Returns exit_code, stdout and stderr (each capped)."
    }

    fn parameters_schema(&self) -> Value {
        schema_for::<ShellExecArgs>()
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let args: ShellExecArgs = parse_args(self.name(), args)?;
            let program = match (args.command, args.argv) {
                (Some(command), None) => Program::Shell(command),
                (None, Some(argv)) => Program::Argv(argv),
                _ => {
                    return Err(ToolError::RespondToModel(
                        "shell.exec: give exactly one of `command` (a shell command line) and \
                         `argv` (a program and its arguments)"
                            .into(),
                    ));
                }
            };
            let timeout =
                timeout_from_secs(self.name(), args.timeout_s, ctx.policy.default_timeout)?;
            let spec = CommandSpec { program, timeout, env: args.env.unwrap_or_default() };
            let mut out = run_command(ctx, &spec).await?;
            explain_frozen(ctx, &mut out);
            output(&out)
        })
    }
}

/// A command that failed on a frozen file (the run's tests, read-only to commands) sees only
/// "Device or resource busy" or "Read-only file system": say what the file is.
fn explain_frozen(ctx: &ToolContext, out: &mut CommandOutput) {
    let failed = out.exit_code != Some(0);
    let busy = out.stderr.contains("Device or resource busy")
        || out.stderr.contains("Read-only file system");
    if !failed || !busy {
        return;
    }
    let root = ctx.workspace.root();
    let frozen: Vec<String> = ctx
        .sandbox
        .frozen()
        .iter()
        .filter_map(|p| p.strip_prefix(root).ok())
        .map(|p| p.display().to_string())
        .filter(|p| out.stderr.contains(p.as_str()))
        .collect();
    if frozen.is_empty() {
        return;
    }
    out.stderr.push_str(&format!(
        "\npev: {} {} one of the checks this work is judged by (tests and test configuration are \
         read-only to commands): make the check pass by fixing the code under test; if the test \
         itself is wrong, say so instead of changing it.\n",
        frozen.join(", "),
        if frozen.len() == 1 { "is" } else { "are" }
    ));
}

/// Run `spec` in the workspace under `ctx`'s policy.
pub async fn run_command(
    ctx: &ToolContext,
    spec: &CommandSpec,
) -> Result<CommandOutput, ToolError> {
    if !ctx.sandbox.is_off() || ctx.sandbox.settings().mode == pev_sandbox::Mode::Require {
        return super::confined::run(ctx, spec).await;
    }
    let mut cmd = build(ctx, spec)?;
    let cap = ctx.policy.max_output_bytes;
    let started = Instant::now();
    let deadline = tokio::time::Instant::now().checked_add(spec.timeout);
    if !crate::spawn_mark::spawning() {
        return Err(ToolError::Fatal(
            "shell.exec: pev could not record that the command is starting (its mark under \
             .pev/inflight), so it did not start it"
                .to_owned(),
        ));
    }
    let mut child = cmd.spawn().map_err(|e| spawn_error(&spec.program, &e))?;
    let mut group =
        GroupGuard { pgid: child.id().and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw) };

    let stdout = Arc::new(Mutex::new(Captured::default()));
    let stderr = Arc::new(Mutex::new(Captured::default()));
    let readers = [
        child.stdout.take().map(|pipe| tokio::spawn(capture(pipe, cap, Arc::clone(&stdout)))),
        child.stderr.take().map(|pipe| tokio::spawn(capture(pipe, cap, Arc::clone(&stderr)))),
    ];

    let waited = match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, child.wait()).await.ok(),
        None => Some(child.wait().await),
    };
    let (status, timed_out) = match waited {
        Some(status) => (status, false),
        None => {
            group.kill();
            (child.wait().await, true)
        }
    };
    // The leader is reaped: from here a kill could hit a reused process group id, and a normal
    // exit may leave background processes that are meant to outlive the step.
    group.disarm();
    let status =
        status.map_err(|e| ToolError::Fatal(format!("waiting for the command failed: {e}")))?;

    let ended = Ended { exit_code: status.code(), signal: status.signal(), timed_out, started };
    Ok(collect(ctx, readers, (&stdout, &stderr), ended).await)
}

/// How a command ended, for [`collect`].
pub(crate) struct Ended {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub started: Instant,
}

/// The output of a command that ended: its pipes read until [`PIPE_GRACE`] after the end, the
/// captured streams decoded.
pub(crate) async fn collect(
    ctx: &ToolContext,
    readers: [Option<JoinHandle<()>>; 2],
    (stdout, stderr): (&Mutex<Captured>, &Mutex<Captured>),
    ended: Ended,
) -> CommandOutput {
    let grace = tokio::time::Instant::now() + PIPE_GRACE;
    for reader in readers.into_iter().flatten() {
        finish_reader(reader, grace).await;
    }
    let (out_bytes, stdout_truncated) = take(stdout);
    let (err_bytes, stderr_truncated) = take(stderr);
    CommandOutput {
        exit_code: ended.exit_code,
        signal: ended.signal,
        stdout: decode(out_bytes, stdout_truncated).text,
        stderr: decode(err_bytes, stderr_truncated).text,
        timed_out: ended.timed_out,
        stdout_truncated,
        stderr_truncated,
        duration_ms: u64::try_from(ended.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        sandbox: sandbox_label(ctx),
    }
}

/// What [`CommandOutput::sandbox`] says for `ctx`.
pub(crate) fn sandbox_label(ctx: &ToolContext) -> &'static str {
    let enforced = ctx.sandbox.enforced();
    match (enforced.mode, enforced.level) {
        (pev_sandbox::Mode::Off, _) => "off",
        (_, level) => level.as_str(),
    }
}

/// The command, with its environment, working directory, pipes and process group.
fn build(ctx: &ToolContext, spec: &CommandSpec) -> Result<Command, ToolError> {
    let mut cmd = match &spec.program {
        Program::Shell(line) => {
            let mut cmd = Command::new("/bin/sh");
            cmd.arg("-c").arg(line);
            cmd
        }
        Program::Argv(argv) => {
            let Some((program, args)) = argv.split_first() else {
                return Err(ToolError::RespondToModel("shell.exec: `argv` is empty".into()));
            };
            let mut cmd = Command::new(program);
            cmd.args(args);
            cmd
        }
    };
    let root = ctx.workspace.root();
    cmd.current_dir(root).env_clear();
    cmd.envs(environment(ctx, spec)?);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    Ok(cmd)
}

/// The whole environment of a command: the fixed and the policy's allowed variables from pev's
/// own environment, `HOME` (the workspace), then the call's `env`.
pub(crate) fn environment(
    ctx: &ToolContext,
    spec: &CommandSpec,
) -> Result<Vec<(String, String)>, ToolError> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |name: &str, value: String| {
        env.retain(|(k, _)| k != name);
        env.push((name.to_string(), value));
    };
    let allowed = FIXED_ENV.iter().copied().chain(ctx.policy.env_allow.iter().map(String::as_str));
    for name in allowed {
        if let Some(value) = std::env::var_os(name) {
            set(name, value.to_string_lossy().into_owned());
        }
    }
    if std::env::var_os("PATH").is_none() {
        set("PATH", DEFAULT_PATH.to_string());
    }
    set("HOME", ctx.workspace.root().display().to_string());
    for (name, value) in &spec.env {
        if name.is_empty() || name.contains(['=', '\0']) || value.contains('\0') {
            return Err(ToolError::RespondToModel(format!(
                "shell.exec: invalid environment variable `{name}` (names may not be empty or \
                 contain `=`; neither may contain a NUL byte)"
            )));
        }
        set(name, value.clone());
    }
    Ok(env)
}

pub(crate) fn spawn_error(program: &Program, err: &io::Error) -> ToolError {
    let what = match program {
        Program::Shell(_) => "/bin/sh",
        Program::Argv(argv) => argv.first().map_or("", String::as_str),
    };
    let message = format!("shell.exec: cannot start `{what}`: {err}");
    match err.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied | io::ErrorKind::InvalidInput => {
            ToolError::RespondToModel(message)
        }
        _ => ToolError::Fatal(message),
    }
}

/// Sends SIGKILL to the child's whole process group when told to, or when dropped armed (the
/// call was cancelled).
struct GroupGuard {
    pgid: Option<Pid>,
}

impl GroupGuard {
    fn kill(&self) {
        if let Some(pgid) = self.pgid {
            // ESRCH (the group is already gone) is the outcome we want anyway.
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }

    fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[derive(Debug, Default)]
pub(crate) struct Captured {
    bytes: Vec<u8>,
    truncated: bool,
}

/// Read a pipe to its end, keeping at most `cap` bytes in `sink`.
pub(crate) async fn capture(
    mut pipe: impl AsyncRead + Unpin,
    cap: usize,
    sink: Arc<Mutex<Captured>>,
) {
    let mut buf = vec![0u8; PIPE_CHUNK];
    let mut full = false;
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if full {
            continue;
        }
        let mut captured = sink.lock().unwrap_or_else(PoisonError::into_inner);
        let room = cap.saturating_sub(captured.bytes.len());
        let take = n.min(room);
        captured.bytes.extend_from_slice(buf.get(..take).unwrap_or_default());
        if take < n {
            captured.truncated = true;
            full = true;
        }
    }
}

/// Wait for a reader until `grace`, then stop it: what it captured so far stays in its sink.
pub(crate) async fn finish_reader(mut reader: JoinHandle<()>, grace: tokio::time::Instant) {
    if tokio::time::timeout_at(grace, &mut reader).await.is_err() {
        reader.abort();
    }
}

pub(crate) fn take(sink: &Mutex<Captured>) -> (Vec<u8>, bool) {
    let mut captured = sink.lock().unwrap_or_else(PoisonError::into_inner);
    (std::mem::take(&mut captured.bytes), captured.truncated)
}
