//! The lint result and its codes (CONTRACTS.md §5).
//!
//! Every code carries its default level (error or warning), a severity for people and SARIF, a
//! one-line explanation (`pev lint --explain CODE`) and a one-line fix shown under each finding.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whether a finding blocks the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Error,
    Warning,
}

/// How bad a finding is, for people and for SARIF's `level`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Low,
    Medium,
    High,
}

macro_rules! lint_codes {
    ($( $variant:ident = $name:literal, $level:ident, $sev:ident, $explain:literal, $fix:literal; )*) => {
        /// A lint finding's code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
        pub enum LintCode {
            $( #[serde(rename = $name)] #[doc = $explain] $variant, )*
        }

        impl LintCode {
            /// Every code, in the order of CONTRACTS.md §5.
            pub const ALL: &'static [LintCode] = &[ $( LintCode::$variant, )* ];

            pub fn as_str(self) -> &'static str {
                match self { $( LintCode::$variant => $name, )* }
            }

            /// Error or warning, before any policy override.
            pub fn default_level(self) -> Level {
                match self { $( LintCode::$variant => Level::$level, )* }
            }

            pub fn severity(self) -> Severity {
                match self { $( LintCode::$variant => Severity::$sev, )* }
            }

            /// What the code means, in one line.
            pub fn explain(self) -> &'static str {
                match self { $( LintCode::$variant => $explain, )* }
            }

            /// How to fix it, in one line.
            pub fn fix(self) -> &'static str {
                match self { $( LintCode::$variant => $fix, )* }
            }
        }
    };
}

lint_codes! {
    SchemaInvalid = "SCHEMA_INVALID", Error, High,
        "The plan does not have the shape of docs/reference.md#1-plan-format: a field has the wrong type or a required one is missing.",
        "Correct the field at the JSON path shown; `pev schema plan` prints the full schema.";
    EmptyPlan = "EMPTY_PLAN", Warning, Low,
        "The plan has no steps, so running it can change nothing.",
        "Add the steps that achieve the goal.";
    UnknownField = "UNKNOWN_FIELD", Warning, Low,
        "A field pev does not know; it is kept but has no effect (often a typo).",
        "Rename it to the canonical field or move it into `context`/`meta`.";
    DuplicateStepId = "DUPLICATE_STEP_ID", Error, High,
        "Two steps share an id, so dependencies and references to it are ambiguous.",
        "Give every step a unique id.";
    UnknownDependency = "UNKNOWN_DEPENDENCY", Error, High,
        "`depends_on` names a step that is not in the plan.",
        "Fix the id in depends_on or add the missing step.";
    LoopDetected = "LOOP_DETECTED", Error, High,
        "Steps depend on each other in a cycle (through depends_on or references), so none of them can start.",
        "Break the cycle: remove one of the dependencies or references listed.";
    UnknownReference = "UNKNOWN_REFERENCE", Error, High,
        "A `${id.result…}` / `{{id.result…}}` reference names a step that is not in the plan (or the step itself).",
        "Point the reference at an existing earlier step.";
    ReferenceNotDependency = "REFERENCE_NOT_DEPENDENCY", Warning, Low,
        "A reference reads a step that is not among the step's transitive depends_on; the order is implied, not stated.",
        "Add the referenced step to depends_on.";
    MaxStepsExceeded = "MAX_STEPS_EXCEEDED", Error, Medium,
        "The plan has more steps than the policy's max_steps allows.",
        "Split the plan or raise max_steps in the policy.";
    ToolDeny = "TOOL_DENY", Error, High,
        "The step uses a tool the policy does not allow (not in allow_tools, or in deny_tools).",
        "Use an allowed tool, or add this one to the policy's allow_tools.";
    UnknownTool = "UNKNOWN_TOOL", Warning, Low,
        "The tool is neither built in nor named anywhere in the policy, so nothing is known of its effects.",
        "Check the tool name, or list it in the policy's allow_tools.";
    BoundViolation = "BOUND_VIOLATION", Error, Medium,
        "A numeric argument is outside the policy's bounds for that tool.",
        "Bring the value within the bounds, or change the policy's bounds.";
    RawSecret = "RAW_SECRET", Error, High,
        "A credential appears in the plan as a literal value (a key, token, private key or password).",
        "Pass a reference to a secret store or an environment variable name instead of the value.";
    SqlWriteInReadonly = "SQL_WRITE_IN_READONLY", Error, High,
        "A read-only SQL tool is given a statement that writes (INSERT, UPDATE, DELETE, DROP, …).",
        "Use the read-write tool for writes, or make the statement a SELECT.";
    SqlInjection = "SQL_INJECTION", Error, High,
        "A step reference or quoted value is spliced into SQL text instead of being passed as a bound parameter.",
        "Use placeholders ($1, ?) in the query and pass values in its args.";
    CommandInjection = "COMMAND_INJECTION", Error, High,
        "A step reference is spliced into a shell command string (or into the code `sh -c`, `python -c`, … runs), so another step's output is read as code.",
        "Use `argv` with the reference as a whole argument, or pass it in `env` and read it from there.";
    CommandChained = "COMMAND_CHAINED", Warning, Low,
        "A shell command string runs several literal commands (`;`, `&&`, `||`, `&`, a newline, `$(…)`, backticks): not injection, but the step has one exit code and one output for all of them.",
        "Split it into one step per command when each needs its own check; otherwise leave it.";
    DownloadExecute = "DOWNLOAD_EXECUTE", Error, High,
        "A shell command runs code it downloads (`curl … | sh`, `sh -c \"$(curl …)\"`, `bash <(wget …)`, a fetched file run right after), so whatever the server sends runs unread.",
        "Install from a package manager, or download to a file, check it (checksum or signature), and run it in a later step.";
    PathTraversal = "PATH_TRAVERSAL", Error, High,
        "A file path leaves the workspace (a `..` that climbs above its root, an absolute path, `~`) or is built from a step reference.",
        "Use a path relative to the workspace that stays inside it.";
    SensitiveDataExposure = "SENSITIVE_DATA_EXPOSURE", Error, High,
        "Data read from a sensitive source (database, file) flows into an external sink (notification, HTTP, email, payment).",
        "Send only what is needed through a reviewed step, or mark the step requires_approval.";
    ApprovalRequired = "APPROVAL_REQUIRED", Warning, Low,
        "A person must approve this step before it runs (requires_approval, or a tool in approve_tools).",
        "Run with a TTY to approve, `--yes`, or `pev approve RUN STEP`.";
    InvalidAssertion = "INVALID_ASSERTION", Error, Medium,
        "An assertion is malformed: unknown type or field, a bad regex, a path outside the workspace, or a step it cannot see.",
        "Fix the assertion as the message says; `pev schema plan` lists every type and field.";
    UnverifiedEffect = "UNVERIFIED_EFFECT", Warning, Low,
        "A step that writes or executes has no assertion and no acceptance criteria, so its success cannot be checked.",
        "Add an assertion (file_contains, content_changed, exit_code_eq, …) that proves the effect.";
    OracleWrite = "ORACLE_WRITE", Warning, Medium,
        "A step writes a file the run is checked by (a test or test configuration by the ecosystems' conventions, or a file the plan's `oracle.protect` names) without `may_change_oracle`: pev refuses the write when it runs, because a test the run must make pass is evidence, not work.",
        "Change the code under test instead; if the step's work is the tests themselves, set `may_change_oracle: true` on it (in a model's plan this counts only when the goal asks for work on tests).";
    DelegateWithTool = "DELEGATE_WITH_TOOL", Error, Medium,
        "A step sets both `tool` and `delegate`: a step is a tool call, an instruction or a delegation to a sub-agent, not two of them.",
        "Remove `tool` (and its parameters) to delegate the step, or remove `delegate` to call the tool directly.";
    DelegateEmptyGoal = "DELEGATE_EMPTY_GOAL", Error, Medium,
        "A delegated step's `delegate.goal` is blank, so its child run has nothing to plan for.",
        "Write the child run's goal in `delegate.goal`.";
    DelegateScopeEscapes = "DELEGATE_SCOPE_ESCAPES", Error, High,
        "A delegated step's `delegate.scope` is not a directory inside the workspace: it is absolute, climbs out with `..`, starts with `~`, is inside `.pev` (pev's journal), or is blank.",
        "Use a workspace-relative directory without `..` above the root, `.` for the whole workspace, or leave `scope` out.";
    DelegateScopeOverlap = "DELEGATE_SCOPE_OVERLAP", Error, Medium,
        "Two delegated steps that may run at the same time (neither waits for the other through depends_on or references) have overlapping scopes (equal, one inside the other, or one absent: the whole workspace), so their child runs may change the same files.",
        "Give each delegated step its own directory as `scope`, or add depends_on so that one runs after the other.";
    DelegateBudgetUnmeetable = "DELEGATE_BUDGET_UNMEETABLE", Error, Medium,
        "A delegated step's budget slice can never be met: `max_usd` is not a number above 0, `max_tokens` or `max_turns` is 0, or `max_turns` is 1 in `pev` mode (which needs a planner call and an executor call).",
        "Raise the limit, or leave it out to share the parent's remaining budget (use mode `loop` for a one-call child).";
    PolicyViolation = "POLICY_VIOLATION", Error, High,
        "A Rego policy's `violations` set reported this plan.",
        "Change the plan as the policy message says.";
}

impl fmt::Display for LintCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown lint code name.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown lint code `{0}`")]
pub struct UnknownCode(pub String);

impl FromStr for LintCode {
    type Err = UnknownCode;

    /// Case-insensitive, so policies may write `raw_secret` as plan-lint users do.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LintCode::ALL
            .iter()
            .copied()
            .find(|c| c.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownCode(s.to_owned()))
    }
}

/// One lint finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    /// 0-based step index; null for plan-level findings (as in plan-lint).
    pub step: Option<usize>,
    /// The step's id, when the finding is about a step.
    #[serde(default)]
    pub step_id: Option<String>,
    pub code: LintCode,
    pub severity: Severity,
    pub msg: String,
    /// JSON pointer to the offending value, e.g. `/steps/2/tool`.
    pub path: String,
    /// Where `path` is in the plan's text, 1-based, when the text was at hand (`pev lint`'s
    /// JSON report of a plan up to 8 MiB; a pev extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
}

impl Finding {
    pub fn plan(code: LintCode, path: impl Into<String>, msg: impl Into<String>) -> Self {
        Self {
            step: None,
            step_id: None,
            code,
            severity: code.severity(),
            msg: msg.into(),
            path: path.into(),
            line: None,
            column: None,
        }
    }

    pub fn step(
        code: LintCode,
        (index, id): (usize, &str),
        path: impl Into<String>,
        msg: impl Into<String>,
    ) -> Self {
        Self {
            step: Some(index),
            step_id: Some(id.to_owned()),
            code,
            severity: code.severity(),
            msg: msg.into(),
            path: path.into(),
            line: None,
            column: None,
        }
    }
}

/// The overall verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LintStatus {
    Pass,
    Warn,
    Error,
}

/// What `pev lint --format json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LintResult {
    pub status: LintStatus,
    /// 0..1, rounded to 2 decimals.
    pub risk_score: f64,
    pub errors: Vec<Finding>,
    pub warnings: Vec<Finding>,
}

impl LintResult {
    /// Whether any finding has this code.
    pub fn has(&self, code: LintCode) -> bool {
        self.errors.iter().chain(&self.warnings).any(|f| f.code == code)
    }
}
