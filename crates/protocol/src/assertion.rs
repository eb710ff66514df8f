//! Assertions: evidence the harness checks itself, never the model (CONTRACTS.md §2).
//!
//! Tagged by `"type"`; the alias tag key `"assert"` is rewritten to `"type"` by [`crate::parse`]
//! before deserialising, because serde cannot alias a tag key. Every variant rejects unknown
//! fields: a typo in an assertion (`patern`) must not turn it into a check that always passes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::plan::StepId;

/// One harness-checked assertion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Assertion {
    FileExists {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovery: Option<String>,
    },
    FileNotExists {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovery: Option<String>,
    },
    FileContains {
        path: String,
        pattern: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        regex: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovery: Option<String>,
    },
    FileNotContains {
        path: String,
        pattern: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        regex: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovery: Option<String>,
    },
    FileSizeGt {
        path: String,
        bytes: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovery: Option<String>,
    },
    ContentChanged {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovery: Option<String>,
    },
    OutputContains {
        pattern: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        regex: bool,
        /// The step whose output is searched; default: the step that owns the assertion.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<StepId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovery: Option<String>,
    },
    ExitCodeEq {
        code: i32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<StepId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovery: Option<String>,
    },
    CommandSucceeds {
        command: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_s: Option<f64>,
        /// `false`: the command must not run twice (it has side effects), so the final
        /// re-check reports it as checked once instead of running it again. Default `true`.
        #[serde(default = "yes", skip_serializing_if = "is_yes")]
        repeatable: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovery: Option<String>,
    },
    SocketOpen {
        host: String,
        port: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovery: Option<String>,
    },
    #[serde(alias = "http_200")]
    HttpStatus {
        url: String,
        #[serde(default = "default_status")]
        status: u16,
        /// `false`: the request must not be sent twice (the endpoint has side effects), so the
        /// final re-check reports it as checked once. Default `true`.
        #[serde(default = "yes", skip_serializing_if = "is_yes")]
        repeatable: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovery: Option<String>,
    },
}

fn default_status() -> u16 {
    200
}

fn yes() -> bool {
    true
}

/// serde's `skip_serializing_if` passes a reference.
fn is_yes(value: &bool) -> bool {
    *value
}

impl Assertion {
    /// The `type` tag as written in plans.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::FileExists { .. } => "file_exists",
            Self::FileNotExists { .. } => "file_not_exists",
            Self::FileContains { .. } => "file_contains",
            Self::FileNotContains { .. } => "file_not_contains",
            Self::FileSizeGt { .. } => "file_size_gt",
            Self::ContentChanged { .. } => "content_changed",
            Self::OutputContains { .. } => "output_contains",
            Self::ExitCodeEq { .. } => "exit_code_eq",
            Self::CommandSucceeds { .. } => "command_succeeds",
            Self::SocketOpen { .. } => "socket_open",
            Self::HttpStatus { .. } => "http_status",
        }
    }

    /// The workspace path the assertion reads, if it reads one.
    pub fn path(&self) -> Option<&str> {
        match self {
            Self::FileExists { path, .. }
            | Self::FileNotExists { path, .. }
            | Self::FileContains { path, .. }
            | Self::FileNotContains { path, .. }
            | Self::FileSizeGt { path, .. }
            | Self::ContentChanged { path, .. } => Some(path),
            _ => None,
        }
    }

    /// The pattern and whether it is a regex, for the assertions that match text.
    pub fn pattern(&self) -> Option<(&str, bool)> {
        match self {
            Self::FileContains { pattern, regex, .. }
            | Self::FileNotContains { pattern, regex, .. }
            | Self::OutputContains { pattern, regex, .. } => Some((pattern, *regex)),
            _ => None,
        }
    }

    /// The other step this assertion looks at, if it names one.
    pub fn step(&self) -> Option<&StepId> {
        match self {
            Self::OutputContains { step, .. } | Self::ExitCodeEq { step, .. } => step.as_ref(),
            _ => None,
        }
    }

    /// Whether the assertion may be run again (by the final re-check) without effects of its
    /// own: everything but a `command_succeeds` or `http_status` the plan marks
    /// `repeatable: false`.
    pub fn repeatable(&self) -> bool {
        match self {
            Self::CommandSucceeds { repeatable, .. } | Self::HttpStatus { repeatable, .. } => {
                *repeatable
            }
            _ => true,
        }
    }

    /// Whether checking it runs a command or reaches the network (`command_succeeds`,
    /// `socket_open`, `http_status`), rather than reading the workspace's files or the step's
    /// own output. Matched exhaustively: a new kind must say which it is.
    pub fn looks_outside(&self) -> bool {
        match self {
            Self::CommandSucceeds { .. } | Self::SocketOpen { .. } | Self::HttpStatus { .. } => {
                true
            }
            Self::FileExists { .. }
            | Self::FileNotExists { .. }
            | Self::FileContains { .. }
            | Self::FileNotContains { .. }
            | Self::FileSizeGt { .. }
            | Self::ContentChanged { .. }
            | Self::OutputContains { .. }
            | Self::ExitCodeEq { .. } => false,
        }
    }

    /// The hint given to the executor or planner when the assertion fails.
    pub fn recovery(&self) -> Option<&str> {
        match self {
            Self::FileExists { recovery, .. }
            | Self::FileNotExists { recovery, .. }
            | Self::FileContains { recovery, .. }
            | Self::FileNotContains { recovery, .. }
            | Self::FileSizeGt { recovery, .. }
            | Self::ContentChanged { recovery, .. }
            | Self::OutputContains { recovery, .. }
            | Self::ExitCodeEq { recovery, .. }
            | Self::CommandSucceeds { recovery, .. }
            | Self::SocketOpen { recovery, .. }
            | Self::HttpStatus { recovery, .. } => recovery.as_deref(),
        }
    }
}

/// The outcome of checking one assertion: `{"type", "passed", "detail"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AssertionResult {
    #[serde(rename = "type")]
    pub kind: String,
    pub passed: bool,
    /// What was seen.
    pub detail: String,
}
