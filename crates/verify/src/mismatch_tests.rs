//! The plan-execution mismatch rule as a table: a named file changed passes; another file
//! changed (or nothing) is a mismatch naming both; read-only steps, steps that name no file,
//! and paths that leave the workspace are never held to it.

use serde_json::{Value, json};

use super::*;
use crate::test_support::Fixture;

/// A workspace with a small site in it.
fn site() -> Fixture {
    let f = Fixture::new();
    f.write("site/style.css", "body { background: white; }\n");
    f.write("site/theme.css", ":root { --accent: blue; }\n");
    f.write("site/index.html", "<html></html>\n");
    f.write("README.md", "# Site\n");
    f.write("config.yaml", "port: 80\n");
    f.write("Makefile", "all:\n");
    f
}

struct Row {
    what: &'static str,
    title: Option<&'static str>,
    description: Option<&'static str>,
    expected_outputs: &'static [&'static str],
    parameters: Value,
    changed: &'static [&'static str],
    /// `None`: the rule passes the step; `Some((expected, changed))`: a mismatch naming these.
    verdict: Option<(&'static [&'static str], &'static [&'static str])>,
}

impl Row {
    fn new(
        what: &'static str,
        description: &'static str,
        changed: &'static [&'static str],
    ) -> Self {
        Self {
            what,
            title: None,
            description: Some(description),
            expected_outputs: &[],
            parameters: json!({}),
            changed,
            verdict: None,
        }
    }

    fn mismatch(
        mut self,
        expected: &'static [&'static str],
        changed: &'static [&'static str],
    ) -> Self {
        self.verdict = Some((expected, changed));
        self
    }
}

fn rows() -> Vec<Row> {
    vec![
        // The named file changed: done, whatever else changed too.
        Row::new(
            "named file changed",
            "Change the background in site/style.css",
            &["site/style.css"],
        ),
        Row::new(
            "named file changed with others",
            "Change the background in site/style.css",
            &["site/theme.css", "./site/style.css"],
        ),
        // Another file changed: the style.css / theme.css case.
        Row::new(
            "other file changed",
            "Change the background in site/style.css to dark green",
            &["site/theme.css"],
        )
        .mismatch(&["site/style.css"], &["site/theme.css"]),
        Row::new(
            "nothing changed",
            "Update `site/style.css`: make the background dark green.",
            &[],
        )
        .mismatch(&["site/style.css"], &[]),
        // Read-only steps are never held to it.
        Row::new("read-only step", "Read site/style.css and report the background colour", &[]),
        Row::new("inspect step", "Inspect site/style.css", &["site/theme.css"]),
        Row::new("check whether", "Check whether site/style.css is updated", &[]),
        // No file named: nothing to hold the step to.
        Row::new("no named files", "Make the page background dark green", &["site/theme.css"]),
        Row::new("a directory is not a file", "Add a stylesheet to site/", &["site/new.css"]),
        Row::new("a colour is not a file", "Set the background to #013220", &["site/theme.css"]),
        Row::new("a library is not a file", "Upgrade Node.js in the build", &["Makefile"]),
        Row::new(
            "a dotted identifier is not a file",
            "Rename user.name to user.full_name",
            &["src/models.py"],
        ),
        Row::new("a domain is not a file", "Point the API at api.example.com", &["config.yaml"]),
        Row::new("a version is not a file", "Bump the version to 1.2.0", &["config.yaml"]),
        // Paths that leave the workspace are ignored, whether or not they exist.
        Row::new("parent path", "Change ../secret.txt", &["site/theme.css"]),
        Row::new("absolute path", "Change /etc/passwd.txt", &["site/theme.css"]),
        Row::new("url", "Update https://example.com/style.css", &["site/theme.css"]),
        // A name without a directory matches the file anywhere; a missing new file counts.
        Row::new("bare name", "Change the background in style.css", &["site/style.css"]),
        // Issue 33: the tail matches at a `/` only: `mystyle.css` is another file.
        Row::new(
            "a name's tail is not the name",
            "Change the background in style.css",
            &["site/mystyle.css"],
        )
        .mismatch(&["style.css"], &["site/mystyle.css"]),
        Row::new(
            "a directory's tail is not the directory",
            "Update css/style.css",
            &["site/scss/style.css"],
        )
        .mismatch(&["css/style.css"], &["site/scss/style.css"]),
        Row::new(
            "new file created",
            "Create site/about.html with an About page",
            &["site/about.html"],
        ),
        Row::new(
            "new file elsewhere",
            "Create site/about.html with an About page",
            &["site/contact.html"],
        )
        .mismatch(&["site/about.html"], &["site/contact.html"]),
        // Sources are not targets; changing one still counts.
        Row::new("source file", "Update the footer based on docs/spec.md", &["site/index.html"]),
        Row::new(
            "copy from a source",
            "Copy the header from site/index.html into site/about.html",
            &["site/about.html"],
        ),
        // A changed file the text names by its stem, of another kind than the named files.
        Row::new("readme by stem", "Update the README to mention config.yaml", &["README.md"]),
        Row::new(
            "same kind by stem is still a mismatch",
            "Change the theme colour in site/style.css",
            &["site/theme.css"],
        )
        .mismatch(&["site/style.css"], &["site/theme.css"]),
        // An existing file without an extension counts.
        Row::new("makefile", "Add a test target to Makefile", &["Makefile"]),
        Row::new("makefile not changed", "Add a test target to Makefile", &["site/index.html"])
            .mismatch(&["Makefile"], &["site/index.html"]),
        // A path with a line number, in backticks, at the end of a sentence.
        Row::new("line suffix", "Fix the typo at `site/index.html:3`.", &["site/index.html"]),
        // Any of several named files is enough.
        Row::new("one of two", "Update site/style.css and site/index.html", &["site/index.html"]),
        Row {
            title: Some("Patch the stylesheet"),
            description: None,
            expected_outputs: &["site/style.css"],
            ..Row::new("expected output", "", &["site/theme.css"])
        }
        .mismatch(&["site/style.css"], &["site/theme.css"]),
        Row {
            title: Some("Update the report"),
            description: None,
            expected_outputs: &["out/report"],
            ..Row::new("expected output without extension", "", &["out/report"])
        },
        Row {
            title: Some("Update the report"),
            description: None,
            expected_outputs: &["A summary of the changes"],
            ..Row::new("expected output in prose", "", &["notes.txt"])
        },
        Row {
            title: Some("Patch the stylesheet"),
            description: None,
            expected_outputs: &["../outside.css", "/abs/x.css"],
            ..Row::new("expected outputs outside the workspace", "", &["site/theme.css"])
        },
        Row {
            title: Some("Apply the edit"),
            description: None,
            parameters: json!({"path": "site/style.css", "content": "see theme.css for details"}),
            ..Row::new("parameter path", "", &["site/theme.css"])
        }
        .mismatch(&["site/style.css"], &["site/theme.css"]),
        Row {
            title: Some("Read the settings"),
            description: None,
            parameters: json!({"path": "site/style.css"}),
            ..Row::new("parameter path on a read-only step", "", &[])
        },
    ]
}

#[test]
fn the_mismatch_rule_as_a_table() {
    let f = site();
    let ws = &f.ctx.workspace;
    let mut failures = Vec::new();
    for row in rows() {
        let outputs: Vec<String> = row.expected_outputs.iter().map(|s| (*s).to_owned()).collect();
        let params = Params::from_map(&row.parameters.as_object().cloned().unwrap_or_default());
        let intent = StepIntent {
            title: row.title,
            description: row.description.filter(|d| !d.is_empty()),
            expected_outputs: &outputs,
            parameters: Some(&params),
        };
        let named = named_files(&intent, ws);
        let changed: Vec<String> = row.changed.iter().map(|s| (*s).to_owned()).collect();
        let got = mismatch(&intent, &named, &changed, ws);
        let want = row.verdict.map(|(e, c)| Mismatch {
            expected: e.iter().map(|s| (*s).to_owned()).collect(),
            changed: c.iter().map(|s| (*s).to_owned()).collect(),
        });
        if got != want {
            failures.push(format!("{}: named {named:?}, got {got:?}, want {want:?}", row.what));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn the_message_names_the_files_expected_and_changed() {
    let m = Mismatch {
        expected: vec!["site/style.css".into()],
        changed: vec!["site/theme.css".into()],
    };
    assert_eq!(
        m.message(),
        "plan-execution mismatch: the step was to change site/style.css, but it changed \
         site/theme.css instead"
    );
    let none = Mismatch { expected: vec!["a.md".into(), "b.md".into()], changed: vec![] };
    assert_eq!(
        none.message(),
        "plan-execution mismatch: the step was to change a.md and b.md, but it changed no file"
    );
    let many: Vec<String> = (1..=7).map(|i| format!("f{i}.md")).collect();
    let long = Mismatch { expected: many.clone(), changed: many };
    assert!(
        long.message().contains("f1.md, f2.md, f3.md, f4.md, f5.md and 2 more"),
        "{}",
        long.message()
    );
}

#[test]
fn a_step_known_only_by_its_title_is_judged_by_it() {
    let f = site();
    let ws = &f.ctx.workspace;
    let patch = StepIntent::titled("Patch site/style.css");
    let named = named_files(&patch, ws);
    assert_eq!(named, ["site/style.css"]);
    assert!(mismatch(&patch, &named, &["site/theme.css".into()], ws).is_some());
    assert!(mismatch(&patch, &named, &["site/style.css".into()], ws).is_none());
    let read = StepIntent::titled("Read site/style.css");
    assert!(named_files(&read, ws).is_empty());
}

#[test]
fn a_step_of_a_plan_is_read_with_all_its_fields() {
    let f = site();
    let step: Step = serde_json::from_value(json!({
        "id": "patch",
        "title": "Patch the stylesheet",
        "description": "Make the background dark green.",
        "expected_outputs": ["site/style.css"],
        "parameters": {"also": ["site/index.html"]},
    }))
    .unwrap();
    let named = named_files(&StepIntent::of(&step), &f.ctx.workspace);
    assert_eq!(named, ["site/style.css", "site/index.html"]);
}

/// What counts as a named file, case by case (the parts of the rule the table above reaches
/// only through a verdict): expected outputs as paths or as prose, line suffixes and URLs,
/// option-like and assignment-like tokens, nested parameters.
#[test]
fn named_files_reads_paths_from_every_field_and_nothing_else() {
    let f = site();
    let ws = &f.ctx.workspace;
    type Case =
        (&'static str, &'static str, &'static [&'static str], Value, &'static [&'static str]);
    let cases: &[Case] = &[
        // expected_outputs: one path each, existing or not, with a `/` or an extension.
        (
            "an output path with a slash",
            "Update the bundle",
            &["dist/app"],
            json!({}),
            &["dist/app"],
        ),
        (
            "an output with an extension",
            "Update the report",
            &["report.txt"],
            json!({}),
            &["report.txt"],
        ),
        ("an output that is a bare word", "Update the build", &["build"], json!({}), &[]),
        ("an existing directory is no file", "Update the site", &["site"], json!({}), &[]),
        // An expected output written as prose is read word by word.
        (
            "an output in prose",
            "Update the page styles",
            &["the updated site/style.css file"],
            json!({}),
            &["site/style.css"],
        ),
        (
            "an output naming a source",
            "Update the page styles",
            &["styles based on site/theme.css"],
            json!({}),
            &[],
        ),
        // A line suffix is not part of the name; a URL is not a path.
        ("a line suffix", "Fix the rule at site/style.css:12", &[], json!({}), &["site/style.css"]),
        (
            "a URL",
            "Change site/style.css to match http://example.com/a.css",
            &[],
            json!({}),
            &["site/style.css"],
        ),
        // Tokens that are options, assignments or pipes are not file names.
        (
            "option-like tokens",
            "Update site/style.css with --out=x.css and -o y.css",
            &[],
            json!({}),
            &["site/style.css", "y.css"],
        ),
        (
            "assignment-like tokens",
            "Set out=x.css and fix site/style.css",
            &[],
            json!({}),
            &["site/style.css"],
        ),
        // A scheme-like suffix is not cut off a name (`Makefile://x` is no Makefile).
        ("a scheme after a name", "Update Makefile://x", &[], json!({}), &[]),
        // An output with any extension is a path, known or not.
        (
            "an output with an unknown extension",
            "Update the data",
            &["data.xyz"],
            json!({}),
            &["data.xyz"],
        ),
        // A path with `..` in it is not held to the rule, even one that stays inside.
        ("a dot-dot path", "Update site/../site/style.css", &[], json!({}), &[]),
        // Parameters are read at any depth.
        (
            "nested parameters",
            "Update the page with the edits",
            &[],
            json!({"edits": [{"target": {"path": "site/index.html"}}]}),
            &["site/index.html"],
        ),
    ];
    let mut failures = Vec::new();
    for (what, description, outputs, parameters, want) in cases {
        let outputs: Vec<String> = outputs.iter().map(|s| (*s).to_owned()).collect();
        let params = Params::from_map(&parameters.as_object().cloned().unwrap_or_default());
        let intent = StepIntent {
            title: None,
            description: Some(description),
            expected_outputs: &outputs,
            parameters: Some(&params),
        };
        let got = named_files(&intent, ws);
        if got != *want {
            failures.push(format!("{what}: got {got:?}, want {want:?}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
