//! What the CLI shows: colours and widths (`style`), a finding's place in its text (`text`,
//! `sarif`), the live view of a run and its summary (`run_view`, `run_summary`, `call_notice`),
//! `pev show`'s page (`show_view`), the lint codes explained (`explain`) and the JSON lint
//! report written on two threads (`lint_json`). Nothing here reads
//! the command line or the journal; it turns values into text.

pub(crate) mod call_notice;
pub(crate) mod explain;
pub(crate) mod lint_json;
pub(crate) mod run_summary;
pub(crate) mod run_view;
pub(crate) mod sarif;
pub(crate) mod show_view;
pub(crate) mod style;
pub(crate) mod text;
