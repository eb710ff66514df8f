//! A command run through the run's kernel sandbox (`pev-sandbox`).
//!
//! pev spawns the sandbox's supervisor with the command's pipes and keeps a unix socket to it.
//! The command's own exit arrives as one line on that socket; the supervisor may outlive it
//! while background processes started by the command run (a server for a later step): such a
//! supervisor is handed to the sandbox, which ends it, and everything under it, when the run
//! ends. At the timeout (or when the call is cancelled) the socket is told `kill` or closed, and
//! the supervisor kills every descendant, `setsid` and double forks included.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

use super::shell::{
    CommandOutput, CommandSpec, Ended, Program, capture, collect, environment, spawn_error,
};
use crate::{ToolContext, ToolError};

/// How long a supervisor may take to tear its tree down after `kill` before it is killed itself.
const TEARDOWN: Duration = Duration::from_secs(5);
/// How long to wait for the supervisor to exit after the command did, before treating it as
/// holding background processes.
const SETTLE: Duration = Duration::from_millis(100);

/// A supervisor still holding background processes; dropping it closes the socket, and the
/// supervisor kills what it holds and exits (tokio reaps it).
#[derive(Debug)]
struct Lingering {
    _control: UnixStream,
    _child: Child,
}

pub(crate) async fn run(ctx: &ToolContext, spec: &CommandSpec) -> Result<CommandOutput, ToolError> {
    let argv = match &spec.program {
        Program::Shell(line) => vec!["/bin/sh".to_string(), "-c".to_string(), line.clone()],
        Program::Argv(argv) if argv.is_empty() => {
            return Err(ToolError::RespondToModel("shell.exec: `argv` is empty".into()));
        }
        Program::Argv(argv) => argv.clone(),
    };
    let env = environment(ctx, spec)?;
    let launch = ctx
        .sandbox
        .launch_in(ctx.workspace.root(), &ctx.workspace.write_root(), argv, env)
        .map_err(|refused| ToolError::Fatal(format!("shell.exec: {refused}")))?;
    let control = launch
        .control
        .set_nonblocking(true)
        .and_then(|()| UnixStream::from_std(launch.control))
        .map_err(|e| ToolError::Fatal(format!("shell.exec: the sandbox socket: {e}")))?;
    let mut cmd = Command::from(launch.command);
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).process_group(0);
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
    // The command holds the supervisor's end of the socket: kept, a supervisor that never
    // started (or died) would leave it open, and the read below would wait for ever.
    drop(cmd);

    let stdout = Arc::new(Mutex::new(super::shell::Captured::default()));
    let stderr = Arc::new(Mutex::new(super::shell::Captured::default()));
    let readers = [
        child.stdout.take().map(|pipe| tokio::spawn(capture(pipe, cap, Arc::clone(&stdout)))),
        child.stderr.take().map(|pipe| tokio::spawn(capture(pipe, cap, Arc::clone(&stderr)))),
    ];

    let mut control = BufReader::new(control);
    let mut line = String::new();
    let reported = tokio::time::timeout_at(
        deadline.unwrap_or_else(far_future),
        report(&mut control, &mut line, &mut child),
    )
    .await
    .ok();
    let (exit_code, signal, timed_out) = match reported {
        Some(Report::Line) => {
            let (code, signal) = parse_status(&line);
            (code, signal, false)
        }
        // The supervisor (or bubblewrap before it) ended without a report: the command never
        // ran, or nothing is left that could say how it ended. Not the command's failure.
        Some(Report::Gone(status)) => {
            let ended = Ended { exit_code: None, signal: None, timed_out: false, started };
            let output = collect(ctx, readers, (&stdout, &stderr), ended).await;
            return Err(ToolError::Fatal(not_started(status, &output.stderr)));
        }
        None => {
            let _ = control.get_mut().write_all(b"kill\n").await;
            let _ = wait_bounded(&mut child, TEARDOWN).await;
            (None, Some(9), true)
        }
    };

    if !timed_out && tokio::time::timeout(SETTLE, child.wait()).await.is_err() {
        // Background processes live on under the supervisor until the run ends.
        ctx.sandbox.linger(Box::new(Lingering { _control: control.into_inner(), _child: child }));
    }

    let ended = Ended { exit_code, signal, timed_out, started };
    Ok(collect(ctx, readers, (&stdout, &stderr), ended).await)
}

/// How the wait for the command's report ended.
enum Report {
    /// The report is in `line`.
    Line,
    /// The supervisor ended, and its socket closed, without one.
    Gone(Option<std::process::ExitStatus>),
}

/// Wait for the supervisor's report line, or for the supervisor itself to end without one.
async fn report(
    control: &mut BufReader<UnixStream>,
    line: &mut String,
    child: &mut Child,
) -> Report {
    let status = tokio::select! {
        read = control.read_line(line) => match read {
            Ok(n) if n > 0 => return Report::Line,
            _ => wait_bounded(child, TEARDOWN).await,
        },
        status = child.wait() => status.ok(),
    };
    // It ended first; a report it wrote just before is still in the socket (whose other end is
    // closed now, so this read ends at once).
    match tokio::time::timeout(TEARDOWN, control.read_line(line)).await {
        Ok(Ok(n)) if n > 0 => Report::Line,
        _ => Report::Gone(status),
    }
}

/// The error of a confined command that never reported: the supervisor's (or bubblewrap's)
/// own words, and what to check.
fn not_started(status: Option<std::process::ExitStatus>, stderr: &str) -> String {
    let status = status.map_or_else(|| "no exit status".to_string(), |s| s.to_string());
    let said = stderr.trim();
    let said = if said.is_empty() { String::new() } else { format!(": {said}") };
    format!(
        "shell.exec: the sandbox could not run the command (its supervisor ended, {status}, \
         without reporting the command's exit){said}. Run `pev doctor` to see what the sandbox \
         can use on this machine; `sandbox = \"off\"` runs commands unconfined"
    )
}

fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(60 * 60 * 24 * 365)
}

/// `exit <code>` or `signal <n>`.
fn parse_status(line: &str) -> (Option<i32>, Option<i32>) {
    let mut words = line.split_whitespace();
    let kind = words.next();
    let value = words.next().and_then(|v| v.parse::<i32>().ok());
    match kind {
        Some("exit") => (value, None),
        Some("signal") => (None, value),
        _ => (None, None),
    }
}

/// Wait for the supervisor up to `limit`, then kill it.
async fn wait_bounded(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    match tokio::time::timeout(limit, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            let _ = child.start_kill();
            child.wait().await.ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_status;

    #[test]
    fn status_lines() {
        assert_eq!(parse_status("exit 3\n"), (Some(3), None));
        assert_eq!(parse_status("signal 9\n"), (None, Some(9)));
        assert_eq!(parse_status("garbage"), (None, None));
    }
}
