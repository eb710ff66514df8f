//! Rego policies, evaluated in-process by regorus (no `opa` binary): each module's
//! `violations` become `POLICY_VIOLATION` findings.
//!
//! The input document is the plan in its canonical JSON form, with each step also given an
//! `args` key equal to its `parameters`, so that policies written for plan-lint (which reads
//! `input.steps[i].args`) work unchanged. For every package the modules declare, pev reads
//! `data.<package>.violations` (a set or an array of `{code?, msg, step?}`, or of bare strings)
//! and `data.<package>.allow`; `allow == false` with no violations denies the plan as a whole.
//!
//! Modules are parsed when the policy is loaded ([`validate`]), so a syntax error stops the
//! policy from loading and names the file, instead of surfacing on every lint. Errors at lint
//! time fail closed: a policy that cannot be evaluated produces a finding, never a silent pass.
//! Builtin errors are undefined rather than fatal, as in OPA, so a policy that applies `lower`
//! to a number behaves as it does under `opa eval`.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::Path;
use std::time::Duration;

use pev_protocol::{Finding, LintCode};
use regorus::Engine;
use regorus::utils::limits::ExecutionTimerConfig;
use serde_json::Value;

use crate::Ctx;
use crate::policy::{PolicyError, RegoSource};

/// A policy that runs longer than this is stopped and reported (fail closed).
const TIME_LIMIT: Duration = Duration::from_secs(10);

/// Work units between clock reads: small enough to stop promptly, large enough to be cheap.
const CHECK_INTERVAL: NonZeroU32 = match NonZeroU32::new(256) {
    Some(n) => n,
    None => NonZeroU32::MIN,
};

/// Parses every module and prepares them together, so that syntax errors, unknown functions
/// and recursive rules are reported when the policy is loaded.
pub fn validate(sources: &[RegoSource]) -> Result<(), PolicyError> {
    if sources.is_empty() {
        return Ok(());
    }
    let mut loaded = Loaded::new(sources)?;
    // Preparing the engine (rule analysis, function table) happens on the first query; a
    // trivial one surfaces those errors now, with no dependence on the plan.
    loaded.engine.eval_query("true".to_owned(), false).map_err(|e| PolicyError::Rego {
        path: blame(sources, &e.to_string()).to_owned(),
        message: tidy(&e.to_string()),
    })?;
    Ok(())
}

/// Evaluates every package's `violations` and `allow` against the plan.
pub(crate) fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let sources = &ctx.policy.rego;
    let Some(first) = sources.first() else { return };
    let mut loaded = match Loaded::new(sources) {
        Ok(loaded) => loaded,
        Err(e) => {
            out.push(failed(&file_name(&first.path), &e.to_string()));
            return;
        }
    };
    match input(ctx) {
        Ok(input) => loaded.engine.set_input(regorus::Value::from(input)),
        Err(e) => {
            out.push(failed(&file_name(&first.path), &e.to_string()));
            return;
        }
    }
    for package in std::mem::take(&mut loaded.packages) {
        evaluate(ctx, &mut loaded.engine, &package, out);
    }
}

/// One package: the query prefix (`data.a.b`) and the file name used in messages.
struct Package {
    query: String,
    file: String,
}

/// An engine holding every module, and the distinct packages they declare.
struct Loaded {
    engine: Engine,
    packages: Vec<Package>,
}

impl Loaded {
    fn new(sources: &[RegoSource]) -> Result<Self, PolicyError> {
        let mut engine = Engine::new();
        engine.set_strict_builtin_errors(false);
        engine.set_execution_timer_config(ExecutionTimerConfig {
            limit: TIME_LIMIT,
            check_interval: CHECK_INTERVAL,
        });
        let mut labels = BTreeMap::new();
        for source in sources {
            let label = source.path.display().to_string();
            add_module(&mut engine, &label, &source.source)
                .map_err(|message| PolicyError::Rego { path: source.path.clone(), message })?;
            labels.insert(label, file_name(&source.path));
        }
        let components = package_components(&mut engine).map_err(|message| PolicyError::Rego {
            path: sources.first().map(|s| s.path.clone()).unwrap_or_default(),
            message,
        })?;
        // Several modules may share a package; its rules are evaluated once, and the findings
        // name every file that declares it.
        let mut packages: Vec<Package> = Vec::new();
        let mut files_of: BTreeMap<String, usize> = BTreeMap::new();
        for (source_file, components) in components {
            let query = package_query(&components);
            let file = labels.get(&source_file).cloned().unwrap_or(source_file);
            match files_of.get(&query) {
                Some(&i) => {
                    if let Some(p) = packages.get_mut(i)
                        && !p.file.split(", ").any(|f| f == file)
                    {
                        p.file.push_str(", ");
                        p.file.push_str(&file);
                    }
                }
                None => {
                    files_of.insert(query.clone(), packages.len());
                    packages.push(Package { query, file });
                }
            }
        }
        Ok(Self { engine, packages })
    }
}

/// Adds a module as Rego v1 (OPA 1.x's default). Only when v1 rejects it for a missing
/// `if`/`contains` keyword is it read again as v0, the syntax of older policies; other v1 errors
/// are reported as they are, and trying v0 would only add regorus's keyword warnings on stderr.
fn add_module(engine: &mut Engine, label: &str, source: &str) -> Result<(), String> {
    engine.set_rego_v0(false);
    let v1 = match engine.add_policy(label.to_owned(), source.to_owned()) {
        Ok(_) => return Ok(()),
        Err(e) => e.to_string(),
    };
    if !v1.contains("keyword is required") {
        return Err(tidy(&v1));
    }
    engine.set_rego_v0(true);
    let v0 = engine.add_policy(label.to_owned(), source.to_owned());
    engine.set_rego_v0(false);
    v0.map(|_| ()).map_err(|e| tidy(&e.to_string()))
}

/// Each module's file label and its package path, as components (`package a["b.c"]` is
/// `["a", "b.c"]`, which the dotted name regorus returns cannot tell from `a.b.c`).
///
/// regorus is pinned to 0.11 (exactly: the parsed modules are in its `unstable` module), the
/// last release that does not build Verus's `vstd` and its proc macros, a third of a cold build.
fn package_components(engine: &mut Engine) -> Result<Vec<(String, Vec<String>)>, String> {
    use regorus::unstable::Expr;
    let mut out = Vec::new();
    for module in engine.get_modules().iter() {
        let mut components = Vec::new();
        let mut expr: &Expr = &module.package.refr;
        loop {
            match expr {
                Expr::RefDot { refr, field, .. } => {
                    components.push(field.0.text().to_owned());
                    expr = refr;
                }
                Expr::RefBrack { refr, index, .. } => match index.as_ref() {
                    Expr::String { value, .. } | Expr::RawString { value, .. } => {
                        let text = value.as_string().map_err(|e| tidy(&e.to_string()))?;
                        components.push(text.as_ref().to_owned());
                        expr = refr;
                    }
                    _ => {
                        return Err(format!(
                            "{}: a package path component is not a string",
                            module.package.span.source.file()
                        ));
                    }
                },
                Expr::Var { span, .. } => {
                    components.push(span.text().to_owned());
                    break;
                }
                _ => {
                    return Err(format!(
                        "{}: the package path is not a reference",
                        module.package.span.source.file()
                    ));
                }
            }
        }
        components.reverse();
        out.push((module.package.span.source.file().clone(), components));
    }
    Ok(out)
}

/// `data.a.b`, with brackets for components that are not plain identifiers.
fn package_query(components: &[String]) -> String {
    let mut query = String::from("data");
    for c in components {
        let plain = c.chars().next().is_some_and(|ch| ch.is_ascii_alphabetic() || ch == '_')
            && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
        if plain {
            query.push('.');
            query.push_str(c);
        } else {
            query.push('[');
            query.push_str(&Value::String(c.clone()).to_string());
            query.push(']');
        }
    }
    query
}

/// The plan as the policy sees it: canonical fields, plus `args` on every step.
fn input(ctx: &Ctx<'_>) -> Result<Value, serde_json::Error> {
    let mut value = serde_json::to_value(ctx.plan)?;
    if let Some(steps) = value.get_mut("steps").and_then(Value::as_array_mut) {
        for (step, plan_step) in steps.iter_mut().zip(&ctx.plan.steps) {
            if let Some(obj) = step.as_object_mut() {
                obj.insert("args".into(), Value::Object(plan_step.parameters.to_map()));
            }
        }
    }
    Ok(value)
}

/// Reads one rule of a package; `None` when it is undefined.
fn read_rule(engine: &mut Engine, query: String) -> Result<Option<Value>, String> {
    let results = engine.eval_query(query, false).map_err(|e| tidy(&e.to_string()))?;
    let Some(value) =
        results.result.into_iter().next().and_then(|r| r.expressions.into_iter().next())
    else {
        return Ok(None);
    };
    if value.value == regorus::Value::Undefined {
        return Ok(None);
    }
    serde_json::to_value(&value.value).map(Some).map_err(|e| e.to_string())
}

fn evaluate(ctx: &Ctx<'_>, engine: &mut Engine, package: &Package, out: &mut Vec<Finding>) {
    let file = &package.file;
    let violations = match read_rule(engine, format!("{}.violations", package.query)) {
        Ok(v) => v,
        Err(e) => return out.push(failed(file, &e)),
    };
    let mut found = 0usize;
    match violations {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for item in &items {
                out.push(violation(ctx, file, item));
                found += 1;
            }
        }
        Some(other) => {
            return out.push(failed(
                file,
                &format!(
                    "`violations` must be a set or an array, found {}",
                    pev_protocol::parse::kind(&other)
                ),
            ));
        }
    }
    if found > 0 {
        return;
    }
    match read_rule(engine, format!("{}.allow", package.query)) {
        Ok(Some(Value::Bool(false))) => {
            out.push(Finding::plan(
                LintCode::PolicyViolation,
                "",
                format!("{file}: policy denies the plan"),
            ));
        }
        Ok(_) => {}
        Err(e) => out.push(failed(file, &e)),
    }
}

/// One element of `violations` as a finding.
fn violation(ctx: &Ctx<'_>, file: &str, item: &Value) -> Finding {
    let (code, msg, step) = match item {
        Value::String(s) => (None, s.clone(), None),
        Value::Object(obj) => {
            let msg = match obj.get("msg").or_else(|| obj.get("message")) {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => item.to_string(),
            };
            let code = obj.get("code").map(|c| match c {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            (code, msg, obj.get("step"))
        }
        other => (None, other.to_string(), None),
    };
    let text = match &code {
        Some(code) => format!("{file}: [{code}] {msg}"),
        None => format!("{file}: {msg}"),
    };
    let index = step.and_then(|s| match s {
        // Rego arithmetic may turn an index into a float (`i + 0.0`); accept whole numbers.
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64))
            .and_then(|i| usize::try_from(i).ok()),
        Value::String(id) => ctx.index().get(id.as_str()).copied(),
        _ => None,
    });
    match index.and_then(|i| ctx.plan.steps.get(i).map(|s| (i, s))) {
        Some((i, s)) => Finding::step(
            LintCode::PolicyViolation,
            (i, s.id.as_str()),
            format!("/steps/{i}"),
            text,
        ),
        None => {
            // A step the plan does not have is still a violation; say which one was named.
            let text = match step {
                Some(Value::Null) | None => text,
                Some(s) => format!("{text} (step {s} is not in the plan)"),
            };
            Finding::plan(LintCode::PolicyViolation, "", text)
        }
    }
}

/// The finding for a policy that could not be evaluated: the plan is not let through.
fn failed(file: &str, error: &str) -> Finding {
    Finding::plan(
        LintCode::PolicyViolation,
        "",
        format!("{file}: the policy failed to evaluate: {error}"),
    )
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into())
}

/// regorus errors span several lines (`--> file:line:col`, a source excerpt with a caret, then
/// `error: what`); a finding or a CLI message reads better as `file:line:col: what`.
fn tidy(message: &str) -> String {
    let mut location = None;
    let mut what = None;
    for line in message.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("-->") {
            location.get_or_insert(rest.trim());
        } else if let Some(rest) = line.strip_prefix("error:") {
            what.get_or_insert(rest.trim());
        }
    }
    match (location, what) {
        (Some(location), Some(what)) => format!("{location}: {what}"),
        _ => message.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" "),
    }
}

/// The source that an error message names, else the first one.
fn blame<'a>(sources: &'a [RegoSource], message: &str) -> &'a Path {
    sources
        .iter()
        .find(|s| message.contains(&*s.path.display().to_string()))
        .or_else(|| sources.first())
        .map_or(Path::new(""), |s| s.path.as_path())
}
