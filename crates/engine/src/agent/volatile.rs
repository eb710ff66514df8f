//! What changes in a tool's output from one run to the next without meaning anything: clock
//! times and dates, durations, temporary paths, process ids. A replay compares each request with
//! the recorded one; the tool results in them are compared with these masked, so a command that
//! prints the date (or a test runner's "Ran 1 test in 0.001s") is not a divergence, while a
//! different exit code, file content or message still is (issue 31).
//!
//! The built-in rules are conservative: each masks a whole token of a recognisable shape
//! (an ISO-8601 or `date(1)` timestamp, a clock time, a number with a time unit, a path under
//! `/tmp` or `/var/tmp`, a number after `pid`), never a bare number. A text recording
//! (`pev_store::recording`) declares the rules it is matched with, these and its own, so it is
//! matched the same way by the pev that recorded it and by a later one: [`Masks::declared`].

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// The built-in rules, in order (a timestamp before the clock time inside it), each a pattern
/// and its stand-in (`${1}` keeps the pattern's first group).
pub const BUILT_IN: &[(&str, &str)] = &[
    // 2026-11-27T03:43:19.123Z, 2026-11-27 03:43:19+01:00
    (r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?", "<time>"),
    // Fri Nov 27 03:43:19 UTC 2026 (date(1)'s default)
    (
        r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} \d{2}:\d{2}:\d{2}(?: [A-Z]{2,5})? \d{4}\b",
        "<time>",
    ),
    // 03:43:19, 03:43:19.5
    (r"\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<time>"),
    // 0.001s, 12 ms, 3.5 seconds
    (r"\b\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|sec|secs|seconds?|min)\b", "<duration>"),
    // /tmp/pev-scratch-1234-…/ws/a.txt, /var/tmp/x
    (r"(^|[^A-Za-z0-9._+\-/])(?:/var)?/tmp/(?:[A-Za-z0-9._+\-/]*[A-Za-z0-9_+\-/])?", "${1}<tmp>"),
    // pid 1234, PID=1234, pid: 1234
    (r"\b(?i:pid)\s?[=:#]?\s?\d+\b", "pid <n>"),
];

/// Compiled rules: what a replay masks in tool results before comparing them.
#[derive(Debug, Clone)]
pub struct Masks {
    rules: Vec<(Regex, String)>,
}

static DEFAULT: LazyLock<Masks> = LazyLock::new(|| {
    let rules = BUILT_IN.iter().map(|(p, w)| ((*p).to_owned(), (*w).to_owned()));
    Masks::declared(rules).unwrap_or_else(|e| panic!("a built-in volatile rule: {e}"))
});

impl Default for Masks {
    /// The built-in rules.
    fn default() -> Self {
        DEFAULT.clone()
    }
}

impl Masks {
    /// Rules as a recording declares them (pattern, stand-in), in order; a pattern that is not
    /// a regular expression is an error naming it.
    pub fn declared(rules: impl IntoIterator<Item = (String, String)>) -> Result<Self, String> {
        let mut compiled = Vec::new();
        for (i, (pattern, with)) in rules.into_iter().enumerate() {
            let re = Regex::new(&pattern)
                .map_err(|e| format!("volatile rule {} ({pattern:?}): {e}", i + 1))?;
            compiled.push((re, with));
        }
        Ok(Self { rules: compiled })
    }

    /// `text` with every volatile token replaced by its stand-in.
    pub fn mask<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for (re, with) in &self.rules {
            if re.is_match(&out) {
                out = Cow::Owned(re.replace_all(&out, with.as_str()).into_owned());
            }
        }
        out
    }
}

/// The built-in rules as a recording declares them.
pub fn built_in_rules() -> Vec<pev_store::recording::VolatileRule> {
    BUILT_IN
        .iter()
        .map(|(pattern, with)| pev_store::recording::VolatileRule {
            pattern: (*pattern).to_owned(),
            with: (*with).to_owned(),
        })
        .collect()
}

/// `text` with the built-in rules applied.
pub fn mask(text: &str) -> Cow<'_, str> {
    DEFAULT.mask(text)
}

#[cfg(test)]
mod tests {
    use super::{Masks, mask};

    #[test]
    fn times_durations_temp_paths_and_pids_are_masked() {
        let cases = [
            ("built at 2026-11-27T03:43:19.123456Z", "built at <time>"),
            ("at 2026-11-27 03:43:19+01:00 ok", "at <time> ok"),
            ("Fri Nov 27 03:43:19 UTC 2026", "<time>"),
            ("Mon Jan  5 10:00:00 2026", "<time>"),
            ("started 03:43:19.5 done", "started <time> done"),
            ("Ran 1 test in 0.001s", "Ran 1 test in <duration>"),
            ("took 12 ms", "took <duration>"),
            ("wrote /tmp/pev-scratch-11280-18ebca/ws/a.txt.", "wrote <tmp>."),
            ("kept in /var/tmp/x-1", "kept in <tmp>"),
            ("/tmp/a at the start", "<tmp> at the start"),
            ("\"/tmp/q\"", "\"<tmp>\""),
            ("server pid 4242 up", "server pid <n> up"),
            ("PID=77", "pid <n>"),
        ];
        for (text, want) in cases {
            assert_eq!(mask(text), want, "{text}");
        }
    }

    #[test]
    fn what_means_something_is_left_alone() {
        for text in [
            "exit code 1",
            "FAILED (failures=1)",
            "12 tests passed",
            "version 1.2.3",
            "line 42: expected 15, got 5",
            "a.txt: 16 bytes",
            "/home/user/project/src/a.rs",
            "src/tmp/a.rs and /srv/tmp/x",
        ] {
            assert_eq!(mask(text), text);
        }
    }

    #[test]
    fn declared_rules_replace_the_built_in_ones_and_a_bad_pattern_is_named() {
        let masks = Masks::declared([(r"build-[0-9a-f]{8}".to_owned(), "build-<id>".to_owned())])
            .expect("compiles");
        assert_eq!(masks.mask("made build-0a1b2c3d at 03:43:19"), "made build-<id> at 03:43:19");
        let err = Masks::declared([
            ("ok".to_owned(), "x".to_owned()),
            ("(unclosed".to_owned(), "y".to_owned()),
        ])
        .expect_err("a bad pattern");
        assert!(err.contains("volatile rule 2") && err.contains("(unclosed"), "{err}");
    }
}
