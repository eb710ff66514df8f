//! Tests that run the `pev` binary (assert_cmd) on plans and policies written to temp dirs.

mod bad_input;
mod examples;
mod exit_codes;
mod explain;
mod output;
mod sarif;
mod schema;
mod support;
