//! Reading the journal from async code. The Postgres backend's client is synchronous and blocks
//! on a runtime of its own, which panics on a thread that drives the engine's ("Cannot start a
//! runtime from within a runtime"); so every read the engine makes while a run is under way goes
//! through [`read`], on a blocking thread, whatever the backend.

use pev_store::{Location, Store, StoreError};

use crate::engine::EngineError;

/// Opens the journal at `location` on a blocking thread and hands it to `f`.
pub(crate) async fn read<T, F>(location: &Location, f: F) -> Result<T, EngineError>
where
    T: Send + 'static,
    F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
{
    let location = location.clone();
    let task = tokio::task::spawn_blocking(move || f(&Store::open_existing(&location)?));
    match task.await {
        Ok(read) => Ok(read?),
        Err(e) => Err(EngineError::Resume(format!("reading the journal failed: {e}"))),
    }
}
