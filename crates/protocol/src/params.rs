//! [`Params`]: a step's parameters, kept as one compact string instead of a tree of values.
//!
//! A 100,000-step plan holds some 350,000 parameters; as a `serde_json::Map` of `Value`s each
//! is an 80-byte value, a 112-byte map entry, a key and a string of its own, with a hash index
//! per map: about 70 MB and a million allocations for 13 MB of JSON (BENCHMARKS.md, issue 32).
//! `Params` keeps the same object in one allocation per step, written straight from the plan's
//! text without building a `Value` first, and hands out borrowed views ([`ValueRef`]) that the
//! lint checks and the reference index walk in place. Code that wants a `Map` (the engine,
//! resolving references before a tool call) asks for one with [`Params::to_map`].
//!
//! The encoding is text, so views are `&str` slices with no UTF-8 check: every byte the encoding
//! adds is ASCII and every string is copied whole, so each slice starts and ends on a character
//! boundary. `params_write.rs` writes the encoding. A value is a tag and its payload:
//!
//! | tag | value | payload |
//! |---|---|---|
//! | `n` `f` `t` | null, false, true | none |
//! | `u` | an integer ≥ 0 | the number as a length (below) |
//! | `i` | an integer < 0 | `!(n as u64)` as a length |
//! | `d` | a finite float | its bits as a length |
//! | `s` | a string | its length in bytes, then the bytes |
//! | `a` | an array | [`SLOT`] digits of count, [`SLOT`] of byte length, then the items |
//! | `o` | an object | the same, then each key (length, bytes) and value |
//!
//! A length is written in 6-bit digits, low first, each below 0x40 and marked 0x40 when more
//! follow. Containers carry fixed-width count and length so that the writer can fill them in when
//! the container ends and a reader can skip one whole. An empty `Params` is the empty string.
//!
//! The semantics are `serde_json`'s with `preserve_order`: keys keep their order, a key given
//! twice keeps its first place and its last value, numbers are `u64`, `i64` or finite `f64`
//! (serialised exactly as a `Value` would be), and equality ignores key order.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};

/// Digits in a container's count and length slots: 36 bits, 64 GiB.
const SLOT: usize = 6;
/// The largest count or length a slot holds.
const SLOT_MAX: u64 = (1 << (6 * SLOT)) - 1;
/// Objects with more keys than this are not searched for a repeated key as they are written;
/// they are rebuilt through a `Map` instead, which settles repeats as `Map` does.
const SCAN_KEYS: usize = 32;
/// A thread's writer gives its buffer back after parameters larger than this (a file's content).
const KEEP: usize = 1 << 20;

/// A step's parameters: a JSON object in one compact string (see the module docs).
#[derive(Clone, Default)]
pub struct Params {
    text: Box<str>,
}

impl Params {
    /// Encodes a map.
    pub fn from_map(map: &Map<String, Value>) -> Self {
        write::from_map(map)
    }

    /// The parameters as an object view.
    pub fn as_object(&self) -> ObjectRef<'_> {
        match Reader::new(&self.text).value() {
            ValueRef::Object(object) => object,
            _ => ObjectRef { len: 0, body: "" },
        }
    }

    pub fn len(&self) -> usize {
        self.as_object().len()
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<ValueRef<'_>> {
        self.as_object().get(key)
    }

    /// The entries, in order.
    pub fn iter(&self) -> ObjectIter<'_> {
        self.as_object().iter()
    }

    /// The parameters as a `serde_json` map (allocates the whole tree).
    pub fn to_map(&self) -> Map<String, Value> {
        self.as_object().to_map()
    }

    /// Bytes this value holds on the heap (for memory accounting and tests).
    pub fn heap_size(&self) -> usize {
        self.text.len()
    }
}

impl From<Map<String, Value>> for Params {
    fn from(map: Map<String, Value>) -> Self {
        Self::from_map(&map)
    }
}

impl<'a> IntoIterator for &'a Params {
    type Item = (&'a str, ValueRef<'a>);
    type IntoIter = ObjectIter<'a>;

    fn into_iter(self) -> ObjectIter<'a> {
        self.iter()
    }
}

impl PartialEq for Params {
    fn eq(&self, other: &Self) -> bool {
        // The same text is the same object; different text may still be (keys in another
        // order), as `Map`'s equality says.
        self.text == other.text || self.to_map() == other.to_map()
    }
}

impl fmt::Debug for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.as_object(), f)
    }
}

impl Serialize for Params {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.as_object().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        write::read(deserializer)
    }
}

impl JsonSchema for Params {
    fn inline_schema() -> bool {
        <Map<String, Value>>::inline_schema()
    }

    fn schema_name() -> Cow<'static, str> {
        <Map<String, Value>>::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        <Map<String, Value>>::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        <Map<String, Value>>::json_schema(generator)
    }
}

/// A value inside [`Params`], borrowed.
#[derive(Clone, Copy)]
pub enum ValueRef<'a> {
    Null,
    Bool(bool),
    Number(NumberRef),
    String(&'a str),
    Array(ArrayRef<'a>),
    Object(ObjectRef<'a>),
}

/// A number as `serde_json` keeps one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NumberRef {
    PosInt(u64),
    NegInt(i64),
    Float(f64),
}

impl NumberRef {
    pub fn as_f64(self) -> f64 {
        match self {
            // The same lossy conversions `serde_json::Number::as_f64` makes.
            Self::PosInt(n) => n as f64,
            Self::NegInt(n) => n as f64,
            Self::Float(f) => f,
        }
    }

    pub fn to_number(self) -> Number {
        match self {
            Self::PosInt(n) => Number::from(n),
            Self::NegInt(n) => Number::from(n),
            // Only finite floats are written; 0 is the fallback that cannot panic.
            Self::Float(f) => Number::from_f64(f).unwrap_or_else(|| Number::from(0u8)),
        }
    }
}

impl<'a> ValueRef<'a> {
    pub fn as_str(self) -> Option<&'a str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(self) -> Option<ArrayRef<'a>> {
        match self {
            Self::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_object(self) -> Option<ObjectRef<'a>> {
        match self {
            Self::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_f64(self) -> Option<f64> {
        match self {
            Self::Number(n) => Some(n.as_f64()),
            _ => None,
        }
    }

    /// The value as an owned `serde_json::Value`.
    pub fn to_value(self) -> Value {
        match self {
            Self::Null => Value::Null,
            Self::Bool(b) => Value::Bool(b),
            Self::Number(n) => Value::Number(n.to_number()),
            Self::String(s) => Value::String(s.to_owned()),
            Self::Array(a) => Value::Array(a.iter().map(Self::to_value).collect()),
            Self::Object(o) => Value::Object(o.to_map()),
        }
    }

    /// Calls `f` for every string in the value, depth first, in document order (keys are not
    /// strings of the value).
    pub fn for_each_str(self, f: &mut impl FnMut(&'a str)) {
        match self {
            Self::String(s) => f(s),
            Self::Array(a) => a.iter().for_each(|v| v.for_each_str(f)),
            Self::Object(o) => o.iter().for_each(|(_, v)| v.for_each_str(f)),
            _ => {}
        }
    }
}

impl PartialEq<Value> for ValueRef<'_> {
    fn eq(&self, other: &Value) -> bool {
        self.to_value() == *other
    }
}

impl fmt::Debug for ValueRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Null => f.write_str("Null"),
            Self::Bool(b) => write!(f, "Bool({b})"),
            Self::Number(n) => write!(f, "Number({})", n.to_number()),
            Self::String(s) => write!(f, "String({s:?})"),
            Self::Array(a) => fmt::Debug::fmt(a, f),
            Self::Object(o) => fmt::Debug::fmt(o, f),
        }
    }
}

impl fmt::Display for ValueRef<'_> {
    /// Compact JSON, as `Value`'s `Display` writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

impl Serialize for ValueRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // As `serde_json::Value` serialises itself, so the output is the same byte for byte.
        match *self {
            Self::Null => serializer.serialize_unit(),
            Self::Bool(b) => serializer.serialize_bool(b),
            Self::Number(NumberRef::PosInt(n)) => serializer.serialize_u64(n),
            Self::Number(NumberRef::NegInt(n)) => serializer.serialize_i64(n),
            Self::Number(NumberRef::Float(n)) => serializer.serialize_f64(n),
            Self::String(s) => serializer.serialize_str(s),
            Self::Array(a) => a.serialize(serializer),
            Self::Object(o) => o.serialize(serializer),
        }
    }
}

/// An array inside [`Params`], borrowed.
#[derive(Clone, Copy)]
pub struct ArrayRef<'a> {
    len: usize,
    body: &'a str,
}

impl<'a> ArrayRef<'a> {
    pub fn len(self) -> usize {
        self.len
    }

    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    pub fn iter(self) -> ArrayIter<'a> {
        ArrayIter { reader: Reader::new(self.body), left: self.len }
    }

    pub fn get(self, index: usize) -> Option<ValueRef<'a>> {
        self.iter().nth(index)
    }
}

impl fmt::Debug for ArrayRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for ArrayRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len))?;
        for item in self.iter() {
            seq.serialize_element(&item)?;
        }
        seq.end()
    }
}

/// The items of an [`ArrayRef`].
#[derive(Clone)]
pub struct ArrayIter<'a> {
    reader: Reader<'a>,
    left: usize,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = ValueRef<'a>;

    fn next(&mut self) -> Option<ValueRef<'a>> {
        self.left = self.left.checked_sub(1)?;
        Some(self.reader.value())
    }

    fn nth(&mut self, n: usize) -> Option<ValueRef<'a>> {
        for _ in 0..n {
            self.left = self.left.checked_sub(1)?;
            self.reader.skip();
        }
        self.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ArrayIter<'_> {}

/// An object inside [`Params`] (or the parameters themselves), borrowed.
#[derive(Clone, Copy)]
pub struct ObjectRef<'a> {
    len: usize,
    body: &'a str,
}

impl<'a> ObjectRef<'a> {
    pub fn len(self) -> usize {
        self.len
    }

    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    pub fn iter(self) -> ObjectIter<'a> {
        ObjectIter { reader: Reader::new(self.body), left: self.len }
    }

    /// The value of `key` (keys are unique).
    pub fn get(self, key: &str) -> Option<ValueRef<'a>> {
        let mut entries = self.iter();
        while let Some(k) = entries.next_key() {
            if k == key {
                return Some(entries.reader.value());
            }
            entries.reader.skip();
        }
        None
    }

    pub fn to_map(self) -> Map<String, Value> {
        let mut map = Map::with_capacity(self.len);
        for (key, value) in self.iter() {
            map.insert(key.to_owned(), value.to_value());
        }
        map
    }
}

impl fmt::Debug for ObjectRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for ObjectRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len))?;
        for (key, value) in self.iter() {
            map.serialize_entry(key, &value)?;
        }
        map.end()
    }
}

/// The entries of an [`ObjectRef`], in order.
#[derive(Clone)]
pub struct ObjectIter<'a> {
    reader: Reader<'a>,
    left: usize,
}

impl<'a> ObjectIter<'a> {
    /// The next key; the reader is then at its value.
    fn next_key(&mut self) -> Option<&'a str> {
        self.left = self.left.checked_sub(1)?;
        Some(self.reader.str())
    }
}

impl<'a> Iterator for ObjectIter<'a> {
    type Item = (&'a str, ValueRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let key = self.next_key()?;
        Some((key, self.reader.value()))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ObjectIter<'_> {}

/// Reads the encoding. It only ever reads what `params_write.rs` wrote; should the
/// text be cut short all the same, it reads nulls and empty strings rather than panic.
#[derive(Clone)]
struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, pos: 0 }
    }

    fn byte(&mut self) -> u8 {
        let b = self.text.as_bytes().get(self.pos).copied().unwrap_or(b'n');
        self.pos += 1;
        b
    }

    fn length(&mut self) -> u64 {
        let mut n = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.byte();
            n |= u64::from(b & 0x3f).checked_shl(shift).unwrap_or(0);
            if b & 0x40 == 0 || shift > 64 {
                return n;
            }
            shift += 6;
        }
    }

    fn slot(&mut self) -> usize {
        let mut n = 0u64;
        for i in 0..SLOT {
            n |= u64::from(self.byte() & 0x3f) << (6 * i);
        }
        usize::try_from(n).unwrap_or(usize::MAX)
    }

    fn take(&mut self, len: usize) -> &'a str {
        let end = self.pos.saturating_add(len);
        let s = self.text.get(self.pos..end).unwrap_or("");
        self.pos = end;
        s
    }

    fn str(&mut self) -> &'a str {
        let len = usize::try_from(self.length()).unwrap_or(usize::MAX);
        self.take(len)
    }

    fn value(&mut self) -> ValueRef<'a> {
        match self.byte() {
            b'f' => ValueRef::Bool(false),
            b't' => ValueRef::Bool(true),
            b'u' => ValueRef::Number(NumberRef::PosInt(self.length())),
            b'i' => ValueRef::Number(NumberRef::NegInt(!self.length() as i64)),
            b'd' => ValueRef::Number(NumberRef::Float(f64::from_bits(self.length()))),
            b's' => ValueRef::String(self.str()),
            b'a' => {
                let len = self.slot();
                let size = self.slot();
                ValueRef::Array(ArrayRef { len, body: self.take(size) })
            }
            b'o' => {
                let len = self.slot();
                let size = self.slot();
                ValueRef::Object(ObjectRef { len, body: self.take(size) })
            }
            _ => ValueRef::Null,
        }
    }

    /// Moves past one value without building a view of it.
    fn skip(&mut self) {
        match self.byte() {
            b'u' | b'i' | b'd' => {
                self.length();
            }
            b's' => {
                self.str();
            }
            b'a' | b'o' => {
                self.slot();
                let size = self.slot();
                self.take(size);
            }
            _ => {}
        }
    }
}

#[path = "params_write.rs"]
mod write;

#[cfg(test)]
#[path = "params_tests.rs"]
mod tests;
