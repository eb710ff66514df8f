//! The run's end: the postconditions and the final re-check (`finish`, `final_check`), what no
//! assertion checked and goes to the judge (`unasserted`), and the workspace snapshot the
//! verdict compares against (`snapshot`).

pub(crate) mod final_check;
pub(crate) mod finish;
pub(crate) mod snapshot;
pub(crate) mod unasserted;
