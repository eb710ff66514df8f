//! The suites, by area; `support` holds the fixtures they share.

mod schedule;
mod support;
