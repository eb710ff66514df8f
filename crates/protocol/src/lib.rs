//! The shapes pev users and tools rely on: plans, steps, assertions, step references, policies and
//! lint results, exactly as `shared/CONTRACTS.md` describes them.
//!
//! This crate is the bottom layer of the workspace. It does no I/O and has no async runtime: it
//! turns text into typed values ([`parse`]) and types into JSON Schemas ([`schema`]), nothing
//! more. Everything above it (lint, engine, CLI) speaks these types.

pub mod assertion;
pub mod event;
pub mod lint;
pub mod oracle;
pub mod params;
pub mod parse;
pub mod plan;
pub mod policy;
pub mod reference;
pub mod run;
pub mod schema;
pub mod short_str;
pub mod tool;

pub use assertion::Assertion;
pub use event::{Event, EventBody};
pub use lint::{Finding, Level, LintCode, LintResult, LintStatus, Severity};
pub use params::{ArrayRef, NumberRef, ObjectRef, Params, ValueRef};
pub use parse::{Format, ParseError, ParsedPlan, PlanIssue};
pub use plan::{
    BudgetSlice, Complexity, DelegateMode, Delegation, OnFail, Plan, Postcondition, Step, StepId,
};
pub use policy::Policy;
pub use reference::{ParamRef, RefPath, Reference, Segment, Template};
pub use short_str::ShortStr;
