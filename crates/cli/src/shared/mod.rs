//! What several commands share: the exit codes and the failure that carries one (`exit`), where
//! the workspace and the journal are (`workspace`), the run's session (observer, approver,
//! telemetry, policy: `session`, `policy_source`, `approve_tty`, `telemetry`), the role clients
//! (`models`), the sandbox's set-up (`sandbox_setup`) and scratch copies (`scratch`).

pub(crate) mod approve_tty;
pub(crate) mod exit;
pub(crate) mod models;
pub(crate) mod policy_source;
pub(crate) mod sandbox_setup;
pub(crate) mod scratch;
pub(crate) mod session;
pub(crate) mod telemetry;
pub(crate) mod workspace;
