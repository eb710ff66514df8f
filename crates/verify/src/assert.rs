//! [`check`]: one assertion of CONTRACTS.md §2, evaluated; and [`check_postconditions`].
//!
//! A check never errors. Whatever stops it (a path that leaves the workspace, an invalid regex,
//! a refused host, a missing output) is a failed assertion whose detail says what was seen, so
//! the person or model reading it can act on it. A failing assertion is conclusive; a passing
//! one is one piece of evidence, and its detail says which.
//!
//! The checks themselves live beside this file: files in `assert_file`, step outputs and
//! commands in `assert_proc`, sockets and HTTP in `assert_net`. File checks read from disk and
//! may search up to 64 MiB, so they run on tokio's blocking pool rather than stalling the steps
//! running beside them.

use pev_protocol::assertion::AssertionResult;
use pev_protocol::run::PostconditionResult;
use pev_protocol::{Assertion, Plan};
use regex::{Regex, RegexBuilder};

use crate::text::{CLIP, clip};
use crate::{CheckEnv, assert_file, assert_net, assert_proc};

/// What a check concluded, before it is tagged with the assertion's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub(crate) passed: bool,
    pub(crate) detail: String,
}

impl Verdict {
    pub(crate) fn pass(detail: impl Into<String>) -> Self {
        Self { passed: true, detail: detail.into() }
    }

    pub(crate) fn fail(detail: impl Into<String>) -> Self {
        Self { passed: false, detail: detail.into() }
    }
}

/// Check `assertion` in `env`. Never errors: a failure is `passed: false` with a detail saying
/// what was seen.
pub async fn check(assertion: &Assertion, env: &CheckEnv<'_>) -> AssertionResult {
    let verdict = match assertion {
        Assertion::FileExists { .. }
        | Assertion::FileNotExists { .. }
        | Assertion::FileContains { .. }
        | Assertion::FileNotContains { .. }
        | Assertion::FileSizeGt { .. }
        | Assertion::ContentChanged { .. } => {
            let before = match assertion {
                Assertion::ContentChanged { path, .. } => before_hash(env, path),
                _ => None,
            };
            let workspace = env.ctx.workspace.clone();
            let owned = assertion.clone();
            off_thread(move || assert_file::check(&workspace, &owned, before))
                .await
                .unwrap_or_else(Verdict::fail)
        }
        Assertion::OutputContains { pattern, regex, step, .. } => {
            let step = step.as_ref().map(|s| s.as_str()).or(env.step);
            assert_proc::output_contains(env, step, pattern, *regex)
        }
        Assertion::ExitCodeEq { code, step, .. } => {
            let step = step.as_ref().map(|s| s.as_str()).or(env.step);
            assert_proc::exit_code_eq(env, step, *code)
        }
        Assertion::CommandSucceeds { command, timeout_s, .. } => {
            assert_proc::command_succeeds(env.ctx, command, *timeout_s).await
        }
        Assertion::SocketOpen { host, port, .. } => {
            assert_net::socket_open(env.ctx, host, *port).await
        }
        Assertion::HttpStatus { url, status, .. } => {
            assert_net::http_status(env.ctx, url, *status).await
        }
    };
    AssertionResult {
        kind: assertion.kind().to_owned(),
        passed: verdict.passed,
        detail: verdict.detail,
    }
}

/// Check every postcondition of `plan`. One is satisfied when it has at least one assertion and
/// all of them pass; a bare-string postcondition has none, so tier 1 cannot verify it. The
/// assertions run as a postcondition's (`env.step` is ignored), one after the other.
pub async fn check_postconditions(
    plan: &Plan,
    env: &CheckEnv<'_>,
) -> Vec<(PostconditionResult, Vec<AssertionResult>)> {
    let env = CheckEnv { step: None, ..*env };
    let mut out = Vec::with_capacity(plan.postconditions.len());
    for post in &plan.postconditions {
        let mut results = Vec::with_capacity(post.assertions.len());
        for assertion in &post.assertions {
            results.push(check(assertion, &env).await);
        }
        let satisfied = !results.is_empty() && results.iter().all(|r| r.passed);
        let evidence = postcondition_evidence(&results);
        out.push((
            PostconditionResult {
                description: post.description.clone(),
                satisfied,
                evidence,
                judge: None,
            },
            results,
        ));
    }
    out
}

/// One line saying what the assertions of a postcondition showed: the failures first.
fn postcondition_evidence(results: &[AssertionResult]) -> String {
    if results.is_empty() {
        return "no assertion: needs a judge".to_owned();
    }
    let describe = |r: &AssertionResult| format!("{}: {}", r.kind, r.detail);
    let failed: Vec<String> = results.iter().filter(|r| !r.passed).map(describe).collect();
    if failed.is_empty() {
        return results.iter().map(describe).collect::<Vec<_>>().join("; ");
    }
    format!("{} of {} assertions failed: {}", failed.len(), results.len(), failed.join("; "))
}

/// The hash taken before the step for `path`: by the path as written, else by the same path
/// written another way (`./site/a.css` for `site/a.css`). `None` when no hash was taken.
pub(crate) fn before_hash(env: &CheckEnv<'_>, path: &str) -> Option<Option<String>> {
    if let Some(hash) = env.before.get(path) {
        return Some(hash.clone());
    }
    let workspace = &env.ctx.workspace;
    let want = workspace.resolve(path).ok()?;
    env.before
        .iter()
        .find(|(key, _)| workspace.resolve(key).is_ok_and(|p| p == want))
        .map(|(_, hash)| hash.clone())
}

/// Run blocking work on tokio's blocking pool when there is a runtime, inline otherwise.
async fn off_thread<T, F>(work: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn_blocking(work).await.map_err(|e| format!("the check could not run: {e}"))
        }
        Err(_) => Ok(work()),
    }
}

/// A text pattern: a literal or a compiled regex.
#[derive(Debug)]
pub(crate) enum Matcher {
    Literal(String),
    Regex(Regex),
}

/// Compiled regexes may take this much memory: far more than any sane pattern needs, far less
/// than a hostile one could ask for.
const REGEX_SIZE_LIMIT: usize = 16 * 1024 * 1024;

impl Matcher {
    /// The matcher for `pattern`; an invalid regex is the detail of a failed assertion.
    pub(crate) fn new(pattern: &str, regex: bool) -> Result<Self, Verdict> {
        if !regex {
            return Ok(Self::Literal(pattern.to_owned()));
        }
        RegexBuilder::new(pattern).size_limit(REGEX_SIZE_LIMIT).build().map(Self::Regex).map_err(
            |e| {
                Verdict::fail(format!(
                    "invalid regex '{}': {}",
                    clip(pattern, CLIP),
                    regex_error(&e)
                ))
            },
        )
    }

    /// The byte offset of the first match in `text`.
    pub(crate) fn find(&self, text: &str) -> Option<usize> {
        match self {
            Self::Literal(p) => text.find(p.as_str()),
            Self::Regex(r) => r.find(text).map(|m| m.start()),
        }
    }

    /// `pattern 'x'` or `regex 'x'`, for details.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Literal(p) => format!("pattern '{}'", clip(p, CLIP)),
            Self::Regex(r) => format!("regex '{}'", clip(r.as_str(), CLIP)),
        }
    }
}

/// The one line of a regex error that says what is wrong (its `Display` draws the pattern
/// with a caret over several lines).
fn regex_error(err: &regex::Error) -> String {
    let text = err.to_string();
    let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or(text.as_str());
    clip(line.strip_prefix("error: ").unwrap_or(line), CLIP)
}
