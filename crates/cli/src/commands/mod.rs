//! One file (or folder) per command, each a `run`-like entry `main` calls with the parsed
//! arguments. Commands use `shared/`, `view/`, `args/` and `input/`; a command that calls another
//! (`replay` runs an agent, `resume` goes through `run`, `run` prints lint reports) imports it.

pub(crate) mod agent;
pub(crate) mod check;
pub(crate) mod conversation;
pub(crate) mod doctor;
pub(crate) mod eval;
pub(crate) mod follow;
pub(crate) mod journal;
pub(crate) mod lint;
pub(crate) mod mcp;
pub(crate) mod replay;
pub(crate) mod run;
