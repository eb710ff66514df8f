//! The plan-execution mismatch rule: a step that was to change named files and changed none of
//! them is not done, whatever a model says about it. The plan says "modify B"; the execution
//! modified C (or nothing). Nothing but this rule connects the two, so it is deterministic and
//! outranks any judge.
//!
//! The rule is written to cry wolf as rarely as it can, because a false alarm turns honest work
//! into `partial`:
//!
//! - It applies only to a step that asks for a change: its title or description is a change
//!   request by the goal classifier ([`crate::goal_asks_for_change`]); "read", "inspect" or
//!   "check site/x.css" is read-only and never held to it.
//! - A name counts only when it is a workspace path: one that resolves to a file in the workspace,
//!   or that looks like a file path (a known file extension; in `expected_outputs`, any path
//!   with a `/` or an extension). Directories, URLs, absolute paths, `..`, version numbers,
//!   dotted identifiers (`user.name`) and tool names (`Node.js`) are not names of files.
//! - A file named as a source ("from", "using", "based on", "reported by" …) is not a target;
//!   a step that changes it still counts as having changed a named file.
//! - Changing *any* named file is enough. A name without a directory matches a changed file of
//!   that name anywhere (`style.css` is `site/style.css`), and a changed file whose stem the text
//!   mentions as a word counts when no named file shares its extension ("update the README"
//!   changing `README.md`), so only a change of the same kind of file elsewhere
//!   (`site/theme.css` for `site/style.css`) is a mismatch.
//!
//! [`named_files`] is taken before the step runs (so a file the step creates is judged by the
//! same list), and [`mismatch`] after, with the files the step changed.

use pev_protocol::{Params, Step};
use pev_tools::{EntryKind, Workspace};

use crate::goal::goal_asks_for_change;

/// How every message of the rule begins (a resumed run recognises its failures by it).
pub const MISMATCH: &str = "plan-execution mismatch:";

/// How many file names a message lists before "and N more".
const LISTED: usize = 5;

/// Extensions a path that does not exist yet may have and still count as a file name.
#[rustfmt::skip]
const EXTENSIONS: &[&str] = &[
    "c", "cc", "cfg", "cjs", "conf", "cpp", "cs", "css", "csv", "dart", "env", "ex", "exs", "go",
    "gradle", "h", "hpp", "htm", "html", "ini", "ipynb", "java", "jpeg", "jpg", "js", "json",
    "jsx", "kt", "less", "lock", "lua", "md", "mdx", "mjs", "php", "pl", "png", "properties",
    "proto", "ps1", "py", "r", "rb", "rs", "rst", "sass", "scala", "scss", "sh", "sql", "svelte",
    "svg", "swift", "tex", "toml", "ts", "tsx", "txt", "vue", "xml", "yaml", "yml", "zsh",
];

/// Library and product names that look like file names.
const NOT_FILES: &[&str] = &[
    "node.js",
    "next.js",
    "vue.js",
    "nuxt.js",
    "react.js",
    "express.js",
    "three.js",
    "d3.js",
    "chart.js",
    "angular.js",
    "ember.js",
    "backbone.js",
    "p5.js",
    "socket.io",
];

/// One word before a name that makes it a source, not a target.
const SOURCE_WORDS: &[&str] = &["from", "using", "per", "via", "like", "following", "see"];

/// Two words before a name that make it a source ("based on X").
const SOURCE_PAIRS: &[(&str, &str)] = &[
    ("based", "on"),
    ("according", "to"),
    ("described", "in"),
    ("specified", "in"),
    ("defined", "in"),
    ("listed", "in"),
    ("documented", "in"),
    ("shown", "in"),
    ("as", "in"),
    ("reported", "by"),
    ("mentioned", "in"),
    ("given", "in"),
];

/// What a step says about the files it works on: the inputs of the rule.
#[derive(Debug, Clone, Copy)]
pub struct StepIntent<'a> {
    pub title: Option<&'a str>,
    pub description: Option<&'a str>,
    pub expected_outputs: &'a [String],
    /// The step's parameters (string values anywhere in them are read).
    pub parameters: Option<&'a Params>,
}

impl<'a> StepIntent<'a> {
    /// The intent of a plan step.
    pub fn of(step: &'a Step) -> Self {
        Self {
            title: step.title.as_deref(),
            description: step.description.as_deref(),
            expected_outputs: &step.expected_outputs,
            parameters: Some(&step.parameters),
        }
    }

    /// A step known only by a title (a loop-mode model's step).
    pub fn titled(title: &'a str) -> Self {
        Self { title: Some(title), description: None, expected_outputs: &[], parameters: None }
    }

    /// The prose: title and description.
    fn texts(&self) -> impl Iterator<Item = &'a str> {
        self.title.into_iter().chain(self.description)
    }

    /// Whether the step asks for a change at all (the rule's first condition).
    pub fn is_mutating(&self) -> bool {
        self.texts().any(goal_asks_for_change)
    }
}

/// The files a step names as what it will change, as normalised workspace paths, in the order
/// first named. Empty when the step is read-only or names no file: then the rule does not apply.
pub fn named_files(intent: &StepIntent<'_>, workspace: &Workspace) -> Vec<String> {
    if !intent.is_mutating() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for text in intent.texts() {
        for (token, source) in tokens(text) {
            if !source && let Some(path) = prose_path(token, workspace) {
                push_unique(&mut out, path);
            }
        }
    }
    for output in intent.expected_outputs {
        let trimmed = trim(output);
        if !trimmed.is_empty() && !trimmed.contains(char::is_whitespace) {
            if let Some(path) = output_path(trimmed, workspace) {
                push_unique(&mut out, path);
            }
        } else {
            for (token, source) in tokens(output) {
                if !source && let Some(path) = prose_path(token, workspace) {
                    push_unique(&mut out, path);
                }
            }
        }
    }
    if let Some(parameters) = intent.parameters {
        let mut strings = Vec::new();
        for (_, value) in parameters {
            value.for_each_str(&mut |s| strings.push(s));
        }
        for s in strings {
            let trimmed = trim(s);
            if !trimmed.contains(char::is_whitespace)
                && let Some(path) = prose_path(trimmed, workspace)
            {
                push_unique(&mut out, path);
            }
        }
    }
    out
}

/// What the rule found: the step was to change `expected` and changed `changed` instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub expected: Vec<String>,
    /// The files the step changed (none of them named); empty when it changed nothing.
    pub changed: Vec<String>,
}

impl Mismatch {
    /// The reason, naming the files expected and the files changed.
    pub fn message(&self) -> String {
        let expected = list(&self.expected);
        if self.changed.is_empty() {
            format!("{MISMATCH} the step was to change {expected}, but it changed no file")
        } else {
            format!(
                "{MISMATCH} the step was to change {expected}, but it changed {} instead",
                list(&self.changed)
            )
        }
    }
}

/// The rule: `named` (from [`named_files`], taken before the step) against the paths the step
/// changed. `None` when the rule does not apply or the step changed a named file.
pub fn mismatch(
    intent: &StepIntent<'_>,
    named: &[String],
    changed: &[String],
    workspace: &Workspace,
) -> Option<Mismatch> {
    if named.is_empty() {
        return None;
    }
    let changed: Vec<String> = {
        let mut out = Vec::new();
        for path in changed.iter().filter_map(|p| normalise(p, workspace)) {
            push_unique(&mut out, path);
        }
        out
    };
    let sources: Vec<String> = intent
        .texts()
        .flat_map(tokens)
        .filter(|(_, source)| *source)
        .filter_map(|(token, _)| prose_path(token, workspace))
        .collect();
    let words: Vec<String> = intent
        .texts()
        .flat_map(|t| t.split(|c: char| !c.is_alphanumeric() && c != '_'))
        .map(str::to_lowercase)
        .collect();
    let named_exts: Vec<&str> = named.iter().filter_map(|n| extension(n)).collect();
    let hit = changed.iter().any(|c| {
        named.iter().chain(&sources).any(|n| same_file(n, c))
            || stem_mentioned(c, &words, &named_exts)
    });
    if hit {
        return None;
    }
    Some(Mismatch { expected: named.to_vec(), changed })
}

/// The words of `text` that may be paths, each with whether it is named as a source.
fn tokens(text: &str) -> Vec<(&str, bool)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let lower: Vec<String> = words.iter().map(|w| trim(w).to_lowercase()).collect();
    let mut out = Vec::with_capacity(words.len());
    for (i, word) in words.iter().enumerate() {
        let token = trim(word);
        if token.is_empty() {
            continue;
        }
        let prev = |back: usize| i.checked_sub(back).and_then(|j| lower.get(j)).map(String::as_str);
        let source = prev(1).is_some_and(|p| SOURCE_WORDS.contains(&p))
            || matches!((prev(2), prev(1)), (Some(a), Some(b)) if SOURCE_PAIRS.contains(&(a, b)));
        out.push((token, source));
    }
    out
}

/// A word with the punctuation around it taken off (quotes, brackets, a sentence's full stop,
/// a `:line` suffix).
fn trim(word: &str) -> &str {
    let wrapper = |c: char| "`'\"()[]{}<>,;!?*".contains(c) || c.is_whitespace();
    let mut word = word;
    loop {
        let next = word.trim_matches(wrapper).trim_end_matches(['.', ':']);
        if next.len() == word.len() {
            break;
        }
        word = next;
    }
    match word.split_once(':') {
        Some((path, rest)) if !rest.starts_with("//") => path,
        _ => word,
    }
}

/// A path named in prose or a parameter: an existing workspace file, or a missing path with a
/// known extension.
fn prose_path(token: &str, workspace: &Workspace) -> Option<String> {
    let path = normalise(token, workspace)?;
    match kind(&path, workspace) {
        Some(EntryKind::File) => Some(path),
        Some(_) => None,
        None => looks_like_file(&path).then_some(path),
    }
}

/// A path from `expected_outputs`: anything that is not a directory and has a `/` or an
/// extension (the field holds paths by contract).
fn output_path(token: &str, workspace: &Workspace) -> Option<String> {
    let path = normalise(token, workspace)?;
    match kind(&path, workspace) {
        Some(EntryKind::File) => Some(path),
        Some(_) => None,
        None => (path.contains('/') || extension(&path).is_some() || looks_like_file(&path))
            .then_some(path),
    }
}

/// `token` as a normalised relative workspace path (`./a//b.css` is `a/b.css`); `None` for a
/// URL, an absolute path, `~`, a path that leaves the workspace, or one with characters no
/// file name in a plan has.
fn normalise(token: &str, workspace: &Workspace) -> Option<String> {
    if token.is_empty()
        || token.contains("://")
        || token.starts_with(['/', '~', '$', '#', '@', '-'])
        || token.split('/').any(|c| c == "..")
        || token.contains(['\\', '=', '|', '&', '\0'])
    {
        return None;
    }
    let rel = workspace.resolve(token).ok()?;
    let parts: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.is_empty() {
        return None;
    }
    Some(parts.join("/"))
}

/// What the path is in the workspace; `None` when absent or unreadable.
fn kind(path: &str, workspace: &Workspace) -> Option<EntryKind> {
    workspace.metadata(path).ok().map(|m| m.kind)
}

/// A missing path that still reads as a file name: a known extension on a name that is not a
/// version number or a library's name.
fn looks_like_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    if NOT_FILES.contains(&name.to_lowercase().as_str()) {
        return false;
    }
    let Some((stem, ext)) = name.rsplit_once('.') else { return false };
    !stem.is_empty() && stem.chars().any(char::is_alphabetic) && EXTENSIONS.contains(&ext)
}

/// The extension of a path's file name, if it has one.
fn extension(path: &str) -> Option<&str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.rsplit_once('.').map(|(_, ext)| ext).filter(|e| !e.is_empty())
}

/// Whether the named path and the changed path are the same file: equal, or the name is a
/// tail of the changed path at a `/` (`style.css`, `css/style.css` for `site/css/style.css`).
fn same_file(named: &str, changed: &str) -> bool {
    changed == named || changed.strip_suffix(named).is_some_and(|head| head.ends_with('/'))
}

/// Whether the changed file's stem is a word of the step's text ("the README" for
/// `README.md`) and its extension is not that of a named file.
fn stem_mentioned(changed: &str, words: &[String], named_exts: &[&str]) -> bool {
    let name = changed.rsplit('/').next().unwrap_or(changed);
    let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
    let stem = stem.to_lowercase();
    stem.chars().count() >= 3 && !named_exts.contains(&ext) && words.contains(&stem)
}

fn push_unique(out: &mut Vec<String>, path: String) {
    if !out.contains(&path) {
        out.push(path);
    }
}

/// `a`, `a and b`, `a, b and c`, or the first few and "N more".
fn list(paths: &[String]) -> String {
    let shown: Vec<&str> = paths.iter().take(LISTED).map(String::as_str).collect();
    let rest = paths.len().saturating_sub(LISTED);
    match (shown.split_last(), rest) {
        (None, _) => "nothing".to_owned(),
        (Some((last, [])), 0) => (*last).to_owned(),
        (Some((last, init)), 0) => format!("{} and {last}", init.join(", ")),
        (Some(_), n) => format!("{} and {n} more", shown.join(", ")),
    }
}

#[cfg(test)]
#[path = "mismatch_tests.rs"]
mod tests;
