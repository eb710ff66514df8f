//! Visiting every string inside a JSON value, with its JSON pointer and the key that holds it.
//!
//! The content checks (secrets above all) must look at strings however deeply they nest, and
//! report the exact pointer of each. The walk is iterative, with an explicit stack that the
//! caller keeps across calls, so a deeply nested value cannot overflow the call stack and a
//! plan of many steps does not allocate a stack per step. The pointer is one buffer that grows
//! and shrinks as the walk goes down and up; nothing is allocated per string.

use std::fmt::Write as _;

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

/// Where the walk stands inside one container.
enum Frame<'a> {
    Object {
        iter: serde_json::map::Iter<'a>,
        /// Pointer length of the container itself.
        len: usize,
    },
    Array {
        iter: std::iter::Enumerate<std::slice::Iter<'a, Value>>,
        len: usize,
        key: Option<&'a str>,
    },
}

/// A reusable walker: keep one per check run and call [`StrWalker::walk`] for each value.
pub(crate) struct StrWalker<'a> {
    stack: Vec<Frame<'a>>,
}

impl<'a> StrWalker<'a> {
    pub(crate) fn new() -> Self {
        Self { stack: Vec::new() }
    }

    /// Calls `f` for every string in `root`, depth first, in document order. `pointer` holds the
    /// pointer of `root` on entry and is restored to it on return; `key` is the key that holds
    /// `root`, if any.
    pub(crate) fn walk(
        &mut self,
        root: &'a Value,
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
                        (v, Some(k.as_str()))
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
        value: &'a Value,
        key: Option<&'a str>,
        pointer: &mut String,
        f: &mut impl FnMut(Visit<'a, '_>),
    ) {
        match value {
            Value::String(s) => f(Visit { key, value: s, pointer }),
            Value::Object(map) if !map.is_empty() => {
                self.stack.push(Frame::Object { iter: map.iter(), len: pointer.len() });
            }
            Value::Array(items) if !items.is_empty() => {
                self.stack.push(Frame::Array {
                    iter: items.iter().enumerate(),
                    len: pointer.len(),
                    key,
                });
            }
            _ => {}
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
