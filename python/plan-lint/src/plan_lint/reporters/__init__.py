"""Reporters: plan-lint's text and JSON output."""
