//! Does the goal ask for a change, and did a step act on it? The two halves of the `no_effects`
//! reason: a plan that only reads and lists cannot succeed at "Change the background".
//!
//! [`goal_asks_for_change`] is a word check, not language understanding. It looks for change
//! verbs as whole words (with their usual inflections: `fixed`, `fixing`) and says yes unless
//! every one of them is excused by the shape around it:
//!
//! - a noun use: right after an article or a possessive ("report *the build* status"), or an
//!   `-s` form anywhere but first in its command ("summarise *changes*");
//! - a negation: a verb shortly after a negation in the same clause ("list the files *without
//!   changing* anything"), every verb coordinated with a negated one ("do not *change, move or
//!   delete* anything"), or a verb whose object is nothing ("*make no* changes", "*touch
//!   nothing*");
//! - a description, not a request: a participle ("what *was changed*", "the files *modified*
//!   today") in a command led by a read-only verb (list, report, check, …), anything inside an
//!   indirect question after one ("check *whether the port is set*") or a question that opens
//!   with a wh-word ("*which files were modified*?").
//!
//! A command is a clause, or a stretch after `and`/`then`/`but` that opens with a new verb
//! ("read the config *and update the port*"). When in doubt it says yes: a false yes costs an
//! honest `partial`, a false no would let a plan that did nothing claim `success`.

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

/// Irregular past participles of the verbs above (the base forms that double as participles,
/// `set`, `reset`, are participles only after an auxiliary).
const IRREGULAR: &[&str] =
    &["built", "made", "wrote", "written", "rewrote", "rewritten", "overwrote", "overwritten"];

/// Words after which a verb form is a noun ("the changes", "its build").
#[rustfmt::skip]
const DETERMINERS: &[&str] = &[
    "a", "an", "the", "this", "that", "these", "those", "my", "our", "your", "its", "their", "his",
    "her", "any", "each", "every", "some", "which", "what", "latest", "last", "recent", "pending",
];

/// Words that negate a verb within the next few words ("do not modify", "without changing").
#[rustfmt::skip]
const NEGATIONS: &[&str] = &[
    "not", "don't", "dont", "never", "without", "no", "nor", "doesn't", "shouldn't", "mustn't",
    "cannot", "can't", "won't", "avoid", "avoiding", "refrain",
];

/// Objects that undo the verb before them ("make no changes", "change nothing").
const EMPTY_OBJECTS: &[&str] = &["no", "nothing", "none"];

/// Words that join a verb to the one before it, so a negation carries over ("not change or
/// delete"). Not `and`: "not updated and update them" asks for the update.
const COORDINATORS: &[&str] = &["or", "nor", "even", "otherwise", "/"];

/// Words that open a new command when a verb follows ("list the files *and* delete the rest").
const COMMAND_JOINS: &[&str] = &["and", "then", "but", "also", "or", "plus"];

/// Words skipped before a command's verb ("please list", "then just report").
const FILLERS: &[&str] =
    &["please", "just", "only", "first", "now", "also", "then", "simply", "kindly"];

/// Verbs that ask to look, not to change: a command they lead describes what it reports.
#[rustfmt::skip]
const READ_VERBS: &[&str] = &[
    "analyse", "analyze", "audit", "check", "compare", "confirm", "count", "describe", "determine",
    "diagnose", "display", "examine", "explain", "find", "grep", "identify", "inspect",
    "investigate", "list", "locate", "look", "measure", "print", "read", "report", "review",
    "search", "see", "show", "summarise", "summarize", "tell", "verify", "view",
];

/// Words that open a question or an indirect question.
const WH_WORDS: &[&str] = &["whether", "if", "which", "what", "who", "why", "how", "where", "when"];

/// Auxiliaries after which a change verb is a participle ("is set", "has been changed").
#[rustfmt::skip]
const AUXILIARIES: &[&str] = &[
    "is", "are", "was", "were", "be", "been", "being", "has", "have", "had", "got", "gets", "get",
];

/// How many words after a negation it still applies to ("do not *ever* modify", "not to
/// modify"). A comma ends it sooner: "without breaking anything, update the docs".
const NEGATION_REACH: usize = 2;

/// Whether `goal` asks for a change to the world (see the module comment for the rule).
pub fn goal_asks_for_change(goal: &str) -> bool {
    sentences(goal).iter().any(sentence_asks_for_change)
}

/// A token of a sentence: a lower-case word, or a comma.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Comma,
}

impl Token {
    fn word(&self) -> Option<&str> {
        match self {
            Self::Word(w) => Some(w),
            Self::Comma => None,
        }
    }
}

/// A sentence: its tokens, and whether it ends with a question mark.
struct Sentence {
    tokens: Vec<Token>,
    question: bool,
}

/// The goal cut into sentences at `.;:!?()` and line breaks, each cut into words and commas. A
/// dot between word characters (`site/style.css`) is part of the word.
fn sentences(goal: &str) -> Vec<Sentence> {
    let mut out = Vec::new();
    let mut tokens = Vec::new();
    let mut word = String::new();
    let end_word = |word: &mut String, tokens: &mut Vec<Token>| {
        let w = word.replace('’', "'").trim_matches('\'').to_lowercase();
        if !w.is_empty() {
            tokens.push(Token::Word(w));
        }
        word.clear();
    };
    let mut chars = goal.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '\'' || c == '’' {
            word.push(c);
            continue;
        }
        // A dot inside a word (`style.css`, `1.5`) does not end the sentence.
        if c == '.' && !word.is_empty() && chars.peek().is_some_and(|n| n.is_alphanumeric()) {
            word.push(c);
            continue;
        }
        end_word(&mut word, &mut tokens);
        match c {
            ',' => tokens.push(Token::Comma),
            '/' => tokens.push(Token::Word("/".to_owned())),
            '.' | ';' | ':' | '!' | '?' | '(' | ')' | '\n' => {
                out.push(Sentence { tokens: std::mem::take(&mut tokens), question: c == '?' });
            }
            _ => {}
        }
    }
    end_word(&mut word, &mut tokens);
    out.push(Sentence { tokens, question: false });
    out
}

/// The rule on one sentence.
fn sentence_asks_for_change(sentence: &Sentence) -> bool {
    let tokens = &sentence.tokens;
    let first = first_word(tokens, 0);
    // "Which files were modified?", "How do I add a user?": asked, not requested.
    if sentence.question && first.is_some_and(|(_, w)| WH_WORDS.contains(&w)) {
        return false;
    }
    let mut command = Command::at(tokens, 0);
    // The index of the last negated verb, and of the last negation.
    let mut negated_verb: Option<usize> = None;
    let mut negation: Option<usize> = None;
    for (i, token) in tokens.iter().enumerate() {
        let Token::Word(word) = token else {
            command = Command::at(tokens, i.saturating_add(1));
            negation = None;
            continue;
        };
        if COMMAND_JOINS.contains(&word.as_str()) && opens_command(tokens, i.saturating_add(1)) {
            command = Command::at(tokens, i.saturating_add(1));
        }
        // "if not", "whether or not": elliptical, not a negated verb.
        let elliptical = word == "not"
            && i.checked_sub(1)
                .and_then(|p| tokens.get(p))
                .and_then(Token::word)
                .is_some_and(|p| matches!(p, "if" | "or" | "whether"));
        if NEGATIONS.contains(&word.as_str()) && !elliptical {
            negation = Some(i);
        }
        // Past the read verb (the words before it are fillers, never wh-words).
        if command.read_led && WH_WORDS.contains(&word.as_str()) {
            command.asking = true;
        }
        let Some(form) = change_verb(word) else { continue };
        let previous = i.checked_sub(1).and_then(|p| tokens.get(p)).and_then(Token::word);
        let next = tokens.get(i.saturating_add(1)).and_then(Token::word);
        let by_negation = negation.is_some_and(|n| i.saturating_sub(n) <= NEGATION_REACH)
            || negated_verb.is_some_and(|v| coordinated(tokens, v, i));
        if by_negation {
            negated_verb = Some(i);
            continue;
        }
        let excused = noun_use(form, i, command.verb, previous)
            || next.is_some_and(|n| EMPTY_OBJECTS.contains(&n))
            || (command.read_led && (command.asking || is_participle(word, form, previous)));
        if !excused {
            return true;
        }
    }
    false
}

/// The command being read: where its verb is and what kind it is.
#[derive(Debug, Clone, Copy)]
struct Command {
    /// The index of its verb (its first word past the fillers).
    verb: usize,
    /// Led by a read-only verb.
    read_led: bool,
    /// Inside an indirect question after its read verb ("check whether …").
    asking: bool,
}

impl Command {
    fn at(tokens: &[Token], start: usize) -> Self {
        let head = first_word(tokens, start);
        Self {
            verb: head.map_or(start, |(i, _)| i),
            read_led: head.is_some_and(|(_, w)| READ_VERBS.contains(&w)),
            asking: false,
        }
    }
}

/// The first word at or after `from`, past the fillers, with its index.
fn first_word(tokens: &[Token], from: usize) -> Option<(usize, &str)> {
    tokens
        .iter()
        .enumerate()
        .skip(from)
        .map_while(|(i, t)| t.word().map(|w| (i, w)))
        .find(|(_, w)| !FILLERS.contains(w))
}

/// Whether a command starts at `at`: its first word is a verb form that is not a participle
/// ("and *delete* the rest", not "modified and *created* today").
fn opens_command(tokens: &[Token], at: usize) -> bool {
    first_word(tokens, at).is_some_and(|(_, w)| {
        READ_VERBS.contains(&w)
            || matches!(change_verb(w), Some(Form::Verb))
                && !IRREGULAR.contains(&w)
                && !w.ends_with("ed")
    })
}

/// A noun use: an `-s` form that is not its command's verb, or any form after a determiner.
fn noun_use(form: Form, i: usize, verb: usize, previous: Option<&str>) -> bool {
    (form == Form::Plural && i > verb) || previous.is_some_and(|p| DETERMINERS.contains(&p))
}

/// Whether the verb at `i` is joined to the negated verb at `v` by coordinators and commas
/// only ("not change, move or delete").
fn coordinated(tokens: &[Token], v: usize, i: usize) -> bool {
    tokens.get(v.saturating_add(1)..i).is_some_and(|between| {
        !between.is_empty()
            && between.iter().all(|t| match t {
                Token::Comma => true,
                Token::Word(w) => COORDINATORS.contains(&w.as_str()),
            })
    })
}

/// Whether a change-verb form is used as a participle: an `-ed` or irregular participle, or any
/// form right after an auxiliary ("is set").
fn is_participle(word: &str, form: Form, previous: Option<&str>) -> bool {
    previous.is_some_and(|p| AUXILIARIES.contains(&p))
        || (form == Form::Verb && (word.ends_with("ed") || IRREGULAR.contains(&word)))
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
