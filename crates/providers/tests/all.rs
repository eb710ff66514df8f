//! pev-providers' integration tests: the clients against a local HTTP server that plays recorded
//! provider responses. No network, no key.

#[cfg(test)]
mod suite;
