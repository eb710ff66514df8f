//! The `pev` binary's integration tests: one test binary, one module per area.

// `cfg(test)` puts the helpers under clippy.toml's allow-*-in-tests, as the tests are.
#[cfg(test)]
mod suite;

#[cfg(test)]
mod agent_http;
