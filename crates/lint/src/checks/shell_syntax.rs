//! The shape of a shell command string as [`shell_parser`](super::shell_parser) reads it: a
//! [`Script`] is a list of simple [`Command`]s (grouped into pipelines) and the operators that
//! join them; a [`Word`] is text after quote removal, with the scripts that run inside it
//! (`$(…)`, backticks, `<(…)`) read into [`Substitution`]s.

/// How two commands of a script are joined, or how one runs others inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Join {
    Semicolon,
    And,
    Or,
    Background,
    Newline,
    /// `$(…)`
    Substitution,
    Backticks,
    /// `<(…)` or `>(…)`
    Process,
}

impl Join {
    /// How a message names the operator.
    pub(super) fn label(self) -> &'static str {
        match self {
            Join::Semicolon => "`;`",
            Join::And => "`&&`",
            Join::Or => "`||`",
            Join::Background => "`&`",
            Join::Newline => "a newline",
            Join::Substitution => "`$(`",
            Join::Backticks => "backticks",
            Join::Process => "process substitution",
        }
    }
}

/// A command list: the simple commands in order, and the operators between them.
#[derive(Debug, Default)]
pub(super) struct Script {
    pub commands: Vec<Command>,
    /// Each operator that stands between two commands, with its byte offset.
    pub joins: Vec<(usize, Join)>,
}

/// One simple command: its words (assignments and the program included) and redirections.
#[derive(Debug, Default)]
pub(super) struct Command {
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// Commands with the same number are one pipeline (`a | b`).
    pub pipeline: usize,
}

/// What a redirection does to the command's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RedirectKind {
    /// `<`, `<>`: stdin from a file.
    Input,
    /// `>`, `>>`, `>|`, `&>`, `&>>`: stdout to a file.
    Output,
    /// `<<`, `<<-`: stdin from the text that follows.
    HereDoc,
    /// `<<<`: stdin from the word.
    HereString,
    /// `>&`, `<&`: a copy of another descriptor.
    Dup,
}

/// A redirection and the word after it.
#[derive(Debug)]
pub(super) struct Redirect {
    pub kind: RedirectKind,
    pub target: Word,
}

/// A word after quote removal. Expansions stay as written (`$HOME`, `${x}`), and so does the text
/// of a substitution, which is also read into [`Word::subs`].
#[derive(Debug, Default)]
pub(super) struct Word {
    pub text: String,
    pub subs: Vec<Substitution>,
    /// Whether any part of it was quoted or escaped (a quoted `if` is not a reserved word).
    pub quoted: bool,
}

/// Which kind of substitution runs a script inside a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SubKind {
    /// `$(…)`
    Dollar,
    /// `` `…` ``
    Backticks,
    /// `<(…)`: a file name to read the commands' output from.
    ProcessIn,
    /// `>(…)`: a file name to write the commands' input to.
    ProcessOut,
}

/// A script run inside a word.
#[derive(Debug)]
pub(super) struct Substitution {
    pub kind: SubKind,
    /// Byte offset of the `$(`, backtick or `<(`.
    pub at: usize,
    pub script: Script,
}

impl Substitution {
    /// How COMMAND_CHAINED names it.
    pub(super) fn join(&self) -> Join {
        match self.kind {
            SubKind::Dollar => Join::Substitution,
            SubKind::Backticks => Join::Backticks,
            SubKind::ProcessIn | SubKind::ProcessOut => Join::Process,
        }
    }
}

/// Every operator that joins commands, in the script and in the substitutions inside it, in the
/// order they appear in the text, each named once.
pub(super) fn joins(script: &Script) -> Vec<Join> {
    let mut found = Vec::new();
    collect_joins(script, &mut found);
    found.sort_by_key(|&(at, _)| at);
    let mut names: Vec<Join> = Vec::new();
    for (_, join) in found {
        if !names.contains(&join) {
            names.push(join);
        }
    }
    names
}

fn collect_joins(script: &Script, out: &mut Vec<(usize, Join)>) {
    out.extend_from_slice(&script.joins);
    for command in &script.commands {
        for word in command.all_words() {
            for sub in &word.subs {
                if !sub.script.commands.is_empty() {
                    out.push((sub.at, sub.join()));
                }
                collect_joins(&sub.script, out);
            }
        }
    }
}

impl Command {
    /// The words and then the redirection targets.
    pub(super) fn all_words(&self) -> impl Iterator<Item = &Word> {
        self.words.iter().chain(self.redirects.iter().map(|r| &r.target))
    }
}
