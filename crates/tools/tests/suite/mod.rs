//! The test modules.

mod files;
mod http;
mod registry;
mod sandbox;
mod shell;
mod support;
