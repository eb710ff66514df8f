//! The suites, by area; `support` holds the fixtures they share.

mod references;
mod schedule;
mod support;
