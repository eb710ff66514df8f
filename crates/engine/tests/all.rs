//! The integration tests of pev-engine, one binary: the scheduler, failure handling, references,
//! approval, cancellation, the event stream, the journal and resume, all through the public API
//! with a real store on a temporary directory and small test tools.

// Tests may unwrap and expect: a panic there is a failed test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
