//! DOWNLOAD_EXECUTE: a shell command that runs code it fetches from the network, so whatever the
//! server (or anyone on the way) sends runs with the step's rights, unread.
//!
//! Read from a parsed script ([`shell_parser`](super::shell_parser)), a command runs downloaded
//! code when a program that runs code (a shell, `python`, `perl`, `ruby`, `node`, `php`, `lua`,
//! `pwsh`, `iex`, `eval`, `source`) takes it
//! - on stdin from a fetch earlier in its pipeline: `curl -fsSL URL | sudo sh`, `wget -qO- URL |
//!   python3 -`, or through a redirection: `bash < <(curl URL)`, `sh <<< "$(curl URL)"`;
//! - as its code argument: `sh -c "$(curl URL)"`, `eval "$(wget -O- URL)"`, `python -c "$(…)"`;
//! - as its script: `bash <(curl URL)`, `source <(curl URL)`;
//! - as a file the same string downloaded first: `curl -o i.sh URL && sh i.sh`,
//!   `wget URL/install.sh; chmod +x install.sh; ./install.sh`.
//!
//! Also `$(curl URL)` in the program's place, and any of these inside the literal script of
//! `sh -c '…'`. A fetch is `curl`, `wget`, `fetch`, `aria2c`, HTTPie (`http`, `https`, `xh`) or
//! PowerShell's `Invoke-WebRequest`/`Invoke-RestMethod` (`iwr`, `irm`), also behind `sudo`,
//! `env X=1`, `nohup`, `timeout 60`, …. Fetching alone is not flagged (`curl -o f URL`), nor is
//! piping into a program that reads data (`curl URL | jq .`, `| python3 -m json.tool`,
//! `| python3 script.py`, `| sh -c 'cat > f'`).

use super::fetch_output::saved_files;
use super::interpreters::{Inputs, SHELLS};
use super::shell_parser;
use super::shell_syntax::{Command, RedirectKind, Script, Word};

/// How deep `sh -c '…'` scripts are read inside one another.
const MAX_NESTING: usize = 4;

/// Programs that fetch from the network.
const FETCHERS: &[&str] = &[
    "curl",
    "wget",
    "wget2",
    "fetch",
    "aria2c",
    "http",
    "https",
    "xh",
    "xhs",
    "invoke-webrequest",
    "iwr",
    "invoke-restmethod",
    "irm",
];

/// Each way a shell command runs downloaded code, described for a message; empty when it does
/// not.
pub(super) fn downloaded_code(script: &Script) -> Vec<String> {
    let mut out = Vec::new();
    check_script(script, 0, &mut out);
    out
}

fn check_script(script: &Script, nesting: usize, out: &mut Vec<String>) {
    // Files the script has downloaded so far, and which program fetched each.
    let mut files: Vec<(String, String)> = Vec::new();
    for (index, command) in script.commands.iter().enumerate() {
        let Some(call) = Call::of(command) else { continue };
        let ctx = Seen { script, index, files: &files };
        check_call(&call, &ctx, nesting, out);
        if call.is_fetcher() {
            for file in saved_files(&call.name, call.command, call.args) {
                files.push((file, call.name.clone()));
            }
        }
        // Substitutions run their own scripts, with what they fetch inside them.
        for word in command.all_words() {
            for sub in &word.subs {
                check_script(&sub.script, nesting, out);
            }
        }
    }
}

/// What a command can see of the script before it.
struct Seen<'a> {
    script: &'a Script,
    index: usize,
    files: &'a [(String, String)],
}

impl Seen<'_> {
    /// The fetch whose output this command's stdin gets through the pipeline.
    fn piped_fetch(&self) -> Option<String> {
        let command = self.script.commands.get(self.index)?;
        self.script
            .commands
            .get(..self.index)?
            .iter()
            .rev()
            .take_while(|c| c.pipeline == command.pipeline)
            .find_map(output_of_fetch)
    }

    /// The program that downloaded `path` earlier in the script.
    fn downloaded(&self, path: &str) -> Option<&str> {
        let path = normalize(path);
        self.files.iter().find(|(file, _)| normalize(file) == path).map(|(_, by)| by.as_str())
    }
}

/// A simple command with its wrappers (`sudo`, `env X=1`, `nohup`, …) and assignments taken off.
struct Call<'c> {
    command: &'c Command,
    /// The program's name: lowercase, without directory or `.exe`.
    name: String,
    /// The program as written.
    program: &'c Word,
    args: &'c [Word],
}

impl<'c> Call<'c> {
    fn of(command: &'c Command) -> Option<Self> {
        let words = unwrap(&command.words);
        let (program, args) = words.split_first()?;
        Some(Self { command, name: program_name(&program.text), program, args })
    }

    fn is_fetcher(&self) -> bool {
        FETCHERS.contains(&self.name.as_str())
    }
}

fn check_call(call: &Call<'_>, seen: &Seen<'_>, nesting: usize, out: &mut Vec<String>) {
    let name = &call.name;
    if let Some(fetch) = fetch_in_word(call.program) {
        out.push(format!("the output of `{fetch}` is run as a command"));
    }
    if call.program.text.contains(['/', '\\'])
        && let Some(by) = seen.downloaded(&call.program.text)
    {
        out.push(format!("`{}` runs the file that `{by}` downloaded", call.program.text));
    }
    let Some(inputs) = Inputs::of(name, call.args) else { return };
    for word in &inputs.code {
        if let Some(fetch) = fetch_in_word(word) {
            out.push(format!("`{name}` runs code from `{fetch}`"));
        } else if SHELLS.contains(&name.as_str()) && nesting < MAX_NESTING {
            check_script(&shell_parser::parse(&word.text), nesting + 1, out);
        }
    }
    if let Some(script) = inputs.script {
        check_script_file(name, script, seen, out);
    }
    if inputs.stdin {
        check_stdin(call, seen, out);
    }
}

/// A script named as a file: `bash <(curl …)`, or `sh i.sh` after `curl -o i.sh`.
fn check_script_file(name: &str, script: &Word, seen: &Seen<'_>, out: &mut Vec<String>) {
    if let Some(fetch) = fetch_in_word(script) {
        out.push(format!("`{name}` runs a script from `{fetch}`"));
    } else if let Some(by) = seen.downloaded(&script.text) {
        out.push(format!("`{name}` runs `{}`, which `{by}` downloaded", script.text));
    }
}

/// Code read from stdin: the pipeline, or the last redirection of stdin.
fn check_stdin(call: &Call<'_>, seen: &Seen<'_>, out: &mut Vec<String>) {
    let name = &call.name;
    let redirect = call.command.redirects.iter().rev().find(|r| {
        matches!(r.kind, RedirectKind::Input | RedirectKind::HereDoc | RedirectKind::HereString)
    });
    match redirect.map(|r| (r.kind, &r.target)) {
        None => {
            if let Some(fetch) = seen.piped_fetch() {
                out.push(format!("`{fetch}` is piped into `{name}`"));
            }
        }
        Some((RedirectKind::Input, target)) => check_script_file(name, target, seen, out),
        Some((RedirectKind::HereString, target)) => {
            if let Some(fetch) = fetch_in_word(target) {
                out.push(format!("`{name}` runs code from `{fetch}`"));
            }
        }
        Some(_) => {}
    }
}

/// The fetch whose output a pipeline stage writes: a fetch itself, or a command whose words
/// substitute one (`echo "$(curl …)"`, `cat <(curl …)`).
fn output_of_fetch(command: &Command) -> Option<String> {
    let call = Call::of(command)?;
    if call.is_fetcher() {
        return Some(call.name);
    }
    command.all_words().find_map(fetch_in_word)
}

/// A fetch run by a substitution in `word` (`"$(curl …)"`, `<(wget …)`), at any depth.
fn fetch_in_word(word: &Word) -> Option<String> {
    word.subs.iter().find_map(|sub| fetch_in_script(&sub.script))
}

fn fetch_in_script(script: &Script) -> Option<String> {
    script.commands.iter().find_map(output_of_fetch)
}

/// Takes off leading assignments and wrappers that run the rest as a command.
fn unwrap(words: &[Word]) -> &[Word] {
    let mut rest = words;
    loop {
        while rest.first().is_some_and(|w| is_assignment(&w.text)) {
            rest = rest.get(1..).unwrap_or_default();
        }
        let Some((first, tail)) = rest.split_first() else { return rest };
        let skip = match program_name(&first.text).as_str() {
            "sudo" => options(tail, &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"]),
            "doas" => options(tail, &["-u", "-C"]),
            "env" => options(tail, &["-u", "-C", "-S", "--unset", "--chdir", "--split-string"]),
            "nice" => options(tail, &["-n"]),
            "exec" => options(tail, &["-a"]),
            "timeout" => options(tail, &["-s", "-k", "--signal", "--kill-after"]) + 1,
            "command" | "builtin" | "nohup" | "setsid" | "time" | "stdbuf" | "busybox" => {
                options(tail, &[])
            }
            _ => return rest,
        };
        rest = tail.get(skip..).unwrap_or_default();
    }
}

/// How many words at the start are options (with the values of `value` options, and a `--`).
fn options(words: &[Word], value: &[&str]) -> usize {
    let mut k = 0;
    while let Some(word) = words.get(k) {
        let text = word.text.as_str();
        if text == "--" {
            return k + 1;
        }
        if !(text.len() > 1 && text.starts_with('-')) {
            break;
        }
        k += if value.contains(&text) { 2 } else { 1 };
    }
    k.min(words.len())
}

/// `NAME=value`, as the shell reads an assignment before a command.
fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else { return false };
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The program's name without its directory or `.exe`, lowercase.
pub(super) fn program_name(word: &str) -> String {
    let base = word.rsplit(['/', '\\']).next().unwrap_or(word).to_ascii_lowercase();
    match base.strip_suffix(".exe") {
        Some(stem) => stem.to_owned(),
        None => base,
    }
}

/// `./x`, `././x` and `x` name the same file.
fn normalize(path: &str) -> &str {
    let mut path = path;
    while let Some(rest) = path.strip_prefix("./") {
        path = rest.trim_start_matches('/');
    }
    path
}

#[cfg(test)]
#[path = "download_tests.rs"]
mod tests;
