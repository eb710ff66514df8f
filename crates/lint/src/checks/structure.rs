//! The plan's shape beyond what serde checks: `EMPTY_PLAN`, `UNKNOWN_FIELD`, `DUPLICATE_STEP_ID`,
//! `UNKNOWN_DEPENDENCY`, `MAX_STEPS_EXCEEDED` and `INVALID_ASSERTION`.
//!
//! Assertions get two passes. The parser already set aside the ones serde could not read (unknown
//! type or field, wrong type) as [`PlanIssue`]s, reported here as they are. The ones that parsed
//! are checked for meaning: a regex that does not compile, a path that leaves the workspace, a
//! `step` that does not exist or may not have run yet, an exit code asked of a step that has none.
//! An assertion that can never pass, or passes for the wrong reason, is worse than none.

use std::collections::HashMap;

use pev_protocol::reference::push_escaped;
use pev_protocol::{Assertion, Finding, LintCode, PlanIssue};

use crate::Ctx;
use crate::graph::{DepSearch, Resolver, StepGraph};

/// Field names a plan object may carry (canonical names and input aliases).
const PLAN_FIELDS: &[&str] = &[
    "goal",
    "context",
    "meta",
    "steps",
    "postconditions",
    "rollback_strategy",
    "oracle",
    "objective",
    "success_criteria",
];
const STEP_FIELDS: &[&str] = &[
    "id",
    "title",
    "description",
    "tool",
    "parameters",
    "depends_on",
    "on_fail",
    "acceptance_criteria",
    "assertions",
    "expected_outputs",
    "complexity",
    "requires_approval",
    "max_attempts",
    "delegate",
    "may_change_oracle",
    "repeatable",
    "step_id",
    "name",
    "args",
    "dependencies",
    "estimated_complexity",
];
const POSTCONDITION_FIELDS: &[&str] = &["description", "assertions"];

pub(crate) fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let plan = ctx.plan;
    if plan.steps.is_empty() {
        out.push(Finding::plan(
            LintCode::EmptyPlan,
            "/steps",
            "the plan has no steps, so running it can change nothing",
        ));
    }
    let max = ctx.policy.policy.max_steps;
    if plan.steps.len() > max {
        out.push(Finding::plan(
            LintCode::MaxStepsExceeded,
            "/steps",
            format!(
                "the plan has {} steps; the policy allows at most {max} (max_steps)",
                plan.steps.len()
            ),
        ));
    }
    for key in plan.extra.keys() {
        out.push(unknown_field(None, Base::Plan, key, PLAN_FIELDS));
    }

    let issues = IssueIndex::new(&ctx.parsed.issues);
    // Only an assertion that reads another step's output needs the dependency graph.
    let graph = needs_graph(ctx).then(|| StepGraph::with_index(plan, ctx.index()));
    let mut assertions = AssertionChecker::new(ctx, graph.as_ref());
    // With one index entry per step there is no duplicate to look for.
    let unique = ctx.index().len() == plan.steps.len();
    let mut resolver = Resolver::new(plan, ctx.index());
    for (i, step) in plan.steps.iter().enumerate() {
        let at = (i, step.id.as_str());
        let base = Base::Step(i);
        for key in step.extra.keys() {
            out.push(unknown_field(Some(at), base, key, STEP_FIELDS));
        }
        if !unique && let Some(&first) = ctx.index().get(step.id.as_str()).filter(|&&f| f != i) {
            out.push(Finding::step(
                LintCode::DuplicateStepId,
                at,
                format!("{base}/id"),
                format!("step id `{}` is already used by step {first}", step.id),
            ));
        }
        for (k, dep) in step.depends_on.iter().enumerate() {
            if resolver.resolve(dep.as_str(), i).is_none() {
                out.push(Finding::step(
                    LintCode::UnknownDependency,
                    at,
                    format!("{base}/depends_on/{k}"),
                    format!("depends_on names `{dep}`, which is not a step in this plan"),
                ));
            }
        }
        let owner = Owner::Step(i);
        issues.report(owner, out, |p, m| Finding::step(LintCode::InvalidAssertion, at, p, m));
        let positions = issues.valid_positions(owner, step.assertions.len());
        for (a, k) in step.assertions.iter().zip(positions) {
            let site = Site { owner: Some(at), base, k, kind: a.kind() };
            assertions.check(a, &site, out);
        }
    }

    let post_key = issues.post_key.unwrap_or("postconditions");
    for (j, post) in plan.postconditions.iter().enumerate() {
        let base = Base::Post(post_key, j);
        for key in post.extra.keys() {
            out.push(unknown_field(None, base, key, POSTCONDITION_FIELDS));
        }
        let owner = Owner::Post(j);
        issues.report(owner, out, |p, m| Finding::plan(LintCode::InvalidAssertion, p, m));
        let positions = issues.valid_positions(owner, post.assertions.len());
        for (a, k) in post.assertions.iter().zip(positions) {
            let site = Site { owner: None, base, k, kind: a.kind() };
            assertions.check(a, &site, out);
        }
    }
    issues.report_orphans(out);
}

/// The object an assertion list or a field sits in; formatted into a pointer only when there
/// is something to report, so a clean 100,000-step plan builds no pointer strings.
#[derive(Debug, Clone, Copy)]
enum Base<'s> {
    Plan,
    Step(usize),
    Post(&'s str, usize),
}

impl std::fmt::Display for Base<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Plan => Ok(()),
            Self::Step(i) => write!(f, "/steps/{i}"),
            Self::Post(key, j) => write!(f, "/{key}/{j}"),
        }
    }
}

/// `UNKNOWN_FIELD` for `key` in the object at `base`, with a suggestion for a near miss.
fn unknown_field(at: Option<(usize, &str)>, base: Base<'_>, key: &str, known: &[&str]) -> Finding {
    let mut pointer = format!("{base}/");
    push_escaped(&mut pointer, key);
    let mut msg = format!("unknown field `{key}` is kept but has no effect");
    if let Some(near) = nearest(key, known) {
        msg.push_str(&format!("; did you mean `{near}`?"));
    }
    match at {
        Some(at) => Finding::step(LintCode::UnknownField, at, pointer, msg),
        None => Finding::plan(LintCode::UnknownField, pointer, msg),
    }
}

/// The known field within edit distance 2 of `key` (case-insensitive, a transposition counts
/// once), when the key is long enough for that to mean a typo rather than another word.
fn nearest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower: Vec<char> = key.to_lowercase().chars().collect();
    if lower.len() > 40 {
        return None;
    }
    let mut best: Option<(usize, &'k str)> = None;
    for &cand in known {
        let cand_chars: Vec<char> = cand.chars().collect();
        let d = edit_distance(&lower, &cand_chars);
        if d <= 2 && 2 * d < lower.len() && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, cand));
        }
    }
    best.map(|(_, c)| c)
}

/// Optimal-string-alignment distance (Levenshtein plus adjacent transpositions).
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let width = b.len() + 1;
    let mut rows = vec![0usize; (a.len() + 1) * width];
    let at = |i: usize, j: usize| i * width + j;
    for i in 0..=a.len() {
        rows[at(i, 0)] = i;
    }
    for j in 0..=b.len() {
        rows[at(0, j)] = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[at(i - 1, j)] + 1)
                .min(rows[at(i, j - 1)] + 1)
                .min(rows[at(i - 1, j - 1)] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[at(i - 2, j - 2)] + 1);
            }
            rows[at(i, j)] = d;
        }
    }
    rows[at(a.len(), b.len())]
}

/// What owns an assertion list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Owner {
    Step(usize),
    Post(usize),
}

/// The parser's assertion issues, grouped by owner with their original positions, so that the
/// valid assertions (which the parser keeps in order, without the invalid ones) get the pointers
/// of where the user wrote them.
struct IssueIndex<'a> {
    by_owner: HashMap<Owner, Vec<(usize, &'a str, &'a str)>>,
    orphans: Vec<(Option<usize>, &'a str, &'a str)>,
    /// `success_criteria` when the plan's postconditions were written under that alias (known
    /// only when one of them had an invalid assertion).
    post_key: Option<&'a str>,
}

impl<'a> IssueIndex<'a> {
    fn new(issues: &'a [PlanIssue]) -> Self {
        let mut index = Self { by_owner: HashMap::new(), orphans: Vec::new(), post_key: None };
        for issue in issues {
            let PlanIssue::InvalidAssertion { step, pointer, message } = issue;
            let segs: Vec<&str> = pointer.split('/').collect();
            let parsed = match segs.as_slice() {
                ["", key, j, "assertions", k] => match (j.parse::<usize>(), k.parse::<usize>()) {
                    (Ok(j), Ok(k)) if *key == "steps" => Some((Owner::Step(j), k)),
                    (Ok(j), Ok(k)) if *key == "postconditions" || *key == "success_criteria" => {
                        index.post_key = Some(key);
                        Some((Owner::Post(j), k))
                    }
                    _ => None,
                },
                _ => None,
            };
            match parsed {
                Some((owner, k)) => {
                    index.by_owner.entry(owner).or_default().push((k, pointer, message))
                }
                None => index.orphans.push((*step, pointer, message)),
            }
        }
        for list in index.by_owner.values_mut() {
            list.sort_unstable_by_key(|e| e.0);
        }
        index
    }

    fn report(
        &self,
        owner: Owner,
        out: &mut Vec<Finding>,
        make: impl Fn(String, String) -> Finding,
    ) {
        for (_, pointer, message) in self.by_owner.get(&owner).into_iter().flatten() {
            out.push(make((*pointer).to_owned(), format!("invalid assertion: {message}")));
        }
    }

    /// The original positions of the `count` assertions that parsed.
    fn valid_positions(&self, owner: Owner, count: usize) -> impl Iterator<Item = usize> + '_ {
        let invalid = self.by_owner.get(&owner).map_or(&[][..], Vec::as_slice);
        (0..).filter(move |k| invalid.binary_search_by_key(k, |e| e.0).is_err()).take(count)
    }

    fn report_orphans(&self, out: &mut Vec<Finding>) {
        for (step, pointer, message) in &self.orphans {
            let mut f = Finding::plan(
                LintCode::InvalidAssertion,
                (*pointer).to_owned(),
                format!("invalid assertion: {message}"),
            );
            f.step = *step;
            out.push(f);
        }
    }
}

/// The semantic checks on parsed assertions, with what they share across the plan: the regexes
/// already tried (each distinct pattern is compiled once), and the dependency search.
struct AssertionChecker<'c, 'a> {
    ctx: &'c Ctx<'a>,
    regexes: HashMap<&'a str, Option<String>>,
    search: Option<DepSearch<'c>>,
}

impl<'c, 'a> AssertionChecker<'c, 'a> {
    fn new(ctx: &'c Ctx<'a>, graph: Option<&'c StepGraph>) -> Self {
        Self { ctx, regexes: HashMap::new(), search: graph.map(StepGraph::dep_search) }
    }
}

/// Whether some step assertion reads another step, which is when the graph is needed.
fn needs_graph(ctx: &Ctx<'_>) -> bool {
    ctx.plan.steps.iter().enumerate().any(|(i, s)| {
        s.assertions
            .iter()
            .any(|a| a.step().and_then(|id| ctx.index().get(id.as_str())).is_some_and(|&t| t != i))
    })
}

/// Where an assertion sits, to emit findings against it.
struct Site<'s> {
    owner: Option<(usize, &'s str)>,
    base: Base<'s>,
    /// The assertion's position as the plan wrote it.
    k: usize,
    kind: &'static str,
}

impl Site<'_> {
    /// An `INVALID_ASSERTION` at `field` of the assertion (the assertion itself when empty).
    fn emit(&self, out: &mut Vec<Finding>, field: &str, msg: impl std::fmt::Display) {
        let (base, k) = (self.base, self.k);
        let path = if field.is_empty() {
            format!("{base}/assertions/{k}")
        } else {
            format!("{base}/assertions/{k}/{field}")
        };
        let msg = format!("{}: {msg}", self.kind);
        out.push(match self.owner {
            Some(at) => Finding::step(LintCode::InvalidAssertion, at, path, msg),
            None => Finding::plan(LintCode::InvalidAssertion, path, msg),
        });
    }
}

impl<'a> AssertionChecker<'_, 'a> {
    fn check(&mut self, a: &'a Assertion, site: &Site<'_>, out: &mut Vec<Finding>) {
        let owner = site.owner.map(|(i, _)| i);
        if let Some(reason) = a.path().and_then(path_problem) {
            let path = a.path().unwrap_or_default();
            site.emit(
                out,
                "path",
                format_args!("path {path:?} {reason}; assertion paths may not leave the workspace"),
            );
        }
        if let Some((pattern, true)) = a.pattern() {
            let error = self.regexes.entry(pattern).or_insert_with(|| {
                regex::Regex::new(pattern)
                    .err()
                    .map(|e| e.to_string().lines().last().unwrap_or_default().trim().to_owned())
            });
            if let Some(error) = error {
                site.emit(
                    out,
                    "pattern",
                    format_args!("{pattern:?} is not a valid regex: {error}"),
                );
            }
        }
        let target = self.check_step_field(owner, a, site, out);
        check_values(self.ctx, a, target, site, out);
    }

    /// Checks `step` (or its absence) and returns the step whose output or exit code the
    /// assertion reads: the one named, or else the owner.
    fn check_step_field(
        &mut self,
        owner: Option<usize>,
        a: &Assertion,
        site: &Site<'_>,
        out: &mut Vec<Finding>,
    ) -> Option<usize> {
        let Some(id) = a.step() else {
            if owner.is_none()
                && matches!(a, Assertion::OutputContains { .. } | Assertion::ExitCodeEq { .. })
            {
                site.emit(out, "", "a postcondition has no step of its own; name one with `step`");
            }
            return owner;
        };
        let Some(&target) = self.ctx.index().get(id.as_str()) else {
            site.emit(out, "step", format_args!("names step `{id}`, which is not in the plan"));
            return None;
        };
        if let Some((i, me)) = site.owner.filter(|&(i, _)| i != target)
            && !self.depends_on(i, target)
        {
            site.emit(
                out,
                "step",
                format_args!(
                    "reads step `{id}`, which is not among the dependencies of `{me}`, so it may \
                     not have run yet; add `{id}` to depends_on"
                ),
            );
        }
        Some(target)
    }

    /// Whether step `from` transitively depends on `to` (the graph exists whenever an assertion
    /// reads another step, see [`needs_graph`]).
    fn depends_on(&mut self, from: usize, to: usize) -> bool {
        match &mut self.search {
            Some(search) => search.is_transitive_dependency(from, to),
            None => false,
        }
    }
}

/// The checks on an assertion's own values; `target` is the step it reads, if any.
fn check_values(
    ctx: &Ctx<'_>,
    a: &Assertion,
    target: Option<usize>,
    site: &Site<'_>,
    out: &mut Vec<Finding>,
) {
    match a {
        Assertion::ExitCodeEq { step, .. } => {
            let Some(s) = target.and_then(|t| ctx.plan.steps.get(t)) else { return };
            let runs = match s.tool.as_deref() {
                Some("shell.exec") => return,
                Some(tool) => format!("runs `{tool}`"),
                None => "is an instruction (no tool)".to_owned(),
            };
            let field = if step.is_some() { "step" } else { "" };
            site.emit(
                out,
                field,
                format_args!(
                    "step `{}` {runs}, which has no exit code; only shell.exec steps do",
                    s.id
                ),
            );
        }
        Assertion::SocketOpen { host, port, .. } => {
            if host.trim().is_empty() {
                site.emit(out, "host", "host is empty");
            }
            if *port == 0 {
                site.emit(out, "port", "port 0 cannot be connected to; use the port it listens on");
            }
        }
        Assertion::HttpStatus { url, status, .. } => {
            if !(100..=599).contains(status) {
                site.emit(out, "status", format_args!("status {status} is not in 100..=599"));
            }
            if !is_http_url(url) {
                site.emit(
                    out,
                    "url",
                    format_args!("url {url:?} is not an http:// or https:// URL"),
                );
            }
        }
        Assertion::CommandSucceeds { command, timeout_s, .. } => {
            if command.trim().is_empty() {
                site.emit(out, "command", "command is empty");
            }
            if let Some(t) = timeout_s.filter(|t| t.is_nan() || *t <= 0.0) {
                site.emit(out, "timeout_s", format_args!("timeout_s {t} must be greater than 0"));
            }
        }
        _ => {}
    }
}

/// Why an assertion path is not a workspace-relative path, if it is not.
fn path_problem(path: &str) -> Option<&'static str> {
    if path.trim().is_empty() {
        Some("is empty")
    } else if super::paths::is_absolute(path) {
        Some("is absolute")
    } else if path.starts_with('~') {
        Some("starts with `~` (a home directory)")
    } else if super::paths::climbs_out(path) {
        Some("climbs out of the workspace with `..`")
    } else {
        None
    }
}

/// Whether `url` is `http://…` or `https://…` with something after the scheme.
fn is_http_url(url: &str) -> bool {
    let url = url.trim();
    ["http://", "https://"].iter().any(|scheme| {
        url.get(..scheme.len()).is_some_and(|s| s.eq_ignore_ascii_case(scheme))
            && url.len() > scheme.len()
    })
}
