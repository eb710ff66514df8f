//! Tests for the references checks (owned by the helper that implements them).
