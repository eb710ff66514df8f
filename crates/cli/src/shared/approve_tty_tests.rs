//! Unit tests for the approval dialogue: what is shown, and how answers are read.

use std::io::Cursor;

use pev_engine::{Approval, ApprovalRequest};
use serde_json::json;

use super::{ask, render_request};
use crate::view::style::Style;

fn request() -> ApprovalRequest {
    ApprovalRequest {
        step: "deploy".into(),
        title: "Deploy the site".into(),
        tool: Some("shell.exec".into()),
        arguments: json!({"command": "rsync -a site/ host:/var/www"}),
        reason: "requires_approval".into(),
    }
}

/// Runs the dialogue on `input`; returns the answer and everything shown.
fn dialogue(input: &str) -> (Approval, String) {
    let mut out = Vec::new();
    let answer = ask(&request(), &mut Cursor::new(input.as_bytes()), &mut out, &Style::plain());
    (answer, String::from_utf8(out).unwrap())
}

#[test]
fn yes_and_no_in_any_case() {
    assert_eq!(dialogue("y\n").0, Approval::Yes);
    assert_eq!(dialogue("YES\n").0, Approval::Yes);
    assert_eq!(dialogue("  Yes  \r\n").0, Approval::Yes);
    assert_eq!(dialogue("n\n").0, Approval::No);
    assert_eq!(dialogue("No\n").0, Approval::No);
    // The last line of a file need not end in a newline.
    assert_eq!(dialogue("y").0, Approval::Yes);
}

#[test]
fn an_unclear_answer_is_asked_again() {
    let (answer, shown) = dialogue("maybe\ny\n");
    assert_eq!(answer, Approval::Yes);
    assert_eq!(shown.matches("approve step deploy? [y/n] ").count(), 2);
    assert!(shown.contains("please answer y (yes) or n (no)"));
}

#[test]
fn three_unclear_answers_count_as_no() {
    let (answer, shown) = dialogue("\nok\nsure\ny\n");
    assert_eq!(answer, Approval::No, "the fourth line is never read");
    assert_eq!(shown.matches("[y/n]").count(), 3);
    assert!(shown.ends_with("no clear answer: step deploy is not approved\n"), "{shown}");
}

#[test]
fn end_of_input_defers() {
    let (answer, shown) = dialogue("");
    assert_eq!(answer, Approval::Defer);
    assert!(shown.contains("no answer: the run will wait for `pev approve`"));
    assert_eq!(dialogue("what\n").0, Approval::Defer, "EOF after an unclear answer");
}

#[test]
fn the_request_shows_step_tool_reason_and_arguments() {
    let text = render_request(&request(), &Style::plain());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "approval needed: step deploy (Deploy the site)");
    assert_eq!(lines[1], "  tool: shell.exec");
    assert_eq!(lines[2], "  why:  requires_approval");
    assert_eq!(lines[3], "  arguments:");
    assert_eq!(lines[4], "    {");
    assert_eq!(lines[5], "      \"command\": \"rsync -a site/ host:/var/www\"");
    assert_eq!(lines[6], "    }");
}

#[test]
fn long_arguments_are_cut_and_escapes_neutralised() {
    let mut req = request();
    let many: Vec<u32> = (0..100).collect();
    req.arguments = json!({ "list": many });
    req.title = "evil\x1b]0;title\x07".into();
    let text = render_request(&req, &Style::plain());
    assert!(text.lines().next().unwrap().contains("evil\\e]0;title^G"), "{text}");
    // 40 argument lines shown: `{`, `"list": [`, then 38 numbers; 104 lines in all.
    assert!(text.contains("      \"list\": [\n"));
    assert!(text.contains("        37,\n"));
    assert!(!text.contains("        38,\n"));
    assert!(text.ends_with("    … 64 more lines\n"), "{text}");
    assert!(!text.contains('\x1b') && !text.contains('\x07'));
}
