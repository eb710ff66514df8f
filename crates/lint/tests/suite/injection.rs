//! Tests for the injection checks (owned by the helper that implements them).
