//! Wire names: what a model (or an MCP client) is offered and calls, as opposed to the plan
//! names (`file.read`) that plans, the journal, events and results use (CONTRACTS.md §3). This
//! module is the one place the two are mapped.
//!
//! Providers refuse tool names outside `^[a-zA-Z0-9_-]{1,64}$` (Anthropic allows 128, OpenAI and
//! MCP clients 64), so a wire name is the plan name with every other character replaced by `_`,
//! cut to 64 characters: `file.read` is offered as `file_read`. A plan name that is already a
//! valid wire name stays itself. When two plan names of one table would get the same wire name
//! (`file.read` and `file_read`, or two long names that differ only past character 64), both get
//! a short hash of their plan name as a suffix (`file_read_1a2b3c4d`), so every wire name maps back
//! to exactly one plan name and the table depends on the set of names, not on the order they were
//! registered in.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::sandbox::hex;

/// The longest wire name every provider and MCP client accepts.
pub const MAX_WIRE_NAME_LEN: usize = 64;

/// Hex digits of the hash suffix that tells colliding names apart (32 bits).
const SUFFIX_HEX: usize = 8;

/// A tool name as a model sees and calls it: 1 to 64 characters of `[a-zA-Z0-9_-]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct WireName(String);

impl WireName {
    /// `name` as a wire name, when it is a valid one.
    pub fn parse(name: &str) -> Option<Self> {
        is_wire_name(name).then(|| Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WireName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`.
/// `text` with each whole-word `from` replaced by `to`: the characters around it are not ones a
/// name or a path is made of.
fn replace_word(text: &str, from: &str, to: &str) -> String {
    let part_of_word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let (before, after) = (&rest[..at], &rest[at + from.len()..]);
        let bounded_before = !before.chars().next_back().is_some_and(part_of_word);
        // A name ending a sentence ("use file.write.") is still a whole word.
        let next = after.chars().next();
        let bounded_after = match next {
            Some('.') => !after[1..].chars().next().is_some_and(part_of_word),
            Some(c) => !part_of_word(c),
            None => true,
        };
        out.push_str(before);
        out.push_str(if bounded_before && bounded_after { to } else { from });
        rest = after;
    }
    out.push_str(rest);
    out
}

pub fn is_wire_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_WIRE_NAME_LEN && name.chars().all(is_wire_char)
}

fn is_wire_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The wire names of a set of plan names, both ways.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolNames {
    wire_of: BTreeMap<String, WireName>,
    plan_of: BTreeMap<WireName, String>,
}

impl ToolNames {
    /// The table for these plan names (duplicates count once).
    pub fn new<I, S>(plan_names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let plans: BTreeSet<String> =
            plan_names.into_iter().map(|name| name.as_ref().to_owned()).collect();
        // Every name starts at level 0 (its own name, made valid). Whoever shares a wire name
        // with another moves up a level (a hash suffix salted with the level) until no two
        // share one. Each round looks only at the set of names, never at their order.
        let mut levels: BTreeMap<&str, u32> = plans.iter().map(|p| (p.as_str(), 0)).collect();
        loop {
            let mut owners: BTreeMap<String, Vec<&str>> = BTreeMap::new();
            for (&plan, &level) in &levels {
                owners.entry(wire_at(plan, level)).or_default().push(plan);
            }
            let clashing: Vec<&str> =
                owners.values().filter(|o| o.len() > 1).flatten().copied().collect();
            if clashing.is_empty() {
                let mut table = Self::default();
                for (wire, plans) in owners {
                    let wire = WireName(wire);
                    for plan in plans {
                        table.wire_of.insert(plan.to_owned(), wire.clone());
                        table.plan_of.insert(wire.clone(), plan.to_owned());
                    }
                }
                return table;
            }
            for plan in clashing {
                if let Some(level) = levels.get_mut(plan) {
                    *level = level.saturating_add(1);
                }
            }
        }
    }

    /// The wire name of the plan name `plan`; `None` for a tool not in the table.
    pub fn wire(&self, plan: &str) -> Option<&WireName> {
        self.wire_of.get(plan)
    }

    /// The plan name of `wire`, the name a model called; `None` for a name it was never given.
    pub fn plan(&self, wire: &str) -> Option<&str> {
        let wire = WireName::parse(wire)?;
        self.plan_of.get(&wire).map(String::as_str)
    }

    /// Every wire name, in the order of their plan names.
    pub fn wire_names(&self) -> impl Iterator<Item = &WireName> {
        self.wire_of.values()
    }

    /// Every (plan name, wire name) pair, in plan-name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &WireName)> {
        self.wire_of.iter().map(|(plan, wire)| (plan.as_str(), wire))
    }

    /// `text` (a tool's message to the model) with every plan name in it written as its wire
    /// name: "invalid arguments for file.read" reads "… for file_read" to a model that knows
    /// only `file_read`. A name counts only as a whole word (not inside `a/file.read.bak`).
    pub fn in_wire_terms(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (plan, wire) in self.iter().filter(|(p, w)| *p != w.as_str()) {
            out = replace_word(&out, plan, wire.as_str());
        }
        out
    }

    pub fn len(&self) -> usize {
        self.wire_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.wire_of.is_empty()
    }
}

/// The wire name of `plan` at `level`: at 0 the name itself with invalid characters replaced
/// and cut to 64; above 0, cut shorter and followed by `_` and a hash of the plan name and the
/// level.
fn wire_at(plan: &str, level: u32) -> String {
    // Only ASCII is kept, so byte lengths below are character counts.
    let mut wire: String = plan.chars().map(|c| if is_wire_char(c) { c } else { '_' }).collect();
    if level == 0 {
        wire.truncate(MAX_WIRE_NAME_LEN);
        if wire.is_empty() {
            wire.push('_');
        }
        return wire;
    }
    wire.truncate(MAX_WIRE_NAME_LEN - 1 - SUFFIX_HEX);
    let mut hasher = Sha256::new();
    hasher.update(level.to_le_bytes());
    hasher.update(plan.as_bytes());
    let digest = hex(&hasher.finalize());
    wire.push('_');
    wire.push_str(digest.get(..SUFFIX_HEX).unwrap_or(&digest));
    wire
}

#[cfg(test)]
#[path = "names_tests.rs"]
mod tests;
