//! One step read straight from its JSON text, for the fast path of a large plan
//! ([`super::parallel`]).
//!
//! `Step` keeps unknown fields (`#[serde(flatten)] extra`), and for such a struct serde's derive
//! first buffers every field of every step into its generic `Content` tree, then deserialises the
//! tree again: two allocations and a copy for each string and number of a plan, only to find each
//! field's place. [`StepSeed`] puts the known fields in place as they are read and the unknown
//! ones in `extra`, and reads the parameters into their compact form ([`crate::Params`]) with no
//! `Value` built on the way.
//!
//! It must give exactly the step the derive gives, for every text it accepts, and it declines
//! (an error) whenever it might not: the caller then reads the whole plan through the derive.
//! Each field's value is read by the field type's own `Deserialize`, straight from serde_json
//! instead of from the buffered tree (for these types the two accept the same texts and give the
//! same values; the differential tests in `parse_step_tests.rs` compare them); a field named
//! twice (under its name or an alias) is declined, as the derive rejects it; an unknown field
//! named twice keeps its last value, as the derive's `BTreeMap` does.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde_json::Value;

use crate::plan::Step;

/// A known field of a step, by its name or an alias (as `Step`'s serde attributes say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Id,
    Title,
    Description,
    Tool,
    Parameters,
    DependsOn,
    OnFail,
    AcceptanceCriteria,
    Assertions,
    ExpectedOutputs,
    Complexity,
    RequiresApproval,
    MaxAttempts,
    Delegate,
    MayChangeOracle,
    Repeatable,
}

impl Field {
    /// The field a key names; `None` for a key the step does not know (`refs`, which serde
    /// skips, and `extra`, the flattened map, are unknown keys too).
    fn of(key: &str) -> Option<Self> {
        Some(match key {
            "id" | "step_id" => Self::Id,
            "title" | "name" => Self::Title,
            "description" => Self::Description,
            "tool" => Self::Tool,
            "parameters" | "args" => Self::Parameters,
            "depends_on" | "dependencies" => Self::DependsOn,
            "on_fail" => Self::OnFail,
            "acceptance_criteria" => Self::AcceptanceCriteria,
            "assertions" => Self::Assertions,
            "expected_outputs" => Self::ExpectedOutputs,
            "complexity" | "estimated_complexity" => Self::Complexity,
            "requires_approval" => Self::RequiresApproval,
            "max_attempts" => Self::MaxAttempts,
            "delegate" => Self::Delegate,
            "may_change_oracle" => Self::MayChangeOracle,
            "repeatable" => Self::Repeatable,
            _ => return None,
        })
    }

    fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// A step's key: a known field, or the name of an unknown one.
enum Key {
    Known(Field),
    Unknown(String),
}

/// Reads a key without allocating for the known ones.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        // What the derive asks for its field names.
        deserializer.deserialize_identifier(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
        Ok(Field::of(key).map_or_else(|| Key::Unknown(key.to_owned()), Key::Known))
    }
}

/// Reads one step (a JSON object) into the step it holds, which starts as `Step::default()`.
pub(super) struct StepSeed<'s>(pub(super) &'s mut Step);

impl<'de> DeserializeSeed<'de> for StepSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        // A struct with a flattened field is read as a map by the derive too.
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for StepSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a step")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // `Step::default()` is every `#[serde(default)]` of the derive (`on_fail: abort`).
        let step = self.0;
        let mut seen = 0u32;
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let field = match key {
                Key::Known(field) => field,
                Key::Unknown(name) => {
                    let value: Value = map.next_value()?;
                    step.extra.insert(name, value);
                    continue;
                }
            };
            if seen & field.bit() != 0 {
                return Err(de::Error::custom("duplicate field"));
            }
            seen |= field.bit();
            match field {
                Field::Id => step.id = map.next_value()?,
                Field::Title => step.title = map.next_value()?,
                Field::Description => step.description = map.next_value()?,
                Field::Tool => step.tool = map.next_value()?,
                Field::Parameters => step.parameters = map.next_value()?,
                Field::DependsOn => step.depends_on = map.next_value()?,
                Field::OnFail => step.on_fail = map.next_value()?,
                Field::AcceptanceCriteria => step.acceptance_criteria = map.next_value()?,
                Field::Assertions => step.assertions = map.next_value()?,
                Field::ExpectedOutputs => step.expected_outputs = map.next_value()?,
                Field::Complexity => step.complexity = map.next_value()?,
                Field::RequiresApproval => step.requires_approval = map.next_value()?,
                Field::MaxAttempts => step.max_attempts = map.next_value()?,
                Field::Delegate => step.delegate = map.next_value()?,
                Field::MayChangeOracle => step.may_change_oracle = map.next_value()?,
                Field::Repeatable => step.repeatable = map.next_value()?,
            }
        }
        if seen & Field::Id.bit() == 0 {
            return Err(de::Error::missing_field("id"));
        }
        Ok(())
    }
}

/// Reads the step in `text` (one JSON object, nothing after it but white space) into `step`,
/// which must be `Step::default()`; false when the text is not one, or when the derive might
/// read it differently (`step` is then in no particular state).
pub(super) fn read(text: &str, step: &mut Step) -> bool {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    StepSeed(step).deserialize(&mut deserializer).is_ok() && deserializer.end().is_ok()
}

#[cfg(test)]
#[path = "parse_step_tests.rs"]
mod tests;
