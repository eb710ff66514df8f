//! `pev eval SUITE_DIR`: what the finalization gate buys, measured. Each scenario of the suite
//! (a goal, a fixture workspace, scripted models or a live provider, the expected outcome; see
//! `eval_suite`) is run with the gate on and off, each run a `pev agent --json` subprocess of
//! this very executable on a fresh copy of the fixture, so an eval exercises exactly what a
//! user runs. The result of each run is read from its `run.finished` event and compared with
//! the expectation; the table (`eval_report`) shows per run whether the outcome was right,
//! whether the model's claim of completion slipped through, how many premature final answers
//! the gate caught, and what the run cost.
//!
//! Exit codes: 0 when every gate-on (and pev-mode) run ended as expected and no run failed to
//! produce a result; 1 otherwise; 2 for a bad suite (nothing is run then).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pev_protocol::run::{RunResult, RunStatus, StepStatus};
use serde_json::Value;

use crate::shared::exit::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, Fail};
use crate::shared::scratch;

pub(crate) mod report;
pub(crate) mod row;
pub(crate) mod scale;
pub mod suite;

pub use row::Row;
use suite::{Scenario, ScenarioMode};

pub use crate::args::values::GateChoice;

/// `pev eval SUITE_DIR`.
#[derive(Debug, Clone)]
pub struct EvalRequest {
    pub suite: PathBuf,
    pub json: bool,
    pub gate: GateChoice,
    /// Keep each run's copy of the fixture (its journal shows the run with `pev show`).
    pub keep: bool,
    /// Run against the configured (real) models, ignoring scripts and recordings, and keep each
    /// run's journal as the scenario's recording.
    pub record: bool,
    /// Runs at once (each a `pev agent` process), at least 1.
    pub jobs: usize,
    /// Only the scenarios of this shard (see `eval_scale`).
    pub shard: Option<crate::args::values::Shard>,
}

/// How a scenario's models answer in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Its scripts (offline).
    Scripts,
    /// Its recording (offline): `pev replay`.
    Recording,
    /// The configured providers (`--record`, or a scenario with neither).
    Live,
}

/// Where the recording of `scenario` with the gate `gate` is kept: a text recording
/// (`NAME.jsonl`, `pev_store::recording`), or a journal file an older pev kept (`NAME.db`),
/// read while no text recording stands beside it.
fn recording_path(scenario: &Scenario, gate: Option<bool>) -> PathBuf {
    let text = text_recording_path(scenario, gate);
    let old = text.with_extension("db");
    if !text.is_file() && old.is_file() { old } else { text }
}

/// Where `--record` writes the recording of `scenario` with the gate `gate`.
fn text_recording_path(scenario: &Scenario, gate: Option<bool>) -> PathBuf {
    let name = match gate {
        Some(true) => "gate-on.jsonl",
        Some(false) => "gate-off.jsonl",
        None => "pev-mode.jsonl",
    };
    let dir = scenario.workspace.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    dir.join("recording").join(name)
}

impl Row {
    /// A gate-on or pev-mode row: one the exit code depends on.
    pub fn gates(&self) -> bool {
        self.gate != Some("off")
    }
}

pub fn run(req: &EvalRequest, out: &mut dyn Write, err: &mut dyn Write) -> Result<u8, Fail> {
    let scenarios = suite::load_suite(&req.suite).map_err(|e| Fail(EXIT_BAD_INPUT, e))?;
    let exe = std::env::current_exe()
        .map_err(|e| Fail(EXIT_FAILED, format!("cannot find the pev executable: {e}")))?;
    let names: Vec<String> = scenarios.iter().map(|s| s.name.clone()).collect();
    let scenarios: Vec<Scenario> = match req.shard {
        Some(shard) => scenarios.into_iter().filter(|s| shard.holds(&s.name)).collect(),
        None => scenarios,
    };
    // Every run to make, in the order the table shows them.
    let mut work: Vec<(&Scenario, Option<bool>, Source)> = Vec::new();
    for scenario in &scenarios {
        let settings: &[bool] = match scenario.mode {
            ScenarioMode::Loop => req.gate.settings(),
            ScenarioMode::Pev => &[true],
        };
        for &gate in settings {
            let gate = (scenario.mode == ScenarioMode::Loop).then_some(gate);
            let source = if req.record {
                Source::Live
            } else if recording_path(scenario, gate).is_file() {
                Source::Recording
            } else if scenario.scripts.is_empty() {
                Source::Live
            } else {
                Source::Scripts
            };
            work.push((scenario, gate, source));
        }
    }
    let one = |(scenario, gate, source): (&Scenario, Option<bool>, Source)| {
        let mut row = run_one(&exe, scenario, gate, req.keep, source);
        if req.record && row.error.is_none() {
            row.note = Some(format!("recorded in {}", recording_path(scenario, gate).display()));
        }
        row
    };
    let say = |err: &mut dyn Write, row: &Row| {
        let _ = writeln!(
            err,
            "pev eval: {} [{}] {} ({} ms){}",
            row.scenario,
            row.gate.map_or_else(|| "pev mode".to_owned(), |g| format!("gate {g}")),
            row.status.map_or("no result", report::status_str),
            row.wall_ms,
            if row.correct { "" } else { "  UNEXPECTED" }
        );
    };
    let failed = |(scenario, gate, _): (&Scenario, Option<bool>, Source), why: String| {
        let mut row = blank_row(scenario, gate);
        row.error = Some(why);
        row
    };
    let rows = run_all(&work, req.jobs, (&one, &failed), &mut |row| say(err, row));
    let honest: Vec<String> =
        scenarios.iter().filter(|s| s.honest).map(|s| s.name.clone()).collect();
    let mut summary = report::summarize(&req.suite, rows, &honest);
    summary.shard = req.shard.map(|s| s.to_string());
    summary.scenarios = names;
    let written = if req.json {
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

/// Runs one item of the work into its row.
type RunOne<'a, W> = dyn Fn(W) -> Row + Sync + 'a;
/// The row of an item whose run panicked, with why.
type RunFailed<'a, W> = dyn Fn(W, String) -> Row + Sync + 'a;

/// Runs `work` with up to `jobs` at once (each item a subprocess, so threads only wait);
/// `done` hears of each row as it finishes, from this thread. The rows come back in `work`'s
/// order.
fn run_all<W: Copy + Send + Sync>(
    work: &[W],
    jobs: usize,
    (one, failed): (&RunOne<'_, W>, &RunFailed<'_, W>),
    done: &mut dyn FnMut(&Row),
) -> Vec<Row> {
    // A run that panics is its own row's error, not the end of the eval.
    let one = |w: W| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| one(w))).unwrap_or_else(|p| {
            let why = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "no message".to_owned());
            failed(w, format!("pev eval failed on this run: {why}"))
        })
    };
    let jobs = jobs.clamp(1, work.len().max(1));
    if jobs == 1 {
        return work
            .iter()
            .map(|w| {
                let row = one(*w);
                done(&row);
                row
            })
            .collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Row)>();
    let mut rows: Vec<Option<Row>> = (0..work.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let next = &next;
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(w) = work.get(i) else { break };
                    if tx.send((i, one(*w))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, row) in rx {
            done(&row);
            rows[i] = Some(row);
        }
    });
    rows.into_iter().flatten().collect()
}

/// What a `pev agent` subprocess left behind.
struct Finished {
    stdout: String,
    stderr: String,
    code: Option<i32>,
    timed_out: bool,
    wall: Duration,
}

/// Runs `scenario` once on a fresh copy of its fixture and judges the result.
fn run_one(exe: &Path, scenario: &Scenario, gate: Option<bool>, keep: bool, source: Source) -> Row {
    let mut row = blank_row(scenario, gate);
    run_into(exe, scenario, (gate, keep, source), &mut row);
    row
}

/// The row of `scenario` with `gate` before anything ran.
fn blank_row(scenario: &Scenario, gate: Option<bool>) -> Row {
    let expect = scenario.expectation(gate);
    Row {
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        mode: scenario.mode.as_str(),
        gate: gate.map(|on| if on { "on" } else { "off" }),
        expected: expect.status,
        expected_reasons: expect.reasons.clone(),
        status: None,
        reasons: Vec::new(),
        correct: false,
        claimed_done: None,
        slipped: false,
        premature: 0,
        caught: 0,
        gate_exhausted: false,
        turns: 0,
        tokens: 0,
        cost_usd: 0.0,
        wall_ms: 0,
        run_id: None,
        workspace: None,
        error: None,
        note: None,
    }
}

/// Runs `scenario` into `row`.
fn run_into(
    exe: &Path,
    scenario: &Scenario,
    (gate, keep, source): (Option<bool>, bool, Source),
    row: &mut Row,
) {
    let copy = match scratch::copy_workspace(&scenario.workspace) {
        Ok(copy) => copy,
        Err(e) => {
            row.error = Some(e);
            return;
        }
    };
    // The copy sits in a directory of its own: the root of what to remove afterwards, and a
    // place for an empty user configuration (see `command`).
    let root = copy.parent().map_or_else(|| copy.clone(), Path::to_path_buf);
    let finished = match source {
        Source::Recording => replay_command(exe, scenario, gate, &root),
        Source::Scripts | Source::Live => command(exe, (scenario, gate, source), &copy, &root),
    }
    .and_then(|cmd| wait(cmd, scenario));
    if source == Source::Live
        && finished.is_ok()
        && let Err(e) = keep_recording(scenario, gate, &copy)
    {
        row.error = Some(e);
    }
    if keep {
        row.workspace = Some(copy.display().to_string());
    } else {
        let _ = std::fs::remove_dir_all(&root);
    }
    let finished = match finished {
        Ok(finished) => finished,
        Err(e) => {
            row.error = Some(e);
            return;
        }
    };
    row.wall_ms = u64::try_from(finished.wall.as_millis()).unwrap_or(u64::MAX);
    let Some(result) = final_result(&finished.stdout) else {
        row.error = Some(no_result(&finished, scenario));
        return;
    };
    judge(row, &result, gate);
    if source == Source::Recording && finished.code != Some(0) {
        // The replay left the recording (a prompt or the code changed what is asked), or the
        // outcome moved: the recording no longer stands for this scenario.
        row.correct = false;
        let why: Vec<&str> = finished
            .stderr
            .lines()
            .filter(|l| {
                l.contains("diverged at") || l.contains("DIFFERENT") || l.contains("never made")
            })
            .collect();
        row.note = Some(format!("replay: {}", why.join("; ")));
    }
}

/// `pev replay last --store RECORDING --from FIXTURE --json`.
fn replay_command(
    exe: &Path,
    scenario: &Scenario,
    gate: Option<bool>,
    root: &Path,
) -> Result<Child, String> {
    let absolute = |p: &Path| {
        std::fs::canonicalize(p).map_err(|e| format!("cannot find {}: {e}", p.display()))
    };
    let mut cmd = Command::new(exe);
    cmd.arg("replay")
        .arg("last")
        .arg("--store")
        .arg(absolute(&recording_path(scenario, gate))?)
        .arg("--from")
        .arg(absolute(&scenario.workspace)?)
        .arg("--goal")
        .arg(&scenario.goal)
        .arg("--workspace")
        .arg(root)
        .arg("--json")
        .env("TMPDIR", root)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().map_err(|e| format!("cannot start {}: {e}", exe.display()))
}

/// Keeps the last run of a live run's journal as the scenario's text recording, matched with
/// the built-in volatile rules and then the scenario's own (replacing an older recording, a
/// journal file of an older pev's included).
fn keep_recording(scenario: &Scenario, gate: Option<bool>, copy: &Path) -> Result<(), String> {
    let target = text_recording_path(scenario, gate);
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let store = pev_store::Store::open_existing(pev_store::default_path(copy))
        .map_err(|e| format!("cannot keep the recording: {e}"))?;
    let run = store.resolve_run("last").map_err(|e| format!("cannot keep the recording: {e}"))?;
    let mut rules = pev_engine::agent::volatile::built_in_rules();
    rules.extend(scenario.volatile.iter().cloned());
    // Written beside the target and renamed over it: an interrupted --record leaves the
    // recording that stood.
    let partial = target.with_extension("jsonl.partial");
    let written = std::fs::File::create(&partial)
        .map_err(|e| format!("cannot write {}: {e}", partial.display()))
        .and_then(|file| {
            let mut out = std::io::BufWriter::new(file);
            pev_store::recording::write(&store, &run, &rules, &mut out)
        })
        .and_then(|()| {
            std::fs::rename(&partial, &target)
                .map_err(|e| format!("cannot write {}: {e}", target.display()))
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    match std::fs::remove_file(target.with_extension("db")) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove the older recording: {e}")),
    }
}

/// `pev agent GOAL --mode M [--no-gate --no-oracle] --workspace COPY --json`, with the
/// scenario's scripts and hidden check. The gate-off run is pev without its harness checks of
/// the model's claims: no finalization gate, and no oracle (tests are not told from work).
fn command(
    exe: &Path,
    (scenario, gate, source): (&Scenario, Option<bool>, Source),
    copy: &Path,
    root: &Path,
) -> Result<Child, String> {
    let mut cmd = Command::new(exe);
    cmd.arg("agent").arg(&scenario.goal).arg("--mode").arg(scenario.mode.as_str());
    if gate == Some(false) {
        cmd.arg("--no-gate").arg("--no-oracle");
    } else if let Some(check) = &scenario.hidden_check {
        cmd.arg("--hidden-check").arg(&check.command);
        if let Some(dir) = &check.tests {
            cmd.arg("--hidden-tests").arg(dir);
        }
    }
    // The scenario's run is journaled in its scratch copy, whatever journal the user's
    // environment names (PEV_STORE, pev.toml): the eval reads it back from there.
    cmd.arg("--workspace").arg(copy).arg("--json");
    cmd.arg("--store").arg(pev_store::default_path(copy)).env_remove("PEV_STORE");
    cmd.current_dir(copy).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if source == Source::Scripts {
        // A scripted scenario is hermetic: the user's pev.toml and model variables stay out
        // (they would change the models, prices or hooks the table measures).
        for role in ["PLANNER", "EXECUTOR", "VERIFIER"] {
            cmd.env_remove(format!("PEV_{role}_PROVIDER")).env_remove(format!("PEV_{role}_MODEL"));
        }
        cmd.env_remove("PEV_PROVIDER").env("XDG_CONFIG_HOME", root.join("config"));
        // A role without a script must not reach a live provider either (loop mode asks the
        // verifier role about postconditions without assertions): without a key it cannot.
        for key in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"] {
            cmd.env_remove(key);
        }
        for (var, path) in scenario.scripts.env() {
            cmd.env(var, format!("script:{}", path.display()));
        }
    }
    cmd.spawn().map_err(|e| format!("cannot start {}: {e}", exe.display()))
}

/// Waits for the run, killing it at the scenario's timeout.
fn wait(mut child: Child, scenario: &Scenario) -> Result<Finished, String> {
    let start = Instant::now();
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() >= scenario.timeout => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("cannot wait for the run: {e}")),
        }
    };
    let wall = start.elapsed();
    // After a kill, a grandchild (a shell command's) may still hold the pipes open: the
    // readers are left to finish on their own rather than waited for.
    let join = |h: Option<std::thread::JoinHandle<String>>| {
        h.filter(|_| !timed_out).and_then(|h| h.join().ok()).unwrap_or_default()
    };
    Ok(Finished {
        stdout: join(stdout),
        stderr: join(stderr),
        code: status.and_then(|s| s.code()),
        timed_out,
        wall,
    })
}

/// Reads a pipe to its end on a thread of its own, so a full pipe never blocks the child.
fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// The result of the run's `run.finished` event (the last, should there be several).
fn final_result(stdout: &str) -> Option<RunResult> {
    stdout.lines().rev().find_map(|line| {
        let event: Value = serde_json::from_str(line).ok()?;
        if event.get("event")?.as_str()? != "run.finished" {
            return None;
        }
        serde_json::from_value(event.get("result")?.clone()).ok()
    })
}

/// Why a run left no result, for the row.
fn no_result(finished: &Finished, scenario: &Scenario) -> String {
    if finished.timed_out {
        return format!("timed out after {} s", scenario.timeout.as_secs());
    }
    let said = finished
        .stderr
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("nothing on stderr");
    let code = finished.code.map_or_else(|| "a signal".to_owned(), |c| format!("code {c}"));
    format!("pev agent ended with {code} and no result: {said}")
}

/// Fills the row from the run's result.
fn judge(row: &mut Row, result: &RunResult, gate: Option<bool>) {
    row.status = Some(result.status);
    row.reasons = result.reasons.iter().map(|r| r.code).collect();
    row.correct = result.status == row.expected
        && row.expected_reasons.iter().all(|code| row.reasons.contains(code));
    row.turns = result.usage.llm_calls;
    row.tokens = result.usage.input_tokens.saturating_add(result.usage.output_tokens);
    row.cost_usd = result.usage.cost_usd;
    row.run_id = Some(result.run_id.clone());
    row.note = result
        .steps
        .iter()
        .find(|s| s.status == StepStatus::Failed)
        .and_then(|s| s.error.as_ref().map(|e| format!("step '{}': {e}", s.id)));
    if gate.is_none() {
        return;
    }
    // The loop step's output carries the gate's counts (`loop_run::record_gate`).
    let counts = result
        .steps
        .iter()
        .find(|s| s.id == pev_engine::agent::loop_run::LOOP_STEP)
        .and_then(|s| s.output.as_ref())
        .and_then(|o| o.get("gate"));
    let count = |key: &str| {
        counts
            .and_then(|g| g.get(key))
            .and_then(Value::as_u64)
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
    };
    let flag = |key: &str| counts.and_then(|g| g.get(key)).and_then(Value::as_bool);
    row.premature = count("premature_finalizations");
    row.caught = count("refusals");
    row.gate_exhausted = flag("gate_exhausted").unwrap_or(false);
    let blocked =
        result.steps.iter().any(|s| s.id.starts_with("plan:") && s.status == StepStatus::Blocked);
    let claimed = flag("final_answer_accepted").unwrap_or(false) && !blocked;
    row.claimed_done = Some(claimed);
    row.slipped = claimed && result.status != RunStatus::Success;
}

#[cfg(test)]
mod run_all_tests {
    use super::*;

    fn row(name: String, error: Option<String>) -> Row {
        Row {
            scenario: name,
            description: None,
            mode: "loop",
            gate: Some("on"),
            expected: RunStatus::Success,
            expected_reasons: Vec::new(),
            status: None,
            reasons: Vec::new(),
            correct: error.is_none(),
            claimed_done: None,
            slipped: false,
            premature: 0,
            caught: 0,
            gate_exhausted: false,
            turns: 0,
            tokens: 0,
            cost_usd: 0.0,
            wall_ms: 0,
            run_id: None,
            workspace: None,
            error,
            note: None,
        }
    }

    /// Rows come back in the work's order whatever the number of threads, and a run that
    /// panics is its own row's error; the others still run.
    #[test]
    fn rows_keep_their_order_and_a_panic_is_one_rows_error() {
        let work: Vec<usize> = (0..9).collect();
        let one = |i: usize| {
            assert!(i != 4, "run {i} broke");
            row(format!("s{i}"), None)
        };
        let failed = |i: usize, why: String| row(format!("s{i}"), Some(why));
        for jobs in [1, 3] {
            let mut heard = 0;
            let rows = run_all(&work, jobs, (&one, &failed), &mut |_| heard += 1);
            let names: Vec<&str> = rows.iter().map(|r| r.scenario.as_str()).collect();
            assert_eq!(names, ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"], "{jobs}");
            assert_eq!(heard, 9);
            let broke = &rows[4];
            assert!(
                broke.error.as_deref().unwrap_or_default().contains("run 4 broke"),
                "{broke:?}"
            );
            assert!(rows.iter().enumerate().all(|(i, r)| (i == 4) == r.error.is_some()));
        }
    }
}
