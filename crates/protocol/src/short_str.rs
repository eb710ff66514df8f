//! [`ShortStr`]: an immutable string kept in place when it is short.
//!
//! A large plan holds hundreds of thousands of short strings the plan's own types own: step ids
//! (each step's, each `depends_on` entry, each reference's), reference paths and pointers. As
//! `String`s each is a heap allocation of its own (32 bytes under glibc for an id of 11), and
//! the allocations, more than their bytes, make a 100,000-step plan's memory. A `ShortStr`
//! keeps up to `N` bytes inside itself (no allocation) and longer text in a `Box<str>`; it is
//! `N + 2` bytes rounded up to 8 (24 for `N = 22`, the size of a `String`). No `unsafe`: the
//! inline bytes are checked as UTF-8 when read, which for a few bytes costs next to nothing.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

/// An immutable string, inline up to 23 bytes ([`smol_str::SmolStr`], whose inline text is read
/// without a check: `str::from_utf8` on every read of an id cost 3% of `pev lint`'s time).
#[derive(Clone, Default)]
pub struct ShortStr(SmolStr);

impl ShortStr {
    /// The longest text kept inline.
    pub const INLINE: usize = 23;

    pub fn new(text: &str) -> Self {
        // `SmolStr::new` first looks for runs of new lines and spaces (which it keeps without
        // copying); ids and pointers have none, and `new_inline` copies straight away.
        if text.len() <= Self::INLINE {
            Self(SmolStr::new_inline(text))
        } else {
            Self(SmolStr::new(text))
        }
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Whether the text is kept inline (no allocation).
    pub fn is_inline(&self) -> bool {
        !self.0.is_heap_allocated()
    }
}

impl Deref for ShortStr {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for ShortStr {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for ShortStr {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for ShortStr {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for ShortStr {
    fn from(text: String) -> Self {
        Self(SmolStr::from(text))
    }
}

impl From<ShortStr> for String {
    fn from(text: ShortStr) -> Self {
        String::from(text.0)
    }
}

impl PartialEq for ShortStr {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ShortStr {}

impl PartialEq<str> for ShortStr {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ShortStr {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for ShortStr {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialOrd for ShortStr {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ShortStr {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for ShortStr {
    /// As the `str` hashes, so that a map keyed by it can be looked up by `&str`.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for ShortStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for ShortStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ShortStr {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ShortStr {
    /// Accepts what a `String` accepts; a short string is copied in place without an
    /// allocation, even when the deserialiser would have made a `String` of it.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = ShortStr;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(ShortStr::new(text))
            }

            fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Self::Value, E> {
                Ok(ShortStr::from(text))
            }

            fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<Self::Value, E> {
                // `String` accepts UTF-8 bytes too.
                match std::str::from_utf8(bytes) {
                    Ok(text) => Ok(ShortStr::new(text)),
                    Err(_) => Err(E::invalid_value(serde::de::Unexpected::Bytes(bytes), &self)),
                }
            }

            fn visit_byte_buf<E: serde::de::Error>(self, bytes: Vec<u8>) -> Result<Self::Value, E> {
                match String::from_utf8(bytes) {
                    Ok(text) => Ok(ShortStr::from(text)),
                    Err(e) => {
                        Err(E::invalid_value(serde::de::Unexpected::Bytes(&e.into_bytes()), &self))
                    }
                }
            }
        }
        deserializer.deserialize_string(Text)
    }
}

#[cfg(test)]
#[path = "short_str_tests.rs"]
mod tests;
