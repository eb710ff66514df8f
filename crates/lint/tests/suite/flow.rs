//! Tests for the flow checks (owned by the helper that implements them).
