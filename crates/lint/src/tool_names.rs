//! The distinct tool names of a plan and the one each step uses, found once per lint.
//!
//! A plan of 100,000 steps uses a handful of tools, and most of what the checks ask of a tool
//! (does a policy glob match it, what does it do) depends on its name alone. The checks answer
//! those questions once per distinct name ([`ToolNames::classify`]) and then look each step's
//! answer up by number, instead of matching globs step after step.
//!
//! Names are numbered in order of first use. A step's name is compared with the few names met
//! last before the map is asked (steps mostly cycle through a few tools); the map keeps the
//! standard library's keyed hash, so a plan cannot make its lookups collide on purpose.

use std::collections::HashMap;

use pev_protocol::Plan;

/// A step without a tool.
pub(crate) const NO_TOOL: u32 = u32::MAX;

/// How many recently met names are compared before the map is asked.
const RECENT: usize = 8;

/// The plan's tool names, numbered, and the number of each step's.
#[derive(Debug, Default)]
pub(crate) struct ToolNames<'a> {
    names: Vec<&'a str>,
    of_step: Vec<u32>,
}

impl<'a> ToolNames<'a> {
    pub(crate) fn new(plan: &'a Plan) -> Self {
        let mut names: Vec<&'a str> = Vec::new();
        let mut numbers: HashMap<&'a str, u32> = HashMap::new();
        let mut recent = [NO_TOOL; RECENT];
        let mut of_step = Vec::with_capacity(plan.steps.len());
        for step in &plan.steps {
            let Some(tool) = step.tool.as_deref() else {
                of_step.push(NO_TOOL);
                continue;
            };
            let seen = recent.iter().copied().find(|&n| {
                names.get(n as usize).is_some_and(|name| name.len() == tool.len() && *name == tool)
            });
            let number = match seen {
                Some(n) => n,
                None => {
                    let next = u32::try_from(names.len()).unwrap_or(NO_TOOL);
                    let n = *numbers.entry(tool).or_insert(next);
                    if n == next {
                        names.push(tool);
                    }
                    recent.rotate_right(1);
                    recent[0] = n;
                    n
                }
            };
            of_step.push(number);
        }
        Self { names, of_step }
    }

    /// The number of step `i`'s tool, or [`NO_TOOL`].
    pub(crate) fn of_step(&self, i: usize) -> u32 {
        self.of_step.get(i).copied().unwrap_or(NO_TOOL)
    }

    /// `f` of every distinct name, indexed by number.
    pub(crate) fn classify<T>(&self, f: impl FnMut(&'a str) -> T) -> Vec<T> {
        self.names.iter().copied().map(f).collect()
    }

    /// `answers[number of step i's tool]`, or `None` when the step has no tool.
    pub(crate) fn lookup<'t, T>(&self, answers: &'t [T], i: usize) -> Option<&'t T> {
        answers.get(self.of_step(i) as usize)
    }
}
