//! pev-tools' integration tests: one binary, one module per tool family, all on temp dirs and
//! local sockets (nothing here touches the internet).

// Integration tests are always built with cfg(test); saying so lets clippy's
// allow-unwrap-in-tests cover the shared helpers, not only the #[test] functions.
#[cfg(test)]
mod suite;
