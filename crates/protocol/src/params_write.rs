//! Writing [`Params`]: from a `Map` ([`from_map`]) and straight from a deserializer
//! ([`read`]), in the encoding the parent module describes.

use std::cell::RefCell;
use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::{KEEP, Params, SCAN_KEYS, SLOT, SLOT_MAX};

/// Encodes a map.
pub(super) fn from_map(map: &Map<String, Value>) -> Params {
    if map.is_empty() {
        return Params::default();
    }
    let mut out = Vec::new();
    write_object(&mut out, map);
    // Every byte written is ASCII or copied from a `str` whole, so this never fails; an empty
    // map is the fallback that cannot panic.
    String::from_utf8(out).map(|s| Params { text: s.into_boxed_str() }).unwrap_or_default()
}

/// Reads parameters from a deserializer, with this thread's writer.
pub(super) fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Params, D::Error> {
    WRITER.with(|writer| match writer.try_borrow_mut() {
        Ok(mut writer) => writer.read(deserializer),
        // Parameters inside parameters cannot happen; a writer of its own if they did.
        Err(_) => Writer::default().read(deserializer),
    })
}

fn put_length(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let digit = (n & 0x3f) as u8;
        n >>= 6;
        if n == 0 {
            out.push(digit);
            return;
        }
        out.push(0x40 | digit);
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_length(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Fills a container's slots (written as zeros at `at`) with its count and its byte length;
/// `false` when either is too large for a slot.
fn close(out: &mut [u8], at: usize, count: usize) -> bool {
    let size = out.len().saturating_sub(at + 2 * SLOT);
    let (count, size) = (count as u64, size as u64);
    if count > SLOT_MAX || size > SLOT_MAX {
        return false;
    }
    for (i, n) in [count, size].into_iter().enumerate() {
        for d in 0..SLOT {
            if let Some(b) = out.get_mut(at + i * SLOT + d) {
                *b = ((n >> (6 * d)) & 0x3f) as u8;
            }
        }
    }
    true
}

/// [`close`] for a `Map` being encoded: a container too large for a slot (a plan of over
/// 64 GiB) is written empty.
fn close_or_empty(out: &mut Vec<u8>, at: usize, count: usize) {
    if !close(out, at, count) {
        out.truncate(at);
        out.resize(at + 2 * SLOT, 0);
    }
}

/// [`close`] for a value being read: a container too large for a slot is an error.
fn close_or_fail<E: de::Error>(out: &mut [u8], at: usize, count: usize) -> Result<(), E> {
    if close(out, at, count) { Ok(()) } else { Err(E::custom("parameters too large")) }
}

/// Opens a container: its tag and two empty slots; returns where the slots are.
fn open(out: &mut Vec<u8>, tag: u8) -> usize {
    out.push(tag);
    let at = out.len();
    out.resize(at + 2 * SLOT, 0);
    at
}

fn put_number(out: &mut Vec<u8>, n: &Number) {
    if let Some(u) = n.as_u64() {
        out.push(b'u');
        put_length(out, u);
    } else if let Some(i) = n.as_i64() {
        out.push(b'i');
        put_length(out, !(i as u64));
    } else if let Some(f) = n.as_f64().filter(|f| f.is_finite()) {
        out.push(b'd');
        put_length(out, f.to_bits());
    } else {
        out.push(b'n');
    }
}

fn write_object(out: &mut Vec<u8>, map: &Map<String, Value>) {
    let at = open(out, b'o');
    for (key, value) in map {
        put_str(out, key);
        write_value(out, value);
    }
    close_or_empty(out, at, map.len());
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.push(b'n'),
        Value::Bool(false) => out.push(b'f'),
        Value::Bool(true) => out.push(b't'),
        Value::Number(n) => put_number(out, n),
        Value::String(s) => {
            out.push(b's');
            put_str(out, s);
        }
        Value::Array(items) => {
            let at = open(out, b'a');
            for item in items {
                write_value(out, item);
            }
            close_or_empty(out, at, items.len());
        }
        Value::Object(map) => write_object(out, map),
    }
}

/// The encoding as it is read from a deserializer. One writer per thread is kept and reused
/// (its buffers grow to the largest step's parameters once), so reading a step's parameters
/// costs one allocation: the finished text.
#[derive(Default)]
struct Writer {
    out: Vec<u8>,
    /// Where the keys of the objects being written are in `out`, innermost object last.
    keys: Vec<(usize, usize)>,
    /// An object holds a key twice (or is too large to tell cheaply): rebuild through `Map`.
    settle: bool,
}

thread_local! {
    static WRITER: RefCell<Writer> = RefCell::new(Writer::default());
}

impl Writer {
    fn read<'de, D: Deserializer<'de>>(&mut self, deserializer: D) -> Result<Params, D::Error> {
        self.out.clear();
        self.keys.clear();
        self.settle = false;
        deserializer.deserialize_map(TopSeed(self))?;
        let text = match std::str::from_utf8(&self.out) {
            Ok(text) => text,
            // Never: every byte written is ASCII or copied from a `str` whole.
            Err(_) => return Err(de::Error::custom("parameters are not UTF-8")),
        };
        let params = Params { text: text.into() };
        if self.out.capacity() > KEEP {
            *self = Self::default();
        }
        Ok(if self.settle { Params::from_map(&params.to_map()) } else { params })
    }

    /// Whether the key just written (`out[key_at..]`) is one of the object's keys since
    /// `keys[first..]`; records it.
    fn repeats(&mut self, first: usize, key_at: usize) -> bool {
        let key = self.out.get(key_at..).unwrap_or_default();
        let out = &self.out;
        let seen = self.keys.get(first..).unwrap_or_default();
        let repeated = seen.iter().any(|&(a, b)| out.get(a..b) == Some(key));
        self.keys.push((key_at, self.out.len()));
        repeated
    }
}

/// The top of [`Params`]: an object.
struct TopSeed<'w>(&'w mut Writer);

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        let writer = self.0;
        if ValueSeed(&mut *writer).object(map)? == 0 {
            // `{}` is the empty text.
            writer.out.clear();
        }
        Ok(())
    }
}

/// Writes one value as the deserializer hands it over.
struct ValueSeed<'w>(&'w mut Writer);

impl ValueSeed<'_> {
    fn object<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
        let writer = self.0;
        let at = open(&mut writer.out, b'o');
        let first = writer.keys.len();
        let mut count = 0;
        loop {
            let key_at = writer.out.len();
            if map.next_key_seed(KeySeed(&mut writer.out))?.is_none() {
                break;
            }
            if !writer.settle && (count >= SCAN_KEYS || writer.repeats(first, key_at)) {
                writer.settle = true;
            }
            map.next_value_seed(ValueSeed(&mut *writer))?;
            count += 1;
        }
        writer.keys.truncate(first);
        close_or_fail(&mut writer.out, at, count).map(|()| count)
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.out.push(if v { b't' } else { b'f' });
        Ok(())
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        put_number(&mut self.0.out, &Number::from(v));
        Ok(())
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        put_number(&mut self.0.out, &Number::from(v));
        Ok(())
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<(), E> {
        match (i64::try_from(v), u64::try_from(v)) {
            (Ok(i), _) => self.visit_i64(i),
            (_, Ok(u)) => self.visit_u64(u),
            _ => Err(E::custom("number out of range")),
        }
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<(), E> {
        match u64::try_from(v) {
            Ok(u) => self.visit_u64(u),
            Err(_) => Err(E::custom("number out of range")),
        }
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        // `Value` keeps a float that is not finite as null.
        match Number::from_f64(v) {
            Some(n) => put_number(&mut self.0.out, &n),
            None => self.0.out.push(b'n'),
        }
        Ok(())
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.out.push(b's');
        put_str(&mut self.0.out, v);
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.out.push(b'n');
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        self.0.out.push(b'n');
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let writer = self.0;
        let at = open(&mut writer.out, b'a');
        let mut count = 0;
        while seq.next_element_seed(ValueSeed(&mut *writer))?.is_some() {
            count += 1;
        }
        close_or_fail(&mut writer.out, at, count)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        self.object(map).map(drop)
    }
}

/// Writes an object key (length and bytes).
struct KeySeed<'o>(&'o mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        put_str(self.0, v);
        Ok(())
    }
}

/// How much this thread's writer holds on to.
#[cfg(test)]
pub(super) fn kept_capacity() -> usize {
    WRITER.with(|w| w.borrow().out.capacity())
}
