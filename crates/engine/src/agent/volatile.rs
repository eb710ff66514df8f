//! What changes in a tool's output from one run to the next without meaning anything: clock
//! times and dates, durations, temporary paths, process ids. A replay compares each request with
//! the recorded one; the tool results in them are compared with these masked, so a command that
//! prints the date (or a test runner's "Ran 1 test in 0.001s") is not a divergence, while a
//! different exit code, file content or message still is (issue 31).
//!
//! The rules are fixed and conservative: each masks a whole token of a recognisable shape
//! (an ISO-8601 or `date(1)` timestamp, a clock time, a number with a time unit, a path under
//! `/tmp` or `/var/tmp`, a number after `pid`), never a bare number.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// The rules, in order (a timestamp before the clock time inside it), with their stand-ins.
static RULES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    let rule = |pattern: &str, with: &'static str| {
        (Regex::new(pattern).unwrap_or_else(|e| panic!("volatile rule {pattern}: {e}")), with)
    };
    vec![
        // 2026-11-27T03:43:19.123Z, 2026-11-27 03:43:19+01:00
        rule(
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
            "<time>",
        ),
        // Fri Nov 27 03:43:19 UTC 2026 (date(1)'s default)
        rule(
            r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} \d{2}:\d{2}:\d{2}(?: [A-Z]{2,5})? \d{4}\b",
            "<time>",
        ),
        // 03:43:19, 03:43:19.5
        rule(r"\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<time>"),
        // 0.001s, 12 ms, 3.5 seconds
        rule(r"\b\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|sec|secs|seconds?|min)\b", "<duration>"),
        // /tmp/pev-scratch-1234-…/ws/a.txt, /var/tmp/x
        rule(
            r"(^|[^A-Za-z0-9._+\-/])(?:/var)?/tmp/(?:[A-Za-z0-9._+\-/]*[A-Za-z0-9_+\-/])?",
            "${1}<tmp>",
        ),
        // pid 1234, PID=1234, pid: 1234
        rule(r"\b(?i:pid)\s?[=:#]?\s?\d+\b", "pid <n>"),
    ]
});

/// `text` with every volatile token replaced by its stand-in.
pub fn mask(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for (re, with) in RULES.iter() {
        if re.is_match(&out) {
            out = Cow::Owned(re.replace_all(&out, *with).into_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::mask;

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
}
