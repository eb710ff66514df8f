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
    let mut child = cmd.spawn().map_err(|e| spawn_error(&spec.program, &e))?;

    let stdout = Arc::new(Mutex::new(super::shell::Captured::default()));
    let stderr = Arc::new(Mutex::new(super::shell::Captured::default()));
    let readers = [
        child.stdout.take().map(|pipe| tokio::spawn(capture(pipe, cap, Arc::clone(&stdout)))),
        child.stderr.take().map(|pipe| tokio::spawn(capture(pipe, cap, Arc::clone(&stderr)))),
    ];

    let mut control = BufReader::new(control);
    let mut line = String::new();
    let read = control.read_line(&mut line);
    let reported = match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, read).await.ok(),
        None => Some(read.await),
    };
    let (exit_code, signal, timed_out) = match reported {
        Some(Ok(n)) if n > 0 => {
            let (code, signal) = parse_status(&line);
            (code, signal, false)
        }
        // The socket closed without a report: the supervisor itself ended; its status is all
        // there is.
        Some(_) => {
            let status = wait_bounded(&mut child, TEARDOWN).await;
            (
                status.and_then(|s| s.code()),
                status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
                false,
            )
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
