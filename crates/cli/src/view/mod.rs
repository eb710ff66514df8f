//! What the CLI shows: colours and widths (`style`), a finding's place in its text (`text`,
//! `sarif`), the live view of a run and its summary (`run_view`, `run_summary`, `call_notice`),
//! `pev show`'s page (`show_view`), and the lint codes explained (`explain`). Nothing here reads
//! the command line or the journal; it turns values into text.

pub(crate) mod call_notice;
pub(crate) mod explain;
pub(crate) mod run_summary;
pub(crate) mod run_view;
pub(crate) mod sarif;
pub(crate) mod show_view;
pub(crate) mod style;
pub(crate) mod text;
