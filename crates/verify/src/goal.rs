//! Does the goal ask for a change, and did a step act on it? The two halves of the `no_effects`
//! reason: a plan that only reads and lists cannot succeed at "Change the background".
//!
//! [`goal_asks_for_change`] is a word check, not language understanding. It looks for change
//! verbs as whole words (with their usual inflections: `fixed`, `fixing`), and skips the shapes
//! that would make a read-only goal look like a change: a verb form right after an article or a
//! possessive ("report *the build* status"), an `-s` form anywhere but first in its clause
//! ("summarise *changes*"), and a verb shortly after a negation in the same clause ("list the
//! files *without changing* anything"). Otherwise it says yes: a false yes costs an honest `partial`, a false no would
//! let a plan that did nothing claim `success`.

use pev_protocol::tool::Effect;
use serde_json::Value;

/// Change verbs, in their base form.
#[rustfmt::skip]
const CHANGE_VERBS: &[&str] = &[
    "add", "adjust", "append", "apply", "build", "bump", "change", "commit", "compile", "configure",
    "convert", "copy", "create", "decrease", "delete", "deploy", "disable", "downgrade", "drop",
    "edit", "enable", "erase", "fix", "generate", "implement", "increase", "init", "initialise",
    "initialize", "insert", "install", "lower", "make", "merge", "migrate", "modify", "move",
    "overwrite", "patch", "publish", "purge", "push", "raise", "reduce", "reformat", "refactor",
    "remove", "rename", "reorganise", "reorganize", "repair", "replace", "reset", "restructure",
    "revert", "rewrite", "save", "scaffold", "set", "swap", "switch", "touch", "transform",
    "translate", "truncate", "turn", "tweak", "uninstall", "update", "upgrade", "upload", "wipe",
    "write",
];

/// Irregular forms of the verbs above.
const IRREGULAR: &[&str] =
    &["built", "made", "wrote", "written", "rewrote", "rewritten", "overwrote", "overwritten"];

/// Words after which a verb form is a noun ("the changes", "its build").
#[rustfmt::skip]
const DETERMINERS: &[&str] = &[
    "a", "an", "the", "this", "that", "these", "those", "my", "our", "your", "its", "their", "his",
    "her", "any", "each", "every", "some", "which", "what", "latest", "last", "recent", "pending",
];

/// Words that negate a verb within the next few words ("do not modify", "without changing").
const NEGATIONS: &[&str] =
    &["not", "don't", "dont", "never", "without", "no", "nor", "doesn't", "shouldn't", "mustn't"];

/// How many words after a negation it still applies to ("do not *ever* modify", "not to
/// modify"). A punctuation mark ends it sooner: "without breaking anything, update the docs".
const NEGATION_REACH: usize = 2;

/// Whether `goal` asks for a change to the world (see the module comment for the rule).
pub fn goal_asks_for_change(goal: &str) -> bool {
    goal.split([',', ';', ':', '.', '!', '?', '(', ')', '\n']).any(clause_asks_for_change)
}

/// The rule on one clause (a stretch of the goal between punctuation marks).
fn clause_asks_for_change(clause: &str) -> bool {
    let words: Vec<String> = clause
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .map(|w| w.replace('’', "'").trim_matches('\'').to_lowercase())
        .filter(|w| !w.is_empty())
        .collect();
    words.iter().enumerate().any(|(i, word)| {
        match change_verb(word) {
            None => return false,
            // "Summarise changes", "count fixes": a third-person or plural form is a noun, unless
            // it opens the clause ("Adds a dark theme", the commit-message style).
            Some(Form::Plural) if i > 0 => return false,
            Some(_) => {}
        }
        let previous = i.checked_sub(1).and_then(|p| words.get(p));
        if previous.is_some_and(|p| DETERMINERS.contains(&p.as_str())) {
            return false;
        }
        let reach = i.saturating_sub(NEGATION_REACH);
        let negated = words
            .get(reach..i)
            .is_some_and(|before| before.iter().any(|w| NEGATIONS.contains(&w.as_str())));
        !negated
    })
}

/// How a word relates to a change verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// The base form, an irregular form, or `-ed`/`-ing`.
    Verb,
    /// `-s`/`-es`: a third-person verb or a plural noun.
    Plural,
}

/// Whether `word` (lower case) is a change verb or one of its inflections, and which kind.
fn change_verb(word: &str) -> Option<Form> {
    if CHANGE_VERBS.contains(&word) || IRREGULAR.contains(&word) {
        return Some(Form::Verb);
    }
    let suffixes = [("ing", Form::Verb), ("ed", Form::Verb), ("d", Form::Verb)];
    let plural = [("es", Form::Plural), ("s", Form::Plural)];
    suffixes.into_iter().chain(plural).find_map(|(suffix, form)| {
        let stem = word.strip_suffix(suffix)?;
        is_stem(stem).then_some(form)
    })
}

/// Whether `stem` (a word without its suffix) is a change verb: as is, with its final `e` back
/// ("chang-ing"), or with a doubled final consonant undone ("sett-ing").
fn is_stem(stem: &str) -> bool {
    if stem.len() < 2 {
        return false;
    }
    if CHANGE_VERBS.contains(&stem) || CHANGE_VERBS.contains(&format!("{stem}e").as_str()) {
        return true;
    }
    let mut chars = stem.chars();
    match chars.next_back() {
        Some(last) => {
            let undoubled = chars.as_str();
            undoubled.ends_with(last) && CHANGE_VERBS.contains(&undoubled)
        }
        None => false,
    }
}

/// Whether a finished call of `tool` counts toward `goal_actions_executed`: a write or exec
/// effect, or a network call whose `method` is not a safe one (GET, HEAD, OPTIONS). A network
/// call with no `method` argument is taken as a read: it cannot be shown to have changed
/// anything. The tool's name adds nothing the effect does not say today; it is in the
/// signature so that a later rule (a tool known to be read-only despite its class) has it.
pub fn is_goal_action(_tool: &str, effect: Effect, arguments: &Value) -> bool {
    match effect {
        Effect::Write | Effect::Exec => true,
        Effect::Read => false,
        Effect::Network => arguments.get("method").and_then(Value::as_str).is_some_and(|m| {
            !["GET", "HEAD", "OPTIONS"].iter().any(|safe| m.trim().eq_ignore_ascii_case(safe))
        }),
    }
}

#[cfg(test)]
#[path = "goal_tests.rs"]
mod tests;
