//! Visiting every string inside a JSON value (a `serde_json::Value` or a view into a step's
//! parameters), with its JSON pointer and the key that holds it.
//!
//! The content checks (secrets above all) must look at strings however deeply they nest, and
//! report the exact pointer of each. The walk is iterative, with an explicit stack that the
//! caller keeps across calls, so a deeply nested value cannot overflow the call stack and a
//! plan of many steps does not allocate a stack per step. The pointer is one buffer that grows
//! and shrinks as the walk goes down and up; nothing is allocated per string.

use std::fmt::Write as _;

use pev_protocol::ValueRef;
use pev_protocol::params::{ArrayIter, ObjectIter};
use pev_protocol::reference::push_escaped;
use serde_json::Value;

/// One string found by the walk.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Visit<'a, 'p> {
    /// The object key that holds the string; for an array element, the key that holds the
    /// array (`{"tokens": ["…"]}` gives `tokens`). `None` at the root of the walk when the caller
    /// gave no key.
    pub key: Option<&'a str>,
    pub value: &'a str,
    /// JSON pointer of the string, including the prefix the caller put in the buffer.
    pub pointer: &'p str,
}

/// A value the walk can go into: a `serde_json::Value` (plan-level fields, unknown fields) or a
/// view into a step's compact parameters.
pub(crate) trait Node<'a>: Copy + 'a {
    type Items: Iterator<Item = Self>;
    type Entries: Iterator<Item = (&'a str, Self)>;
    fn shape(self) -> Shape<'a, Self>;
}

/// What a [`Node`] is, as far as the walk cares.
pub(crate) enum Shape<'a, N: Node<'a>> {
    Str(&'a str),
    Array(N::Items),
    Object(N::Entries),
    Other,
}

type ValueEntries<'a> =
    std::iter::Map<serde_json::map::Iter<'a>, fn((&'a String, &'a Value)) -> (&'a str, &'a Value)>;

impl<'a> Node<'a> for &'a Value {
    type Items = std::slice::Iter<'a, Value>;
    type Entries = ValueEntries<'a>;

    fn shape(self) -> Shape<'a, Self> {
        match self {
            Value::String(s) => Shape::Str(s),
            Value::Array(items) if !items.is_empty() => Shape::Array(items.iter()),
            Value::Object(map) if !map.is_empty() => {
                let entry: fn((&'a String, &'a Value)) -> (&'a str, &'a Value) =
                    |(k, v)| (k.as_str(), v);
                Shape::Object(map.iter().map(entry))
            }
            _ => Shape::Other,
        }
    }
}

impl<'a> Node<'a> for ValueRef<'a> {
    type Items = ArrayIter<'a>;
    type Entries = ObjectIter<'a>;

    fn shape(self) -> Shape<'a, Self> {
        match self {
            ValueRef::String(s) => Shape::Str(s),
            ValueRef::Array(items) if !items.is_empty() => Shape::Array(items.iter()),
            ValueRef::Object(map) if !map.is_empty() => Shape::Object(map.iter()),
            _ => Shape::Other,
        }
    }
}

/// Where the walk stands inside one container.
enum Frame<'a, N: Node<'a>> {
    Object {
        iter: N::Entries,
        /// Pointer length of the container itself.
        len: usize,
    },
    Array {
        iter: std::iter::Enumerate<N::Items>,
        len: usize,
        key: Option<&'a str>,
    },
}

/// A reusable walker: keep one per check run and call [`StrWalker::walk`] for each value.
pub(crate) struct StrWalker<'a, N: Node<'a>> {
    stack: Vec<Frame<'a, N>>,
}

impl<'a, N: Node<'a>> StrWalker<'a, N> {
    pub(crate) fn new() -> Self {
        Self { stack: Vec::new() }
    }

    /// Calls `f` for every string in `root`, depth first, in document order. `pointer` holds the
    /// pointer of `root` on entry and is restored to it on return; `key` is the key that holds
    /// `root`, if any.
    pub(crate) fn walk(
        &mut self,
        root: N,
        key: Option<&'a str>,
        pointer: &mut String,
        mut f: impl FnMut(Visit<'a, '_>),
    ) {
        self.stack.clear();
        let base = pointer.len();
        self.enter(root, key, pointer, &mut f);
        loop {
            // Take the next child out of the top frame first, so the frame is no longer
            // borrowed when the child pushes a frame of its own.
            let (child, child_key) = match self.stack.last_mut() {
                None => break,
                Some(Frame::Object { iter, len }) => match iter.next() {
                    Some((k, v)) => {
                        pointer.truncate(*len);
                        pointer.push('/');
                        push_key(pointer, k);
                        (v, Some(k))
                    }
                    None => {
                        self.stack.pop();
                        continue;
                    }
                },
                Some(Frame::Array { iter, len, key }) => match iter.next() {
                    Some((i, v)) => {
                        pointer.truncate(*len);
                        // Writing to a String cannot fail.
                        let _ = write!(pointer, "/{i}");
                        (v, *key)
                    }
                    None => {
                        self.stack.pop();
                        continue;
                    }
                },
            };
            self.enter(child, child_key, pointer, &mut f);
        }
        pointer.truncate(base);
    }

    /// Visits a string at once; pushes a frame for a container; ignores the rest.
    fn enter(
        &mut self,
        value: N,
        key: Option<&'a str>,
        pointer: &mut String,
        f: &mut impl FnMut(Visit<'a, '_>),
    ) {
        match value.shape() {
            Shape::Str(s) => f(Visit { key, value: s, pointer }),
            Shape::Object(iter) => self.stack.push(Frame::Object { iter, len: pointer.len() }),
            Shape::Array(items) => {
                self.stack.push(Frame::Array { iter: items.enumerate(), len: pointer.len(), key });
            }
            Shape::Other => {}
        }
    }
}

/// Appends a key as a pointer segment; keys rarely hold `~` or `/`, so most are copied whole.
pub(crate) fn push_key(pointer: &mut String, key: &str) {
    if key.bytes().any(|b| b == b'~' || b == b'/') {
        push_escaped(pointer, key);
    } else {
        pointer.push_str(key);
    }
}

#[cfg(test)]
#[path = "walk_tests.rs"]
mod tests;
