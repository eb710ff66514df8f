//! Helpers shared by the suite: the binary with a clean environment, temp files, and captured
//! output.

#![allow(dead_code)] // each suite module uses a subset

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use assert_cmd::Command;
use tempfile::TempDir;

/// The `pev` binary, with the environment variables it reads removed so the parent's do not leak.
pub fn pev() -> Command {
    let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("pev");
    cmd.env_remove("PEV_MAX_INPUT_BYTES").env_remove("NO_COLOR").env_remove("PEV_STORE");
    cmd.env("PATH", path());
    cmd
}

/// `PATH` for the processes the tests start: this process's, with the real `python3`'s
/// directory put first when the `python3` found on it is a version manager's shim. pyenv's is a
/// shell script that works out the version on every call, about 0.25 s of bash a time (0.03 s
/// for the interpreter itself), and the evals' Python fixture projects run their tests hundreds
/// of times over the suite: on a machine with pyenv that was most of the CLI suite's time. The
/// interpreter is the one the shim would have run; a machine without a shim gets its `PATH`
/// unchanged.
pub fn path() -> OsString {
    static PATH: OnceLock<OsString> = OnceLock::new();
    PATH.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        real_python_first(&path).unwrap_or(path)
    })
    .clone()
}

/// `path` with the directory of the interpreter a `python3` shim runs put first; `None` when the
/// first `python3` on it is not a script, or does not say where its interpreter is.
fn real_python_first(path: &OsString) -> Option<OsString> {
    use std::io::Read as _;
    let found = std::env::split_paths(path).map(|d| d.join("python3")).find(|p| p.is_file())?;
    let mut head = [0u8; 2];
    std::fs::File::open(&found).ok()?.read_exact(&mut head).ok()?;
    if &head != b"#!" {
        return None;
    }
    let out = std::process::Command::new(&found)
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let exe = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    let dir = exe.parent().filter(|_| out.status.success() && exe.is_absolute())?;
    std::env::join_paths(std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(path))).ok()
}

/// [`path`] with `dir` first (the binary's directory, as where the README's `pev` is installed).
pub fn path_with(dir: &Path) -> OsString {
    let rest = path();
    std::env::join_paths(std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&rest)))
        .expect("a PATH")
}

/// What a run of the binary produced.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Standard output parsed as JSON (the test fails if it is not exactly one JSON document).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

/// Runs `cmd` with `args` and captures everything.
pub fn run(cmd: &mut Command, args: &[&str]) -> Run {
    cmd.args(args);
    // A binary a test has just copied (an install of pev) can be busy for a moment: another
    // test's thread may fork while the copy's file is still open for writing, and the child
    // holds it until it execs ("Text file busy"). Asked again, it runs.
    let mut tries = 0;
    let output = loop {
        match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other.expect("the binary runs"),
        }
    };
    Run {
        code: output.status.code().expect("exited normally, not by a signal"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// Runs `pev` with `args` in `dir`.
pub fn pev_in(dir: &Path, args: &[&str]) -> Run {
    run(pev().current_dir(dir), args)
}

/// A temp dir holding the given files.
pub fn dir_with(files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, contents) in files {
        std::fs::write(dir.path().join(name), contents).expect("write fixture");
    }
    dir
}

/// The workspace root (for the examples).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// This crate's fixtures.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// A policy that allows only `file.read`: any other tool is a TOOL_DENY error.
pub const READ_ONLY_POLICY: &str = "allow_tools: [\"file.read\"]\n";

/// A plan that passes the default policy and READ_ONLY_POLICY without findings.
pub const CLEAN_PLAN: &str = r#"{
  "goal": "Read the price list",
  "steps": [
    {"id": "read", "title": "Read prices", "tool": "file.read", "parameters": {"path": "prices.csv"}}
  ]
}"#;

/// Step 2 (`step-003`, "Update prices") uses `db.exec`, which READ_ONLY_POLICY denies; the
/// `"tool"` of that step is on line 15.
pub const DENIED_PLAN: &str = r#"{
  "goal": "Update the prices",
  "steps": [
    {
      "id": "step-001",
      "title": "Read prices",
      "tool": "file.read",
      "parameters": {"path": "prices.csv"}
    },
    {"id": "step-002", "title": "Read rules", "tool": "file.read",
     "parameters": {"path": "rules.csv"}},
    {
      "id": "step-003",
      "title": "Update prices",
      "tool": "db.exec",
      "parameters": {"sql": "UPDATE prices SET amount = amount * 0.9"},
      "acceptance_criteria": ["prices are 10% lower"]
    }
  ]
}"#;

/// No steps: one EMPTY_PLAN warning (risk 0.05).
pub const EMPTY_PLAN: &str = r#"{"goal": "Nothing yet", "steps": []}"#;

/// Runs `check` on `items` from a few threads at once (the kill-point tests run `pev` hundreds
/// of times, each independent of the others), taking them in order, until a check returns
/// `Break`: no item is taken after that, and those already taken finish (each check stands on
/// its own). A panic in a check stops the others from taking more and is raised again here
/// with its own message, so the test fails as it would have one item at a time.
pub fn in_parallel<T: Send>(
    items: impl IntoIterator<Item = T, IntoIter: Send>,
    check: impl Fn(T) -> std::ops::ControlFlow<()> + Sync,
) {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    // Two cores run a pev each while a third thread waits on its child; more only adds load
    // (and on a big machine, runs past the last kill point that are thrown away).
    let workers = (std::thread::available_parallelism().map_or(2, |n| n.get()) + 1).min(4);
    let items = Mutex::new(items.into_iter());
    let stop = AtomicBool::new(false);
    let failure = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while !stop.load(Ordering::SeqCst) {
                    let Some(item) = items.lock().unwrap_or_else(|e| e.into_inner()).next() else {
                        return;
                    };
                    let checked =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(item)));
                    match checked {
                        Ok(std::ops::ControlFlow::Continue(())) => {}
                        Ok(std::ops::ControlFlow::Break(())) => stop.store(true, Ordering::SeqCst),
                        Err(panic) => {
                            stop.store(true, Ordering::SeqCst);
                            failure.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(panic);
                        }
                    }
                }
            });
        }
    });
    if let Some(panic) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        std::panic::resume_unwind(panic);
    }
}
