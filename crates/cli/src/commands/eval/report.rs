//! `pev eval`'s report: the totals per gate setting, the overhead of the gate on the honest
//! scenarios, and the two renderings (an aligned table for people, one JSON document for
//! machines).

use std::io::{self, Write};
use std::path::Path;

use pev_protocol::run::{ReasonCode, RunStatus};
use serde::Serialize;

use super::row::Row;

/// The whole eval, as `--json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub suite: String,
    pub rows: Vec<Row>,
    /// One per gate setting that was run (`on`, `off`, `pev` for pev-mode scenarios).
    pub totals: Vec<Totals>,
    /// For each scenario marked `honest` that ran with the gate on and off.
    pub overhead: Vec<Overhead>,
    /// Every gate-on (and pev-mode) run ended as expected, and every run produced a result.
    pub passed: bool,
    /// The scenarios marked `honest` (what the overhead is computed on; a merge needs them).
    pub honest: Vec<String>,
    /// Every scenario of the suite, in its order (a shard's document too: a merge checks that
    /// all of them are there, and orders the rows by it).
    pub scenarios: Vec<String>,
    /// The shard (`K/N`) this document holds, when the run was sharded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
}

/// The runs of one gate setting, added up.
#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    pub gate: &'static str,
    pub runs: usize,
    pub correct: usize,
    pub slipped: usize,
    pub premature: u64,
    pub caught: u64,
    pub mean_turns: f64,
    pub mean_tokens: f64,
    pub cost_usd: f64,
    pub wall_ms: u64,
}

/// What the gate cost an honest model: its run with the gate on against the one with it off.
#[derive(Debug, Clone, Serialize)]
pub struct Overhead {
    pub scenario: String,
    pub turns_on: u64,
    pub turns_off: u64,
    pub extra_turns: i64,
    pub tokens_on: u64,
    pub tokens_off: u64,
    pub extra_tokens: i64,
}

pub fn status_str(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Success => "success",
        RunStatus::Partial => "partial",
        RunStatus::Failed => "failed",
        RunStatus::AwaitingApproval => "awaiting_approval",
    }
}

/// A reason code as the JSON spells it.
fn reason_str(code: ReasonCode) -> String {
    serde_json::to_value(code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{code:?}"))
}

/// The gate column's text, and the totals' group.
fn group(row: &Row) -> &'static str {
    row.gate.unwrap_or("pev")
}

pub fn summarize(suite: &Path, rows: Vec<Row>, honest: &[String]) -> Summary {
    let totals = ["on", "off", "pev"]
        .into_iter()
        .filter_map(|gate| {
            let runs: Vec<&Row> = rows.iter().filter(|r| group(r) == gate).collect();
            (!runs.is_empty()).then(|| totals(gate, &runs))
        })
        .collect();
    let overhead = honest
        .iter()
        .filter_map(|name| {
            let find = |gate| rows.iter().find(|r| &r.scenario == name && r.gate == Some(gate));
            let (on, off) = (find("on")?, find("off")?);
            let diff = |a: u64, b: u64| {
                i64::try_from(a).unwrap_or(i64::MAX).saturating_sub(i64::try_from(b).unwrap_or(0))
            };
            Some(Overhead {
                scenario: name.clone(),
                turns_on: on.turns,
                turns_off: off.turns,
                extra_turns: diff(on.turns, off.turns),
                tokens_on: on.tokens,
                tokens_off: off.tokens,
                extra_tokens: diff(on.tokens, off.tokens),
            })
        })
        .collect();
    let passed = rows.iter().all(|r| (!r.gates() || r.correct) && r.error.is_none());
    Summary {
        suite: suite.display().to_string(),
        rows,
        totals,
        overhead,
        passed,
        honest: honest.to_vec(),
        scenarios: Vec::new(),
        shard: None,
    }
}

fn totals(gate: &'static str, runs: &[&Row]) -> Totals {
    let n = runs.len();
    let mean = |f: fn(&Row) -> u64| {
        let sum: u64 = runs.iter().map(|r| f(r)).fold(0, u64::saturating_add);
        let mean = if n == 0 { 0.0 } else { sum as f64 / n as f64 };
        (mean * 10.0).round() / 10.0
    };
    Totals {
        gate,
        runs: n,
        correct: runs.iter().filter(|r| r.correct).count(),
        slipped: runs.iter().filter(|r| r.slipped).count(),
        premature: runs.iter().map(|r| u64::from(r.premature)).sum(),
        caught: runs.iter().map(|r| u64::from(r.caught)).sum(),
        mean_turns: mean(|r| r.turns),
        mean_tokens: mean(|r| r.tokens),
        // Rounded to a millionth of a dollar: a sum of float prices carries noise past that.
        cost_usd: (runs.iter().map(|r| r.cost_usd).sum::<f64>() * 1e6).round() / 1e6,
        wall_ms: runs.iter().map(|r| r.wall_ms).fold(0, u64::saturating_add),
    }
}

/// The width of an aligned table's lines.
fn table_width(rows: &[Vec<String>]) -> usize {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let cells: usize = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .sum();
    cells + 2 * columns.saturating_sub(1)
}

/// Drops columns (by index, in the order given) until the table fits `width`; the first
/// `text_columns` count down with the text columns dropped.
fn fit(rows: &mut [Vec<String>], text_columns: &mut usize, width: usize, droppable: &[usize]) {
    let mut dropped: Vec<usize> = Vec::new();
    for &column in droppable {
        if table_width(rows) <= width {
            break;
        }
        // Earlier drops shift later indices left.
        let at = column - dropped.iter().filter(|&&d| d < column).count();
        for row in rows.iter_mut() {
            if at < row.len() {
                row.remove(at);
            }
        }
        if column < *text_columns {
            *text_columns -= 1;
        }
        dropped.push(column);
    }
}

/// Left-aligned text columns, then right-aligned numbers.
fn write_aligned(out: &mut dyn Write, rows: &[Vec<String>], text_columns: usize) -> io::Result<()> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let width = widths.get(c).copied().unwrap_or(0);
            if c > 0 {
                line.push_str("  ");
            }
            if c < text_columns {
                line.push_str(&format!("{cell:<width$}"));
            } else {
                line.push_str(&format!("{cell:>width$}"));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

fn yes_no(value: bool) -> String {
    if value { "yes" } else { "no" }.to_owned()
}

fn usd(cost: f64) -> String {
    format!("${cost:.4}")
}

fn seconds(ms: u64) -> String {
    format!("{}.{:03} s", ms / 1000, ms % 1000)
}

/// The table for people: one line per run, the totals per gate setting, the honest overhead,
/// and what went wrong with runs that left no result. With a `width` (a terminal's), the
/// least telling columns (wall time, tokens, turns, the premature count, the expected status)
/// are left out until the tables fit; `--json` has them all.
pub fn write_table(summary: &Summary, out: &mut dyn Write, width: Option<usize>) -> io::Result<()> {
    let mut lines = vec![
        [
            "scenario",
            "gate",
            "expected",
            "status",
            "correct",
            "claimed",
            "slipped",
            "premature",
            "caught",
            "turns",
            "tokens",
            "cost",
            "wall",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for r in &summary.rows {
        lines.push(vec![
            r.scenario.clone(),
            group(r).to_owned(),
            status_str(r.expected).to_owned(),
            r.status.map_or("-", status_str).to_owned(),
            if r.correct { "yes" } else { "NO" }.to_owned(),
            r.claimed_done.map_or_else(|| "-".to_owned(), yes_no),
            if r.slipped { "SLIPPED" } else { "no" }.to_owned(),
            r.premature.to_string(),
            r.caught.to_string(),
            r.turns.to_string(),
            r.tokens.to_string(),
            usd(r.cost_usd),
            seconds(r.wall_ms),
        ]);
    }
    let mut text_columns = 7;
    if let Some(width) = width {
        // wall, tokens, turns, premature, expected, cost
        fit(&mut lines, &mut text_columns, width, &[12, 10, 9, 7, 2, 11]);
    }
    write_aligned(out, &lines, text_columns)?;

    writeln!(out)?;
    let mut lines = vec![
        [
            "gate",
            "runs",
            "correct",
            "slipped",
            "premature",
            "caught",
            "mean turns",
            "mean tokens",
            "cost",
            "wall",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for t in &summary.totals {
        lines.push(vec![
            t.gate.to_owned(),
            t.runs.to_string(),
            format!("{}/{}", t.correct, t.runs),
            t.slipped.to_string(),
            t.premature.to_string(),
            t.caught.to_string(),
            format!("{:.1}", t.mean_turns),
            format!("{:.1}", t.mean_tokens),
            usd(t.cost_usd),
            seconds(t.wall_ms),
        ]);
    }
    let mut text_columns = 1;
    if let Some(width) = width {
        // wall, mean tokens, mean turns, premature, cost
        fit(&mut lines, &mut text_columns, width, &[9, 7, 6, 4, 8]);
    }
    write_aligned(out, &lines, text_columns)?;

    if !summary.overhead.is_empty() {
        writeln!(out)?;
        for o in &summary.overhead {
            let line = format!(
                "gate overhead on honest `{}`: {:+} turns ({} on, {} off), {:+} tokens ({} on, {} off)",
                o.scenario,
                o.extra_turns,
                o.turns_on,
                o.turns_off,
                o.extra_tokens,
                o.tokens_on,
                o.tokens_off
            );
            let short = format!(
                "gate overhead, `{}`: {:+} turns, {:+} tokens",
                o.scenario, o.extra_turns, o.extra_tokens
            );
            let fits = width.is_none_or(|w| line.chars().count() <= w);
            writeln!(out, "{}", if fits { line } else { short })?;
        }
    }
    let errors: Vec<&Row> = summary.rows.iter().filter(|r| r.error.is_some()).collect();
    if !errors.is_empty() {
        writeln!(out)?;
        for r in errors {
            writeln!(
                out,
                "{} [{}]: {}",
                r.scenario,
                group(r),
                r.error.as_deref().unwrap_or_default()
            )?;
        }
    }
    let wrong: Vec<&Row> =
        summary.rows.iter().filter(|r| !r.correct && r.error.is_none()).collect();
    if !wrong.is_empty() {
        writeln!(out)?;
        for r in wrong {
            let reasons: Vec<String> = r.reasons.iter().map(|c| reason_str(*c)).collect();
            writeln!(
                out,
                "{} [{}]: expected {}, got {} ({}){}",
                r.scenario,
                group(r),
                status_str(r.expected),
                r.status.map_or("-", status_str),
                if reasons.is_empty() { "no reasons".to_owned() } else { reasons.join(", ") },
                r.note.as_deref().map(|n| format!("; {n}")).unwrap_or_default()
            )?;
        }
    }
    let kept: Vec<&Row> = summary.rows.iter().filter(|r| r.workspace.is_some()).collect();
    if !kept.is_empty() {
        writeln!(out)?;
        for r in kept {
            writeln!(
                out,
                "{} [{}]: kept {}",
                r.scenario,
                group(r),
                r.workspace.as_deref().unwrap_or_default()
            )?;
        }
    }
    writeln!(
        out,
        "\n{}",
        if summary.passed {
            "every gate-on run ended as expected"
        } else {
            "FAILED: some gate-on run did not end as expected, or a run left no result"
        }
    )
}

/// The width to fit the table to: the terminal's when stdout is one, else `COLUMNS` when set;
/// `None` (the whole table) when the output goes to a file or a pipe.
pub fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse().ok());
    if std::io::stdout().is_terminal() {
        console::Term::stdout().size_checked().map(|(_, cols)| usize::from(cols)).or(columns)
    } else {
        columns
    }
}
