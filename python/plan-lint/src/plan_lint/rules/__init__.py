"""plan-lint's rule plugins, answered by pev's SQL and secret checks."""
