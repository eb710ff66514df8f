//! The checks, grouped by what they look at. Each is `fn check(ctx, out)`: pure, infallible,
//! pushing findings in step order.

use pev_protocol::Finding;

use crate::Ctx;

mod delegate;
mod download;
mod fetch_output;
mod flow;
mod injection;
mod interpreters;
mod oracle;
mod paths;
mod references;
mod secrets;
mod shell_parser;
mod shell_syntax;
mod sql;
mod structure;
mod tools;

/// Runs every check, then the Rego policies.
pub(crate) fn run_all(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    structure::check(ctx, out);
    references::check(ctx, out);
    delegate::check(ctx, out);
    tools::check(ctx, out);
    oracle::check(ctx, out);
    secrets::check(ctx, out);
    sql::check(ctx, out);
    injection::check(ctx, out);
    flow::check(ctx, out);
    crate::rego::check(ctx, out);
}
