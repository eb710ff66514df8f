//! The test modules.

mod files;
mod http;
mod registry;
mod sandbox;
mod scope;
mod shell;
mod support;
