//! Tests that run the `pev` binary (assert_cmd) on plans and policies written to temp dirs.

mod bad_input;
mod doctor;
mod examples;
mod exit_codes;
mod explain;
mod output;
mod run_approval;
mod run_assertions;
mod run_dag;
mod run_examples;
mod run_journal;
mod run_outcome;
mod run_sandbox;
mod run_support;
mod run_tools;
mod sarif;
mod schema;
mod support;
