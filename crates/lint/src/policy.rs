//! Loading and compiling a policy: YAML into [`Policy`], then into the matchers the checks use.
//!
//! Everything that can be wrong with a policy is found here, once, and named: the unknown key,
//! the regex that does not compile (with its index), the bound whose min exceeds its max. A
//! policy that loads is one every check can use without failing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use pev_protocol::policy::{DEFAULT_EXTERNAL_SINKS, DEFAULT_SENSITIVE_SOURCES, LevelOverride};
use pev_protocol::{Level, LintCode, Policy};
use regex::Regex;

/// An I/O error as a plan's is reported: the system's message without its `(os error N)`.
fn io_reason(err: &std::io::Error) -> String {
    let text = err.to_string();
    text.split(" (os error").next().unwrap_or(&text).to_owned()
}

/// Why a policy cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy `{}`: {}", .path.display(), io_reason(.source))]
    Io { path: PathBuf, source: std::io::Error },
    #[error("policy {path} is empty")]
    Empty { path: PathBuf },
    #[error("invalid policy {path}{location}: {message}")]
    Yaml { path: PathBuf, location: String, message: String },
    #[error(
        "policy {path}: deny_tokens_regex[{index}] `{pattern}` is not a valid regex: {message}"
    )]
    InvalidRegex { path: PathBuf, index: usize, pattern: String, message: String },
    #[error("policy {path}: bounds.{key}: {reason}")]
    InvalidBound { path: PathBuf, key: String, reason: String },
    #[error("policy {path}: {field}: {reason}")]
    InvalidValue { path: PathBuf, field: String, reason: String },
    #[error("policy {path}: severity: unknown lint code `{code}` (see `pev lint --explain`)")]
    UnknownSeverityCode { path: PathBuf, code: String },
    #[error("policy {path}: rego: {message}")]
    Rego { path: PathBuf, message: String },
}

/// A `*`/`?` glob over tool names (`db.*`, `notify.*`, `file.read`).
#[derive(Debug, Clone)]
pub struct Glob(String);

impl Glob {
    pub fn new(pattern: &str) -> Self {
        Self(pattern.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn matches(&self, name: &str) -> bool {
        glob_match(self.0.as_bytes(), name.as_bytes())
    }
}

/// Iterative wildcard match with single-star backtracking: linear in practice, no recursion.
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// Whether any glob in `globs` matches `name`.
pub fn any_match(globs: &[Glob], name: &str) -> bool {
    globs.iter().any(|g| g.matches(name))
}

/// One numeric bound: `key` is `<tool>.<arg path>` as written in the policy.
#[derive(Debug, Clone)]
pub struct Bound {
    pub key: String,
    pub min: f64,
    pub max: f64,
}

/// A Rego module named by the policy, already read.
#[derive(Debug, Clone)]
pub struct RegoSource {
    pub path: PathBuf,
    pub source: String,
}

/// A policy ready for the checks.
#[derive(Debug, Clone)]
pub struct CompiledPolicy {
    pub policy: Policy,
    pub allow_tools: Vec<Glob>,
    pub deny_tools: Vec<Glob>,
    pub approve_tools: Vec<Glob>,
    /// The policy's readonly_tools plus `db.query_ro` and `sql.query_ro`.
    pub readonly_tools: Vec<Glob>,
    pub sensitive_sources: Vec<Glob>,
    pub external_sinks: Vec<Glob>,
    pub bounds: Vec<Bound>,
    /// `(pattern as written, compiled)`.
    pub deny_tokens: Vec<(String, Regex)>,
    risk_weights: HashMap<LintCode, f64>,
    levels: HashMap<LintCode, LevelOverride>,
    pub rego: Vec<RegoSource>,
    /// Remarks about the policy that do not stop it from being used (printed on stderr).
    pub notes: Vec<String>,
}

impl Default for CompiledPolicy {
    fn default() -> Self {
        // The default policy has no regexes, bounds or Rego, so it always compiles.
        Self::from_parts(Policy::default(), Path::new("<default>"), Vec::new())
            .unwrap_or_else(|_| unreachable_default())
    }
}

#[cold]
fn unreachable_default() -> CompiledPolicy {
    CompiledPolicy {
        policy: Policy::default(),
        allow_tools: Vec::new(),
        deny_tools: Vec::new(),
        approve_tools: Vec::new(),
        readonly_tools: Vec::new(),
        sensitive_sources: Vec::new(),
        external_sinks: Vec::new(),
        bounds: Vec::new(),
        deny_tokens: Vec::new(),
        risk_weights: HashMap::new(),
        levels: HashMap::new(),
        rego: Vec::new(),
        notes: Vec::new(),
    }
}

impl CompiledPolicy {
    /// Reads a YAML (or JSON) policy file and the Rego files it names (relative to it).
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| PolicyError::Io { path: path.to_owned(), source })?;
        let lower = path.to_string_lossy().to_ascii_lowercase();
        if lower.ends_with(".rego") {
            // A bare Rego file is a policy with only that module, as plan-lint accepts.
            let rego = vec![RegoSource { path: path.to_owned(), source: text }];
            return Self::from_parts(Policy::default(), path, rego);
        }
        let policy = Self::parse(&text, path)?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut rego = Vec::new();
        for file in &policy.rego {
            let full = base.join(file);
            let source = std::fs::read_to_string(&full).map_err(|e| PolicyError::Rego {
                path: path.to_owned(),
                message: format!("cannot read {}: {e}", full.display()),
            })?;
            rego.push(RegoSource { path: full, source });
        }
        Self::from_parts(policy, path, rego)
    }

    /// Parses policy text; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Policy, PolicyError> {
        if text.trim().is_empty() {
            return Err(PolicyError::Empty { path: path.to_owned() });
        }
        serde_yaml_ng::from_str::<Policy>(text).map_err(|e| {
            let location = e
                .location()
                .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
                .unwrap_or_default();
            let message = e.to_string();
            let message =
                message.find(" at line ").map_or(message.clone(), |p| message[..p].to_owned());
            PolicyError::Yaml { path: path.to_owned(), location, message }
        })
    }

    /// Compiles a parsed policy; `path` is only used in messages.
    pub fn from_parts(
        policy: Policy,
        path: &Path,
        rego: Vec<RegoSource>,
    ) -> Result<Self, PolicyError> {
        let globs = |v: &[String]| v.iter().map(|s| Glob::new(s)).collect::<Vec<_>>();
        let defaults = |v: &[&str]| v.iter().map(|s| Glob::new(s)).collect::<Vec<_>>();
        let mut notes = Vec::new();

        let mut deny_tokens = Vec::with_capacity(policy.deny_tokens_regex.len());
        for (index, pattern) in policy.deny_tokens_regex.iter().enumerate() {
            let re = Regex::new(pattern).map_err(|e| PolicyError::InvalidRegex {
                path: path.to_owned(),
                index,
                pattern: pattern.clone(),
                message: e.to_string().lines().last().unwrap_or_default().trim().to_owned(),
            })?;
            deny_tokens.push((pattern.clone(), re));
        }

        let mut bounds = Vec::with_capacity(policy.bounds.len());
        for (key, [min, max]) in &policy.bounds {
            let invalid = |reason: String| PolicyError::InvalidBound {
                path: path.to_owned(),
                key: key.clone(),
                reason,
            };
            if !key.contains('.') || key.starts_with('.') || key.ends_with('.') {
                return Err(invalid("the key must be `<tool>.<argument>`".into()));
            }
            if !min.is_finite() || !max.is_finite() {
                return Err(invalid("min and max must be finite numbers".into()));
            }
            if min > max {
                return Err(invalid(format!("min {min} is greater than max {max}")));
            }
            bounds.push(Bound { key: key.clone(), min: *min, max: *max });
        }

        for (field, globs) in
            policy.oracle.iter().flat_map(|o| [("protect", &o.protect), ("allow", &o.allow)])
        {
            for glob in globs {
                if let Err(e) = glob::Pattern::new(glob) {
                    return Err(PolicyError::InvalidValue {
                        path: path.to_owned(),
                        field: format!("oracle.{field}"),
                        reason: format!("`{glob}` is not a valid glob: {e}"),
                    });
                }
            }
        }

        let threshold = policy.fail_risk_threshold;
        if !(0.0..=1.0).contains(&threshold) || threshold.is_nan() {
            return Err(PolicyError::InvalidValue {
                path: path.to_owned(),
                field: "fail_risk_threshold".into(),
                reason: format!("{threshold} is not between 0 and 1"),
            });
        }

        let mut risk_weights = HashMap::new();
        for (key, weight) in &policy.risk_weights {
            if !weight.is_finite() || *weight < 0.0 {
                return Err(PolicyError::InvalidValue {
                    path: path.to_owned(),
                    field: format!("risk_weights.{key}"),
                    reason: format!("{weight} is not a non-negative number"),
                });
            }
            match key.parse::<LintCode>() {
                Ok(code) => {
                    risk_weights.insert(code, *weight);
                }
                // plan-lint's bundled policy has keys such as `tool_write` that name no code;
                // refusing them would break drop-in use, ignoring them silently would hide typos.
                Err(_) => notes.push(format!(
                    "policy {}: risk_weights.{key} names no lint code and is ignored",
                    path.display()
                )),
            }
        }

        let mut levels = HashMap::new();
        for (key, level) in &policy.severity {
            let code = key.parse::<LintCode>().map_err(|_| PolicyError::UnknownSeverityCode {
                path: path.to_owned(),
                code: key.clone(),
            })?;
            levels.insert(code, *level);
        }

        let mut readonly_tools = defaults(&["db.query_ro", "sql.query_ro"]);
        readonly_tools.extend(globs(&policy.readonly_tools));
        let sensitive_sources = match &policy.sensitive_sources {
            Some(v) => globs(v),
            None => defaults(DEFAULT_SENSITIVE_SOURCES),
        };
        let external_sinks = match &policy.external_sinks {
            Some(v) => globs(v),
            None => defaults(DEFAULT_EXTERNAL_SINKS),
        };

        crate::rego::validate(&rego)?;

        Ok(Self {
            allow_tools: globs(&policy.allow_tools),
            deny_tools: globs(&policy.deny_tools),
            approve_tools: globs(&policy.approve_tools),
            readonly_tools,
            sensitive_sources,
            external_sinks,
            bounds,
            deny_tokens,
            risk_weights,
            levels,
            rego,
            notes,
            policy,
        })
    }

    /// The level a code is reported at under this policy; `None` when the policy turns it off.
    pub fn level(&self, code: LintCode) -> Option<Level> {
        match self.levels.get(&code) {
            Some(LevelOverride::Error) => Some(Level::Error),
            Some(LevelOverride::Warning) => Some(Level::Warning),
            Some(LevelOverride::Off) => None,
            None => Some(code.default_level()),
        }
    }

    /// The risk weight of a code: the policy's, or 0.2 for errors and 0.05 for warnings.
    pub fn risk_weight(&self, code: LintCode, level: Level) -> f64 {
        self.risk_weights.get(&code).copied().unwrap_or(match level {
            Level::Error => 0.2,
            Level::Warning => 0.05,
        })
    }

    /// Whether the policy's allow/deny lists let a plan use `tool`.
    pub fn tool_allowed(&self, tool: &str) -> bool {
        !any_match(&self.deny_tools, tool)
            && (self.allow_tools.is_empty() || any_match(&self.allow_tools, tool))
    }

    /// Whether the policy names `tool` anywhere, which makes it a known tool.
    pub fn names_tool(&self, tool: &str) -> bool {
        any_match(&self.allow_tools, tool)
            || any_match(&self.approve_tools, tool)
            || any_match(&self.readonly_tools, tool)
            || self
                .bounds
                .iter()
                .any(|b| b.key.starts_with(tool) && b.key[tool.len()..].starts_with('.'))
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
