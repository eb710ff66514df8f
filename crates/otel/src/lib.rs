//! pev's traces. A run's journal (events, model calls, plan versions) is mapped by one pure
//! function, [`map::map_run`], to spans that follow OpenTelemetry's GenAI semantic conventions;
//! [`proto`] encodes them as an OTLP/protobuf export request; and, with the `otlp` feature (on by
//! default), [`export`] sends them over OTLP/HTTP, either live while a run runs ([`export::Live`],
//! which reads the journal as it grows and never holds a run up) or after the fact
//! (`pev export`). Ids derive from the run id, so every outlet agrees on the trace.

pub mod follow;
pub mod map;
pub mod proto;
pub mod span;

#[cfg(feature = "otlp")]
pub mod export;
#[cfg(feature = "otlp")]
mod live;

use pev_store::{ModelCallRecord, Store, StoreError};

pub use map::{Options, RunJournal, SCHEMA_URL, map_run, trace_id, tree_root};
pub use span::Span;

/// A run's journal, read out of a store.
#[derive(Debug, Clone, Default)]
pub struct LoadedRun {
    pub run_id: String,
    pub events: Vec<pev_protocol::event::Event>,
    pub model_calls: Vec<ModelCallRecord>,
    pub plans: Vec<(u32, serde_json::Value)>,
    /// Its parent run, for a child run.
    pub parent: Option<String>,
}

impl LoadedRun {
    /// Reads run `run_id` (a full id) from `store`.
    pub fn load(store: &Store, run_id: &str) -> Result<Self, StoreError> {
        let events = store.events(run_id)?;
        let model_calls = store.model_calls(run_id)?;
        let plans =
            store.plan_versions(run_id)?.into_iter().map(|(v, plan, _, _)| (v, plan)).collect();
        let parent = store.parent_of(run_id)?;
        Ok(Self { run_id: run_id.to_owned(), events, model_calls, plans, parent })
    }

    /// Run `run_id` and every child run under it (delegated steps'), parents first.
    pub fn tree(store: &Store, run_id: &str) -> Result<Vec<Self>, StoreError> {
        let mut out = vec![Self::load(store, run_id)?];
        let mut next = 0;
        while next < out.len() {
            let children: Vec<String> = out[next]
                .events
                .iter()
                .filter_map(|e| match &e.body {
                    pev_protocol::EventBody::DelegateStarted { child_run, .. } => {
                        Some(child_run.clone())
                    }
                    _ => None,
                })
                .collect();
            for child in children {
                if out.iter().all(|r| r.run_id != child) {
                    // A child whose record never got written (refused before it was created).
                    if let Ok(run) = Self::load(store, &child) {
                        out.push(run);
                    }
                }
            }
            next += 1;
        }
        Ok(out)
    }

    /// The run as the mapping takes it.
    pub fn journal(&self) -> RunJournal<'_> {
        RunJournal {
            run_id: &self.run_id,
            events: &self.events,
            model_calls: &self.model_calls,
            plans: &self.plans,
            parent: self.parent.as_deref(),
        }
    }

    /// Its spans.
    pub fn spans(&self, options: &Options) -> Vec<Span> {
        map_run(&self.journal(), options)
    }
}
