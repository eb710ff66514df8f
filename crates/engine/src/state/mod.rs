//! Who holds what while a run goes: a step's slot (`slot`), the context a step task is handed and
//! the report it returns (`step`), and the run's state between steps (`run`). Data and the small
//! functions on it; nothing here calls a tool or a model.

pub(crate) mod run;
pub(crate) mod slot;
pub(crate) mod step;
