//! Traces from the CLI: the live exporter a run's session holds (when `OTEL_EXPORTER_OTLP_ENDPOINT`
//! or the user's `[telemetry]` names an endpoint), and `pev export RUN… --otlp URL`, which
//! replays finished runs from the journal. Both use `pev-otel`'s one mapping; without the `otlp`
//! feature the live exporter is absent and `pev export` says how to get it.

use std::io::Write;

use pev_providers::config::Config;

use crate::args::values::Common;
use crate::shared::exit::{EXIT_BAD_INPUT, Fail};

/// `pev export`'s arguments.
#[derive(Debug)]
pub(crate) struct ExportRequest {
    pub runs: Vec<String>,
    pub url: Option<String>,
    pub capture_content: bool,
}

#[cfg(feature = "otlp")]
mod enabled {
    use pev_otel::export::{FileSettings, Live, OtlpConfig};

    use super::*;
    use crate::shared::exit::{EXIT_FAILED, EXIT_OK};
    use crate::shared::workspace::{store_path, workspace_dir};

    /// The settings of the environment and the user's `[telemetry]`; `None` when no endpoint
    /// is named.
    pub(crate) fn settings(config: &Config) -> Result<Option<OtlpConfig>, String> {
        settings_to(config, None)
    }

    /// [`settings`], sending to `url` when given.
    fn settings_to(config: &Config, url: Option<&str>) -> Result<Option<OtlpConfig>, String> {
        let file = config.telemetry().map_or_else(FileSettings::default, |t| FileSettings {
            endpoint: t.endpoint.clone(),
            headers: t.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            capture_content: t.capture_content,
            timeout_ms: t.timeout_ms,
        });
        OtlpConfig::from_vars_to(&|k| std::env::var(k).ok(), &file, url)
            .map_err(|e| if url.is_some() { format!("--otlp: {e}") } else { e })
    }

    /// A run's live exporter, or nothing.
    #[derive(Debug, Default)]
    pub(crate) struct Tracing {
        live: Option<Live>,
    }

    impl Tracing {
        /// Starts exporting the runs of journal `db` if an endpoint is configured. Settings pev
        /// cannot use (a gRPC protocol set for other tools, a bad URL) are one warning on `err`
        /// and no traces: they never stop a run.
        pub(crate) fn start(
            config: &Config,
            db: &pev_store::Location,
            err: &mut dyn Write,
        ) -> Self {
            match settings(config) {
                Ok(settings) => Self { live: settings.map(|s| Live::start(s, db.clone())) },
                Err(e) => {
                    let _ = writeln!(err, "pev: warning: no traces are sent: {e}");
                    Self::default()
                }
            }
        }

        pub(crate) fn follow(&self, run_id: &str, resumed: bool) {
            if let Some(live) = &self.live {
                live.follow(run_id, resumed);
            }
        }

        /// Sends the rest (bounded by the exporter's timeout); a failure is one warning.
        pub(crate) fn finish(&mut self, err: &mut dyn Write) {
            if let Some(warning) = self.live.take().and_then(Live::finish) {
                let _ = writeln!(err, "pev: warning: {warning}");
            }
        }
    }

    pub(crate) fn export(
        req: &ExportRequest,
        common: &Common,
        out: &mut dyn Write,
    ) -> Result<u8, Fail> {
        let workspace = workspace_dir(common.workspace.as_deref())?;
        let file = crate::shared::workspace::file_config(&workspace)?;
        let mut config = settings_to(&file, req.url.as_deref())
            .map_err(|e| Fail(EXIT_BAD_INPUT, e))?
            .ok_or_else(|| {
                Fail(
                    EXIT_BAD_INPUT,
                    "no endpoint: give --otlp URL, or set OTEL_EXPORTER_OTLP_ENDPOINT \
                     (or [telemetry] endpoint in ~/.config/pev/pev.toml)"
                        .to_owned(),
                )
            })?;
        config.options.capture_content |= req.capture_content;
        let db = store_path(common, &workspace)?;
        let store = pev_store::Store::open_existing(&db)
            .map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?;
        let mut runs = Vec::new();
        for run in &req.runs {
            let id = store.resolve_run(run).map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?;
            if !runs.contains(&id) {
                runs.push(id);
            }
        }
        for run_id in &runs {
            // A run's child runs (delegated steps') nest in its trace and go with it.
            let tree = pev_otel::LoadedRun::tree(&store, run_id)
                .map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
            let spans: Vec<pev_otel::Span> =
                tree.iter().flat_map(|run| run.spans(&config.options)).collect();
            let trace_of = if tree.first().is_some_and(|r| r.parent.is_some()) {
                pev_otel::tree_root(run_id)
            } else {
                run_id.as_str()
            };
            pev_otel::export::send_blocking(&config, &spans).map_err(|e| {
                Fail(EXIT_FAILED, format!("run {run_id} was not sent to {}: {e}", config.endpoint))
            })?;
            let children = match tree.len() {
                1 => String::new(),
                n => format!(" with {} child run(s)", n - 1),
            };
            let _ = writeln!(
                out,
                "sent run {run_id}{children}: {} span(s), trace {} → {}",
                spans.len(),
                pev_otel::span::hex(&pev_otel::trace_id(trace_of)),
                config.endpoint
            );
        }
        Ok(EXIT_OK)
    }
}

#[cfg(feature = "otlp")]
pub(crate) use enabled::{Tracing, export};

#[cfg(not(feature = "otlp"))]
mod disabled {
    use super::*;

    /// Without the `otlp` feature there is nothing to export to.
    #[derive(Debug, Default)]
    pub(crate) struct Tracing;

    impl Tracing {
        pub(crate) fn start(
            _config: &Config,
            _db: &pev_store::Location,
            _err: &mut dyn Write,
        ) -> Self {
            Self
        }

        pub(crate) fn follow(&self, _run_id: &str, _resumed: bool) {}

        pub(crate) fn finish(&mut self, _err: &mut dyn Write) {}
    }

    pub(crate) fn export(
        _req: &ExportRequest,
        _common: &Common,
        _out: &mut dyn Write,
    ) -> Result<u8, Fail> {
        Err(Fail(
            EXIT_BAD_INPUT,
            "this pev was built without the `otlp` feature; rebuild with default features"
                .to_owned(),
        ))
    }
}

#[cfg(not(feature = "otlp"))]
pub(crate) use disabled::{Tracing, export};
