//! The suites, by area; `support` holds the fixtures they share.

mod cache;
mod control;
mod final_check;
mod hooks;
mod journal;
mod references;
mod resume;
mod schedule;
mod support;
mod wire_names;
