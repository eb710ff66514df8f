//! RAW_SECRET: credentials written into the plan as literal values.
//!
//! Every string is looked at where it is, however deeply it nests (step parameters, the plan's
//! goal, context and meta, each step's title, description, acceptance criteria, unknown fields,
//! and the command and URL of its assertions), never in some printed form of the whole
//! document: the finding's pointer names the exact value.
//!
//! Three kinds of evidence, each reported at most once per value:
//! - built-in content detectors: AWS access key ids and secret key assignments, PEM private key
//!   blocks, JWTs, well-known token prefixes (`ghp_`, `github_pat_`, `xox?-`, `sk_live_`, `sk-`),
//!   bearer tokens, passwords in URLs and password assignments in text (`password=…`);
//! - a secret-named key (`db_password`, `apiKey`, `X-Auth-Token`, …) holding a literal value,
//!   when no content detector already explains that value;
//! - the policy's `deny_tokens_regex`, each pattern reported by name.
//!
//! Placeholders are not secrets: step references, `${ENV}`, `{{x}}`, `$VAR`, `%VAR%`, `<…>`,
//! an ALL_CAPS environment variable name, a path to a secret file, a secret-store address
//! (`vault:`, `arn:`, `op://`), and redacted or example values (`***`, `REDACTED`, `xxxx`,
//! `changeme`, `your_api_key`). `changeme` and its kin are treated as placeholders on purpose:
//! the check is about leaking a credential, and these leak nothing.
//!
//! Messages name the detector or the pattern and give the length; they show the first four
//! characters only when those are a public marker (`AKIA`, `eyJh`, `ghp_`), never the secret.

use std::fmt::Write as _;
use std::sync::LazyLock;

use pev_protocol::{Assertion, Finding, LintCode, PlanIssue, Step, ValueRef};
use regex::{Captures, Regex, RegexSet};
use serde_json::Value;

use crate::Ctx;
use crate::walk::{StrWalker, Visit, push_key};

/// A built-in content detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detector {
    PrivateKey,
    AwsAccessKeyId,
    AwsSecretKey,
    Jwt,
    TokenPrefix,
    Bearer,
    UrlPassword,
    PasswordAssignment,
}

impl Detector {
    fn name(self) -> &'static str {
        match self {
            Self::PrivateKey => "PEM private key block",
            Self::AwsAccessKeyId => "AWS access key id",
            Self::AwsSecretKey => "AWS secret access key",
            Self::Jwt => "JSON Web Token",
            Self::TokenPrefix => "API token",
            Self::Bearer => "bearer token",
            Self::UrlPassword => "password in a URL",
            Self::PasswordAssignment => "password assignment",
        }
    }

    /// Whether the first characters are a public marker rather than part of the secret.
    fn shows_prefix(self) -> bool {
        matches!(self, Self::AwsAccessKeyId | Self::Jwt | Self::TokenPrefix)
    }
}

/// The detectors in priority order: when two match the same characters (a JWT used as a bearer
/// token), only the first is reported. `(detector, pattern, capture group of the secret)`.
/// `(?-u:\b)` keeps word boundaries ASCII so the fast DFA engines apply to any text.
const PATTERNS: &[(Detector, &str, usize)] = &[
    (
        Detector::PrivateKey,
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:\s|\\n)*(?:[A-Za-z0-9+/=]{16,}|Proc-Type:)",
        0,
    ),
    (Detector::AwsAccessKeyId, r"(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)", 0),
    (
        Detector::AwsSecretKey,
        r#"(?i)aws_?secret_?(?:access_?)?key["']?\s*[:=]\s*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
        1,
    ),
    (Detector::Jwt, r"(?-u:\b)eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{16,}", 0),
    (
        Detector::TokenPrefix,
        r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}|xox[abprs]-[A-Za-z0-9-]{10,}|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{20,})",
        0,
    ),
    (Detector::Bearer, r"(?i)(?-u:\b)bearer[ \t]+([A-Za-z0-9._~+/-]{20,}=*)", 1),
    (Detector::UrlPassword, r"(?i)(?-u:\b)[a-z][a-z0-9+.-]*://[^\s/:@]+:([^\s/@]+)@", 1),
    (
        Detector::PasswordAssignment,
        r#"(?i)(?:--(?:password|passwd)[ \t]+|(password|passwd|pwd)["']?[ \t]*[=:][ \t]*)("[^"\n]*"|'[^'\n]*'|[^\s"',;&]+)"#,
        2,
    ),
];

/// The compiled detectors: a set to learn in one pass whether any matches, then each regex to
/// find where.
struct Builtin {
    set: RegexSet,
    regexes: Vec<(Detector, Regex, usize)>,
}

/// The patterns are constants covered by the test suite; should one ever fail to compile, the
/// built-in detectors are skipped rather than taking the linter down.
static BUILTIN: LazyLock<Option<Builtin>> = LazyLock::new(|| {
    let set = RegexSet::new(PATTERNS.iter().map(|p| p.1)).ok()?;
    let regexes = PATTERNS
        .iter()
        .map(|&(d, p, g)| Regex::new(p).ok().map(|re| (d, re, g)))
        .collect::<Option<Vec<_>>>()?;
    Some(Builtin { set, regexes })
});

/// Strings shorter than this cannot hold anything a built-in detector finds (`pwd=abcdef`).
const MIN_DETECTABLE: usize = 10;

/// Keys whose value is a secret (compared case-insensitively, ignoring `_`, `-` and `.`, as a
/// suffix: `db_password`, `X-Api-Key`, `accessToken`).
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "apikey",
    "token",
    "privatekey",
    "secretkey",
    "secretaccesskey",
    "credentials",
    "authorization",
];

/// Keys that end like a secret name but hold pagination state, not credentials.
const NOT_SECRET_KEYS: &[&str] =
    &["pagetoken", "nexttoken", "paginationtoken", "continuationtoken", "cursortoken", "synctoken"];

/// A secret-named key's value must be at least this long to count.
const MIN_KEYED_SECRET: usize = 8;
/// A password in text or in a URL must be at least this long to count.
const MIN_PASSWORD: usize = 6;

/// The check as one step at a time, for the pass that runs several checks over each step:
/// [`Pass::new`] scans the plan-level text, [`Pass::step`] each step, and [`Pass::finish`]
/// hands over the findings, in that order.
pub(crate) struct Pass<'a, 'c> {
    scanner: Scanner<'a, 'c>,
    /// Steps with an assertion the parser set aside, sorted: their assertions' indices only
    /// match the document for steps without one.
    misaligned: Vec<usize>,
    base: String,
    index: String,
}

impl<'a, 'c> Pass<'a, 'c> {
    pub(crate) fn new(ctx: &'c Ctx<'a>) -> Self {
        let plan = ctx.plan;
        let mut s = Scanner {
            walker: StrWalker::new(),
            params: StrWalker::new(),
            ptr: String::with_capacity(64),
            detect: Detect::new(ctx),
        };

        // Plan-level text.
        s.text(None, &["/", "goal"], &plan.goal);
        for (name, value) in [("context", &plan.context), ("meta", &plan.meta)] {
            if let Some(value) = value {
                s.value(None, &["/", name], value, None);
            }
        }
        if let Some(text) = &plan.rollback_strategy {
            s.text(None, &["/", "rollback_strategy"], text);
        }
        for (key, value) in &plan.extra {
            s.value(None, &["/", key], value, Some(key));
        }

        let mut misaligned: Vec<usize> = ctx
            .parsed
            .issues
            .iter()
            .filter_map(|issue| match issue {
                PlanIssue::InvalidAssertion { step, .. } => *step,
            })
            .collect();
        misaligned.sort_unstable();
        Self { scanner: s, misaligned, base: String::new(), index: String::new() }
    }

    pub(crate) fn step(&mut self, i: usize, step: &'a Step) {
        let (s, base, index) = (&mut self.scanner, &mut self.base, &mut self.index);
        let owner = Some((i, step.id.as_str()));
        base.clear();
        let _ = write!(base, "/steps/{i}");
        for (field, text) in [("title", &step.title), ("description", &step.description)] {
            if let Some(text) = text {
                s.text(owner, &[base, "/", field], text);
            }
        }
        for (key, value) in &step.parameters {
            s.param(owner, &[base, "/parameters/", key], value, Some(key));
        }
        for (k, text) in step.acceptance_criteria.iter().enumerate() {
            index.clear();
            let _ = write!(index, "{k}");
            s.text(owner, &[base, "/acceptance_criteria/", index], text);
        }
        for (key, value) in &step.extra {
            s.value(owner, &[base, "/", key], value, Some(key));
        }
        if self.misaligned.binary_search(&i).is_err() {
            for (k, assertion) in step.assertions.iter().enumerate() {
                let (field, text) = match assertion {
                    Assertion::CommandSucceeds { command, .. } => ("command", command),
                    Assertion::HttpStatus { url, .. } => ("url", url),
                    _ => continue,
                };
                index.clear();
                let _ = write!(index, "{k}");
                s.text(owner, &[base, "/assertions/", index, "/", field], text);
            }
        }
    }

    /// The findings, plan-level ones first, then each step's in order.
    pub(crate) fn finish(self) -> Vec<Finding> {
        self.scanner.detect.out
    }
}

/// The walk state and the detectors, kept apart so the walk's callback can borrow the
/// detectors while the walker is busy.
struct Scanner<'a, 'c> {
    walker: StrWalker<'a, &'a Value>,
    params: StrWalker<'a, ValueRef<'a>>,
    ptr: String,
    detect: Detect<'c>,
}

impl<'a> Scanner<'a, '_> {
    /// Scans every string in `value`, whose pointer is `parts` joined (the last part is a key,
    /// escaped as a pointer segment).
    fn value(&mut self, owner: Owner<'_>, parts: &[&str], value: &'a Value, key: Option<&'a str>) {
        set_ptr(&mut self.ptr, parts);
        let detect = &mut self.detect;
        self.walker.walk(value, key, &mut self.ptr, |v| detect.visit(owner, v));
    }

    /// [`Scanner::value`] for a value in a step's parameters.
    fn param(
        &mut self,
        owner: Owner<'_>,
        parts: &[&str],
        value: ValueRef<'a>,
        key: Option<&'a str>,
    ) {
        set_ptr(&mut self.ptr, parts);
        let detect = &mut self.detect;
        self.params.walk(value, key, &mut self.ptr, |v| detect.visit(owner, v));
    }

    /// Scans one text field.
    fn text(&mut self, owner: Owner<'_>, parts: &[&str], text: &str) {
        set_ptr(&mut self.ptr, parts);
        self.detect.visit(owner, Visit { key: None, value: text, pointer: &self.ptr });
    }
}

/// Resets the pointer buffer to `parts` joined; the last part is escaped as a pointer segment
/// (it may be a key holding `/` or `~`).
fn set_ptr(ptr: &mut String, parts: &[&str]) {
    ptr.clear();
    if let Some((last, head)) = parts.split_last() {
        for part in head {
            ptr.push_str(part);
        }
        push_key(ptr, last);
    }
}

/// The step a value belongs to (`None` for plan-level values).
type Owner<'a> = Option<(usize, &'a str)>;

/// Runs the detectors over one string at a time and pushes findings.
///
/// Most strings match nothing, so the cost that matters is the "does anything match" pass. The
/// built-in patterns and the policy's deny patterns go into one set, which answers that for all
/// of them in a single scan of the string (about three times faster than a set for each); only a
/// string that matches is searched again, pattern by pattern, for where.
struct Detect<'c> {
    builtin: Option<&'static Builtin>,
    deny: &'c [(String, Regex)],
    /// Built-in patterns first (`builtin_len` of them), then the deny patterns; `None` when the
    /// policy has no deny patterns (the static built-in set serves) or the union would not
    /// compile within the regex size limits (then each deny regex runs on its own).
    combined: Option<RegexSet>,
    builtin_len: usize,
    /// Spans reported for the current value, so overlapping detectors report once.
    spans: Vec<(usize, usize)>,
    out: Vec<Finding>,
}

impl<'c> Detect<'c> {
    fn new(ctx: &'c Ctx<'_>) -> Self {
        let deny = ctx.policy.deny_tokens.as_slice();
        let builtin = BUILTIN.as_ref();
        let builtin_len = builtin.map_or(0, |_| PATTERNS.len());
        let combined = if deny.is_empty() {
            None
        } else {
            let builtin_patterns = PATTERNS.iter().take(builtin_len).map(|p| p.1);
            RegexSet::new(builtin_patterns.chain(deny.iter().map(|(p, _)| p.as_str()))).ok()
        };
        Self { builtin, deny, combined, builtin_len, spans: Vec::new(), out: Vec::new() }
    }

    fn visit(&mut self, owner: Owner<'_>, v: Visit<'_, '_>) {
        self.spans.clear();
        match (&self.combined, self.builtin) {
            (Some(set), _) => {
                if set.is_match(v.value) {
                    let matches = set.matches(v.value);
                    let mut hits = matches.iter().peekable();
                    while let Some(index) = hits.next_if(|&i| i < self.builtin_len) {
                        self.builtin_hit(owner, v, index);
                    }
                    self.key_name(owner, v);
                    for index in hits {
                        self.deny_hit(owner, v, index - self.builtin_len);
                    }
                } else {
                    self.key_name(owner, v);
                }
            }
            (None, builtin) => {
                if let Some(builtin) = builtin
                    && v.value.len() >= MIN_DETECTABLE
                    && builtin.set.is_match(v.value)
                {
                    for index in builtin.set.matches(v.value).iter() {
                        self.builtin_hit(owner, v, index);
                    }
                }
                self.key_name(owner, v);
                // Without a combined set (none needed, or too big), each deny regex runs alone.
                for index in 0..self.deny.len() {
                    self.deny_hit(owner, v, index);
                }
            }
        }
    }

    /// Built-in detector `index` matched somewhere: report its first real match, unless an
    /// earlier detector already reported those characters.
    fn builtin_hit(&mut self, owner: Owner<'_>, v: Visit<'_, '_>, index: usize) {
        let text = v.value;
        let Some((detector, re, group)) = self.builtin.and_then(|b| b.regexes.get(index)) else {
            return;
        };
        for caps in re.captures_iter(text) {
            let Some((start, end)) = validate(*detector, &caps, *group) else { continue };
            if self.spans.iter().any(|&(s, e)| start < e && s < end) {
                continue;
            }
            self.spans.push((start, end));
            let secret = text.get(start..end).unwrap_or_default();
            let msg = format!("literal {} {}", detector.name(), describe(secret, *detector));
            self.push(owner, v.pointer, msg);
            return;
        }
    }

    /// A secret-named key holding a literal, when no content detector explained the value.
    fn key_name(&mut self, owner: Owner<'_>, v: Visit<'_, '_>) {
        if self.spans.is_empty()
            && let Some(key) = v.key
            && is_secret_key(key)
            && is_literal_secret(v.value)
        {
            let msg = format!(
                "secret-named key `{key}` holds a literal value ({} chars)",
                v.value.trim().chars().count()
            );
            self.push(owner, v.pointer, msg);
        }
    }

    /// Deny pattern `index`, once per value.
    fn deny_hit(&mut self, owner: Owner<'_>, v: Visit<'_, '_>, index: usize) {
        let Some((pattern, re)) = self.deny.get(index) else { return };
        if let Some(m) = re.find(v.value) {
            let msg = format!(
                "matches the policy's deny_tokens_regex `{pattern}` (a {}-char match at offset {})",
                v.value[m.range()].chars().count(),
                v.value[..m.start()].chars().count()
            );
            self.push(owner, v.pointer, msg);
        }
    }

    fn push(&mut self, owner: Owner<'_>, pointer: &str, msg: String) {
        self.out.push(finding(owner, pointer, msg));
    }
}

fn finding(owner: Owner<'_>, pointer: &str, msg: String) -> Finding {
    match owner {
        Some(step) => Finding::step(LintCode::RawSecret, step, pointer, msg),
        None => Finding::plan(LintCode::RawSecret, pointer, msg),
    }
}

/// `(` + the public prefix when the detector has one + the length `)`; never the secret.
fn describe(secret: &str, detector: Detector) -> String {
    let len = secret.chars().count();
    if detector.shows_prefix() {
        let prefix = secret.char_indices().nth(4).map_or(secret, |(i, _)| &secret[..i]);
        format!("(`{prefix}…`, {len} chars)")
    } else {
        format!("({len} chars)")
    }
}

/// The span of the secret in a match, if the match is really one.
fn validate(detector: Detector, caps: &Captures<'_>, group: usize) -> Option<(usize, usize)> {
    let m = caps.get(group)?;
    let text = m.as_str();
    match detector {
        // `sk-` and `xox?-` also start ordinary hyphenated words; real keys carry digits.
        Detector::TokenPrefix if text.starts_with("sk-") || text.starts_with("xox") => {
            text.bytes().any(|b| b.is_ascii_digit()).then_some((m.start(), m.end()))
        }
        Detector::PasswordAssignment | Detector::UrlPassword => {
            let inner = strip_quotes(text);
            let long_enough = inner.chars().count() >= MIN_PASSWORD;
            (long_enough && !is_placeholder(inner)).then_some((m.start(), m.end()))
        }
        _ => Some((m.start(), m.end())),
    }
}

fn strip_quotes(text: &str) -> &str {
    let b = text.as_bytes();
    match (b.first(), b.last()) {
        (Some(b'"'), Some(b'"')) | (Some(b'\''), Some(b'\'')) if b.len() >= 2 => {
            text.get(1..text.len() - 1).unwrap_or_default()
        }
        _ => text,
    }
}

/// Whether a key names a secret: it ends (ignoring case, `_`, `-`, `.`) with a secret word.
fn is_secret_key(key: &str) -> bool {
    // Most keys (`query`, `path`, `content`) are rejected by their last letter alone.
    let last = key.bytes().rev().find(|b| !matches!(b, b'_' | b'-' | b'.'));
    if !last.is_some_and(|b| b"deEtTyYnNsSD".contains(&b)) {
        return false;
    }
    SECRET_KEYS.iter().any(|s| ends_with_normalized(key, s))
        && !NOT_SECRET_KEYS.iter().any(|s| ends_with_normalized(key, s))
}

fn ends_with_normalized(key: &str, suffix: &str) -> bool {
    let mut k = key
        .bytes()
        .rev()
        .filter(|b| !matches!(b, b'_' | b'-' | b'.'))
        .map(|b| b.to_ascii_lowercase());
    suffix.bytes().rev().all(|s| k.next() == Some(s))
}

/// A secret-named key's value counts when it is one literal word of 8+ characters.
fn is_literal_secret(value: &str) -> bool {
    let v = value.trim();
    v.chars().count() >= MIN_KEYED_SECRET
        && !v.chars().any(char::is_whitespace)
        && !is_placeholder(v)
}

/// Words that stand for a value rather than being one.
const PLACEHOLDER_WORDS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "none",
    "null",
    "nil",
    "required",
    "optional",
    "string",
    "undefined",
    "todo",
    "tbd",
    "hidden",
    "masked",
    "unset",
];

/// Marks of a redacted, example or placeholder value, anywhere in it.
const PLACEHOLDER_MARKS: &[&str] =
    &["***", "redacted", "changeme", "change_me", "placeholder", "example", "xxxx", "dummy"];

/// Addresses of a secret in a store, not the secret.
const STORE_PREFIXES: &[&str] = &[
    "vault:",
    "arn:",
    "op://",
    "env:",
    "ssm:",
    "secretsmanager:",
    "sm://",
    "awssm:",
    "azkv:",
    "gcpsm:",
    "keyring:",
    "file:",
];

/// Whether a value is a reference, a variable, a path, a store address or a redaction rather
/// than a credential.
fn is_placeholder(value: &str) -> bool {
    let v = value.trim();
    let b = v.as_bytes();
    let (Some(&first), Some(&last)) = (b.first(), b.last()) else { return true };
    if v.contains("${") || v.contains("{{") {
        return true; // step references and templates of every kind
    }
    let var_start = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_');
    if (first == b'$' && var_start(b.get(1)))
        || (first == b'%' && last == b'%' && b.len() > 2)
        || (first == b'<' && last == b'>')
    {
        return true;
    }
    if ["/", "./", "../", "~/"].iter().any(|p| v.starts_with(p)) {
        return true; // a path to a secret file
    }
    // An environment variable's name (`GITHUB_TOKEN`) says where the secret is, not what.
    if first.is_ascii_uppercase()
        && b.contains(&b'_')
        && b.iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
    {
        return true;
    }
    if b.iter().all(|&c| c == first) {
        return true; // `********`, `00000000`
    }
    if starts_with_ci(v, "your") {
        return true; // `your_api_key`, `YOUR-TOKEN-HERE`
    }
    PLACEHOLDER_WORDS.iter().any(|w| v.eq_ignore_ascii_case(w))
        || PLACEHOLDER_MARKS.iter().any(|m| contains_ci(v, m))
        || STORE_PREFIXES.iter().any(|p| starts_with_ci(v, p))
}

fn starts_with_ci(hay: &str, prefix: &str) -> bool {
    hay.as_bytes().get(..prefix.len()).is_some_and(|h| h.eq_ignore_ascii_case(prefix.as_bytes()))
}

fn contains_ci(hay: &str, needle: &str) -> bool {
    hay.as_bytes().windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}
