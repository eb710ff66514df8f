//! Tests for the tools checks (owned by the helper that implements them).
