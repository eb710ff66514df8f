//! Tests for the secrets checks (owned by the helper that implements them).
