//! How a command ends: its exit code (reference §4's table: 0 success, 1 failed, 2 bad input
//! or usage, 3 partial, 4 awaiting approval) and the [`Fail`] that carries a message to stderr.

use pev_protocol::run::RunStatus;

pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_BAD_INPUT: u8 = 2;
pub const EXIT_PARTIAL: u8 = 3;
pub const EXIT_AWAITING: u8 = 4;

/// A failure that ends the command: the message and the exit code.
#[derive(Debug)]
pub struct Fail(pub u8, pub String);

impl Fail {
    pub(crate) fn input(message: impl Into<String>) -> Self {
        Self(EXIT_BAD_INPUT, message.into())
    }
}

pub fn exit_code(status: RunStatus) -> u8 {
    match status {
        RunStatus::Success => EXIT_OK,
        RunStatus::Failed => EXIT_FAILED,
        RunStatus::Partial => EXIT_PARTIAL,
        RunStatus::AwaitingApproval => EXIT_AWAITING,
    }
}
