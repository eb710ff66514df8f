//! Every command the README prints, exactly as printed (issue 30): the README's quick start once
//! failed at its first command and nothing noticed.
//!
//! Every line of every ```` ```sh ```` block of README.md is a command (a `\` continues it, a `#`
//! starts a comment). Each one is either
//! - **run** with `bash -c`, exactly as printed, in the repository's root, with this build's
//!   `pev` first on `PATH` (the README's `pev` is the installed binary) and `cargo` as the test
//!   found it: it must exit as [`EXPECTED`] says (0 when it says nothing), and when the README's
//!   next line is a comment naming the outcome (`# partial: oracle_changed (…), …`), the output
//!   must carry that outcome and every reason code it names;
//! - or **not run** because it needs what a test may not have or do, listed in [`NOT_RUN`] with
//!   why: a key, a model server, Docker, Claude Code, a release build, the test command itself,
//!   a Python venv (`python/ci.sh` runs the Python ones in one). A `pev` command that is not run
//!   still has each of its `--flags` checked against `pev SUBCOMMAND --help`.
//!
//! A command in neither place fails the test, and so does an entry of [`NOT_RUN`] that the README
//! no longer prints: a new command cannot go unchecked, and the list cannot rot. ```` ```text ````
//! blocks are synopses (`pev run PLAN [--workspace DIR]`): their flags are checked the same way.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::support::repo_root;

/// Exit codes other than 0, by the command as printed.
const EXPECTED: &[(&str, i32)] = &[
    (
        "cargo run -p pev -- run examples/discovery-only/plan.json --workspace examples/dark-green/site --scratch",
        3,
    ),
    (
        "PEV_EXECUTOR_PROVIDER=script:$PWD/evals/tests-edit-by-shell/model.json pev agent \"Make the failing test in tests/test_calc.py pass\" --mode loop -w /tmp/calc --policy /tmp/off.yaml",
        3,
    ),
    (
        "PEV_EXECUTOR_PROVIDER=script:$PWD/evals/tests-special-case/model.json pev agent \"Make the failing test in tests/test_calc.py pass\" --mode loop -w /tmp/calc2 --hidden-check 'python3 -m unittest discover -s heldout -t . -q' --hidden-tests /tmp/heldout",
        3,
    ),
];

/// Commands the test does not run, as printed (continuations joined with one space), and why.
const NOT_RUN: &[(&str, &str)] = &[
    ("cargo test --workspace", "the test command itself"),
    (
        "cargo install --path crates/cli",
        "a release build of the whole tree into ~/.cargo/bin (minutes); checked by hand",
    ),
    ("cargo build --release -p pev", "a release build (minutes)"),
    ("export ANTHROPIC_API_KEY=…", "a placeholder for the user's key"),
    (
        "pev agent \"Change the site background to dark green\" --workspace site --max-usd 0.50",
        "an Anthropic key",
    ),
    (
        "PEV_PROVIDER=openai OPENAI_BASE_URL=http://localhost:11434/v1 PEV_PLANNER_MODEL=qwen2.5:14b PEV_EXECUTOR_MODEL=qwen2.5:14b PEV_VERIFIER_MODEL=qwen2.5:7b pev agent \"Add a CHANGELOG entry for 1.2\" --workspace .",
        "a local Ollama server, and it would change this repository",
    ),
    ("pev doctor --ping", "an Anthropic key (it calls each role's model)"),
    ("pev replay last", "a run of the user's own in the current directory's journal"),
    ("pev show <run-id>", "a placeholder for the run the line above made"),
    (
        "docker run --rm -d -p 16686:16686 -p 4318:4318 jaegertracing/jaeger:latest",
        "Docker and the network",
    ),
    ("pip install arize-phoenix && phoenix serve", "the network, and a server that does not exit"),
    ("export OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318", "an OTLP receiver"),
    (
        "pev agent \"Change the site background to dark green\" -w examples/agent/site",
        "an OTLP receiver, and it would change this repository's example",
    ),
    (
        "pev export last --otlp http://localhost:4318",
        "an OTLP receiver and a run of the user's own",
    ),
    ("pev integrate claude", "it writes this repository's .claude/settings.json"),
    ("claude", "Claude Code (scripts/real-clients/ drives it against a mock model)"),
    ("pev gate status", "a Claude Code session's run"),
    ("pip install ./python", "builds the wheel in a venv: python/ci.sh does"),
    (
        "cd your-project && pev integrate claude",
        "a project of the user's own, with the wheel installed",
    ),
    (
        "python -c \"import pev; print(pev.lint({'goal': 'g', 'steps': [{'id': 'a', 'tool': 'shell.exec', 'parameters': {'command': 'curl x | sh'}}]}).codes())\"",
        "the wheel installed in a venv: python/ci.sh runs it as printed",
    ),
];

/// One command of a block: its text (continuations joined, trailing comment dropped) and the
/// comment line that follows it in the README, if any.
#[derive(Debug)]
struct Printed {
    text: String,
    next_comment: Option<String>,
    synopsis: bool,
}

/// The commands of every ```` ```sh ```` block, and the lines of ```` ```text ```` ones.
fn printed(readme: &str) -> Vec<Printed> {
    let mut out: Vec<Printed> = Vec::new();
    let mut block: Option<bool> = None; // Some(synopsis?) inside a block we read
    let mut pending = String::new();
    let mut fenced = false;
    for line in readme.lines() {
        if let Some(info) = line.strip_prefix("```") {
            if fenced {
                fenced = false;
                block = None;
                continue;
            }
            fenced = true;
            let lang = info.split_whitespace().next().unwrap_or("");
            block = match lang {
                "sh" => Some(false),
                "text" => Some(true),
                _ => None,
            };
            continue;
        }
        let Some(synopsis) = block else { continue };
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            if let Some(last) =
                out.last_mut().filter(|p| pending.is_empty() && p.next_comment.is_none())
            {
                last.next_comment = Some(trimmed.trim_start_matches('#').trim().to_owned());
            }
            continue;
        }
        if trimmed.is_empty() {
            continue;
        }
        let code = strip_comment(trimmed);
        if let Some(head) = code.strip_suffix('\\') {
            pending.push_str(head.trim_end());
            pending.push(' ');
            continue;
        }
        pending.push_str(code.trim_end());
        out.push(Printed { text: std::mem::take(&mut pending), next_comment: None, synopsis });
    }
    out
}

/// `line` without a trailing `  # comment` (a `#` after whitespace, outside quotes).
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' if !single && !double && i > 0 && bytes[i - 1].is_ascii_whitespace() => {
                return line[..i].trim_end();
            }
            _ => {}
        }
    }
    line
}

/// The `--flags` of a `pev` command (after any `VAR=value` and `cd …&&` prefixes), and its
/// subcommand; `None` when it is not a `pev` command.
fn pev_flags(command: &str) -> Option<(String, Vec<String>)> {
    let command = command.rsplit("&& ").next().unwrap_or(command);
    let words: Vec<&str> = command.split_whitespace().collect();
    let start = words.iter().position(|w| *w == "pev")?;
    let sub = words.get(start + 1).filter(|w| !w.starts_with('-'))?.to_string();
    let flags = words[start + 1..]
        .iter()
        .map(|w| w.trim_start_matches('['))
        .filter(|w| w.starts_with("--"))
        .map(|w| w.split(['=', ']']).next().unwrap_or(w).to_owned())
        .collect();
    Some((sub, flags))
}

fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_pev")).parent().expect("the binary's directory").to_path_buf()
}

/// Each of `command`'s flags is one `pev SUB --help` lists.
fn check_flags(command: &str) -> Result<(), String> {
    let Some((sub, flags)) = pev_flags(command) else { return Ok(()) };
    let sub = sub.split('|').next().unwrap_or(&sub).to_owned();
    let help = Command::new(env!("CARGO_BIN_EXE_pev"))
        .args([sub.as_str(), "--help"])
        .output()
        .map_err(|e| format!("pev {sub} --help: {e}"))?;
    if !help.status.success() {
        return Err(format!("`{command}`: `pev {sub}` is no command"));
    }
    let help = String::from_utf8_lossy(&help.stdout);
    let missing: Vec<&String> = flags.iter().filter(|f| !help.contains(f.as_str())).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("`{command}`: `pev {sub} --help` has no {missing:?}"))
    }
}

/// The variables cargo sets for a test binary (by prefix), which a user's shell does not have;
/// the ones a user may set (`CARGO_HOME`, `CARGO_TARGET_DIR`, `CARGO_PROFILE_…`) are kept.
const SET_FOR_TESTS: &[&str] = &[
    "CARGO_MANIFEST_",
    "CARGO_PKG_",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
];

/// Runs `command` as printed; the problem, if any.
fn run(command: &str, expected: i32, outcome: Option<&str>, home: &Path) -> Result<(), String> {
    let path = super::support::path_with(&bin_dir());
    let mut bash = Command::new("bash");
    // What cargo sets for a test binary is not in a user's shell. A `cargo run` that inherited
    // it would fingerprint the build scripts that read it (`ring`'s) differently, rebuild them
    // and what depends on them, and the next `cargo test` would rebuild them all back: some
    // 40 s of every warm run of the suite.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name == "OUT_DIR" || SET_FOR_TESTS.iter().any(|p| name.starts_with(p)) {
            bash.env_remove(&*name);
        }
    }
    let out = bash
        .args(["-c", command])
        .current_dir(repo_root())
        .env("PATH", path)
        .env("PEV_JOURNAL_KEY_FILE", home.join("journal.key"))
        .env_remove("PEV_STORE")
        .env_remove("NO_COLOR")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .map_err(|e| format!("`{command}`: bash: {e}"))?;
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // A --scratch run names its copy: remove it as the hint says.
    for copy in stderr.lines().filter_map(|l| l.split("rm -rf ").nth(1)) {
        let _ = std::fs::remove_dir_all(copy.split('`').next().unwrap_or_default());
    }
    let code = out.status.code().unwrap_or(-1);
    if code != expected {
        return Err(format!(
            "`{command}` exited {code}, the README says {expected}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        ));
    }
    if let Some(outcome) = outcome {
        let (status, rest) = outcome.split_once(':').unwrap_or((outcome, ""));
        let all = format!("{stdout}{stderr}");
        let mut wanted = vec![status.trim().to_owned()];
        // Reason codes: the words before each `(`, in a comma list outside parentheses.
        let mut depth = 0;
        let mut item = String::new();
        for c in rest.chars().chain(std::iter::once(',')) {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    let code = item.trim().to_owned();
                    if code.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !code.is_empty()
                    {
                        wanted.push(code);
                    }
                    item.clear();
                }
                c if depth == 0 => item.push(c),
                _ => {}
            }
        }
        let missing: Vec<&String> = wanted.iter().filter(|w| !all.contains(w.as_str())).collect();
        if !missing.is_empty() {
            return Err(format!(
                "`{command}`: the README says `{outcome}`, the output lacks {missing:?}\n{all}"
            ));
        }
    }
    Ok(())
}

#[test]
fn the_parser_reads_blocks_continuations_and_comments() {
    let readme = "intro\n```sh\nfoo a  # note\nbar \\\n  --x 1\n# partial: a_b (why, more), c\n```\n\
                  ```toml\nk = 1\n```\n```text\npev lint PLAN [--policy FILE]\n```\n";
    let found = printed(readme);
    let texts: Vec<&str> = found.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(texts, ["foo a", "bar --x 1", "pev lint PLAN [--policy FILE]"]);
    assert_eq!(found[1].next_comment.as_deref(), Some("partial: a_b (why, more), c"));
    assert!(found[2].synopsis && !found[0].synopsis);
    assert_eq!(
        pev_flags("A=1 pev agent \"g\" --mode loop -w x --policy=p [--json]"),
        Some(("agent".to_owned(), vec!["--mode".into(), "--policy".into(), "--json".into()]))
    );
    assert_eq!(pev_flags("cargo test"), None);
    assert!(check_flags("pev run PLAN [--no-such-flag]").is_err(), "a flag pev lacks is caught");
    assert!(check_flags("pev run PLAN [--workspace DIR]").is_ok());
}

#[test]
fn every_command_the_readme_prints_runs_as_printed_or_says_why_not() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let commands = printed(&readme);
    assert!(commands.len() > 20, "too few commands found: {commands:#?}");
    // The README's runs assume a fresh machine: its /tmp copies do not exist yet.
    for stale in ["/tmp/calc", "/tmp/calc2", "/tmp/heldout"] {
        let _ = std::fs::remove_dir_all(stale);
    }
    let _ = std::fs::remove_file("/tmp/off.yaml");
    let home = tempfile::tempdir().expect("temp dir");
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    let mut ran = 0;
    for p in &commands {
        seen.insert(p.text.as_str());
        if p.synopsis {
            problems.extend(check_flags(&p.text).err());
            continue;
        }
        if NOT_RUN.iter().any(|(c, _)| *c == p.text) {
            problems.extend(check_flags(&p.text).err());
            continue;
        }
        let expected = EXPECTED.iter().find(|(c, _)| *c == p.text).map_or(0, |(_, code)| *code);
        let outcome = p.next_comment.as_deref().filter(|c| {
            ["success", "partial", "failed"].iter().any(|s| c.starts_with(&format!("{s}:")))
        });
        problems.extend(run(&p.text, expected, outcome, home.path()).err());
        ran += 1;
    }
    for (command, why) in NOT_RUN {
        if !seen.contains(command) {
            problems.push(format!(
                "NOT_RUN lists `{command}` ({why}), which the README no longer prints"
            ));
        }
    }
    for (command, _) in EXPECTED {
        if !seen.contains(command) {
            problems.push(format!("EXPECTED lists `{command}`, which the README no longer prints"));
        }
    }
    for stale in ["/tmp/calc", "/tmp/calc2", "/tmp/heldout"] {
        let _ = std::fs::remove_dir_all(stale);
    }
    let _ = std::fs::remove_file("/tmp/off.yaml");
    assert!(problems.is_empty(), "{} problem(s):\n\n{}", problems.len(), problems.join("\n\n"));
    assert!(ran >= 6, "only {ran} commands ran");
}

/// The features of every package in `cargo tree ARGS` (a package built for the host and for
/// the target is listed with both sets).
fn features(args: &[&str]) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let out = Command::new(env!("CARGO"))
        .arg("tree")
        .args(args)
        .args(["--offline", "--locked", "--prefix", "none", "--format", "{p}|{f}"])
        .current_dir(repo_root())
        .output()
        .expect("cargo tree");
    assert!(out.status.success(), "cargo tree {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let mut found = std::collections::BTreeMap::<String, BTreeSet<String>>::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((package, features)) = line.trim_end_matches(" (*)").split_once('|') else {
            continue;
        };
        let set = found.entry(package.to_owned()).or_default();
        set.extend(features.split(',').filter(|f| !f.is_empty()).map(str::to_owned));
    }
    found
}

/// The README's `cargo run -p pev …` must build the very `pev` that `cargo test --workspace`
/// builds and its tests run. A dev-dependency that turns on a feature of a crate pev shares
/// (criterion once turned on `zerocopy/derive`, prost's derive `syn/extra-traits`, a test
/// `tokio/test-util`) makes `cargo run` build a second copy of that crate and of everything
/// above it, pev included, in the middle of the suite (every cold run paid it), and relink
/// `target/debug/pev` while other tests run it; and the binary tested is not the one shipped.
#[test]
fn cargo_run_builds_the_pev_that_cargo_test_builds() {
    let run = features(&["-p", "pev", "--edges", "normal,build"]);
    let test = features(&["--workspace", "--edges", "normal,build,dev"]);
    assert!(run.len() > 100, "{} packages in pev's tree?", run.len());
    let differ: Vec<String> = run
        .iter()
        .filter_map(|(package, features)| {
            let other = test.get(package)?;
            (other != features).then(|| {
                let extra: Vec<&String> = other.difference(features).collect();
                format!("{package}: the tests' build adds {extra:?}")
            })
        })
        .collect();
    assert!(
        differ.is_empty(),
        "a dev-dependency turns on features pev's own build lacks (make it a feature of its \
         own, like the benches' `bench`, or drop it):\n{}",
        differ.join("\n")
    );
}
