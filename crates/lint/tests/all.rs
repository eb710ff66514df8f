//! pev-lint's integration tests: one binary, one module per group of checks.

// Tests may unwrap and expect: a panic there is a failed test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
