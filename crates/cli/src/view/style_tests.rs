//! Unit tests for the colour decision and the text helpers of the run views.

use std::ffi::OsStr;

use super::{ColorChoice, ColorEnv, Style, clean, duration, truncate};

fn env(no_color: Option<&str>, term: Option<&str>, tty: bool) -> ColorEnv {
    ColorEnv::from_vars(no_color.map(OsStr::new), term.map(OsStr::new), tty)
}

#[test]
fn auto_colours_only_a_capable_terminal() {
    assert!(Style::decide(ColorChoice::Auto, env(None, Some("xterm"), true)).color);
    assert!(!Style::decide(ColorChoice::Auto, env(None, Some("xterm"), false)).color);
    assert!(!Style::decide(ColorChoice::Auto, env(Some("1"), Some("xterm"), true)).color);
    assert!(!Style::decide(ColorChoice::Auto, env(None, Some("dumb"), true)).color);
    // An empty NO_COLOR does not count (no-color.org).
    assert!(Style::decide(ColorChoice::Auto, env(Some(""), None, true)).color);
}

#[test]
fn always_and_never_win_over_the_environment() {
    assert!(Style::decide(ColorChoice::Always, env(Some("1"), Some("dumb"), false)).color);
    assert!(!Style::decide(ColorChoice::Never, env(None, Some("xterm"), true)).color);
}

#[test]
fn styles_are_plain_text_without_colour() {
    let off = Style::plain();
    assert_eq!(off.green("ok"), "ok");
    assert_eq!(off.status("failed"), "failed");
    let on = Style { color: true };
    assert_eq!(on.red("no"), "\x1b[31mno\x1b[0m");
    assert_eq!(on.dim("x"), "\x1b[2mx\x1b[0m");
    assert!(on.status("success").contains("\x1b[32m"));
}

#[test]
fn clean_neutralises_control_characters() {
    assert!(matches!(clean("plain text\twith tab"), std::borrow::Cow::Borrowed(_)));
    assert_eq!(clean("a\x1b[2Jb"), "a\\e[2Jb");
    assert_eq!(clean("x\ry"), "x^My");
    assert_eq!(clean("one\ntwo"), "one⏎two");
    assert_eq!(clean("\u{202e}abc"), "\\u{202e}abc");
    assert_eq!(clean("\u{7f}"), "\\u{7f}");
}

#[test]
fn truncate_is_char_safe() {
    assert_eq!(truncate("héllo", 5), "héllo");
    assert_eq!(truncate("héllo wörld", 5), "héll…");
    assert_eq!(truncate("abc", 0), "…");
}

#[test]
fn durations_read_naturally() {
    assert_eq!(duration(12), "12ms");
    assert_eq!(duration(1_234), "1.2s");
    assert_eq!(duration(123_000), "2m03s");
    assert_eq!(duration(3_720_000), "1h02m");
}
