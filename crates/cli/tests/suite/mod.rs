//! Tests that run the `pev` binary (assert_cmd) on plans and policies written to temp dirs.

mod agent_budget;
mod agent_example;
mod agent_outcomes;
mod agent_recovery;
mod agent_resume;
mod agent_support;
mod bad_input;
mod doctor;
mod eval;
mod examples;
mod exit_codes;
mod explain;
mod final_check;
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
