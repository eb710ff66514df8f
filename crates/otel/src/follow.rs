//! A run's journal read as it grows: the live exporter looks at the journal every fraction of a
//! second, and reading the whole run each time made the looks cost more the longer the run
//! ran (a 1,000-step run is 5,000 events, ~30 ms to read and parse). [`Following`] keeps what
//! it read and asks the store only for the rows after the last ones it has, so the journal is
//! read once in total. What it holds is what [`LoadedRun::tree`] reads at that moment, so the
//! spans mapped from it are the spans `pev export` maps from the finished run.

use pev_protocol::EventBody;
use pev_store::{Store, StoreError};

use crate::LoadedRun;

/// Run `run_id` and its child runs, as far as the journal has them.
#[derive(Debug, Clone)]
pub struct Following {
    run_id: String,
    /// The run first, then its child runs (delegated steps') as they were found.
    runs: Vec<LoadedRun>,
    /// Child runs a `delegate.started` names whose record could not be read yet.
    pending: Vec<String>,
}

impl Following {
    /// Follows `run_id` (a full id); nothing is read until [`Following::update`].
    pub fn new(run_id: &str) -> Self {
        Self { run_id: run_id.to_owned(), runs: Vec::new(), pending: Vec::new() }
    }

    /// The run followed.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The runs read so far, the followed run first.
    pub fn runs(&self) -> &[LoadedRun] {
        &self.runs
    }

    /// Reads what the journal gained since the last update; whether anything did. The plan
    /// versions are read again when a plan event names a version not read yet, or when `last`
    /// (the final look, which must see what [`LoadedRun::tree`] would).
    pub fn update(&mut self, store: &Store, last: bool) -> Result<bool, StoreError> {
        let mut grew = false;
        if self.runs.is_empty() {
            let run = LoadedRun::load(store, &self.run_id)?;
            self.pending.extend(children(&run.events));
            self.runs.push(run);
            grew = true;
        } else {
            for run in &mut self.runs {
                let events = store.events_after(&run.run_id, run.events.last().map(|e| e.seq))?;
                let calls =
                    store.model_calls_after(&run.run_id, run.model_calls.last().map(|c| c.seq))?;
                grew |= !events.is_empty() || !calls.is_empty();
                self.pending.extend(children(&events));
                run.events.extend(events);
                run.model_calls.extend(calls);
                let known = run.plans.iter().map(|(v, _)| *v).max().unwrap_or(0);
                if last || latest_plan(&run.events) > known {
                    run.plans = store
                        .plan_versions(&run.run_id)?
                        .into_iter()
                        .map(|(v, plan, _, _)| (v, plan))
                        .collect();
                }
            }
        }
        // Child runs, and theirs in turn: a child whose record is not written yet is tried
        // again at the next look (and left out at the last, as `LoadedRun::tree` leaves it).
        let mut waiting = Vec::new();
        while let Some(child) = self.pending.pop() {
            if self.runs.iter().any(|r| r.run_id == child) || waiting.contains(&child) {
                continue;
            }
            match LoadedRun::load(store, &child) {
                Ok(run) => {
                    self.pending.extend(children(&run.events));
                    self.runs.push(run);
                    grew = true;
                }
                Err(_) => waiting.push(child),
            }
        }
        self.pending = waiting;
        Ok(grew)
    }
}

/// The child runs `events` start.
fn children(events: &[pev_protocol::event::Event]) -> impl Iterator<Item = String> + '_ {
    events.iter().filter_map(|e| match &e.body {
        EventBody::DelegateStarted { child_run, .. } => Some(child_run.clone()),
        _ => None,
    })
}

/// The highest plan version `events` announce.
fn latest_plan(events: &[pev_protocol::event::Event]) -> u32 {
    let versions = events.iter().filter_map(|e| match &e.body {
        EventBody::PlanCreated { version, .. } | EventBody::PlanRevised { version, .. } => {
            Some(*version)
        }
        _ => None,
    });
    versions.max().unwrap_or(0)
}
