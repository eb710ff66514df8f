//! Tests for the rego checks (owned by the helper that implements them).
