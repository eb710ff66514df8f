//! A small reader for the strings a shell tool runs with `sh -c`, into the
//! [`shell_syntax`](super::shell_syntax) types: which simple commands a string runs, how they are
//! joined, and what each word is after quote removal, with the commands inside `$(…)`, backticks
//! and `<(…)` read the same way.
//!
//! It knows single quotes (nothing is special inside), double quotes (only `\`, `$` and backticks
//! are), `$'…'`, backslash escapes and line continuations, `#` comments, `${…}` and `$((…))`
//! (expansions, not commands), redirections (so `2>&1` is not a background `&`) and
//! here-documents (their bodies are data). Reserved words at the start of a command (`if`,
//! `then`, `do`, `{`, `!`, …) are dropped, so `if a; then b; fi` reads as the commands `a` and `b`.
//!
//! It never fails and never panics: what it does not understand is read as words, an
//! unterminated quote runs to the end of the text, and substitutions nested deeper than
//! [`MAX_DEPTH`] are skipped unread. It is not a full shell grammar: a subshell's commands are
//! flattened into the enclosing list (`(a && b) | c` reads as `a && b | c`), and a `case`
//! pattern's `)` inside `$(…)` ends the substitution early.

use super::shell_syntax::{
    Command, Join, Redirect, RedirectKind, Script, SubKind, Substitution, Word,
};

/// How deep `$(…)`, backticks and `<(…)` are read inside one another.
pub(super) const MAX_DEPTH: usize = 16;

/// Words that open or close a compound command when they start one; they are not programs.
const RESERVED: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for",
    "select", "case", "esac",
];

/// Reads a command string.
pub(super) fn parse(src: &str) -> Script {
    Parser::new(src, 0).list(0, End::Eof)
}

/// Where a list ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Eof,
    /// The `)` of `$(…)` or `<(…)`.
    Paren,
}

/// A script being built: the command being read, and the operator waiting for a command after it.
#[derive(Default)]
struct Builder {
    script: Script,
    command: Command,
    pipeline: usize,
    pending: Option<(usize, Join)>,
}

impl Builder {
    /// A word or redirection starts or continues the current command.
    fn touch(&mut self) {
        if self.command.words.is_empty()
            && self.command.redirects.is_empty()
            && let Some(join) = self.pending.take()
        {
            self.script.joins.push(join);
        }
    }

    fn word(&mut self, word: Word) {
        let reserved = !word.quoted && RESERVED.contains(&word.text.as_str());
        if reserved && self.command.words.is_empty() {
            return;
        }
        self.touch();
        self.command.words.push(word);
    }

    fn redirect(&mut self, redirect: Redirect) {
        self.touch();
        self.command.redirects.push(redirect);
    }

    fn end_command(&mut self) {
        if !self.command.words.is_empty() || !self.command.redirects.is_empty() {
            let mut command = std::mem::take(&mut self.command);
            command.pipeline = self.pipeline;
            self.script.commands.push(command);
        }
    }

    /// A list operator: the next command starts a new pipeline, joined to the last by `join`.
    fn separate(&mut self, at: usize, join: Join) {
        self.end_command();
        self.pipeline += 1;
        if !self.script.commands.is_empty() && self.pending.is_none() {
            self.pending = Some((at, join));
        }
    }

    fn finish(mut self) -> Script {
        self.end_command();
        self.script
    }
}

struct Parser<'s> {
    src: &'s str,
    b: &'s [u8],
    i: usize,
    /// Added to every offset (a backtick body is read from an unescaped copy).
    base: usize,
    /// Here-document delimiters (and whether leading tabs are stripped), read at the next newline.
    heredocs: Vec<(String, bool)>,
}

fn is_blank(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r')
}

/// Bytes that end an unquoted run of plain text.
fn is_special(c: u8) -> bool {
    is_blank(c) || b"\n;&|()<>\\'\"$`".contains(&c)
}

impl<'s> Parser<'s> {
    fn new(src: &'s str, base: usize) -> Self {
        Self { src, b: src.as_bytes(), i: 0, base, heredocs: Vec::new() }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.b.get(self.i + ahead).copied()
    }

    fn slice(&self, from: usize, to: usize) -> &'s str {
        self.src.get(from..to).unwrap_or_default()
    }

    fn list(&mut self, depth: usize, end: End) -> Script {
        let mut out = Builder::default();
        let mut parens = 0usize;
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else { break };
            let at = self.base + self.i;
            let next = self.peek_at(1);
            match c {
                b'#' => self.skip_comment(),
                b'\n' => {
                    self.i += 1;
                    self.heredoc_bodies();
                    out.separate(at, Join::Newline);
                }
                b';' => {
                    self.i += if next == Some(b';') { 2 } else { 1 };
                    out.separate(at, Join::Semicolon);
                }
                b'&' if next == Some(b'&') => {
                    self.i += 2;
                    out.separate(at, Join::And);
                }
                b'&' if next == Some(b'>') => {
                    let redirect = self.redirect(depth);
                    out.redirect(redirect);
                }
                b'&' => {
                    self.i += 1;
                    out.separate(at, Join::Background);
                }
                b'|' if next == Some(b'|') => {
                    self.i += 2;
                    out.separate(at, Join::Or);
                }
                b'|' => {
                    self.i += if next == Some(b'&') { 2 } else { 1 };
                    out.end_command();
                }
                b'(' => {
                    self.i += 1;
                    parens += 1;
                    out.end_command();
                }
                b')' => {
                    self.i += 1;
                    if parens == 0 && end == End::Paren {
                        break;
                    }
                    parens = parens.saturating_sub(1);
                    out.end_command();
                }
                b'<' | b'>' if next != Some(b'(') => {
                    let redirect = self.redirect(depth);
                    out.redirect(redirect);
                }
                b'0'..=b'9' if self.fd_redirect() => {
                    let redirect = self.redirect(depth);
                    out.redirect(redirect);
                }
                _ => {
                    let word = self.word(depth);
                    out.word(word);
                }
            }
        }
        out.finish()
    }

    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(c) if is_blank(c) => self.i += 1,
                Some(b'\\') if self.peek_at(1) == Some(b'\n') => self.i += 2,
                _ => return,
            }
        }
    }

    fn skip_comment(&mut self) {
        let rest = self.b.get(self.i..).unwrap_or_default();
        self.i += rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
    }

    /// Whether the digits here are a descriptor number before `<` or `>` (`2>&1`).
    fn fd_redirect(&self) -> bool {
        let rest = self.b.get(self.i..).unwrap_or_default();
        let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        matches!(rest.get(digits), Some(b'<' | b'>'))
    }

    /// Reads `[n]op word`; a here-document's delimiter is queued for the end of the line.
    fn redirect(&mut self, depth: usize) -> Redirect {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        let rest = self.b.get(self.i..).unwrap_or_default();
        let (len, kind) = match rest {
            [b'<', b'<', b'<', ..] => (3, RedirectKind::HereString),
            [b'<', b'<', b'-', ..] => (3, RedirectKind::HereDoc),
            [b'<', b'<', ..] => (2, RedirectKind::HereDoc),
            [b'<', b'&', ..] | [b'>', b'&', ..] => (2, RedirectKind::Dup),
            [b'<', b'>', ..] => (2, RedirectKind::Input),
            [b'&', b'>', b'>', ..] => (3, RedirectKind::Output),
            [b'>', b'>' | b'|', ..] | [b'&', b'>', ..] => (2, RedirectKind::Output),
            [b'<', ..] => (1, RedirectKind::Input),
            _ => (1, RedirectKind::Output),
        };
        let strip_tabs = rest.get(2) == Some(&b'-');
        self.i += len;
        self.skip_blanks();
        let target = self.word(depth);
        if kind == RedirectKind::HereDoc {
            self.heredocs.push((target.text.clone(), strip_tabs));
        }
        Redirect { kind, target }
    }

    /// Skips the bodies of the here-documents opened on the line that just ended.
    fn heredoc_bodies(&mut self) {
        for (delimiter, strip_tabs) in std::mem::take(&mut self.heredocs) {
            while self.i < self.b.len() {
                let rest = self.b.get(self.i..).unwrap_or_default();
                let len = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
                let line = self.slice(self.i, self.i + len);
                self.i += len + 1;
                let line = if strip_tabs { line.trim_start_matches('\t') } else { line };
                if line == delimiter {
                    break;
                }
            }
            self.i = self.i.min(self.b.len());
        }
    }

    fn word(&mut self, depth: usize) -> Word {
        let mut word = Word::default();
        while let Some(c) = self.peek() {
            match c {
                b'<' | b'>' if self.peek_at(1) == Some(b'(') => self.process(depth, &mut word),
                b'\\' => self.escape(&mut word),
                b'\'' => self.single_quoted(&mut word),
                b'"' => self.double_quoted(depth, &mut word),
                b'$' => self.dollar(depth, &mut word, false),
                b'`' => self.backticks(depth, &mut word),
                _ if is_special(c) => break,
                _ => {
                    let start = self.i;
                    while self.peek().is_some_and(|c| !is_special(c)) {
                        self.i += 1;
                    }
                    word.text.push_str(self.slice(start, self.i));
                }
            }
        }
        word
    }

    /// `\x` outside quotes: `x` taken literally; `\` and a newline continue the line.
    fn escape(&mut self, word: &mut Word) {
        word.quoted = true;
        let next = self.src.get(self.i + 1..).and_then(|s| s.chars().next());
        match next {
            Some('\n') => self.i += 2,
            Some(c) => {
                word.text.push(c);
                self.i += 1 + c.len_utf8();
            }
            None => self.i += 1,
        }
    }

    fn single_quoted(&mut self, word: &mut Word) {
        word.quoted = true;
        let start = self.i + 1;
        let rest = self.b.get(start..).unwrap_or_default();
        let len = rest.iter().position(|&c| c == b'\'').unwrap_or(rest.len());
        word.text.push_str(self.slice(start, start + len));
        self.i = (start + len + 1).min(self.b.len());
    }

    fn double_quoted(&mut self, depth: usize, word: &mut Word) {
        word.quoted = true;
        self.i += 1;
        while let Some(c) = self.peek() {
            match c {
                b'"' => {
                    self.i += 1;
                    return;
                }
                b'\\' => match self.peek_at(1) {
                    Some(b'\n') => self.i += 2,
                    Some(e @ (b'$' | b'`' | b'"' | b'\\')) => {
                        word.text.push(char::from(e));
                        self.i += 2;
                    }
                    _ => {
                        word.text.push('\\');
                        self.i += 1;
                    }
                },
                b'$' => self.dollar(depth, word, true),
                b'`' => self.backticks(depth, word),
                _ => {
                    let start = self.i;
                    while self.peek().is_some_and(|c| !b"\"\\$`".contains(&c)) {
                        self.i += 1;
                    }
                    word.text.push_str(self.slice(start, self.i));
                }
            }
        }
    }

    /// `$'…'`, `$((…))`, `$(…)`, `${…}` or a plain `$`.
    fn dollar(&mut self, depth: usize, word: &mut Word, in_double: bool) {
        let start = self.i;
        match (self.peek_at(1), self.peek_at(2)) {
            (Some(b'\''), _) if !in_double => {
                self.ansi_c_quoted(word);
                return;
            }
            (Some(b'('), Some(b'(')) => self.i = self.skip_balanced(start + 1, b'(', b')'),
            (Some(b'('), _) => {
                let script = self.nested(depth, start + 2);
                word.subs.push(Substitution {
                    kind: SubKind::Dollar,
                    at: self.base + start,
                    script,
                });
            }
            (Some(b'{'), _) => self.i = self.skip_balanced(start + 1, b'{', b'}'),
            _ => self.i += 1,
        }
        word.text.push_str(self.slice(start, self.i));
    }

    /// `$'…'`: backslash escapes are kept as written; `\'` does not end it.
    fn ansi_c_quoted(&mut self, word: &mut Word) {
        word.quoted = true;
        let start = self.i + 2;
        self.i = start;
        while let Some(c) = self.peek() {
            match c {
                b'\'' => {
                    word.text.push_str(self.slice(start, self.i));
                    self.i += 1;
                    return;
                }
                b'\\' => self.i += 1 + self.char_len(self.i + 1),
                _ => self.i += 1,
            }
        }
        self.i = self.i.min(self.b.len());
        word.text.push_str(self.slice(start, self.i));
    }

    /// The length in bytes of the character at `at` (0 at the end of the text).
    fn char_len(&self, at: usize) -> usize {
        self.src.get(at..).and_then(|s| s.chars().next()).map_or(0, char::len_utf8)
    }

    /// `<(…)` or `>(…)`.
    fn process(&mut self, depth: usize, word: &mut Word) {
        let start = self.i;
        let kind = if self.peek() == Some(b'<') { SubKind::ProcessIn } else { SubKind::ProcessOut };
        let script = self.nested(depth, start + 2);
        word.subs.push(Substitution { kind, at: self.base + start, script });
        word.text.push_str(self.slice(start, self.i));
    }

    /// Reads the list that starts at `from` up to its `)`, or skips it when nested too deep.
    fn nested(&mut self, depth: usize, from: usize) -> Script {
        if depth >= MAX_DEPTH {
            self.i = self.skip_balanced(from.saturating_sub(1), b'(', b')');
            return Script::default();
        }
        self.i = from;
        self.list(depth + 1, End::Paren)
    }

    /// The end of the bracketed text whose `open` is at `at` (quotes are not looked at).
    fn skip_balanced(&self, at: usize, open: u8, close: u8) -> usize {
        let mut level = 0usize;
        for (k, &c) in self.b.iter().enumerate().skip(at) {
            if c == open {
                level += 1;
            } else if c == close {
                level = level.saturating_sub(1);
                if level == 0 {
                    return k + 1;
                }
            }
        }
        self.b.len()
    }

    /// `` `…` ``: the body is unescaped (`` \` ``, `\\`, `\$`) and read as a script of its own.
    fn backticks(&mut self, depth: usize, word: &mut Word) {
        let start = self.i;
        self.i += 1;
        let mut body = String::new();
        while let Some(c) = self.peek() {
            match c {
                b'`' => {
                    self.i += 1;
                    break;
                }
                b'\\' if matches!(self.peek_at(1), Some(b'`' | b'\\' | b'$')) => {
                    body.push_str(self.slice(self.i + 1, self.i + 2));
                    self.i += 2;
                }
                _ => {
                    let from = self.i;
                    self.i += 1;
                    while self.peek().is_some_and(|c| c != b'`' && c != b'\\') {
                        self.i += 1;
                    }
                    body.push_str(self.slice(from, self.i));
                }
            }
        }
        let script = if depth >= MAX_DEPTH {
            Script::default()
        } else {
            Parser::new(&body, self.base + start + 1).list(depth + 1, End::Eof)
        };
        word.subs.push(Substitution { kind: SubKind::Backticks, at: self.base + start, script });
        word.text.push_str(self.slice(start, self.i));
    }
}

#[cfg(test)]
#[path = "shell_parser_tests.rs"]
mod tests;
