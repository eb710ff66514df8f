//! pev-lint's integration tests: one binary, one module per group of checks.

mod suite;
