//! Tests for the plan_lint_compat checks (owned by the helper that implements them).
