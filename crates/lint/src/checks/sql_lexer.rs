//! A small SQL lexer: enough to tell keywords from string literals, quoted identifiers and
//! comments across the common dialects (Postgres, MySQL, SQLite, SQL Server).
//!
//! It never fails and never panics: unterminated literals and comments run to the end of the
//! text (and an unterminated string is marked, because a quote without its partner is what a
//! spliced payload leaves behind). Token boundaries are always at ASCII bytes, so slicing the
//! text at them is safe. Backslash escapes inside strings (MySQL's default mode) are not
//! modelled: `'it\'s'` reads as a string `'it\'` followed by `s'…`.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// An identifier or keyword.
    Word,
    Number,
    /// `'…'` or `$tag$…$tag$`; `closed` is false when the text ends inside it.
    Str {
        closed: bool,
    },
    /// `"…"`, `` `…` `` or `[…]`.
    QuotedIdent,
    /// `$1`, `?`, `:name`, `@name`, and step references or templates (`${…}`, `{{…}}`).
    Placeholder,
    /// `-- …` (`line`) or `/* … */`.
    Comment {
        line: bool,
    },
    /// Any other single byte.
    Punct(u8),
}

/// One token: its kind and byte range; for a string, the range of its contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
    inner_start: usize,
    inner_end: usize,
}

impl Token {
    /// The token's text.
    pub fn text(self, sql: &str) -> &str {
        sql.get(self.start..self.end).unwrap_or_default()
    }

    /// A string's contents without its quotes (escapes left as written); the text otherwise.
    pub fn inner(self, sql: &str) -> &str {
        sql.get(self.inner_start..self.inner_end).unwrap_or_default()
    }
}

fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Appends the tokens of `sql` to `out`.
pub(super) fn lex(sql: &str, out: &mut Vec<Token>) {
    let b = sql.as_bytes();
    let n = b.len();
    let mut i = 0;
    let mut push = |kind, start, end, inner: (usize, usize)| {
        out.push(Token { kind, start, end, inner_start: inner.0, inner_end: inner.1 });
    };
    while i < n {
        let c = b[i];
        let next = b.get(i + 1).copied();
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'-' && next == Some(b'-') {
            i = find_byte(b, i + 2, b'\n').unwrap_or(n);
            push(Kind::Comment { line: true }, start, i, (start, i));
        } else if c == b'/' && next == Some(b'*') {
            i = find_seq(b, i + 2, b"*/").map_or(n, |p| p + 2);
            push(Kind::Comment { line: false }, start, i, (start, i));
        } else if c == b'\'' {
            let (end, closed) = quoted(b, i + 1, b'\'');
            let inner_end = if closed { end - 1 } else { end };
            push(Kind::Str { closed }, start, end, (start + 1, inner_end));
            i = end;
        } else if c == b'"' || c == b'`' {
            i = quoted(b, i + 1, c).0;
            push(Kind::QuotedIdent, start, i, (start, i));
        } else if c == b'[' {
            i = find_byte(b, i + 1, b']').map_or(n, |p| p + 1);
            push(Kind::QuotedIdent, start, i, (start, i));
        } else if (c == b'$' && next == Some(b'{')) || (c == b'{' && next == Some(b'{')) {
            // A step reference or template placeholder (`${s1.result.id}`, `{{x}}`): one opaque
            // token, so the words of its path are not read as SQL.
            let close: &[u8] = if c == b'$' { b"}" } else { b"}}" };
            i = find_seq(b, i + 2, close).map_or(n, |p| p + close.len());
            push(Kind::Placeholder, start, i, (start, i));
        } else if c == b'$' && next.is_some_and(|d| d.is_ascii_digit()) {
            i += 1;
            while i < n && b[i].is_ascii_digit() {
                i += 1;
            }
            push(Kind::Placeholder, start, i, (start, i));
        } else if c == b'$' {
            // `$$…$$` or `$tag$…$tag$`; a `$` that opens neither is punctuation.
            let mut j = i + 1;
            while j < n && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            if j < n && b[j] == b'$' {
                let tag = &b[i..=j];
                match find_seq(b, j + 1, tag) {
                    Some(p) => {
                        push(Kind::Str { closed: true }, start, p + tag.len(), (j + 1, p));
                        i = p + tag.len();
                    }
                    None => {
                        push(Kind::Str { closed: false }, start, n, (j + 1, n));
                        i = n;
                    }
                }
            } else {
                push(Kind::Punct(c), start, i + 1, (start, i + 1));
                i += 1;
            }
        } else if c == b':' && next == Some(b':') {
            // A `::type` cast, not a `:name` placeholder.
            push(Kind::Punct(c), start, i + 2, (start, i + 2));
            i += 2;
        } else if (c == b':' || c == b'@') && next.is_some_and(is_word_start) {
            i += 1;
            while i < n && is_word_byte(b[i]) {
                i += 1;
            }
            push(Kind::Placeholder, start, i, (start, i));
        } else if c == b'?' {
            push(Kind::Placeholder, start, i + 1, (start, i + 1));
            i += 1;
        } else if c.is_ascii_digit() {
            while i < n && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
            push(Kind::Number, start, i, (start, i));
        } else if is_word_start(c) {
            while i < n && is_word_byte(b[i]) {
                i += 1;
            }
            push(Kind::Word, start, i, (start, i));
        } else {
            push(Kind::Punct(c), start, i + 1, (start, i + 1));
            i += 1;
        }
    }
}

/// Scans a quoted run from `i` (just after the opening quote) where a doubled quote is an
/// escape. Returns the end (just after the closing quote) and whether it was closed.
fn quoted(b: &[u8], mut i: usize, quote: u8) -> (usize, bool) {
    while let Some(p) = find_byte(b, i, quote) {
        if b.get(p + 1) == Some(&quote) {
            i = p + 2;
        } else {
            return (p + 1, true);
        }
    }
    (b.len(), false)
}

fn find_byte(b: &[u8], from: usize, byte: u8) -> Option<usize> {
    b.get(from..)?.iter().position(|&x| x == byte).map(|p| p + from)
}

fn find_seq(b: &[u8], from: usize, seq: &[u8]) -> Option<usize> {
    if seq.is_empty() {
        return None;
    }
    b.get(from..)?.windows(seq.len()).position(|w| w == seq).map(|p| p + from)
}
