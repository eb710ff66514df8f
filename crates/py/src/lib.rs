//! `pev._pev`: pev's linter in a Python process.
//!
//! The boundary is JSON text both ways: Python serialises a plan (`json.dumps`) and this module
//! reads it with `pev_protocol::parse::parse_plan`, the CLI's own path (fast path included), and
//! hands back a `LintResult` as the JSON `pev lint --format json` prints. So the Python package
//! cannot drift from the contract through a second conversion layer, and nothing here tracks
//! PyO3's minor versions beyond the macros.
//!
//! Errors cross as one internal exception, `NativeError(kind, message, details_json)`; the Python
//! layer (`pev/_errors.py`) turns it into the typed exception (`PlanSyntaxError`,
//! `PlanSchemaError`, `PolicyError` with its `kind`). Every lint releases the GIL.

use std::path::{Path, PathBuf};

use pev_lint::{locate, locate_yaml};

use pev_lint::policy::RegoSource;
use pev_lint::{CompiledPolicy, LintOptions, PolicyError, lint as lint_plan, schema_failure};
use pev_protocol::parse::{Format, ParseError, parse_plan};
use pev_protocol::schema::{SchemaKind, schema_of};
use pev_protocol::{Level, LintCode, LintResult, Severity};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde_json::json;

pyo3::create_exception!(_pev, NativeError, PyException, "An error from pev's Rust core.");

/// `NativeError(kind, message, details)` with `details` as JSON text.
fn native(kind: &str, message: String, details: &serde_json::Value) -> PyErr {
    NativeError::new_err((kind.to_owned(), message, details.to_string()))
}

fn format_of(name: &str) -> PyResult<Format> {
    match name {
        "json" => Ok(Format::Json),
        "yaml" => Ok(Format::Yaml),
        "auto" | "" => Err(native("usage", "format must be json or yaml".into(), &json!({}))),
        other => Err(native("usage", format!("unknown plan format `{other}`"), &json!({}))),
    }
}

fn parse_error(err: ParseError) -> PyErr {
    let message = err.to_string();
    match err {
        ParseError::Syntax { format, line, column, message: reason } => native(
            "syntax",
            message,
            &json!({"format": format, "line": line, "column": column, "reason": reason}),
        ),
        ParseError::Schema(issues) => {
            let issues: Vec<_> = issues
                .iter()
                .map(|i| json!({"step": i.step, "pointer": i.pointer, "message": i.message}))
                .collect();
            native("schema", message, &json!({"issues": issues}))
        }
    }
}

fn policy_error(err: &PolicyError) -> PyErr {
    let (kind, path) = match err {
        PolicyError::Io { path, .. } => ("io", path),
        PolicyError::Empty { path } => ("empty", path),
        PolicyError::Yaml { path, .. } => ("yaml", path),
        PolicyError::InvalidRegex { path, .. } => ("invalid_regex", path),
        PolicyError::InvalidBound { path, .. } => ("invalid_bound", path),
        PolicyError::InvalidValue { path, .. } => ("invalid_value", path),
        PolicyError::UnknownSeverityCode { path, .. } => ("unknown_severity_code", path),
        PolicyError::Rego { path, .. } => ("rego", path),
    };
    native("policy", err.to_string(), &json!({"kind": kind, "path": path.display().to_string()}))
}

/// A compiled policy: loaded and checked once, immutable, shared freely across threads.
#[pyclass(frozen, module = "pev._pev", name = "CompiledPolicy")]
struct PyPolicy {
    inner: CompiledPolicy,
}

#[pymethods]
impl PyPolicy {
    /// Reads a YAML/JSON policy file and the Rego files it names, or a bare `.rego` file.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = py.detach(|| CompiledPolicy::load(&path)).map_err(|e| policy_error(&e))?;
        Ok(Self { inner })
    }

    /// Compiles policy text (YAML or JSON). `label` names it in messages; Rego files it names are
    /// read relative to `base_dir`; `rego` adds modules given as `(label, source)` pairs.
    #[staticmethod]
    #[pyo3(signature = (text, label, base_dir, rego))]
    fn from_text(
        py: Python<'_>,
        text: &str,
        label: &str,
        base_dir: PathBuf,
        rego: Vec<(String, String)>,
    ) -> PyResult<Self> {
        let label = Path::new(label);
        let inner = py
            .detach(|| {
                let policy = CompiledPolicy::parse(text, label)?;
                let mut sources = Vec::new();
                for file in &policy.rego {
                    let full = base_dir.join(file);
                    let source = std::fs::read_to_string(&full).map_err(|e| PolicyError::Rego {
                        path: label.to_owned(),
                        message: format!("cannot read {}: {e}", full.display()),
                    })?;
                    sources.push(RegoSource { path: full, source });
                }
                sources.extend(
                    rego.into_iter()
                        .map(|(path, source)| RegoSource { path: PathBuf::from(path), source }),
                );
                CompiledPolicy::from_parts(policy, label, sources)
            })
            .map_err(|e| policy_error(&e))?;
        Ok(Self { inner })
    }

    /// The default policy (what `pev lint` uses without `--policy`).
    #[staticmethod]
    fn default() -> Self {
        Self { inner: CompiledPolicy::default() }
    }

    #[getter]
    fn fail_risk_threshold(&self) -> f64 {
        self.inner.policy.fail_risk_threshold
    }

    /// Remarks that do not stop the policy from being used (`pev lint` prints them as notes).
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.inner.notes.clone()
    }

    /// The policy document, as JSON text (defaults filled in).
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner.policy)
            .map_err(|e| native("internal", e.to_string(), &json!({})))
    }

    /// The Rego modules, as `(path, source)` pairs.
    fn rego_sources(&self) -> Vec<(String, String)> {
        self.inner.rego.iter().map(|r| (r.path.display().to_string(), r.source.clone())).collect()
    }
}

/// Lints plan text; returns the lint result as JSON text. A plan that does not match the schema
/// is a result of `SCHEMA_INVALID` findings (as `pev lint` prints it); one that is not JSON/YAML
/// at all raises. With `locate`, findings carry the line and column of their path in `text`.
#[pyfunction]
#[pyo3(signature = (text, format, policy=None, fail_risk=None, locate=false))]
#[allow(clippy::too_many_arguments, reason = "the Python signature: one keyword per option")]
fn lint(
    py: Python<'_>,
    text: &str,
    format: &str,
    policy: Option<&PyPolicy>,
    fail_risk: Option<f64>,
    locate: bool,
) -> PyResult<String> {
    let format = format_of(format)?;
    let default;
    let policy = match policy {
        Some(p) => &p.inner,
        None => {
            default = CompiledPolicy::default();
            &default
        }
    };
    let options = LintOptions { fail_risk };
    py.detach(|| {
        let mut result = match parse_plan(text, format) {
            Ok(parsed) => lint_plan(&parsed, policy, options),
            Err(ParseError::Schema(issues)) => schema_failure(&issues, policy, options),
            Err(err) => return Err(err),
        };
        if locate {
            add_locations(&mut result, text, format);
        }
        Ok(serde_json::to_string(&result))
    })
    .map_err(parse_error)?
    .map_err(|e| native("internal", e.to_string(), &json!({})))
}

/// Fills each finding's line and column, as `pev lint --format json` does.
fn add_locations(result: &mut LintResult, text: &str, format: Format) {
    let pointers: Vec<String> =
        result.errors.iter().chain(&result.warnings).map(|f| f.path.clone()).collect();
    let locations = match format {
        Format::Json => locate::Locations::json(text, pointers.iter().map(String::as_str)),
        Format::Yaml => locate_yaml::locations(text, pointers.iter().map(String::as_str)),
    };
    for finding in result.errors.iter_mut().chain(result.warnings.iter_mut()) {
        if let Some(at) = locations.get(&finding.path) {
            finding.line = Some(at.line);
            finding.column = Some(at.column);
        }
    }
}

/// Parses plan text into pev's canonical plan (aliases resolved), as JSON text.
#[pyfunction]
fn parse(py: Python<'_>, text: &str, format: &str) -> PyResult<String> {
    let format = format_of(format)?;
    let parsed = py.detach(|| parse_plan(text, format)).map_err(parse_error)?;
    serde_json::to_string(&parsed.plan).map_err(|e| native("internal", e.to_string(), &json!({})))
}

fn level_word(level: Level) -> &'static str {
    match level {
        Level::Error => "error",
        Level::Warning => "warning",
    }
}

fn severity_word(severity: Severity) -> &'static str {
    match severity {
        Severity::Low => "low",
        Severity::Medium => "medium",
        Severity::High => "high",
    }
}

type CodeRow = (&'static str, &'static str, &'static str, &'static str, &'static str);

fn code_row(code: LintCode) -> CodeRow {
    (
        code.as_str(),
        level_word(code.default_level()),
        severity_word(code.severity()),
        code.explain(),
        code.fix(),
    )
}

/// `(code, default level, severity, explanation, fix)` of one code (case-insensitive).
#[pyfunction]
fn explain(code: &str) -> PyResult<CodeRow> {
    let code: LintCode = code.trim().parse().map_err(|_| {
        native(
            "unknown_code",
            format!("unknown lint code `{code}` (`pev lint --explain all` lists every code)"),
            &json!({"code": code}),
        )
    })?;
    Ok(code_row(code))
}

/// Every code's row, in the order of CONTRACTS.md §5.
#[pyfunction]
fn codes() -> Vec<CodeRow> {
    LintCode::ALL.iter().copied().map(code_row).collect()
}

/// The JSON Schema of `plan`, `lint`, `policy` or `result`, as JSON text (= `pev schema KIND`).
#[pyfunction]
fn schema(kind: &str) -> PyResult<String> {
    let kind = match kind {
        "plan" => SchemaKind::Plan,
        "lint" => SchemaKind::Lint,
        "policy" => SchemaKind::Policy,
        "result" => SchemaKind::Result,
        other => {
            return Err(native(
                "usage",
                format!("unknown schema `{other}`: plan, lint, policy or result"),
                &json!({}),
            ));
        }
    };
    Ok(schema_of(kind).to_string())
}

#[pymodule]
fn _pev(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add_class::<PyPolicy>()?;
    m.add_function(wrap_pyfunction!(lint, m)?)?;
    m.add_function(wrap_pyfunction!(parse, m)?)?;
    m.add_function(wrap_pyfunction!(explain, m)?)?;
    m.add_function(wrap_pyfunction!(codes, m)?)?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    Ok(())
}
