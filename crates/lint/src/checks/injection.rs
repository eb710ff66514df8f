//! COMMAND_INJECTION and PATH_TRAVERSAL: step outputs and literals that reach a shell or the
//! file system in a dangerous shape.
//!
//! Commands (`shell.*` and `*.exec` tools). A `command` string is run by `sh -c`, so a step
//! reference anywhere in it is injection: another step's output becomes shell syntax. Chaining
//! and substitution are found by a small shell lexer that knows single quotes (nothing is
//! special inside), double quotes (only backticks and `$(` are), backslash escapes and `#`
//! comments: `;`, `&&`, `||`, a lone `&` (not a `2>&1` redirection), backticks, `$(` (not
//! `$((` arithmetic) and a newline with more after it. A pipe alone is one pipeline, not flagged;
//! `${HOME}` and `$HOME` are shell variables, not step references. An `argv` array runs no shell,
//! so a reference as an element is safe, unless the program is a shell (`sh -c`, `bash -lc`) or
//! an interpreter (`python -c`, `node -e`, `perl -e`) and the reference is in the code it runs.
//!
//! Paths (`file.*` tools; `path`, `paths`, `src`, `dest`, `source`, `target`, `dir`,
//! `directory`). A path leaves the workspace with a `..` component (`/` and `\` both separate
//! components; `a..b` and `..foo` are names), when it is absolute (`/x`, `\x`, `\\server`,
//! `C:\x`), when it starts with `~`, or holds a NUL byte. A reference spliced into a longer path
//! (`out/${s1.result.name}`) can carry `../` from another step's output and is flagged too; a path
//! that is exactly one reference passes another tool's path through whole and is not.

use pev_protocol::{Finding, LintCode, ParamRef, Step};
use serde_json::Value;

use crate::Ctx;

/// The file-tool parameters that hold paths.
const PATH_PARAMS: &[&str] =
    &["path", "paths", "src", "dest", "source", "target", "dir", "directory"];

/// Shells whose `-c` option runs its argument as a script.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh"];

pub(crate) fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for (index, step) in ctx.plan.steps.iter().enumerate() {
        let Some(tool) = step.tool.as_deref() else { continue };
        let at = (index, step);
        if tool.starts_with("shell.") || tool.ends_with(".exec") {
            match step.parameters.get("command") {
                Some(Value::String(command)) => check_command(at, command, out),
                Some(Value::Array(argv)) => check_argv(at, "command", argv, out),
                _ => {}
            }
            if let Some(Value::Array(argv)) = step.parameters.get("argv") {
                check_argv(at, "argv", argv, out);
            }
        }
        if tool.starts_with("file.") {
            // One pass over the parameters: a map lookup per name would hash every name.
            for (param, value) in &step.parameters {
                if !PATH_PARAMS.contains(&param.as_str()) {
                    continue;
                }
                match value {
                    Value::String(path) => check_path(at, param, None, path, out),
                    Value::Array(items) => {
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
    let ops = shell_operators(command);
    if !ops.is_empty() {
        let msg = format!(
            "the shell command chains or substitutes commands ({}); run one command per step, \
             or quote the characters if they are data",
            ops.join(", ")
        );
        out.push(finding(LintCode::CommandInjection, at, pointer, msg));
    }
}

/// The chaining and substitution operators outside quotes, each named once, in order.
fn shell_operators(command: &str) -> Vec<&'static str> {
    #[derive(PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let b = command.as_bytes();
    let mut ops: Vec<&'static str> = Vec::new();
    let mut add = |op: &'static str| {
        if !ops.contains(&op) {
            ops.push(op);
        }
    };
    // A newline is a separator only with a command after it; a trailing one is harmless.
    let last_text = b.iter().rposition(|x| !x.is_ascii_whitespace()).unwrap_or(0);
    let mut quote = Quote::None;
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        let next = b.get(i + 1).copied();
        let substitution = c == b'$' && next == Some(b'(') && b.get(i + 2) != Some(&b'(');
        match quote {
            Quote::Single => {
                if c == b'\'' {
                    quote = Quote::None;
                }
            }
            Quote::Double => match c {
                b'\\' => i += 1,
                b'"' => quote = Quote::None,
                b'`' => add("backticks"),
                _ if substitution => add("`$(`"),
                _ => {}
            },
            Quote::None => match c {
                b'\\' => i += 1,
                b'\'' => quote = Quote::Single,
                b'"' => quote = Quote::Double,
                b'#' if i == 0 || b.get(i - 1).is_some_and(|p| b" \t\n;&|()".contains(p)) => {
                    // A comment runs to the end of the line; the newline itself still counts.
                    i = b[i..].iter().position(|&x| x == b'\n').map_or(b.len(), |p| i + p);
                    continue;
                }
                b';' => add("`;`"),
                b'&' if next == Some(b'&') => {
                    add("`&&`");
                    i += 1;
                }
                b'&' => {
                    let redirect = next == Some(b'>')
                        || i.checked_sub(1)
                            .and_then(|p| b.get(p))
                            .is_some_and(|p| b"<>".contains(p));
                    if !redirect {
                        add("`&`");
                    }
                }
                b'|' if next == Some(b'|') => {
                    add("`||`");
                    i += 1;
                }
                b'`' => add("backticks"),
                b'\n' if i < last_text => add("a newline"),
                _ if substitution => add("`$(`"),
                _ => {}
            },
        }
        i += 1;
    }
    ops
}

/// An argv array: safe unless it runs a shell or interpreter on code that holds a reference.
fn check_argv(at: (usize, &Step), param: &str, argv: &[Value], out: &mut Vec<Finding>) {
    let words: Vec<&str> = argv.iter().map(|v| v.as_str().unwrap_or("")).collect();
    // `env [VAR=x …] bash -c …` runs bash.
    let mut start = 0;
    if words.first().is_some_and(|w| program_name(w) == "env") {
        start = 1;
        while words.get(start).is_some_and(|w| w.contains('=') || w.starts_with('-')) {
            start += 1;
        }
    }
    let Some(program) = words.get(start).map(|w| program_name(w)) else { return };
    let runs_code = |flag: &str| -> bool {
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
    };
    let Some(flag_at) = words.iter().skip(start + 1).position(|w| runs_code(w)) else { return };
    let code_at = start + 1 + flag_at + 1;
    if code_at >= words.len() {
        return;
    }
    let pointer = format!("/parameters/{param}/{code_at}");
    let refs = list_refs(refs_at(at.1, &pointer));
    if !refs.is_empty() {
        let msg = format!(
            "step output {refs} is spliced into code that `{program}` runs; pass it as a separate \
             argument (or in env) and read it from there"
        );
        out.push(finding(LintCode::CommandInjection, at, &pointer, msg));
    }
}

/// The program's name without its directory or `.exe`.
fn program_name(word: &str) -> &str {
    let base = word.rsplit(['/', '\\']).next().unwrap_or(word);
    base.strip_suffix(".exe").unwrap_or(base)
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
    let b = path.as_bytes();
    if path.split(['/', '\\']).any(|c| c == "..") {
        reasons.push("has a `..` component".into());
    }
    let drive = b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b[1] == b':'
        && b.get(2).is_none_or(|c| *c == b'/' || *c == b'\\');
    if b.first().is_some_and(|c| *c == b'/' || *c == b'\\') || drive {
        reasons.push("is absolute".into());
    }
    if b.first() == Some(&b'~') {
        reasons.push("starts with `~` (a home directory)".into());
    }
    if b.contains(&0) {
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
