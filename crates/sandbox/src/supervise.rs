//! Stage 1 of the helper: the supervisor of one confined command and everything it starts.
//!
//! It becomes a child subreaper (orphans of the command, `setsid` and double forks included,
//! are re-parented to it rather than to init), starts stage 2, and talks to pev over the unix
//! socket it got as stdin:
//!
//! - when the command itself exits, it writes `exit <code>` or `signal <n>` (one line);
//! - it stays alive while any descendant lives (a server started for a later step), and exits
//!   when the last one is gone;
//! - a `kill` line, or the socket closing (pev ended the run, or died), makes it kill every
//!   descendant and exit.
//!
//! The supervisor itself is outside the command's Landlock domain, so the command can neither
//! signal nor trace it.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::process::descendants;

/// How long a teardown keeps killing a tree that keeps forking before it gives up (and says so
/// on stderr). Without a pid namespace (bubblewrap) a process that forks and exits in a tight
/// loop can outrun a scan of `/proc`; killing whole process groups catches most of them.
const KILL_FOR: Duration = Duration::from_secs(10);

/// Run the supervisor; `spec_json` is passed on to stage 2. Returns the helper's exit code.
pub(crate) fn run(spec_json: &str) -> i32 {
    let control = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => UnixStream::from(fd),
        Err(e) => return fail(&format!("no control socket: {e}")),
    };
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        return fail(&format!("cannot become a subreaper: {e}"));
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return fail(&format!("cannot find the helper binary: {e}")),
    };
    let child = Command::new(exe)
        .arg0("pev-sandbox")
        .args(["__sandbox", "exec", spec_json])
        .stdin(Stdio::null())
        .process_group(0)
        .spawn();
    let main_pid = match child {
        Ok(child) => Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX)),
        Err(e) => return fail(&format!("cannot start the command's stage: {e}")),
    };

    let stopping = Arc::new(AtomicBool::new(false));
    if let Ok(reader) = control.try_clone() {
        let stopping = Arc::clone(&stopping);
        std::thread::spawn(move || {
            let mut lines = BufReader::new(reader).lines();
            // Any line (`kill`) or the end of the stream: tear everything down.
            let _ = lines.next();
            stopping.store(true, Ordering::SeqCst);
            kill_all();
        });
    }

    let mut control = control;
    let mut reported = false;
    loop {
        match waitpid(None, None) {
            Ok(status) => {
                if status.pid() == Some(main_pid) && !reported {
                    reported = true;
                    let line = match status {
                        WaitStatus::Exited(_, code) => format!("exit {code}\n"),
                        WaitStatus::Signaled(_, signal, _) => format!("signal {}\n", signal as i32),
                        _ => continue,
                    };
                    let _ = control.write_all(line.as_bytes());
                }
            }
            Err(Errno::EINTR) => {}
            // No children left: the command and everything it started are gone.
            Err(_) => break,
        }
    }
    if !reported {
        let _ = control.write_all(b"signal 9\n");
    }
    i32::from(stopping.load(Ordering::SeqCst))
}

/// SIGKILL every descendant until none is left (or [`KILL_FOR`] runs out).
fn kill_all() {
    let me = Pid::this();
    let start = std::time::Instant::now();
    while start.elapsed() < KILL_FOR {
        let pids = descendants(me);
        if pids.is_empty() {
            return;
        }
        // Stop them all first so that none forks a replacement while the others die; a whole
        // process group at once catches the children a member forked since the scan.
        for pid in &pids {
            let _ = kill(*pid, Signal::SIGSTOP);
        }
        for pid in &pids {
            if let Ok(group) = nix::unistd::getpgid(Some(*pid))
                && group != nix::unistd::getpgrp()
            {
                let _ = nix::sys::signal::killpg(group, Signal::SIGKILL);
            }
            let _ = kill(*pid, Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let left = descendants(me).len();
    if left > 0 {
        let mut err = std::io::stderr();
        let _ = writeln!(
            err,
            "pev sandbox: {left} processes were still alive after {KILL_FOR:?} of killing"
        );
    }
}

fn fail(message: &str) -> i32 {
    let mut err = std::io::stderr();
    let _ = writeln!(err, "pev sandbox: {message}");
    125
}
