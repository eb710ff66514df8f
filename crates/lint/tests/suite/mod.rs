//! Every lint code has at least one plan that triggers it and one near-miss that must not.

mod flow;
mod injection;
mod plan_lint_compat;
mod props;
mod references;
mod rego;
mod secrets;
mod sql;
mod structure;
mod support;
mod tools;
