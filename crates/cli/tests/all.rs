//! The `pev` binary's integration tests: one test binary, one module per area.

mod suite;
