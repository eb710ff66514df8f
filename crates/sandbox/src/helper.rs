//! The helper's entry point: `<binary> __sandbox <stage> …`, dispatched before anything else in
//! the binary that embeds it (pev's `main`, or the `pev-sandbox` binary of this crate).
//!
//! - `probe`: restrict a throw-away process and print what applied (JSON);
//! - `supervise <spec>`: stage 1, see `supervise.rs`;
//! - `exec <spec>`: stage 2, see `confine.rs`;
//! - `without-landlock -- <program> …`: run a program with the Landlock system calls failing,
//!   as on a kernel without Landlock (for tests of `sandbox = "require"`).

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::spec::Spec;

/// The first argument that marks a helper invocation.
pub const HELPER_ARG: &str = "__sandbox";

/// If this process was started as the sandbox helper, run the helper and return its exit code;
/// otherwise `None` (and the caller goes on with its own `main`).
pub fn helper_main() -> Option<i32> {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).and_then(|a| a.to_str()) != Some(HELPER_ARG) {
        return None;
    }
    let stage = args.get(2).and_then(|a| a.to_str()).unwrap_or_default();
    let spec = || -> Result<(Spec, String), String> {
        let text = args
            .get(3)
            .and_then(|a| a.to_str())
            .ok_or("the helper needs a spec argument")?
            .to_string();
        let spec = serde_json::from_str(&text).map_err(|e| format!("bad spec: {e}"))?;
        Ok((spec, text))
    };
    let code = match stage {
        "probe" => {
            let report = crate::probe::inside();
            let text = serde_json::to_string(&report).unwrap_or_default();
            let mut out = std::io::stdout();
            let _ = writeln!(out, "{text}");
            0
        }
        "supervise" => match spec() {
            Ok((_, text)) => crate::supervise::run(&text),
            Err(e) => fail(&e),
        },
        "exec" => match spec() {
            Ok((spec, _)) => fail(&crate::confine::exec(&spec)),
            Err(e) => fail(&e),
        },
        "without-landlock" => without_landlock(args.get(4..).unwrap_or_default()),
        other => fail(&format!("unknown helper stage `{other}`")),
    };
    Some(code)
}

fn without_landlock(argv: &[OsString]) -> i32 {
    let Some((program, rest)) = argv.split_first() else {
        return fail("without-landlock: give a program after `--`");
    };
    if let Err(e) = crate::confine::deny_landlock() {
        return fail(&format!("without-landlock: {e}"));
    }
    let err = Command::new(program).args(rest).exec();
    fail(&format!("without-landlock: cannot start {}: {err}", program.to_string_lossy()))
}

fn fail(message: &str) -> i32 {
    let mut err = std::io::stderr();
    let message = message.strip_prefix("pev sandbox: ").unwrap_or(message);
    let _ = writeln!(err, "pev sandbox: {message}");
    126
}
