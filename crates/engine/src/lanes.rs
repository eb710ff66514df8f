//! Lanes: how many steps of a run may run at once.
//!
//! `jobs` (`--jobs`, one a core by default) bounds the steps that spend their time using the
//! machine or waiting on someone else's: a command, a model, a request, a child run, a judge, a
//! hook. A *file step* does its work in pev itself: its tool is one whose
//! [`Tool::in_process`](pev_tools::Tool::in_process) is true (the built-in `file.*` tools), it
//! has no judge, no delegation and no hooks, and its assertions read files and outputs only. It
//! spends most of its time waiting for its intent to be durable, and two at a time, each waits
//! on a commit of its own. So while no other kind of step runs, up to `light_jobs` file steps
//! run together and their intents share commits (one fsync for several).
//!
//! Only where running them together cannot change what they do: a file step is light when
//! every path it names (its tool's, its assertions', its expected outputs') is written out in
//! the plan, stays in the workspace and is nobody else's: no other file step of the plan names
//! the same path, a directory above it, or a path below it. Steps that share a path run as
//! before, at most `jobs` at a time.
//!
//! A heavy step starts only when fewer than `jobs` steps of the run are running, so within a run
//! a command never runs beside more steps than `--jobs` allows, and the crediting of its changes
//! (which needs it to run alone) is what it was. The ready steps start in order: a heavy step
//! waiting for room stops light ones from overtaking it, so it waits for at most the light steps
//! already running.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use pev_protocol::{Assertion, Plan, Step};
use pev_tools::Registry;

/// How a step counts against the run's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Weight {
    /// A file step whose paths are its own.
    Light,
    /// Everything else.
    Heavy,
}

/// The weight of each of `plan`'s steps, in plan order; `hooks`: the run has hooks, which run
/// commands around every call.
pub(crate) fn weights(plan: &Plan, registry: &Registry, hooks: bool) -> Vec<Weight> {
    let footprints: Vec<Option<Vec<String>>> = plan
        .steps
        .iter()
        .map(|step| if hooks { None } else { footprint(step, registry) })
        .collect();
    let mut shared = vec![false; footprints.len()];
    let mut owner: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, paths) in footprints.iter().enumerate() {
        for path in paths.iter().flatten() {
            match owner.entry(path.as_str()) {
                Entry::Vacant(e) => {
                    e.insert(i);
                }
                Entry::Occupied(e) if *e.get() != i => {
                    shared[i] = true;
                    shared[*e.get()] = true;
                }
                Entry::Occupied(_) => {}
            }
        }
    }
    // A directory above another step's path: every path's ancestors, the workspace's root ("")
    // included, looked up among the paths. (The root's own lookup of "" finds the path itself,
    // whose sharing the loop above settled.)
    for (i, paths) in footprints.iter().enumerate() {
        for path in paths.iter().flatten() {
            let ancestors = std::iter::once(0).chain(path.match_indices('/').map(|(at, _)| at));
            for at in ancestors {
                if let Some(&j) = owner.get(&path[..at])
                    && j != i
                {
                    shared[i] = true;
                    shared[j] = true;
                }
            }
        }
    }
    footprints
        .iter()
        .zip(shared)
        .map(
            |(paths, shared)| {
                if paths.is_some() && !shared { Weight::Light } else { Weight::Heavy }
            },
        )
        .collect()
}

/// The workspace paths a file step names, normalised (`./a//b` is `a/b`, the root is ""); `None`
/// when the step is not a file step, or names a path that is not written out (a reference), or
/// one that climbs (`..`) or starts at `/`.
fn footprint(step: &Step, registry: &Registry) -> Option<Vec<String>> {
    let tool = registry.get(step.tool.as_deref()?)?;
    if !tool.in_process()
        || step.assertions.iter().any(Assertion::looks_outside)
        || !step.acceptance_criteria.is_empty()
        || step.delegate.is_some()
    {
        return None;
    }
    let named = match step.parameters.get("path").map(|v| v.as_str()) {
        Some(Some(path)) => Some(path),
        Some(None) => return None,
        None => None,
    };
    named
        .into_iter()
        .chain(step.assertions.iter().filter_map(Assertion::path))
        .chain(step.expected_outputs.iter().map(String::as_str))
        .map(normal)
        .collect()
}

/// `path` as a workspace-relative key, or `None` when it cannot be told apart from others by
/// its text alone.
fn normal(path: &str) -> Option<String> {
    if path.contains("${") || path.starts_with('/') {
        return None;
    }
    let mut out = String::with_capacity(path.len());
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return None,
            part => {
                if !out.is_empty() {
                    out.push('/');
                }
                out.push_str(part);
            }
        }
    }
    Some(out)
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

    fn plan_of(steps: &[serde_json::Value]) -> Plan {
        let mut steps = steps.to_vec();
        for (i, step) in steps.iter_mut().enumerate() {
            step["id"] = format!("s{i}").into();
        }
        let plan = serde_json::json!({"goal": "g", "steps": steps});
        pev_protocol::parse::parse_plan(&plan.to_string(), pev_protocol::Format::Json).unwrap().plan
    }

    fn weights_of(steps: &[serde_json::Value], hooks: bool) -> Vec<Weight> {
        weights(&plan_of(steps), &Registry::builtin(), hooks)
    }

    fn file(tool: &str, path: &str) -> serde_json::Value {
        serde_json::json!({"tool": tool, "parameters": {"path": path, "content": "x"}})
    }

    #[test]
    fn a_file_step_that_checks_files_is_light_and_anything_more_is_heavy() {
        use Weight::{Heavy, Light};
        let write = serde_json::json!({"tool": "file.write",
            "parameters": {"path": "a.txt", "content": "x"},
            "assertions": [{"type": "file_contains", "path": "a.txt", "pattern": "x"},
                           {"type": "output_contains", "pattern": "x"}]});
        let tools = [
            write.clone(),
            file("file.read", "b.txt"),
            file("file.list", "src"),
            file("file.patch", "c.txt"),
        ];
        assert_eq!(weights_of(&tools, false), [Light; 4]);
        assert_eq!(weights_of(&tools, true), [Heavy; 4], "hooks run commands around every call");
        let heavier = [
            serde_json::json!({"tool": "shell.exec", "parameters": {"command": "true"}}),
            serde_json::json!({"tool": "http.request", "parameters": {"url": "http://x/"}}),
            serde_json::json!({"description": "write a.txt"}),
            serde_json::json!({"tool": "mcp.unknown", "parameters": {}}),
        ];
        assert_eq!(weights_of(&heavier, false), [Heavy; 4]);
        let extra = [
            ("assertions", serde_json::json!([{"type": "command_succeeds", "command": "true"}])),
            ("assertions", serde_json::json!([{"type": "socket_open", "host": "h", "port": 1}])),
            ("assertions", serde_json::json!([{"type": "http_status", "url": "http://x/"}])),
            ("acceptance_criteria", serde_json::json!(["reads well"])),
        ];
        for (key, value) in extra {
            let mut json = write.clone();
            json[key] = value.clone();
            assert_eq!(weights_of(&[json], false), [Heavy], "{key}: {value}");
        }
    }

    #[test]
    fn file_steps_that_name_one_path_or_a_directory_above_it_stay_heavy() {
        use Weight::{Heavy, Light};
        let w = |steps: &[serde_json::Value]| weights_of(steps, false);
        // Two writers of one file (spelt two ways), and a reader of it.
        let same =
            [file("file.write", "a.txt"), file("file.patch", "./a.txt"), file("file.read", "b")];
        assert_eq!(w(&same), [Heavy, Heavy, Light]);
        let read = [file("file.read", "dir//a.txt"), file("file.write", "dir/a.txt")];
        assert_eq!(w(&read), [Heavy, Heavy]);
        // A listing of a directory another step writes in; the root's listing meets every path.
        let list = [
            file("file.list", "src"),
            file("file.write", "src/x/y.rs"),
            file("file.write", "srcs"),
        ];
        assert_eq!(w(&list), [Heavy, Heavy, Light]);
        let root = [file("file.write", "z.txt"), file("file.list", ".")];
        assert_eq!(w(&root), [Heavy, Heavy]);
        // An assertion or an expected output names the other step's file.
        let mut checks = file("file.write", "a.txt");
        checks["assertions"] = serde_json::json!([{"type": "file_exists", "path": "b.txt"}]);
        assert_eq!(w(&[checks, file("file.write", "b.txt")]), [Heavy, Heavy]);
        let mut outputs = file("file.write", "a.txt");
        outputs["expected_outputs"] = serde_json::json!(["out/b.txt"]);
        assert_eq!(w(&[outputs, file("file.write", "out")]), [Heavy, Heavy]);
        // One step naming its own path twice is still its own.
        let mut own = file("file.write", "a.txt");
        own["assertions"] =
            serde_json::json!([{"type": "file_contains", "path": "./a.txt", "pattern": "x"}]);
        assert_eq!(w(&[own, file("file.write", "a.txtx")]), [Light, Light]);
        // Paths that cannot be told apart by their text.
        let unknown = [
            file("file.write", "${s1.result.path}"),
            file("file.write", "../a.txt"),
            file("file.write", "/etc/x"),
            serde_json::json!({"tool": "file.write", "parameters": {"path": 7, "content": "x"}}),
        ];
        assert_eq!(w(&unknown), [Heavy; 4]);
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
        // A light step that ends beside the command leaves the command counted.
        lanes.start(Weight::Light);
        lanes.end(Weight::Light);
        lanes.start(Weight::Light);
        assert!(!lanes.admits(Weight::Light), "the command still runs: jobs bounds them all");
        lanes.end(Weight::Light);
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
