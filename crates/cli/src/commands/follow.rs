//! `pev show RUN --follow`: the run's events as they are journaled, by whichever process (on
//! whichever machine, with a shared journal) drives it, until its `run.finished`.
//!
//! Events are read by sequence number after the last one printed, so a wake-up that never came
//! (or a journal connection that dropped and was reopened) delays an event, never loses or
//! repeats one. Text is one line per event; `--json` is the events themselves, one per line.

use std::io::Write;
use std::time::Duration;

use pev_protocol::event::{Event, EventBody};
use pev_store::{Store, Watch};

use crate::args::values::Common;
use crate::shared::exit::{EXIT_FAILED, EXIT_OK, Fail};
use crate::shared::workspace::{store_path, workspace_dir};

/// The longest a follower waits before looking again (the wake-up is a hint).
const LOOK_AGAIN: Duration = Duration::from_secs(2);

/// How long a follower keeps trying to reach a journal it lost before giving up.
const GIVE_UP: Duration = Duration::from_secs(300);

pub fn follow(
    run: &str,
    common: &Common,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, Fail> {
    let workspace = workspace_dir(common.workspace.as_deref())?;
    let db = store_path(common, &workspace)?;
    let mut store = Store::open_existing(&db).map_err(|e| Fail(2, e.to_string()))?;
    let run_id = store.resolve_run(run).map_err(|e| Fail(2, e.to_string()))?;
    let mut watch = Watch::new(&db);
    let mut last: Option<u64> = None;
    let mut lost_since: Option<std::time::Instant> = None;
    loop {
        let events = match store.events_after(&run_id, last) {
            Ok(events) => {
                lost_since = None;
                events
            }
            Err(e) => {
                let since = *lost_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() > GIVE_UP {
                    return Err(Fail(EXIT_FAILED, format!("lost the journal: {e}")));
                }
                let _ = writeln!(err, "pev: the journal is unreachable ({e}); trying again");
                std::thread::sleep(Duration::from_secs(1));
                if let Ok(again) = Store::open_existing(&db) {
                    store = again;
                }
                continue;
            }
        };
        for event in &events {
            let line = if common.json {
                serde_json::to_string(event).unwrap_or_default()
            } else {
                text_line(event)
            };
            writeln!(out, "{line}")
                .and_then(|()| out.flush())
                .map_err(|e| Fail(EXIT_FAILED, format!("cannot write the events: {e}")))?;
            last = Some(event.seq);
            if matches!(event.body, EventBody::RunFinished { .. }) {
                return Ok(EXIT_OK);
            }
        }
        if events.is_empty() {
            watch.wait(LOOK_AGAIN);
        }
    }
}

/// `14:22:33.123  #7  step.finished  step=patch status=done`: the event's own fields, compact.
fn text_line(event: &Event) -> String {
    let time = event.at.split('T').nth(1).unwrap_or(&event.at).trim_end_matches('Z');
    let mut line = format!("{time}  #{:<4} {}", event.seq, event.body.name());
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(&event.body) {
        for (key, value) in fields {
            if matches!(key.as_str(), "type" | "event" | "kind") {
                continue;
            }
            let value = match value {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            line.push_str(&format!("  {key}={}", fold(&value, 80)));
        }
    }
    line
}

/// `text` cut to `max` characters, on one line.
fn fold(text: &str, max: usize) -> String {
    let flat = text.replace('\n', "\\n");
    match flat.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}
