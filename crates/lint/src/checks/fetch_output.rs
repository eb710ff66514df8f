//! The files a fetch writes to disk, so a later command that runs one of them is known to run
//! downloaded code: curl's `-o F`/`--output F`/`-O` (the URL's name), wget's `-O F` or the
//! URL's name, `fetch -o F`, PowerShell's `-OutFile F`, and a `> F` redirection of the output.
//! `-` (stdout) is not a file.

use super::shell_syntax::{Command, RedirectKind, Word};

/// The files a fetch writes: `-o F`/`-O` (curl), `-O F` or the URL's name (wget), `-OutFile F`,
/// and a `> F` redirection of its output.
pub(super) fn saved_files(name: &str, command: &Command, args: &[Word]) -> Vec<String> {
    let mut files: Vec<String> = command
        .redirects
        .iter()
        .filter(|r| r.kind == RedirectKind::Output)
        .map(|r| r.target.text.clone())
        .collect();
    let saved = match name {
        "curl" => curl_output(args),
        "wget" | "wget2" => wget_output(args),
        "fetch" | "aria2c" => option_value(args, &["-o", "--output"]),
        "invoke-webrequest" | "iwr" | "invoke-restmethod" | "irm" => {
            let lower: Vec<String> = args.iter().map(|w| w.text.to_ascii_lowercase()).collect();
            lower
                .iter()
                .position(|w| w == "-outfile")
                .and_then(|k| args.get(k + 1))
                .map(|w| w.text.clone())
        }
        _ => None,
    };
    files.extend(saved.filter(|f| f != "-"));
    files
}

/// curl's short options that take a value (so a cluster ends at them).
const CURL_VALUE_LETTERS: &str = "AbcCdDeEFHKmoPQrTtuUwxXyYz";

fn curl_output(args: &[Word]) -> Option<String> {
    if let Some(file) = option_value(args, &["-o", "--output"]) {
        return Some(file);
    }
    for (k, word) in args.iter().enumerate() {
        let text = word.text.as_str();
        if text == "-O" || text == "--remote-name" {
            return url_file_name(args);
        }
        if let Some(letters) = text.strip_prefix('-').filter(|l| !l.starts_with('-')) {
            for (at, letter) in letters.char_indices() {
                match letter {
                    'o' => {
                        let rest = letters.get(at + 1..).unwrap_or_default();
                        return if rest.is_empty() {
                            args.get(k + 1).map(|w| w.text.clone())
                        } else {
                            Some(rest.to_owned())
                        };
                    }
                    'O' => return url_file_name(args),
                    _ if CURL_VALUE_LETTERS.contains(letter) => break,
                    _ => {}
                }
            }
        }
    }
    None
}

/// wget's short options that take a value.
const WGET_VALUE_LETTERS: &str = "OoaiBtTwQeUlARDIXP";

fn wget_output(args: &[Word]) -> Option<String> {
    if let Some(file) = option_value(args, &["-O", "--output-document"]) {
        return Some(file);
    }
    for (k, word) in args.iter().enumerate() {
        let Some(letters) = word.text.strip_prefix('-').filter(|l| !l.starts_with('-')) else {
            continue;
        };
        for (at, letter) in letters.char_indices() {
            if letter == 'O' {
                let rest = letters.get(at + 1..).unwrap_or_default();
                return if rest.is_empty() {
                    args.get(k + 1).map(|w| w.text.clone())
                } else {
                    Some(rest.to_owned())
                };
            }
            if WGET_VALUE_LETTERS.contains(letter) {
                break;
            }
        }
    }
    url_file_name(args)
}

/// The value of the first of `names` (`-o F`, `--output F`, `--output=F`).
fn option_value(args: &[Word], names: &[&str]) -> Option<String> {
    args.iter().enumerate().find_map(|(k, word)| {
        let text = word.text.as_str();
        if names.contains(&text) {
            return args.get(k + 1).map(|w| w.text.clone());
        }
        names.iter().filter(|n| n.starts_with("--")).find_map(|n| {
            text.strip_prefix(n).and_then(|rest| rest.strip_prefix('=')).map(str::to_owned)
        })
    })
}

/// The last path segment of the first URL among the arguments (what `curl -O` and `wget` name
/// the file), when it has one.
fn url_file_name(args: &[Word]) -> Option<String> {
    let url = args.iter().find_map(|w| w.text.split_once("://").map(|(_, rest)| rest))?;
    let path = url.split(['?', '#']).next().unwrap_or_default();
    let (_, name) = path.split_once('/')?;
    let name = name.rsplit('/').next().unwrap_or_default();
    (!name.is_empty()).then(|| name.to_owned())
}
