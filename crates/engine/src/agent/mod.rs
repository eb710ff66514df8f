//! `pev agent`: the Plan-Execute-Verify loop with models. A planner model writes the plan
//! (`planner`), an executor model carries out instruction steps with tools (`executor`), a
//! verifier model judges what tier 1 cannot check (`judge`), and every model call is paid from a
//! budget that is a ceiling (`budget`). The run engine does the rest: scheduling, the journal,
//! tier-1 verification and the outcome.

pub mod budget;
pub mod call_log;
pub mod call_marks;
pub mod conversation;
pub mod delegate;
pub mod executor;
pub mod judge;
pub mod judge_post;
mod judge_rules;
pub mod loop_mode;
pub mod loop_run;
pub mod planner;
pub mod replay;
pub mod roles;
pub mod run;
#[cfg(test)]
mod test_clients;
pub(crate) mod turn;
pub mod volatile;
