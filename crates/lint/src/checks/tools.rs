//! The tool policy: `TOOL_DENY`, `UNKNOWN_TOOL`, `BOUND_VIOLATION`, `APPROVAL_REQUIRED` and
//! `UNVERIFIED_EFFECT`.
//!
//! A plan uses few distinct tools but may have 100,000 steps, so everything that depends only on
//! the tool name (allow/deny verdict, approval glob, effect class) is worked out once per name,
//! and each policy bound key is resolved to its tool once per lint. Tool names contain dots, so
//! the key `payments.transfer.amount` belongs to the longest tool name used in the plan that it
//! starts with (`payments.transfer`), and the rest is a dotted path into the parameters.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use pev_protocol::ValueRef;
use pev_protocol::reference::push_escaped;
use pev_protocol::tool::{Effect, builtin_effect};
use pev_protocol::{Finding, LintCode, Step};

use crate::Ctx;
use crate::policy::Bound;

/// Verbs that mark a tool outside the built-in table as changing something, when its last
/// dotted segment starts with one (`priceAPI.bulkUpdate`, `payments.transfer`).
const MUTATING_VERBS: &[&str] = &[
    "write", "update", "bulk", "delete", "remove", "create", "insert", "transfer", "send", "exec",
    "run", "patch", "put", "post", "set", "drop", "pay", "charge", "refund",
];

/// The check as one step at a time, for the pass that runs several checks over each step.
pub(crate) struct Pass<'p> {
    /// What each distinct tool name is, by its number in [`Ctx::tools`].
    facts: Vec<ToolFacts<'p>>,
}

impl<'p> Pass<'p> {
    pub(crate) fn new(ctx: &Ctx<'p>) -> Self {
        let mut bounds = resolve_bounds(ctx);
        let facts = ctx
            .tools
            .classify(|tool| ToolFacts::of(ctx, tool, bounds.remove(tool).unwrap_or_default()));
        Self { facts }
    }

    pub(crate) fn step(&self, ctx: &Ctx<'_>, i: usize, step: &Step, out: &mut Vec<Finding>) {
        let at = (i, step.id.as_str());
        let (Some(tool), Some(f)) = (step.tool.as_deref(), ctx.tools.lookup(&self.facts, i)) else {
            unverified(step, at, None, out);
            return;
        };
        if let Some(reason) = &f.denied {
            out.push(Finding::step(LintCode::ToolDeny, at, format!("/steps/{i}/tool"), reason));
        } else if f.unknown {
            out.push(Finding::step(
                LintCode::UnknownTool,
                at,
                format!("/steps/{i}/tool"),
                format!(
                    "tool `{tool}` is not built in and the policy does not name it, so nothing \
                     is known of its effects"
                ),
            ));
        }
        for rule in &f.bounds {
            check_bound(step, at, tool, rule, out);
        }
        if step.requires_approval {
            out.push(Finding::step(
                LintCode::ApprovalRequired,
                at,
                format!("/steps/{i}/requires_approval"),
                format!("step `{}` requires approval (requires_approval: true)", step.id),
            ));
        } else if let Some(glob) = f.approve {
            out.push(Finding::step(
                LintCode::ApprovalRequired,
                at,
                format!("/steps/{i}/tool"),
                format!("tool `{tool}` matches approve_tools `{glob}`: a person must approve it"),
            ));
        }
        unverified(step, at, Some(f.effect), out);
    }
}

/// What a step's tool does, as far as lint can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ToolEffect {
    /// A built-in tool's effect class (for `http.request` the method decides, per step).
    Builtin(Effect),
    /// Not built in; its last segment starts with this mutating verb.
    Mutating(&'static str),
    /// Not built in, and nothing in its name says it changes anything.
    Opaque,
}

/// Everything that depends only on a tool's name.
struct ToolFacts<'p> {
    denied: Option<String>,
    unknown: bool,
    approve: Option<&'p str>,
    effect: ToolEffect,
    /// The policy bounds whose key resolved to this tool.
    bounds: Vec<BoundRule<'p>>,
}

impl<'p> ToolFacts<'p> {
    fn of(ctx: &Ctx<'p>, tool: &str, bounds: Vec<BoundRule<'p>>) -> Self {
        let policy = ctx.policy;
        let denied = if let Some(g) = policy.deny_tools.iter().find(|g| g.matches(tool)) {
            Some(format!("tool `{tool}` is denied by the policy (deny_tools `{}`)", g.as_str()))
        } else if !policy.tool_allowed(tool) {
            Some(format!("tool `{tool}` is not in the policy's allow_tools"))
        } else {
            None
        };
        let builtin = builtin_effect(tool);
        let unknown = denied.is_none() && builtin.is_none() && !policy.names_tool(tool);
        let approve = policy.approve_tools.iter().find(|g| g.matches(tool)).map(|g| g.as_str());
        let effect = match builtin {
            Some(e) => ToolEffect::Builtin(e),
            None => mutating_verb(tool).map_or(ToolEffect::Opaque, ToolEffect::Mutating),
        };
        Self { denied, unknown, approve, effect, bounds }
    }
}

/// The mutating verb the tool's last dotted segment starts with (case-insensitive), if any.
///
/// The verb must end at a word boundary (end, `_`, `-`, a digit or an upper-case letter), so that
/// `bulkUpdate`, `set_price` and `transfer` count but `settings`, `payload` and `runtime` do not.
fn mutating_verb(tool: &str) -> Option<&'static str> {
    let last = tool.rsplit('.').next().unwrap_or(tool);
    MUTATING_VERBS.iter().copied().find(|verb| {
        last.get(..verb.len()).is_some_and(|head| head.eq_ignore_ascii_case(verb))
            && !last.as_bytes().get(verb.len()).is_some_and(u8::is_ascii_lowercase)
    })
}

/// `UNVERIFIED_EFFECT` when a step that changes something has nothing that checks it.
fn unverified(step: &Step, at: (usize, &str), effect: Option<ToolEffect>, out: &mut Vec<Finding>) {
    if !step.assertions.is_empty() || !step.acceptance_criteria.is_empty() {
        return;
    }
    let tool = step.tool.as_deref().unwrap_or_default();
    let what = match effect {
        None => "is an instruction for the executor with no check: nothing but its word would \
                 say it was done"
            .to_owned(),
        Some(ToolEffect::Builtin(Effect::Write)) => format!("writes files (`{tool}`)"),
        Some(ToolEffect::Builtin(Effect::Exec)) => format!("runs a command (`{tool}`)"),
        Some(ToolEffect::Builtin(Effect::Network)) => match mutating_method(step) {
            Some(what) => format!("{what}, which may change the server"),
            None => return,
        },
        Some(ToolEffect::Mutating(verb)) => {
            format!("uses `{tool}`, whose name says it changes something ({verb})")
        }
        Some(ToolEffect::Builtin(Effect::Read) | ToolEffect::Opaque) => return,
    };
    out.push(Finding::step(
        LintCode::UnverifiedEffect,
        at,
        format!("/steps/{}", at.0),
        format!(
            "step `{}` {what}, but has no assertion and no acceptance_criteria; add an \
             assertion that proves the effect (file_contains, content_changed, exit_code_eq, \
             http_status, …)",
            step.id
        ),
    ));
}

/// What an `http.request` step does when its method is not GET or HEAD (default GET).
fn mutating_method(step: &Step) -> Option<String> {
    match step.parameters.get("method") {
        None | Some(ValueRef::Null) => None,
        Some(ValueRef::String(m)) => {
            let m = m.trim();
            if m.eq_ignore_ascii_case("GET") || m.eq_ignore_ascii_case("HEAD") {
                None
            } else if m.contains("${") || m.contains("{{") {
                Some(format!("sends an HTTP request whose method comes from a reference ({m})"))
            } else {
                Some(format!("sends an HTTP {} request", m.to_ascii_uppercase()))
            }
        }
        Some(other) => Some(format!("sends an HTTP request with method {other}")),
    }
}

/// A bound resolved to its tool: the argument path below `parameters`.
struct BoundRule<'p> {
    bound: &'p Bound,
    path: Vec<&'p str>,
}

/// Resolves every bound key to the longest tool name used in the plan that it starts with
/// (followed by a dot); keys that match no tool in this plan are dropped.
fn resolve_bounds<'p>(ctx: &Ctx<'p>) -> HashMap<&'p str, Vec<BoundRule<'p>>> {
    let mut rules: HashMap<&'p str, Vec<BoundRule<'p>>> = HashMap::new();
    if ctx.policy.bounds.is_empty() {
        return rules;
    }
    let tools: HashSet<&'p str> = ctx.tools.classify(|t| t).into_iter().collect();
    for bound in &ctx.policy.bounds {
        let key = bound.key.as_str();
        // Dots from the right: the first prefix that is a used tool is the longest one.
        let found = key.rmatch_indices('.').find_map(|(dot, _)| {
            let tool = tools.get(key.get(..dot)?)?;
            Some((*tool, key.get(dot + 1..)?))
        });
        if let Some((tool, arg)) = found {
            rules
                .entry(tool)
                .or_default()
                .push(BoundRule { bound, path: arg.split('.').collect() });
        }
    }
    rules
}

/// `BOUND_VIOLATION` for every number at the rule's path (element-wise in arrays) that is
/// outside the bound. Numeric strings count; references and other strings are skipped.
fn check_bound(
    step: &Step,
    at: (usize, &str),
    tool: &str,
    rule: &BoundRule<'_>,
    out: &mut Vec<Finding>,
) {
    let Some((first, rest)) = rule.path.split_first() else { return };
    let mut value = step.parameters.get(first);
    for seg in rest {
        value = match value {
            Some(ValueRef::Object(map)) => map.get(seg),
            Some(ValueRef::Array(items)) => seg.parse::<usize>().ok().and_then(|k| items.get(k)),
            _ => None,
        };
    }
    let Some(value) = value else { return };
    let mut bad = Vec::new();
    collect_out_of_bounds(value, rule.bound, &mut Vec::new(), &mut bad);
    if bad.is_empty() {
        return;
    }
    // Pointers and messages are built only for violations: a clean plan allocates nothing here.
    let mut base = format!("/steps/{}/parameters", at.0);
    for seg in &rule.path {
        base.push('/');
        push_escaped(&mut base, seg);
    }
    let arg = rule.path.join(".");
    let (min, max) = (rule.bound.min, rule.bound.max);
    for (trail, shown) in bad {
        let mut pointer = base.clone();
        for k in trail {
            let _ = write!(pointer, "/{k}");
        }
        out.push(Finding::step(
            LintCode::BoundViolation,
            at,
            pointer,
            format!(
                "`{tool}` argument `{arg}` = {shown} is outside the policy bounds [{min}, {max}] \
                 (bounds key `{}`)",
                rule.bound.key
            ),
        ));
    }
}

/// `map[key]`. Parameter objects are small, and a scan that mostly compares lengths is cheaper
/// than hashing the key and chasing the bucket (this runs once per step per bound).
/// Appends `(array indices below the argument, value as shown)` for each out-of-bounds number
/// in `value`; `trail` is the array path walked so far.
fn collect_out_of_bounds(
    value: ValueRef<'_>,
    bound: &Bound,
    trail: &mut Vec<usize>,
    bad: &mut Vec<(Vec<usize>, String)>,
) {
    let outside = |x: f64| x < bound.min || x > bound.max;
    match value {
        ValueRef::Number(n) if outside(n.as_f64()) => {
            bad.push((trail.clone(), n.to_number().to_string()));
        }
        ValueRef::String(s) if numeric_string(s).is_some_and(outside) => {
            bad.push((trail.clone(), format!("{s:?}")));
        }
        ValueRef::Array(items) => {
            for (k, item) in items.iter().enumerate() {
                trail.push(k);
                collect_out_of_bounds(item, bound, trail, bad);
                trail.pop();
            }
        }
        _ => {}
    }
}

/// The number a string spells, when it is only a number (`"5000"`, `" -1.5e3 "`); not `"inf"`,
/// `"NaN"`, a reference or any other text.
fn numeric_string(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty()
        || !t.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E'))
    {
        return None;
    }
    t.parse::<f64>().ok().filter(|x| !x.is_nan())
}
