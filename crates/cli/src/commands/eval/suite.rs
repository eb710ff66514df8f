//! `pev eval`'s suite: reading a directory of scenarios, strictly. A bad suite is the eval's
//! input error (exit 2), so every problem names the file and the field, and nothing is run
//! until every scenario has been read and its scripts parsed.
//!
//! A suite is a directory whose every subdirectory is one scenario:
//!
//! ```text
//! SUITE/lazy/scenario.toml   the scenario (below)
//! SUITE/lazy/workspace/      the fixture, copied to a fresh temporary directory per run
//! SUITE/lazy/model.json      the scripted model(s), named in [scripts]
//! ```
//!
//! ```toml
//! name = "lazy"                 # default: the directory's name
//! description = "says done after 2 of 3 edits"
//! goal = "Set the title in a.txt, b.txt and c.txt"
//! mode = "loop"                 # or "pev" (planner, executor and judge; run once, no gate)
//! honest = true                 # optional: the gate on/off difference is the gate's overhead
//! timeout_secs = 60             # optional: per run
//!
//! [scripts]                     # optional: script:PATH per role, relative to this file
//! executor = "model.json"       # also planner, verifier
//!
//! [expect]                      # the outcome with the gate on (and in pev mode)
//! status = "partial"            # success | partial | failed
//! reasons = ["steps_not_run"]   # optional: reason codes that must be among the run's
//!
//! [expect.gate_off]             # optional: the outcome with the gate off, when it differs
//! status = "partial"
//!
//! [[volatile]]                  # optional: what else changes between runs in a tool's output,
//! pattern = "build-[0-9a-f]{8}" # masked when a recording is replayed (times, durations, temp
//! with = "build-<id>"           # paths and pids always are); written into the recording
//! ```
//!
//! The scripts live beside `scenario.toml`, outside `workspace/`, so the model cannot read its
//! own script through the workspace tools; the eval hands them to `pev agent` as
//! `PEV_<ROLE>_PROVIDER=script:ABSOLUTE_PATH`. A `workspace/pev.toml` (models, prices, hooks)
//! is copied with the fixture and read as usual. A scenario without scripts talks to whatever
//! provider its `pev.toml` and the environment name: a live eval.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pev_protocol::run::{ReasonCode, RunStatus};
use pev_providers::script::ScriptedClient;
use serde::Deserialize;

/// The file that makes a directory a scenario.
pub const SCENARIO_FILE: &str = "scenario.toml";
/// The fixture directory of a scenario.
pub const WORKSPACE_DIR: &str = "workspace";
/// The time one run may take unless the scenario says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How the scenario's models are arranged (`pev agent --mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScenarioMode {
    /// One model in a tool loop with the plan tools; run with the gate on and off.
    #[default]
    Loop,
    /// Planner, executor and judge; run once (there is no gate to switch).
    Pev,
}

impl ScenarioMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loop => "loop",
            Self::Pev => "pev",
        }
    }
}

/// The outcome a run must end with to be correct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    pub status: RunStatus,
    /// Reason codes that must be among the run's (others may be there too).
    pub reasons: Vec<ReasonCode>,
}

/// The scripted models, absolute paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scripts {
    pub planner: Option<PathBuf>,
    pub executor: Option<PathBuf>,
    pub verifier: Option<PathBuf>,
}

impl Scripts {
    /// `(PEV_<ROLE>_PROVIDER, path)` for each role with a script.
    pub fn env(&self) -> Vec<(&'static str, &Path)> {
        [
            ("PEV_PLANNER_PROVIDER", &self.planner),
            ("PEV_EXECUTOR_PROVIDER", &self.executor),
            ("PEV_VERIFIER_PROVIDER", &self.verifier),
        ]
        .into_iter()
        .filter_map(|(var, path)| path.as_deref().map(|p| (var, p)))
        .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.env().is_empty()
    }
}

/// One scenario, read and checked.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub description: Option<String>,
    pub goal: String,
    pub mode: ScenarioMode,
    pub honest: bool,
    pub timeout: Duration,
    /// The fixture (`DIR/workspace`).
    pub workspace: PathBuf,
    pub scripts: Scripts,
    /// With the gate on, and in pev mode.
    pub expect: Expectation,
    /// With the gate off.
    pub expect_gate_off: Expectation,
    /// A check the model never sees (`hidden_check`, `hidden_tests`), for the gate-on run.
    pub hidden_check: Option<HiddenCheck>,
    /// The scenario's own volatile rules (`[[volatile]]`), after the built-in ones in its
    /// recordings.
    pub volatile: Vec<pev_store::recording::VolatileRule>,
}

/// A scenario's hidden check: a command, and a directory of held-out tests beside
/// `scenario.toml` (never in `workspace/`, so the model cannot read it).
#[derive(Debug, Clone)]
pub struct HiddenCheck {
    pub command: String,
    pub tests: Option<PathBuf>,
}

impl Scenario {
    /// The expectation for a run with the gate `gate` (`None`: pev mode).
    pub fn expectation(&self, gate: Option<bool>) -> &Expectation {
        match gate {
            Some(false) => &self.expect_gate_off,
            Some(true) | None => &self.expect,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    goal: String,
    #[serde(default)]
    mode: ScenarioMode,
    #[serde(default)]
    honest: bool,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    scripts: RawScripts,
    /// A command pev runs on a copy of the final workspace when it decides the verdict.
    #[serde(default)]
    hidden_check: Option<String>,
    /// Held-out tests for it: a directory beside `scenario.toml`, copied in at its own name.
    #[serde(default)]
    hidden_tests: Option<String>,
    expect: RawExpect,
    #[serde(default)]
    volatile: Vec<RawVolatile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVolatile {
    pattern: String,
    with: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScripts {
    #[serde(default)]
    planner: Option<String>,
    #[serde(default)]
    executor: Option<String>,
    #[serde(default)]
    verifier: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    status: RunStatus,
    #[serde(default)]
    reasons: Vec<ReasonCode>,
    #[serde(default)]
    gate_off: Option<RawExpectation>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpectation {
    status: RunStatus,
    #[serde(default)]
    reasons: Vec<ReasonCode>,
}

/// Reads every scenario of `suite`, in the order of their directory names; `suite` may also be
/// one scenario's directory (it has a `scenario.toml`), which is then the whole suite.
pub fn load_suite(suite: &Path) -> Result<Vec<Scenario>, String> {
    if suite.join(SCENARIO_FILE).is_file() {
        return Ok(vec![load_scenario(suite)?]);
    }
    let entries = std::fs::read_dir(suite)
        .map_err(|e| format!("cannot read the suite directory {}: {e}", suite.display()))?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", suite.display()))?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let name = entry.file_name();
        // Hidden directories (.git, an editor's) are not scenarios.
        if is_dir && !name.to_string_lossy().starts_with('.') {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    if dirs.is_empty() {
        return Err(format!(
            "{}: no scenarios (a scenario is a subdirectory with a {SCENARIO_FILE})",
            suite.display()
        ));
    }
    let mut names = HashSet::new();
    let mut scenarios = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let scenario = load_scenario(&dir)?;
        if !names.insert(scenario.name.clone()) {
            return Err(format!(
                "{}: name: `{}` is the name of an earlier scenario too",
                dir.join(SCENARIO_FILE).display(),
                scenario.name
            ));
        }
        scenarios.push(scenario);
    }
    Ok(scenarios)
}

/// Reads one scenario directory.
pub fn load_scenario(dir: &Path) -> Result<Scenario, String> {
    let file = dir.join(SCENARIO_FILE);
    let shown = file.display();
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{}: not a scenario: it has no {SCENARIO_FILE}", dir.display()));
        }
        Err(e) => return Err(format!("cannot read {shown}: {e}")),
    };
    let raw: RawScenario =
        toml::from_str(&text).map_err(|e| format!("{shown}: {}", e.to_string().trim_end()))?;
    let name = match raw.name {
        Some(name) if name.trim().is_empty() => return Err(format!("{shown}: name: it is empty")),
        Some(name) => name.trim().to_owned(),
        None => dir.file_name().map_or_else(|| "scenario".into(), |n| n.to_string_lossy()).into(),
    };
    if raw.goal.trim().is_empty() {
        return Err(format!("{shown}: goal: it is empty"));
    }
    if raw.timeout_secs == Some(0) {
        return Err(format!("{shown}: timeout_secs: it must be at least 1"));
    }
    let workspace = dir.join(WORKSPACE_DIR);
    if !workspace.is_dir() {
        return Err(format!(
            "{}: the scenario has no {WORKSPACE_DIR}/ directory (its fixture)",
            dir.display()
        ));
    }
    let script = |role: &str, path: Option<String>| -> Result<Option<PathBuf>, String> {
        let Some(path) = path else { return Ok(None) };
        let full = dir.join(&path);
        let full = full.canonicalize().map_err(|e| {
            format!("{shown}: scripts.{role}: cannot open `{path}` ({}): {e}", full.display())
        })?;
        ScriptedClient::load(&full).map_err(|e| format!("{shown}: scripts.{role}: {e}"))?;
        Ok(Some(full))
    };
    let scripts = Scripts {
        planner: script("planner", raw.scripts.planner)?,
        executor: script("executor", raw.scripts.executor)?,
        verifier: script("verifier", raw.scripts.verifier)?,
    };
    let expect = Expectation { status: raw.expect.status, reasons: raw.expect.reasons };
    let expect_gate_off = match raw.expect.gate_off {
        Some(_) if raw.mode == ScenarioMode::Pev => {
            return Err(format!(
                "{shown}: expect.gate_off: a pev-mode scenario has no gate to switch off"
            ));
        }
        Some(off) => Expectation { status: off.status, reasons: off.reasons },
        None => expect.clone(),
    };
    let hidden_check = match (raw.hidden_check, raw.hidden_tests) {
        (None, Some(_)) => {
            return Err(format!("{shown}: hidden_tests: it needs a hidden_check to run them"));
        }
        (None, None) => None,
        (Some(command), _) if command.trim().is_empty() => {
            return Err(format!("{shown}: hidden_check: it is empty"));
        }
        (Some(command), tests) => {
            let tests = match tests {
                Some(rel) => {
                    let full = dir.join(&rel);
                    if !full.is_dir() {
                        return Err(format!(
                            "{shown}: hidden_tests: `{rel}` is not a directory beside it"
                        ));
                    }
                    if full.starts_with(&workspace) {
                        return Err(format!(
                            "{shown}: hidden_tests: `{rel}` is inside {WORKSPACE_DIR}/, where the \
                             model can read it"
                        ));
                    }
                    Some(full.canonicalize().unwrap_or(full))
                }
                None => None,
            };
            Some(HiddenCheck { command, tests })
        }
    };
    let volatile: Vec<pev_store::recording::VolatileRule> = raw
        .volatile
        .into_iter()
        .map(|v| pev_store::recording::VolatileRule { pattern: v.pattern, with: v.with })
        .collect();
    pev_engine::agent::volatile::Masks::declared(
        volatile.iter().map(|v| (v.pattern.clone(), v.with.clone())),
    )
    .map_err(|e| format!("{shown}: volatile: {e}"))?;
    Ok(Scenario {
        hidden_check,
        volatile,
        name,
        description: raw.description.map(|d| d.trim().to_owned()).filter(|d| !d.is_empty()),
        goal: raw.goal.trim().to_owned(),
        mode: raw.mode,
        honest: raw.honest,
        timeout: raw.timeout_secs.map_or(DEFAULT_TIMEOUT, Duration::from_secs),
        workspace,
        scripts,
        expect,
        expect_gate_off,
    })
}
