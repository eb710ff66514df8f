//! The values the command line parses into, below both `args.rs` (which declares the flags)
//! and the commands (which act on them): neither imports the other for a type. What a value
//! does in a command (`Place::open`, `Shard::holds`) is written beside that command, as an
//! `impl` of the type here.

use std::path::PathBuf;

use clap::Args;

use crate::view::style::ColorChoice;

/// How the models are arranged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Planner, executor and judge around the harness
    Pev,
    /// One model in a tool loop with plan tools and a finalization gate
    Loop,
}

/// Which gate settings to run loop-mode scenarios with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GateChoice {
    On,
    Off,
    Both,
}

impl GateChoice {
    pub(crate) fn settings(self) -> &'static [bool] {
        match self {
            Self::On => &[true],
            Self::Off => &[false],
            Self::Both => &[true, false],
        }
    }
}

/// `K/N`: run the `K`th of `N` shards (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not a shard: write K/N, 1 ≤ K ≤ N (e.g. 2/4)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = k.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Where a command's workspace and journal are.
#[derive(Debug, Clone, Default)]
pub(crate) struct Place {
    pub workspace: Option<PathBuf>,
    pub store: Option<PathBuf>,
}

/// Which client `pev integrate` wires, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Client {
    Claude,
    Codex,
}

/// What `pev run` and `pev resume` share.
#[derive(Debug, Clone)]
pub struct Common {
    pub workspace: Option<PathBuf>,
    pub store: Option<pev_store::Location>,
    pub jobs: Option<usize>,
    pub yes: bool,
    /// `--cache`: reuse the verified results of unchanged steps.
    pub cache: bool,
    /// `--protect`, `--allow-oracle`, `--hidden-check`, `--hidden-tests`.
    pub oracle: OracleArgs,
    pub json: bool,
    pub color: ColorChoice,
}

/// `--older-than`: a number and a unit (`s`, `m`, `h`, `d`, `w`).
pub(crate) fn parse_age(text: &str) -> Result<std::time::Duration, String> {
    let bad =
        || format!("`{text}` is not a duration: write a number and a unit, s m h d or w (30d)");
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = text.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(seconds).map(std::time::Duration::from_secs).ok_or_else(bad)
}

/// The checks a run is judged by (see "Tests are the check, not the work" in the README).
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct OracleArgs {
    /// Protect more files as checks the run may not change (a glob; repeatable), beyond the
    /// tests and test configuration pev infers
    #[arg(long, value_name = "GLOB")]
    pub(crate) protect: Vec<String>,
    /// Let the run change these checks (a glob; repeatable): for work on the tests themselves
    #[arg(long = "allow-oracle", value_name = "GLOB")]
    pub(crate) allow_oracle: Vec<String>,
    /// A check the models never see, run by pev on a copy of the final workspace when it
    /// decides the verdict (`success` needs it to pass; repeatable)
    #[arg(long = "hidden-check", value_name = "COMMAND")]
    pub(crate) hidden_check: Vec<String>,
    /// A directory of held-out tests outside the workspace, copied into that copy (at its own
    /// name) for the hidden checks; hidden from the models' tools and from commands
    #[arg(long = "hidden-tests", value_name = "DIR", requires = "hidden_check")]
    pub(crate) hidden_tests: Option<PathBuf>,
    /// No oracle: record and protect no tests, run no pristine re-check and no hidden check, so
    /// a changed test goes unnoticed (for comparison; `pev eval` uses it for its gate-off runs)
    #[arg(long = "no-oracle", conflicts_with_all = ["protect", "allow_oracle", "hidden_check"])]
    pub(crate) no_oracle: bool,
    /// More directories to hide from commands: a resumed run's held-out tests.
    #[arg(skip)]
    pub(crate) also_hide: Vec<PathBuf>,
}
