//! pev's scheduler: runs a plan's steps as a DAG over `depends_on` and references, calls tools in
//! the workspace sandbox, checks each step's assertions, journals everything, and resumes a
//! crashed run without repeating its side effects.
//!
//! This file is the table of contents. The modules stand in layers that import only downward
//! (`crates/cli/tests/structure.rs` checks it), lowest first:
//!
//! 0. contracts and leaves: `instruct`, `delegation`, `hooks` (the runner), `resolve`,
//!    `inventory`, `lanes`, `model_scope`, `digest`;
//! 1. `engine`: [`Engine`], [`EngineConfig`] and what a run reports to;
//! 2. data of calls and the journal: `call`, `continuation`, `cache/`, `recorder`,
//!    `journal_read`, `oracle`;
//! 3. `state/`: who holds what during a run (a step's slot, the context and report of a step
//!    task, the run's state);
//! 4. `verdict/`: the postconditions, the final re-check and the outcome;
//! 5. `step/`: one step task (a tool step, an instruction step and its gate, a delegated step,
//!    the call's durable life, approval, hooks, cache, recovery of an interrupted call);
//! 6. `scheduler`: the ready queue, settling reports, resume's rebuild;
//! 7. `agent/`: the models behind the contracts.

pub mod agent;
mod cache;
mod call;
mod continuation;
pub mod delegation;
mod digest;
mod engine;
pub mod hooks;
pub mod instruct;
pub mod inventory;
mod journal_read;
mod lanes;
pub mod model_scope;
mod oracle;
mod recorder;
pub mod resolve;
mod scheduler;
mod state;
mod step;
mod verdict;
pub mod write_locks;

pub use engine::{
    Approval, ApprovalMode, ApprovalRequest, Approver, Cancel, Engine, EngineConfig, EngineError,
    LIGHT_JOBS, ModelHooks, Observer, Silent, check_runnable,
};
/// A boxed future that can cross threads (the providers' alias: the same type).
pub use pev_providers::BoxFuture;
pub use scheduler::{ResumeInput, RunInput};
pub use verdict::finish::status_name;
pub use verdict::snapshot::snapshot;
