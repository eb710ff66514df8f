//! SQL_WRITE_IN_READONLY and SQL_INJECTION: SQL text in `query`, `sql` and `statement`
//! parameters, read as tokens rather than searched as text.
//!
//! The lexer skips string literals (`'…'` with `''` escapes, Postgres `$tag$…$tag$`), quoted
//! identifiers (`"…"`, `` `…` ``, `[…]`) and comments (`--`, `/* */`), so `SELECT created_at`
//! is not a CREATE, `SELECT 'DROP TABLE x'` is not a DROP and `-- delete later` is not a DELETE.
//! Keywords are whole identifier tokens compared without case.
//!
//! Write keywords, and the forms that look like one and are not: `FOR UPDATE` and
//! `FOR NO KEY UPDATE` are row locks; `REPLACE(` is a string function; a name after a `.` is a
//! column. `ON CONFLICT … DO UPDATE` and `ON DUPLICATE KEY UPDATE` only follow an INSERT, which
//! is reported itself. `SELECT … INTO` creates a table (or, in MySQL, a file) and is a write.
//!
//! Injection is two things. (1) A step reference spliced into SQL text, anywhere, including a
//! parameter that is exactly one reference (the whole statement then comes from another step's
//! output); references belong in the statement's args with placeholders. (2) Literal text that
//! carries a classic payload: an always-true comparison after OR (or after a quote and AND),
//! `'…'='…'` between equal strings, a quote followed by `;` and another statement, a quote
//! followed straight by a `--` comment, and `UNION SELECT` after a quote in a statement whose
//! quotes or comments show it was cut open (a well-formed `SELECT 'a' UNION SELECT 'b'` is fine).

use std::fmt::Write as _;

use pev_protocol::ValueRef;
use pev_protocol::{Finding, LintCode, Step};

use crate::Ctx;
use crate::policy::any_match;

#[path = "sql_lexer.rs"]
mod lexer;

use lexer::{Kind, Token, lex};

/// The parameters that hold SQL text.
const SQL_PARAMS: &[&str] = &["query", "sql", "statement"];

/// Keywords that write, as reported.
const WRITE_KEYWORDS: &[&str] = &[
    "INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "REPLACE", "DROP", "ALTER", "CREATE",
    "TRUNCATE", "GRANT", "REVOKE", "RENAME", "COPY", "CALL", "EXEC", "EXECUTE", "ATTACH", "VACUUM",
    "REINDEX",
];

/// Words that start a statement, for "a quote, `;`, another statement".
const STATEMENT_VERBS: &[&str] = &[
    "SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "REPLACE", "DROP", "ALTER",
    "CREATE", "TRUNCATE", "GRANT", "REVOKE", "RENAME", "COPY", "CALL", "EXEC", "EXECUTE", "ATTACH",
    "DETACH", "VACUUM", "REINDEX", "WITH", "SHUTDOWN", "DECLARE", "SET", "LOAD", "PRAGMA",
];

/// The check as one step at a time, for the pass that runs several checks over each step.
pub(crate) struct Pass {
    /// Whether each distinct tool name is read-only, by its number in [`Ctx::tools`]: the
    /// globs are matched once per name, not once per step.
    readonly: Vec<bool>,
    tokens: Vec<Token>,
    pointer: String,
}

impl Pass {
    pub(crate) fn new(ctx: &Ctx<'_>) -> Self {
        let readonly =
            ctx.tools.classify(|t| !t.is_empty() && any_match(&ctx.policy.readonly_tools, t));
        Self { readonly, tokens: Vec::new(), pointer: String::new() }
    }

    pub(crate) fn step(
        &mut self,
        ctx: &Ctx<'_>,
        index: usize,
        step: &Step,
        out: &mut Vec<Finding>,
    ) {
        let tool = step.tool.as_deref().unwrap_or("");
        let kind = Checks {
            tool,
            readonly: ctx.tools.lookup(&self.readonly, index).is_some_and(|&b| b),
            sql_tool: tool.starts_with("db.") || tool.starts_with("sql."),
        };
        let mut scan = Scan { tokens: &mut self.tokens, pointer: &mut self.pointer, out };
        // One pass over the parameters: a map lookup per name would hash every name.
        for (param, value) in &step.parameters {
            if !SQL_PARAMS.contains(&param) {
                continue;
            }
            match value {
                ValueRef::String(text) => scan.text(&kind, (index, step), (param, None), text),
                ValueRef::Array(items) => {
                    for (k, item) in items.iter().enumerate() {
                        if let Some(text) = item.as_str() {
                            scan.text(&kind, (index, step), (param, Some(k)), text);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// Which checks apply to a step's SQL.
struct Checks<'t> {
    tool: &'t str,
    readonly: bool,
    sql_tool: bool,
}

/// Buffers reused across every SQL string of the plan, and where the findings go.
struct Scan<'o> {
    tokens: &'o mut Vec<Token>,
    pointer: &'o mut String,
    out: &'o mut Vec<Finding>,
}

impl Scan<'_> {
    fn text(
        &mut self,
        checks: &Checks<'_>,
        (index, step): (usize, &Step),
        (param, element): (&str, Option<usize>),
        text: &str,
    ) {
        self.pointer.clear();
        self.pointer.push_str("/parameters/");
        self.pointer.push_str(param);
        if let Some(k) = element {
            let _ = write!(self.pointer, "/{k}");
        }
        self.tokens.clear();
        lex(text, self.tokens);
        let at = Site { step, index, pointer: self.pointer };
        if checks.readonly {
            check_writes(&at, checks.tool, text, self.tokens, self.out);
        }
        if checks.sql_tool || looks_like_sql(text, self.tokens) {
            check_injection(&at, text, self.tokens, self.out);
        }
    }
}

/// Where a SQL string is: its step and its pointer within the step.
struct Site<'s> {
    step: &'s Step,
    index: usize,
    pointer: &'s str,
}

impl Site<'_> {
    fn finding(&self, code: LintCode, msg: String) -> Finding {
        let path = format!("/steps/{}{}", self.index, self.pointer);
        Finding::step(code, (self.index, self.step.id.as_str()), path, msg)
    }
}

/// SQL_WRITE_IN_READONLY: one finding per statement text, naming every write keyword in it.
fn check_writes(at: &Site<'_>, tool: &str, text: &str, tokens: &[Token], out: &mut Vec<Finding>) {
    let mut found: Vec<&'static str> = Vec::new();
    let mut saw_select = false;
    let mut saw_insert = false;
    let sig: Vec<usize> = significant(tokens).collect();
    for (n, &t) in sig.iter().enumerate() {
        let tok = tokens[t];
        if tok.kind == Kind::Punct(b';') {
            saw_select = false;
            saw_insert = false;
            continue;
        }
        if tok.kind != Kind::Word {
            continue;
        }
        let prev = n.checked_sub(1).and_then(|p| sig.get(p)).map(|&p| tokens[p]);
        let next = sig.get(n + 1).map(|&x| tokens[x]);
        if prev.is_some_and(|p| p.kind == Kind::Punct(b'.')) {
            continue; // `t.update` is a column
        }
        let word = tok.text(text);
        let is = |k: &str| word.eq_ignore_ascii_case(k);
        if is("SELECT") {
            saw_select = true;
            continue;
        }
        if is("INTO") {
            if saw_select && !saw_insert {
                push_unique(&mut found, "SELECT … INTO");
            }
            continue;
        }
        let Some(&keyword) = WRITE_KEYWORDS.iter().find(|k| is(k)) else { continue };
        match keyword {
            "UPDATE" => {
                let before = prev.map(|p| p.text(text)).unwrap_or_default();
                // FOR UPDATE, FOR NO KEY UPDATE (locks); KEY UPDATE / DO UPDATE follow INSERT.
                if ["FOR", "KEY", "DO"].iter().any(|w| before.eq_ignore_ascii_case(w)) {
                    continue;
                }
            }
            "REPLACE" if next.is_some_and(|x| x.kind == Kind::Punct(b'(')) => continue,
            _ => {}
        }
        if matches!(keyword, "INSERT" | "MERGE" | "UPSERT" | "REPLACE") {
            saw_insert = true;
        }
        push_unique(&mut found, keyword);
    }
    if !found.is_empty() {
        let msg = format!(
            "read-only tool `{tool}` is given SQL that writes ({}); use a read-write tool or make \
             it a SELECT",
            found.join(", ")
        );
        out.push(at.finding(LintCode::SqlWriteInReadonly, msg));
    }
}

fn push_unique(found: &mut Vec<&'static str>, keyword: &'static str) {
    if !found.contains(&keyword) {
        found.push(keyword);
    }
}

/// SQL_INJECTION: spliced references (one finding listing them) and a literal payload (one
/// finding naming the first one seen).
fn check_injection(at: &Site<'_>, text: &str, tokens: &[Token], out: &mut Vec<Finding>) {
    let mut refs = at.step.refs.iter().filter(|r| r.pointer == at.pointer).peekable();
    if let Some(first) = refs.peek() {
        let msg = if first.whole {
            format!(
                "the whole SQL statement is {}, another step's output; write the statement here \
                 and pass values as bound parameters",
                first.reference
            )
        } else {
            let list: Vec<String> = refs.map(|r| r.reference.to_string()).collect();
            let (noun, verb) =
                if list.len() == 1 { ("reference", "is") } else { ("references", "are") };
            format!(
                "step {noun} {} {verb} spliced into SQL text; use placeholders ($1, ?) and pass \
                 the values in the query's args",
                list.join(", ")
            )
        };
        out.push(at.finding(LintCode::SqlInjection, msg));
    }
    if let Some(payload) = find_payload(text, tokens) {
        let msg = format!(
            "literal SQL text carries an injection payload: {payload}; pass values as bound \
             parameters instead of splicing them into the statement"
        );
        out.push(at.finding(LintCode::SqlInjection, msg));
    }
}

/// Indices of the tokens that are not comments.
fn significant(tokens: &[Token]) -> impl Iterator<Item = usize> + '_ {
    tokens.iter().enumerate().filter(|(_, t)| !matches!(t.kind, Kind::Comment { .. })).map(|p| p.0)
}

/// The first classic payload in the tokens, described.
fn find_payload(text: &str, tokens: &[Token]) -> Option<&'static str> {
    let sig: Vec<usize> = significant(tokens).collect();
    let at = |n: usize| sig.get(n).map(|&t| tokens[t]);
    let is_word = |t: Option<Token>, w: &str| {
        t.is_some_and(|t| t.kind == Kind::Word && t.text(text).eq_ignore_ascii_case(w))
    };
    let is_str = |t: Option<Token>| t.is_some_and(|t| matches!(t.kind, Kind::Str { .. }));
    let damaged = tokens.iter().any(|t| t.kind == (Kind::Str { closed: false }));
    let last_comment = tokens.iter().rposition(|t| matches!(t.kind, Kind::Comment { .. }));
    for n in 0..sig.len() {
        let tok = at(n);
        let prev = n.checked_sub(1).and_then(at);
        // `'1'='1'`: two equal strings compared (never written on purpose).
        if is_str(tok)
            && at(n + 1).is_some_and(|t| t.kind == Kind::Punct(b'='))
            && same_literal(text, tok, at(n + 2))
            && is_str(at(n + 2))
        {
            return Some("an always-true comparison of two equal strings (`'1'='1'`)");
        }
        // `OR 1=1` anywhere; `' AND 1=1` after a quote.
        if (is_word(tok, "OR") || (is_word(tok, "AND") && is_str(prev)))
            && at(n + 2).is_some_and(|t| t.kind == Kind::Punct(b'='))
            && same_literal(text, at(n + 1), at(n + 3))
        {
            return Some("a quote or OR followed by an always-true comparison (`' OR 1=1`)");
        }
        if is_str(tok)
            && at(n + 1).is_some_and(|t| t.kind == Kind::Punct(b';'))
            && at(n + 2).is_some_and(|t| {
                t.kind == Kind::Word
                    && STATEMENT_VERBS.iter().any(|v| t.text(text).eq_ignore_ascii_case(v))
            })
        {
            return Some("a quote followed by `;` and another statement (`'; DROP …`)");
        }
        if is_word(tok, "UNION") && is_str(prev) {
            let select_at = if is_word(at(n + 1), "ALL") { n + 2 } else { n + 1 };
            let commented_after = sig.get(n).is_some_and(|&t| last_comment.is_some_and(|c| c > t));
            if is_word(at(select_at), "SELECT") && (damaged || commented_after) {
                return Some("`UNION SELECT` after a quote, with the rest cut off");
            }
        }
    }
    // A quote followed straight by `--`: the rest of the statement is cut off.
    for pair in tokens.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if matches!(a.kind, Kind::Str { closed: true })
            && b.kind == (Kind::Comment { line: true })
            && line_comment_is_cut(text, a, b)
        {
            return Some("a quote followed by a `--` comment that cuts the statement off");
        }
    }
    None
}

/// Whether two tokens are the same string or number literal (an unterminated string counts by
/// its text: `'1'='1` is a payload whose closing quote the template supplies).
fn same_literal(text: &str, a: Option<Token>, b: Option<Token>) -> bool {
    let (Some(a), Some(b)) = (a, b) else { return false };
    match (a.kind, b.kind) {
        (Kind::Number, Kind::Number) => a.text(text) == b.text(text),
        (Kind::Str { .. }, Kind::Str { .. }) => a.inner(text) == b.inner(text),
        _ => false,
    }
}

/// `'admin'--'…`: the comment touches the quote, or it is empty, or it swallows a quote.
/// `'active' -- only active rows` is an ordinary comment.
fn line_comment_is_cut(text: &str, quote: Token, comment: Token) -> bool {
    let body = text.get(comment.start + 2..comment.end).unwrap_or_default();
    quote.end == comment.start || body.trim().is_empty() || body.contains('\'')
}

/// Whether text in a non-SQL tool's parameter is SQL: a statement verb with its companion
/// keyword (`SELECT … FROM`, `INSERT INTO`, `UPDATE … SET`, `DROP TABLE`), so that a search
/// query such as "update on the weather" is not taken for SQL.
fn looks_like_sql(text: &str, tokens: &[Token]) -> bool {
    let mut words = tokens.iter().filter(|t| t.kind == Kind::Word).map(|t| t.text(text));
    let Some(first) = words.next() else { return false };
    let is = |w: &str| first.eq_ignore_ascii_case(w);
    let companions: &[&str] = if is("SELECT") || is("DELETE") {
        &["FROM"]
    } else if is("INSERT") || is("MERGE") || is("REPLACE") || is("UPSERT") {
        &["INTO"]
    } else if is("UPDATE") {
        &["SET"]
    } else if is("WITH") {
        &["SELECT", "INSERT", "UPDATE", "DELETE"]
    } else if is("GRANT") || is("REVOKE") {
        &["ON"]
    } else if is("DROP") || is("CREATE") || is("ALTER") || is("TRUNCATE") {
        // The object kind comes right after the verb.
        return words.next().is_some_and(|x| {
            [
                "TABLE",
                "VIEW",
                "INDEX",
                "DATABASE",
                "SCHEMA",
                "FUNCTION",
                "PROCEDURE",
                "TRIGGER",
                "SEQUENCE",
                "USER",
                "ROLE",
                "TYPE",
                "OR",
                "UNIQUE",
                "TEMP",
                "TEMPORARY",
            ]
            .iter()
            .any(|k| x.eq_ignore_ascii_case(k))
        });
    } else {
        return false;
    };
    words.any(|x| companions.iter().any(|k| x.eq_ignore_ascii_case(k)))
}
