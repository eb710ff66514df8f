//! Tests for the sql checks (owned by the helper that implements them).
