//! `pev eval` past one process: `--jobs N` runs scenarios in parallel on this machine,
//! `--shard K/N` runs the scenarios a stable hash of their names gives shard K (adding or
//! removing a scenario moves no other between shards, so CI runners and Kubernetes Indexed Jobs
//! can each take one), and `pev eval merge` joins the shards' `--json` documents into the table
//! and totals an unsharded run prints. No scheduler of pev's own: the batch engine a team
//! already has starts the shards.

use std::io::Write;
use std::path::PathBuf;

use pev_protocol::run::{ReasonCode, RunStatus};
use serde::Deserialize;

use crate::commands::eval::report;
use crate::commands::eval::row::Row;
use crate::shared::exit::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, Fail};

pub use crate::args::values::Shard;

impl Shard {
    /// Whether scenario `name` belongs to this shard: FNV-1a (64 bits) of the name, modulo the
    /// shard count. Depends on the name alone, never on the other scenarios.
    pub fn holds(&self, name: &str) -> bool {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in name.as_bytes() {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash % u64::from(self.count) == u64::from(self.index - 1)
    }
}

/// A row as `--json` printed it.
#[derive(Debug, Deserialize)]
struct RowIn {
    scenario: String,
    description: Option<String>,
    mode: String,
    gate: Option<String>,
    expected: RunStatus,
    #[serde(default)]
    expected_reasons: Vec<ReasonCode>,
    status: Option<RunStatus>,
    #[serde(default)]
    reasons: Vec<ReasonCode>,
    correct: bool,
    claimed_done: Option<bool>,
    slipped: bool,
    premature: u32,
    caught: u32,
    gate_exhausted: bool,
    turns: u64,
    tokens: u64,
    cost_usd: f64,
    wall_ms: u64,
    run_id: Option<String>,
    workspace: Option<String>,
    error: Option<String>,
    note: Option<String>,
}

impl RowIn {
    fn into_row(self) -> Result<Row, String> {
        let mode = match self.mode.as_str() {
            "loop" => "loop",
            "pev" => "pev",
            other => return Err(format!("row `{}`: unknown mode `{other}`", self.scenario)),
        };
        let gate = match self.gate.as_deref() {
            None => None,
            Some("on") => Some("on"),
            Some("off") => Some("off"),
            Some(other) => return Err(format!("row `{}`: unknown gate `{other}`", self.scenario)),
        };
        Ok(Row {
            scenario: self.scenario,
            description: self.description,
            mode,
            gate,
            expected: self.expected,
            expected_reasons: self.expected_reasons,
            status: self.status,
            reasons: self.reasons,
            correct: self.correct,
            claimed_done: self.claimed_done,
            slipped: self.slipped,
            premature: self.premature,
            caught: self.caught,
            gate_exhausted: self.gate_exhausted,
            turns: self.turns,
            tokens: self.tokens,
            cost_usd: self.cost_usd,
            wall_ms: self.wall_ms,
            run_id: self.run_id,
            workspace: self.workspace,
            error: self.error,
            note: self.note,
        })
    }
}

/// One shard's document, as much of it as a merge reads.
#[derive(Debug, Deserialize)]
struct ShardIn {
    suite: String,
    rows: Vec<RowIn>,
    #[serde(default)]
    honest: Vec<String>,
    #[serde(default)]
    shard: Option<String>,
    #[serde(default)]
    scenarios: Vec<String>,
}

/// Where a row sorts in a whole run: by the scenario's place in the suite (by name when the
/// documents do not say), then gate on, gate off (pev mode has one row).
fn order(row: &Row, suite: &[String]) -> (usize, String, u8) {
    let place = suite.iter().position(|s| *s == row.scenario).unwrap_or(usize::MAX);
    (place, row.scenario.clone(), u8::from(row.gate == Some("off")))
}

/// `pev eval merge FILE...`: the shards' rows as one eval, checked for a scenario run twice.
pub fn merge(
    files: &[PathBuf],
    (json, allow_partial): (bool, bool),
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, Fail> {
    if files.is_empty() {
        return Err(Fail(EXIT_BAD_INPUT, "give the shards' --json files to merge".into()));
    }
    let mut rows: Vec<Row> = Vec::new();
    let mut honest: Vec<String> = Vec::new();
    let mut suite: Option<String> = None;
    let mut seen: std::collections::HashMap<(String, Option<&'static str>), PathBuf> =
        std::collections::HashMap::new();
    let mut shards: Vec<String> = Vec::new();
    let mut listed: Option<Vec<String>> = None;
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|e| {
            Fail(EXIT_BAD_INPUT, format!("{}: {}", file.display(), crate::input::describe(&e)))
        })?;
        let doc: ShardIn = serde_json::from_str(&text).map_err(|e| {
            Fail(
                EXIT_BAD_INPUT,
                format!("{}: not a `pev eval --json` document: {e}", file.display()),
            )
        })?;
        match &suite {
            Some(s) if *s != doc.suite => {
                let _ = writeln!(
                    err,
                    "pev eval merge: note: {} ran suite {}, the first file ran {s}",
                    file.display(),
                    doc.suite
                );
            }
            Some(_) => {}
            None => suite = Some(doc.suite.clone()),
        }
        if let Some(shard) = doc.shard {
            shards.push(shard);
        }
        if !doc.scenarios.is_empty() {
            match &listed {
                Some(list) if *list != doc.scenarios => {
                    return Err(Fail(
                        EXIT_BAD_INPUT,
                        format!(
                            "{} ran a suite with other scenarios than the first file's: shards \
                             of one suite only",
                            file.display()
                        ),
                    ));
                }
                Some(_) => {}
                None => listed = Some(doc.scenarios.clone()),
            }
        }
        for name in doc.honest {
            if !honest.contains(&name) {
                honest.push(name);
            }
        }
        for row in doc.rows {
            let row = row
                .into_row()
                .map_err(|e| Fail(EXIT_BAD_INPUT, format!("{}: {e}", file.display())))?;
            let key = (row.scenario.clone(), row.gate);
            if let Some(first) = seen.insert(key, file.clone()) {
                return Err(Fail(
                    EXIT_BAD_INPUT,
                    format!(
                        "scenario `{}` (gate {}) is in both {} and {}: each scenario belongs to \
                         one shard",
                        row.scenario,
                        row.gate.unwrap_or("pev"),
                        first.display(),
                        file.display()
                    ),
                ));
            }
            rows.push(row);
        }
    }
    shards.sort();
    shards.dedup();
    let suite_order = listed.unwrap_or_default();
    let mut missing: Vec<String> = missing_shards(&shards).into_iter().collect();
    let absent: Vec<&str> = suite_order
        .iter()
        .filter(|name| !rows.iter().any(|r| r.scenario == **name))
        .map(String::as_str)
        .collect();
    if !absent.is_empty() {
        missing.push(format!("scenario(s) with no row: {}", absent.join(", ")));
    }
    if !missing.is_empty() {
        let what = missing.join("; ");
        if !allow_partial {
            return Err(Fail(
                EXIT_BAD_INPUT,
                format!(
                    "the files are not the whole suite ({what}); give every shard, or \
                     --allow-partial to tabulate what is there"
                ),
            ));
        }
        let _ = writeln!(err, "pev eval merge: warning: not the whole suite: {what}");
    }
    rows.sort_by_key(|r| order(r, &suite_order));
    honest.sort_by_key(|h| suite_order.iter().position(|s| s == h).unwrap_or(usize::MAX));
    let suite = PathBuf::from(suite.unwrap_or_default());
    let mut summary = report::summarize(&suite, rows, &honest);
    summary.scenarios = suite_order;
    let written = if json {
        serde_json::to_string_pretty(&summary)
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(out, "{text}"))
    } else {
        report::write_table(&summary, out, report::terminal_width())
    };
    if let Err(e) = written
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(Fail(EXIT_FAILED, format!("cannot write the report: {e}")));
    }
    Ok(if summary.passed { EXIT_OK } else { EXIT_FAILED })
}

/// Which shards of `K/N` are not among those merged (all of one `N`), said as a warning.
fn missing_shards(shards: &[String]) -> Option<String> {
    let parsed: Vec<Shard> = shards.iter().filter_map(|s| s.parse().ok()).collect();
    let count = parsed.first()?.count;
    if parsed.iter().any(|s| s.count != count) {
        return Some(format!("the files come from different shardings: {}", shards.join(", ")));
    }
    let missing: Vec<String> = (1..=count)
        .filter(|k| !parsed.iter().any(|s| s.index == *k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    (!missing.is_empty()).then(|| format!("shard(s) {} are missing", missing.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_is_k_of_n() {
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        for bad in ["0/4", "5/4", "1/0", "x/2", "2", "", "1/2/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn every_name_is_in_exactly_one_shard_and_stays_there() {
        let names: Vec<String> = (0..200).map(|i| format!("scenario-{i}")).collect();
        for n in [1, 2, 3, 7] {
            for name in &names {
                let holders = (1..=n).filter(|k| Shard { index: *k, count: n }.holds(name)).count();
                assert_eq!(holders, 1, "{name} in {holders} of {n} shards");
            }
        }
        // A fixed assignment: the hash of the name alone (adding scenarios moves none).
        let three = |name: &str| (1..=3).find(|k| Shard { index: *k, count: 3 }.holds(name));
        assert_eq!(three("honest"), three("honest"));
        let spread: std::collections::HashSet<Option<u32>> =
            names.iter().map(|n| three(n)).collect();
        assert_eq!(spread.len(), 3, "200 names land in all three shards");
    }

    #[test]
    fn missing_and_mixed_shards_are_named() {
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert_eq!(missing_shards(&s(&["1/3", "3/3"])), Some("shard(s) 2/3 are missing".into()));
        assert_eq!(missing_shards(&s(&["1/2", "2/2"])), None);
        assert!(missing_shards(&s(&["1/2", "1/3"])).unwrap().contains("different"));
        assert_eq!(missing_shards(&[]), None);
    }
}
