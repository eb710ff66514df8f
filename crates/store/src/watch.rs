//! Following a journal as other processes write it (`pev show --follow`): a [`Watch`] waits
//! until new events may have been committed, and the follower reads them by sequence number
//! ([`crate::Store::events_after`]). The wake-up is only a hint, so a missed or doubled one
//! loses or repeats nothing.
//!
//! On Postgres every commit that adds events notifies channel `pev_events` with each run's id
//! (in the transaction, so the notice comes with the commit, and only then), and a watch
//! LISTENs on a connection of its own; a connection that breaks is reopened at the next wait.
//! A SQLite journal is on this machine, and a watch there simply waits a short while.

use std::time::Duration;

use crate::db::{Conn, Dialect, Location, params};
use crate::error::{StoreError, db_err};

/// The channel commits with events notify.
pub(crate) const CHANNEL: &str = "pev_events";

/// How long a SQLite watch waits before the follower looks again.
const POLL: Duration = Duration::from_millis(150);

/// Notifies the runs' followers (Postgres) when the transaction commits.
pub(crate) fn notify<'a>(
    conn: &mut Conn,
    at: &Location,
    runs: impl Iterator<Item = &'a str>,
) -> Result<(), StoreError> {
    if conn.dialect() != Dialect::Postgres {
        return Ok(());
    }
    let mut sent: Vec<&str> = Vec::new();
    for run in runs {
        if !sent.contains(&run) {
            conn.exec(&format!("SELECT pg_notify('{CHANNEL}', ?1)"), params![run])
                .map_err(|e| db_err(at, "notify the run's followers", e))?;
            sent.push(run);
        }
    }
    Ok(())
}

/// Waits for new events in a journal.
pub struct Watch {
    #[cfg(feature = "postgres")]
    listen: Option<(std::sync::Arc<crate::pg::Target>, Option<postgres::Client>)>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

impl Watch {
    /// A watch on the journal at `at`.
    pub fn new(at: &Location) -> Watch {
        match at {
            Location::File(_) => Watch {
                #[cfg(feature = "postgres")]
                listen: None,
            },
            #[cfg(feature = "postgres")]
            Location::Postgres(target) => {
                Watch { listen: Some((std::sync::Arc::clone(target), None)) }
            }
        }
    }

    /// Returns when new events may be there, or after `timeout` at most. Never fails: a
    /// broken connection is reopened at the next call, and the follower's next read says
    /// whether the journal itself is reachable.
    pub fn wait(&mut self, timeout: Duration) {
        #[cfg(feature = "postgres")]
        if let Some((target, client)) = &mut self.listen {
            if client.is_none() {
                *client = target.listener(CHANNEL).ok();
                if client.is_none() {
                    // No listening connection (too many clients, a pooler): look again later.
                    std::thread::sleep(timeout.min(Duration::from_secs(1)));
                }
                // Anything committed before the LISTEN took effect is read by the follower now.
                return;
            }
            let broken = client.as_mut().is_some_and(|c| {
                use fallible_iterator::FallibleIterator as _;
                let woke = c.notifications().timeout_iter(timeout).next().is_err();
                woke || c.is_closed()
            });
            if broken {
                *client = None;
                std::thread::sleep(timeout.min(Duration::from_secs(1)));
            }
            return;
        }
        std::thread::sleep(timeout.min(POLL));
    }
}
