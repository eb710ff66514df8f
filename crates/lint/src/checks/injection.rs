//! COMMAND_INJECTION, COMMAND_CHAINED, DOWNLOAD_EXECUTE and PATH_TRAVERSAL: step outputs and
//! literals that reach a shell or the file system in a dangerous shape.
//!
//! Commands (`shell.*` and `*.exec` tools). A `command` string is run by `sh -c`, so a step
//! reference anywhere in it is injection (COMMAND_INJECTION): another step's output becomes shell
//! syntax. Literal commands chained in one string (`cd app && make test`, `a; b`, `a || b`, a
//! background `&`, a newline with more after it, `$(…)`, backticks, `<(…)`) are not injection:
//! nothing from outside the plan reaches the shell. They are a COMMAND_CHAINED warning, because
//! one step then reports one exit code and one output for several commands. A pipe alone is one
//! pipeline and not flagged. A command that runs code it fetched (`curl … | sh`,
//! `sh -c "$(curl …)"`) is DOWNLOAD_EXECUTE (see [`download`](super::download)). The string is
//! read by [`shell_parser`](super::shell_parser), so quoted text (`grep 'a;b'`), comments,
//! redirections (`2>&1`) and `${HOME}` are not operators.
//!
//! An `argv` array runs no shell, so a reference as an element is safe, unless the program is a
//! shell (`sh -c`, `bash -lc`) or an interpreter (`python -c`, `node -e`, `perl -e`) and the
//! reference is in the code it runs. The literal script of a shell in `argv` is checked for
//! DOWNLOAD_EXECUTE; its chaining is not warned about, since a script is what `sh -c` was asked
//! to run.
//!
//! Paths (`file.*` tools; `path`, `paths`, `src`, `dest`, `source`, `target`, `dir`,
//! `directory`). A path leaves the workspace when a `..` climbs above its root once the path is
//! normalised (`../x`, `a/../../x`; `docs/../docs/readme.md` stays inside; `/` and `\` both
//! separate components), when it is absolute (`/x`, `\x`, `\\server`, `C:\x`), when it starts
//! with `~`, or holds a NUL byte. A reference spliced into a longer path
//! (`out/${s1.result.name}`) can carry `../` from another step's output and is flagged too; a path
//! that is exactly one reference passes another tool's path through whole and is not.

use pev_protocol::{ArrayRef, ValueRef};
use pev_protocol::{Finding, LintCode, ParamRef, Step};

use super::download::{self, program_name};
use super::interpreters::SHELLS;
use super::paths;
use super::shell_parser;
use super::shell_syntax::{self, Script};

/// The file-tool parameters that hold paths.
const PATH_PARAMS: &[&str] =
    &["path", "paths", "src", "dest", "source", "target", "dir", "directory"];

/// The check of one step, for the pass that runs several checks over each step.
pub(crate) fn check_step(index: usize, step: &Step, out: &mut Vec<Finding>) {
    let Some(tool) = step.tool.as_deref() else { return };
    let at = (index, step);
    if tool.starts_with("shell.") || tool.ends_with(".exec") {
        match step.parameters.get("command") {
            Some(ValueRef::String(command)) => check_command(at, command, out),
            Some(ValueRef::Array(argv)) => check_argv(at, "command", argv, out),
            _ => {}
        }
        if let Some(ValueRef::Array(argv)) = step.parameters.get("argv") {
            check_argv(at, "argv", argv, out);
        }
    }
    if tool.starts_with("file.") {
        // One pass over the parameters: a map lookup per name would hash every name.
        for (param, value) in &step.parameters {
            if !PATH_PARAMS.contains(&param) {
                continue;
            }
            match value {
                ValueRef::String(path) => check_path(at, param, None, path, out),
                ValueRef::Array(items) => {
                    for (k, item) in items.iter().enumerate() {
                        if let Some(path) = item.as_str() {
                            check_path(at, param, Some(k), path, out);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

fn finding(code: LintCode, (index, step): (usize, &Step), pointer: &str, msg: String) -> Finding {
    let path = format!("/steps/{index}{pointer}");
    Finding::step(code, (index, step.id.as_str()), path, msg)
}

/// The references found in the string at `pointer` (within the step).
fn refs_at<'s>(step: &'s Step, pointer: &'s str) -> impl Iterator<Item = &'s ParamRef> + 's {
    step.refs.iter().filter(move |r| r.pointer == pointer)
}

fn list_refs<'r>(refs: impl Iterator<Item = &'r ParamRef>) -> String {
    refs.map(|r| r.reference.to_string()).collect::<Vec<_>>().join(", ")
}

fn check_command(at: (usize, &Step), command: &str, out: &mut Vec<Finding>) {
    let pointer = "/parameters/command";
    let refs = list_refs(refs_at(at.1, pointer));
    if !refs.is_empty() {
        let msg = format!(
            "step output {refs} is spliced into a shell command, where it is read as shell \
             syntax; use `argv` with the reference as a whole argument"
        );
        out.push(finding(LintCode::CommandInjection, at, pointer, msg));
    }
    let script = shell_parser::parse(command);
    let joins = shell_syntax::joins(&script);
    if !joins.is_empty() {
        let names: Vec<&str> = joins.iter().map(|j| j.label()).collect();
        let msg = format!(
            "the shell command runs several commands ({}) with one exit code and one output \
             between them; split it into steps if each needs its own check",
            names.join(", ")
        );
        out.push(finding(LintCode::CommandChained, at, pointer, msg));
    }
    check_download(at, pointer, &script, out);
}

/// DOWNLOAD_EXECUTE for a script a shell runs.
fn check_download(at: (usize, &Step), pointer: &str, script: &Script, out: &mut Vec<Finding>) {
    let ways = download::downloaded_code(script);
    if !ways.is_empty() {
        let msg = format!(
            "the shell command runs code it downloads ({}), so whatever the server sends runs \
             unread; download to a file, check it (checksum or signature), and run it in a \
             later step, or install it from a package manager",
            ways.join("; ")
        );
        out.push(finding(LintCode::DownloadExecute, at, pointer, msg));
    }
}

/// An argv array: safe unless it runs a shell or interpreter on code that holds a reference, or
/// a shell on a script that runs downloaded code.
fn check_argv(at: (usize, &Step), param: &str, argv: ArrayRef<'_>, out: &mut Vec<Finding>) {
    let words: Vec<&str> = argv.iter().map(|v| v.as_str().unwrap_or("")).collect();
    let Some((program, code_at)) = code_argument(&words) else { return };
    let pointer = format!("/parameters/{param}/{code_at}");
    let refs = list_refs(refs_at(at.1, &pointer));
    if !refs.is_empty() {
        let msg = format!(
            "step output {refs} is spliced into code that `{program}` runs; pass it as a separate \
             argument (or in env) and read it from there"
        );
        out.push(finding(LintCode::CommandInjection, at, &pointer, msg));
    }
    if SHELLS.contains(&program.as_str())
        && let Some(code) = words.get(code_at)
    {
        check_download(at, &pointer, &shell_parser::parse(code), out);
    }
}

/// The program of an argv and the index of the code it is told to run (`sh -c CODE`,
/// `python -c CODE`, `env X=1 node -e CODE`), when it runs code from an argument.
fn code_argument(words: &[&str]) -> Option<(String, usize)> {
    // `env [VAR=x …] bash -c …` runs bash.
    let mut start = 0;
    if words.first().is_some_and(|w| program_name(w) == "env") {
        start = 1;
        while words.get(start).is_some_and(|w| w.contains('=') || w.starts_with('-')) {
            start += 1;
        }
    }
    let program = program_name(words.get(start)?);
    let flag_at = words.iter().skip(start + 1).position(|w| runs_code(&program, w))?;
    let code_at = start + 1 + flag_at + 1;
    (code_at < words.len()).then_some((program, code_at))
}

/// Whether `flag` tells `program` to run its next argument as code.
fn runs_code(program: &str, flag: &str) -> bool {
    if SHELLS.contains(&program) {
        // `-c`, or a cluster of short options that includes it (`-lc`, `-ec`).
        flag.len() > 1 && flag.starts_with('-') && !flag.starts_with("--") && flag.contains('c')
    } else if program.starts_with("python") {
        flag == "-c"
    } else if ["node", "nodejs", "deno", "bun"].contains(&program) {
        ["-e", "--eval", "-p", "--print"].contains(&flag)
    } else if ["perl", "ruby"].contains(&program) {
        flag == "-e" || flag == "-E"
    } else if program == "php" {
        flag == "-r"
    } else {
        false
    }
}

fn check_path(
    at: (usize, &Step),
    param: &str,
    element: Option<usize>,
    path: &str,
    out: &mut Vec<Finding>,
) {
    let pointer = match element {
        Some(k) => format!("/parameters/{param}/{k}"),
        None => format!("/parameters/{param}"),
    };
    let mut reasons: Vec<String> = Vec::new();
    if paths::climbs_out(path) {
        reasons.push("climbs out of the workspace with `..`".into());
    }
    if paths::is_absolute(path) {
        reasons.push("is absolute".into());
    }
    if path.starts_with('~') {
        reasons.push("starts with `~` (a home directory)".into());
    }
    if path.contains('\0') {
        reasons.push("holds a NUL byte".into());
    }
    let spliced: Vec<&ParamRef> = refs_at(at.1, &pointer).filter(|r| !r.whole).collect();
    if !spliced.is_empty() {
        reasons.push(format!(
            "is built from step output {}, which can hold `../`",
            list_refs(spliced.into_iter())
        ));
    }
    if !reasons.is_empty() {
        let shown: String = path.chars().take(80).collect();
        let msg = format!(
            "path {shown:?} {}; use a path relative to the workspace without `..`",
            reasons.join(", ")
        );
        out.push(finding(LintCode::PathTraversal, at, &pointer, msg));
    }
}
