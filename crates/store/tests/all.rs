//! The integration tests of pev-store, one binary: opening files, the journal writer, reads.

// Tests may unwrap and expect: a panic there is a failed test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
