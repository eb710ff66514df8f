//! TODO(helper): flow checks.

use pev_protocol::Finding;

use crate::Ctx;

pub(crate) fn check(_ctx: &Ctx<'_>, _out: &mut Vec<Finding>) {}
