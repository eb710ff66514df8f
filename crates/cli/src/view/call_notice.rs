//! Where the model clients' notices go ("planner (claude-opus-4-6) has waited 30s for an
//! answer…"): stderr, and once a run draws its live view, above its bars so they are not garbled.
//! The clients are built before the run's view exists, so they write through a [`Notices`] that
//! the view is attached to later.

use std::io::Write;
use std::sync::{Arc, OnceLock};

use pev_providers::notice::{CallNotice, NoticeSink};

use crate::view::run_view::LiveView;

/// The destination of every notice of one command.
#[derive(Default)]
pub(crate) struct Notices {
    live: OnceLock<Arc<LiveView>>,
}

impl Notices {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// From now on, lines go above `live`'s bars (none: stderr, as before).
    pub(crate) fn attach(&self, live: Option<Arc<LiveView>>) {
        if let Some(live) = live {
            let _ = self.live.set(live);
        }
    }

    /// A sink for the calls of `who` ("planner (claude-opus-4-6)").
    pub(crate) fn sink(self: &Arc<Self>, who: String) -> NoticeSink {
        let notices = Arc::clone(self);
        Arc::new(move |notice: CallNotice| notices.say(&format!("pev: {}", notice.describe(&who))))
    }

    fn say(&self, line: &str) {
        match self.live.get() {
            Some(live) => live.note(line),
            None => {
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            }
        }
    }
}
