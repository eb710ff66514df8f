//! The launcher with this crate's own helper binary: a command confined by Landlock and seccomp
//! alone (bubblewrap left out on purpose, as on a machine without it) and by the full stack, and
//! the supervisor's protocol (the exit line, `kill`, the socket closing).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use pev_sandbox::{Level, Mode, Probe, Sandbox, Settings, decide, probe};

fn helper() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pev-sandbox-helper"))
}

/// The machine's probe, or `None` (and why) when Landlock is missing here.
fn landlock_probe() -> Option<Probe> {
    let found = probe(Some(&helper()));
    if found.landlock_abi.is_none() || !found.seccomp {
        eprintln!("skipped: Landlock or seccomp is not available here: {:?}", found.notes);
        return None;
    }
    Some(found)
}

struct Ran {
    status: String,
    stdout: String,
    stderr: String,
}

fn run_in(sandbox: &Sandbox, ws: &Path, line: &str) -> Ran {
    let launch = sandbox
        .launch(
            ws,
            vec!["/bin/sh".into(), "-c".into(), line.into()],
            vec![("PATH".into(), "/usr/bin:/bin".into())],
        )
        .unwrap();
    let mut command = launch.command;
    let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut status = String::new();
    BufReader::new(&launch.control).read_line(&mut status).unwrap();
    drop(launch.control);
    let out = child.wait_with_output().unwrap();
    Ran {
        status: status.trim().to_owned(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn workspace() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(ws.join(".pev")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    (root, ws, outside)
}

#[test]
fn landlock_alone_confines_writes_and_says_the_journal_is_writable() {
    let Some(mut found) = landlock_probe() else { return };
    found.bubblewrap = None;
    found.namespaces = false;
    let sandbox = Sandbox::with_probe(Settings::default(), Some(helper()), found);
    assert_eq!(sandbox.enforced().level, Level::Partial);
    assert_eq!(sandbox.enforced().journal, "writable by commands");
    let (_root, ws, outside) = workspace();
    let line = format!(
        "echo in > inside.txt; echo out > {}/escaped.txt; echo j > .pev/j; cat inside.txt",
        outside.display()
    );
    let ran = run_in(&sandbox, &ws, &line);
    assert_eq!(ran.status, "exit 0", "{}", ran.stderr);
    assert_eq!(ran.stdout.trim(), "in");
    assert!(ran.stderr.contains("Permission denied"), "{}", ran.stderr);
    assert!(!outside.join("escaped.txt").exists());
    // The documented gap of this level: Landlock cannot carve `.pev/` out of the workspace.
    assert!(ws.join(".pev/j").exists());
}

#[test]
fn the_exit_code_and_signal_of_the_command_are_reported() {
    let Some(found) = landlock_probe() else { return };
    let sandbox = Sandbox::with_probe(Settings::default(), Some(helper()), found);
    let (_root, ws, _outside) = workspace();
    assert_eq!(run_in(&sandbox, &ws, "exit 7").status, "exit 7");
    assert_eq!(run_in(&sandbox, &ws, "kill -TERM $$").status, "signal 15");
}

#[test]
fn kill_ends_every_descendant_including_setsid_ones() {
    let Some(mut found) = landlock_probe() else { return };
    // Without bubblewrap there is no pid namespace: the supervisor's own kill must do it.
    found.bubblewrap = None;
    let sandbox = Sandbox::with_probe(Settings::default(), Some(helper()), found);
    let (_root, ws, _outside) = workspace();
    let launch = sandbox
        .launch(
            &ws,
            vec![
                "/bin/sh".into(),
                "-c".into(),
                "(setsid sh -c 'sleep 2; echo escaped > late.txt' &); sleep 30".into(),
            ],
            vec![("PATH".into(), "/usr/bin:/bin".into())],
        )
        .unwrap();
    let mut command = launch.command;
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut control = launch.control;
    control.write_all(b"kill\n").unwrap();
    let mut status = String::new();
    BufReader::new(&control).read_line(&mut status).unwrap();
    assert_eq!(status.trim(), "signal 9");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(5), "the supervisor did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!ws.join("late.txt").exists(), "a setsid descendant survived the kill");
}

/// A delegated child's write scope swapped for a symlink out of the workspace after it was made
/// (a parent's command may write the workspace): its commands are refused, not given the
/// symlink's target to write.
#[test]
fn a_write_scope_that_resolves_outside_the_workspace_is_refused() {
    let probe = Probe { landlock_abi: Some(7), seccomp: true, ..Probe::default() };
    let sandbox = Sandbox::with_probe(Settings::default(), Some(helper()), probe);
    let (_root, ws, outside) = workspace();
    std::fs::create_dir(ws.join("real")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("scope")).unwrap();
    let argv = || vec!["true".to_owned()];
    let err = sandbox.launch_in(&ws, &ws.join("scope"), argv(), Vec::new()).unwrap_err();
    assert!(err.0.contains("outside the workspace"), "{err}");
    assert!(sandbox.launch_in(&ws, &ws.join("real"), argv(), Vec::new()).is_ok());
    assert!(sandbox.launch_in(&ws, &ws, argv(), Vec::new()).is_ok());
}

#[test]
fn require_refuses_below_full_and_off_refuses_to_launch() {
    let probe = Probe { landlock_abi: Some(7), seccomp: true, ..Probe::default() };
    let settings = Settings { mode: Mode::Require, ..Settings::default() };
    let sandbox = Sandbox::with_probe(settings, Some(helper()), probe);
    let err = sandbox.launch(Path::new("/tmp"), vec!["true".into()], Vec::new()).unwrap_err();
    assert!(err.0.contains("sandbox = \"require\""), "{err}");
    assert!(err.0.contains("bubblewrap is not available"), "{err}");
    let off = Sandbox::off();
    assert!(off.is_off());
    assert!(off.launch(Path::new("/tmp"), vec!["true".into()], Vec::new()).is_err());
}

#[test]
fn the_level_follows_what_the_probe_found() {
    let bwrap = Some(pev_sandbox::Bubblewrap {
        path: "/usr/bin/bwrap".into(),
        version: "bubblewrap 0.8.0".into(),
    });
    let full =
        Probe { landlock_abi: Some(7), seccomp: true, bubblewrap: bwrap, ..Probe::default() };
    let settings = Settings::default();
    assert_eq!(decide(&settings, true, &full).level, Level::Full);
    assert_eq!(decide(&settings, true, &full).journal, "hidden from commands");
    let no_landlock = Probe { landlock_abi: None, ..full.clone() };
    let d = decide(&settings, true, &no_landlock);
    assert_eq!(d.level, Level::Partial);
    assert!(d.gaps.iter().any(|g| g.contains("Landlock is not available")), "{:?}", d.gaps);
    let nothing = Probe::default();
    assert_eq!(decide(&settings, true, &nothing).level, Level::None);
    assert_eq!(decide(&settings, false, &full).level, Level::None, "no helper, no sandbox");
    let old = Probe { landlock_abi: Some(3), ..full.clone() };
    assert!(decide(&settings, true, &old).gaps.iter().any(|g| g.contains("cannot filter TCP")));
    let off = Settings { mode: Mode::Off, ..Settings::default() };
    assert_eq!(decide(&off, true, &full).level, Level::None);
    assert!(decide(&off, true, &full).summary().starts_with("off"));
    // Without bubblewrap, pev's own namespaces make the sandbox full, and the run says what
    // they do not give; without either, partial.
    let own = Probe { bubblewrap: None, namespaces: true, ..full.clone() };
    let d = decide(&settings, true, &own);
    assert_eq!((d.level, d.journal.as_str()), (Level::Full, "hidden from commands"));
    assert!(d.mechanisms.iter().any(|m| m.starts_with("namespaces")), "{:?}", d.mechanisms);
    assert!(d.gaps.iter().any(|g| g.contains("process namespace")), "{:?}", d.gaps);
    let neither = Probe { namespaces: false, ..own };
    let d = decide(&settings, true, &neither);
    assert_eq!((d.level, d.journal.as_str()), (Level::Partial, "writable by commands"));
    assert!(d.gaps.iter().any(|g| g.contains("host's unix sockets")), "{:?}", d.gaps);
    // bubblewrap, when there, is what is used.
    let both = Probe { namespaces: true, ..full };
    assert!(!decide(&settings, true, &both).mechanisms.iter().any(|m| m.starts_with("namespaces")));
}
