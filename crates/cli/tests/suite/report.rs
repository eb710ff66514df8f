//! `pev report`: a run written as one HTML file, through the binary, for a plan run and for a
//! run whose step wrote `<script>` into a file and its output.

use super::support::{dir_with, pev_in};

#[test]
fn a_run_becomes_one_self_contained_file_with_everything_escaped() {
    let plan = r#"{"goal": "Write a page", "steps": [
        {"id": "page", "tool": "file.write", "parameters": {"path": "x.html", "content": "<script>document.title='pwned'</script>\n"},
         "assertions": [{"type": "file_contains", "path": "x.html", "pattern": "script"}]},
        {"id": "echo", "tool": "shell.exec", "parameters": {"command": "cat x.html"}, "depends_on": ["page"]}
    ]}"#;
    let ws = dir_with(&[("plan.json", plan), ("policy.yaml", "sandbox: off\n")]);
    let run = pev_in(ws.path(), &["run", "plan.json", "--policy", "policy.yaml"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("pev report ") || run.stdout.contains("pev report "),
        "the next hint names it"
    );
    let out = pev_in(ws.path(), &["report", "last", "-o", "r.html"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("wrote r.html ("), "{}", out.stdout);
    let html = std::fs::read_to_string(ws.path().join("r.html")).unwrap();
    assert!(html.starts_with("<!doctype html>"));
    assert!(!html.to_lowercase().contains("<script"), "no script, escaped or own");
    assert!(html.contains("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;"));
    assert!(html.contains("class=\"verdict s-success\""));
    assert_eq!(html.matches("<g class=\"node n-done\">").count(), 2);
    assert_eq!(html.matches("class=\"edge\"").count(), 1);
    assert!(html.contains("<span class=\"add\">+&lt;script&gt;"), "the diff");
    assert!(!html.contains("http://") && !html.contains("https://"), "nothing remote");
    // To stdout, the same document.
    let piped = pev_in(ws.path(), &["report", "last", "-o", "-"]);
    assert!(piped.stdout.starts_with("<!doctype html>"));
    let missing = pev_in(ws.path(), &["report", "nope"]);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
}
