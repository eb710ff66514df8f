//! Lanes: how many steps of a run may run at once.
//!
//! `jobs` (`--jobs`, one a core by default) bounds the steps that spend their time using the
//! machine or waiting on someone else's: a command, a model, a request, a child run, a judge, a
//! hook. A step that only reads or writes workspace files in pev itself (a tool whose
//! [`Tool::in_process`](pev_tools::Tool::in_process) is true, with assertions that read files
//! and outputs only) spends most of its time waiting for its intent to be durable; two at a
//! time, each waits on a commit of its own. So while no heavy step runs, up to `light_jobs` such
//! steps run together and their intents share commits (one fsync for several).
//!
//! A heavy step starts only when fewer than `jobs` steps run, so a command never runs beside
//! more steps than `--jobs` allows, and the crediting of a command's changes (which needs it to
//! run alone) is what it was. The ready steps start in order: a heavy step waiting for room
//! stops light ones from overtaking it, so it waits for at most the light steps already running.

use pev_protocol::{Assertion, Step};
use pev_tools::Registry;

/// How a step counts against the run's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Weight {
    /// Reads or writes files in pev itself and nothing else.
    Light,
    /// Everything else.
    Heavy,
}

/// `step`'s weight: light only when it is a tool step of an in-process tool, with no judge, no
/// delegation, no hooks to run and no assertion that runs a command or reaches the network.
/// (A step waiting for a person's approval uses nothing: it may wait in either lane.)
pub(crate) fn weight(step: &Step, registry: &Registry, hooks: bool) -> Weight {
    let in_process =
        step.tool.as_deref().and_then(|name| registry.get(name)).is_some_and(|t| t.in_process());
    let reads_only = step.assertions.iter().all(|a| {
        !matches!(
            a,
            Assertion::CommandSucceeds { .. }
                | Assertion::SocketOpen { .. }
                | Assertion::HttpStatus { .. }
        )
    });
    if in_process
        && reads_only
        && !hooks
        && step.acceptance_criteria.is_empty()
        && step.delegate.is_none()
    {
        Weight::Light
    } else {
        Weight::Heavy
    }
}

/// The steps running now, against the two limits.
#[derive(Debug)]
pub(crate) struct Lanes {
    jobs: usize,
    light_jobs: usize,
    running: usize,
    heavy: usize,
}

impl Lanes {
    /// `jobs` steps at once, or `light_jobs` while all of them are light (never fewer than
    /// `jobs`, never fewer than one).
    pub(crate) fn new(jobs: usize, light_jobs: usize) -> Self {
        let jobs = jobs.max(1);
        Self { jobs, light_jobs: light_jobs.max(jobs), running: 0, heavy: 0 }
    }

    /// Whether a step of weight `w` may start now.
    pub(crate) fn admits(&self, w: Weight) -> bool {
        match w {
            Weight::Heavy => self.running < self.jobs,
            Weight::Light => {
                self.running < self.jobs || (self.heavy == 0 && self.running < self.light_jobs)
            }
        }
    }

    pub(crate) fn start(&mut self, w: Weight) {
        self.running += 1;
        self.heavy += usize::from(w == Weight::Heavy);
    }

    pub(crate) fn end(&mut self, w: Weight) {
        self.running = self.running.saturating_sub(1);
        if w == Weight::Heavy {
            self.heavy = self.heavy.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(json: &serde_json::Value) -> Step {
        let mut plan = serde_json::json!({"goal": "g", "steps": [json]});
        plan["steps"][0]["id"] = "s".into();
        pev_protocol::parse::parse_plan(&plan.to_string(), pev_protocol::Format::Json)
            .unwrap()
            .plan
            .steps
            .remove(0)
    }

    #[test]
    fn a_file_step_that_checks_files_is_light_and_anything_more_is_heavy() {
        let registry = Registry::builtin();
        let write = serde_json::json!({"tool": "file.write",
            "parameters": {"path": "a.txt", "content": "x"},
            "assertions": [{"type": "file_contains", "path": "a.txt", "pattern": "x"}]});
        assert_eq!(weight(&step(&write), &registry, false), Weight::Light);
        for tool in ["file.read", "file.list", "file.patch"] {
            let s = step(&serde_json::json!({"tool": tool, "parameters": {"path": "a.txt"}}));
            assert_eq!(weight(&s, &registry, false), Weight::Light, "{tool}");
        }
        assert_eq!(weight(&step(&write), &registry, true), Weight::Heavy, "hooks run");
        let heavier = [
            serde_json::json!({"tool": "shell.exec", "parameters": {"command": "true"}}),
            serde_json::json!({"tool": "http.request", "parameters": {"url": "http://x/"}}),
            serde_json::json!({"description": "write a.txt"}),
            serde_json::json!({"tool": "mcp.unknown", "parameters": {}}),
        ];
        for json in heavier {
            assert_eq!(weight(&step(&json), &registry, false), Weight::Heavy, "{json}");
        }
        let extra = [
            ("assertions", serde_json::json!([{"type": "command_succeeds", "command": "true"}])),
            ("assertions", serde_json::json!([{"type": "socket_open", "host": "h", "port": 1}])),
            ("assertions", serde_json::json!([{"type": "http_status", "url": "http://x/"}])),
            ("acceptance_criteria", serde_json::json!(["reads well"])),
        ];
        for (key, value) in extra {
            let mut json = write.clone();
            json[key] = value.clone();
            assert_eq!(weight(&step(&json), &registry, false), Weight::Heavy, "{key}: {value}");
        }
    }

    #[test]
    fn light_steps_fill_the_wide_lane_only_while_no_heavy_step_runs() {
        let mut lanes = Lanes::new(2, 8);
        for _ in 0..8 {
            assert!(lanes.admits(Weight::Light));
            lanes.start(Weight::Light);
        }
        assert!(!lanes.admits(Weight::Light), "eight at most");
        assert!(!lanes.admits(Weight::Heavy), "a command waits until fewer than jobs run");
        for _ in 0..7 {
            lanes.end(Weight::Light);
        }
        assert!(lanes.admits(Weight::Heavy), "one light step left: room for a command");
        lanes.start(Weight::Heavy);
        assert!(!lanes.admits(Weight::Light), "beside a command, jobs bounds them all");
        assert!(!lanes.admits(Weight::Heavy));
        lanes.end(Weight::Light);
        assert!(lanes.admits(Weight::Light) && lanes.admits(Weight::Heavy));
        lanes.start(Weight::Heavy);
        lanes.end(Weight::Heavy);
        lanes.end(Weight::Heavy);
        assert!(lanes.admits(Weight::Light));
    }

    #[test]
    fn an_explicit_limit_below_jobs_is_raised_to_it() {
        let mut lanes = Lanes::new(3, 1);
        for _ in 0..3 {
            assert!(lanes.admits(Weight::Light));
            lanes.start(Weight::Light);
        }
        assert!(!lanes.admits(Weight::Light));
        let one = Lanes::new(0, 0);
        assert!(one.admits(Weight::Heavy));
    }
}
