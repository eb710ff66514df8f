//! Tests for the structure checks (owned by the helper that implements them).
