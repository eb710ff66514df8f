//! The suites, by area; `support` holds the fixtures they share.

mod cache;
mod control;
mod delegate;
mod final_check;
mod hooks;
mod journal;
mod judged;
mod judged_loop;
mod oracle;
mod references;
mod resume;
mod schedule;
mod stop;
mod support;
mod wire_names;
