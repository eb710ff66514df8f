//! One driver per run: a [`Lease`] is held by the process driving a run (`pev run`, `pev agent`,
//! `pev resume`) for as long as it drives it, and a second driver is refused while it lives.
//!
//! On a SQLite journal the lease is an exclusive file lock beside the journal
//! (`.pev/locks/RUN.lock`); the OS drops it when the process dies, `kill -9` included.
//!
//! On a Postgres journal it is a session advisory lock taken on the connection of this
//! process's journal writer, and every journal this process then opens on that database writes
//! through that same connection. The server drops the lock the moment the session ends (the
//! process died, or someone terminated its session), and a writer whose session is gone cannot
//! commit again: it never reconnects, so its next record (the intent of an effect included)
//! fails instead of landing after another driver took over. The session's `application_name`
//! says which machine and process hold a run, for the refusal's message.

use std::path::Path;

use crate::db::Location;
#[cfg(feature = "postgres")]
use crate::error::StoreError;

/// Held while a process drives a run; dropping it lets another process take the run.
#[derive(Debug)]
pub struct Lease {
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    held: Held,
}

#[derive(Debug)]
enum Held {
    File(#[allow(dead_code)] std::fs::File),
    #[cfg(feature = "postgres")]
    Session {
        journal: crate::Journal,
        key: i64,
        target: std::sync::Arc<crate::pg::Target>,
    },
}

impl Drop for Lease {
    fn drop(&mut self) {
        #[cfg(feature = "postgres")]
        if let Held::Session { journal, key, target } = &self.held {
            // A writer that cannot unlock has lost its session, and the lock with it.
            let _ = journal.advisory_lock(*key, false);
            crate::pg::lock(&target.held).remove(key);
        }
    }
}

/// Why a run could not be leased.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another process drives the run.
    #[error("run {run_id} is being run by another pev process{holder}; wait for it to end")]
    Held { run_id: String, holder: String },
    /// The lock could not be taken or checked.
    #[error("cannot lease run {run_id}: {message}")]
    Failed { run_id: String, message: String },
}

impl Location {
    /// Takes `run_id`'s lease for this process, or says who holds it.
    ///
    /// On Postgres the lease's journal writer (which every `Journal` and `Store` write of this
    /// process goes through) MACs with the environment's journal key (`key.rs`).
    pub fn lease(&self, run_id: &str) -> Result<Lease, LeaseError> {
        match self {
            Location::File(db) => file_lease(db, run_id),
            #[cfg(feature = "postgres")]
            Location::Postgres(target) => session_lease(self, target, run_id, None),
        }
    }

    /// [`Location::lease`] with the journal key the lease's writer uses given (tests).
    pub fn lease_keyed(&self, run_id: &str, keying: &crate::Keying) -> Result<Lease, LeaseError> {
        match self {
            Location::File(db) => {
                let _ = keying;
                file_lease(db, run_id)
            }
            #[cfg(feature = "postgres")]
            Location::Postgres(target) => session_lease(self, target, run_id, Some(keying)),
        }
    }
}

fn file_lease(db: &Path, run_id: &str) -> Result<Lease, LeaseError> {
    let failed = |message: String| LeaseError::Failed { run_id: run_id.to_owned(), message };
    let dir = db.parent().unwrap_or_else(|| Path::new(".")).join("locks");
    let path = dir.join(format!("{run_id}.lock"));
    std::fs::create_dir_all(&dir)
        .map_err(|e| failed(format!("cannot create {}: {e}", dir.display())))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| failed(format!("cannot open {}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(Lease { held: Held::File(file) }),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(LeaseError::Held { run_id: run_id.to_owned(), holder: String::new() })
        }
        Err(std::fs::TryLockError::Error(e)) => {
            Err(failed(format!("cannot lock {}: {e}", path.display())))
        }
    }
}

#[cfg(feature = "postgres")]
fn session_lease(
    at: &Location,
    target: &std::sync::Arc<crate::pg::Target>,
    run_id: &str,
    keying: Option<&crate::Keying>,
) -> Result<Lease, LeaseError> {
    use std::sync::Arc;
    let failed =
        |e: StoreError| LeaseError::Failed { run_id: run_id.to_owned(), message: e.to_string() };
    let key = crate::pg::lease_key(run_id);
    // Advisory locks nest within a session; a run is driven once per process too.
    if !crate::pg::lock(&target.held).insert(key) {
        return Err(LeaseError::Held {
            run_id: run_id.to_owned(),
            holder: " (this one)".to_owned(),
        });
    }
    let taken = (|| {
        let journal = {
            let mut writer = crate::pg::lock(&target.leased);
            match writer.upgrade() {
                Some(inner) => crate::Journal { inner },
                None => {
                    let journal = crate::Journal::start_new(
                        at,
                        match keying {
                            Some(k) => k.clone(),
                            None => crate::key::load_key(crate::key::CreateKey::Yes)?,
                        },
                    )?;
                    *writer = Arc::downgrade(&journal.inner);
                    journal
                }
            }
        };
        let held = journal.advisory_lock(key, true)?;
        Ok::<_, StoreError>((journal, held))
    })();
    match taken {
        Ok((journal, true)) => {
            Ok(Lease { held: Held::Session { journal, key, target: Arc::clone(target) } })
        }
        Ok((_, false)) => {
            crate::pg::lock(&target.held).remove(&key);
            let holder = crate::pg::holder(at, key).unwrap_or_default();
            Err(LeaseError::Held { run_id: run_id.to_owned(), holder })
        }
        Err(e) => {
            crate::pg::lock(&target.held).remove(&key);
            Err(failed(e))
        }
    }
}

/// The writer of this process's leases on `target`, while one lives.
#[cfg(feature = "postgres")]
pub(crate) fn leased_writer(
    target: &crate::pg::Target,
) -> Option<std::sync::Arc<crate::journal::Inner>> {
    crate::pg::lock(&target.leased).upgrade()
}
