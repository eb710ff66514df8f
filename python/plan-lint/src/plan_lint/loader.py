"""plan-lint's loaders, reading plans with pev (JSON or YAML) and policies as plan-lint did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import pev
import yaml  # type: ignore[import-untyped]

from plan_lint.types import Plan, Policy


def load_schema(schema_path: Optional[str] = None) -> Dict[str, Any]:
    """The plan JSON Schema: the file given, else pev's (``pev schema plan``)."""
    if schema_path:
        with open(schema_path) as f:
            return json.load(f)  # type: ignore[no-any-return]
    return pev.schema("plan")


def load_plan(plan_path: str) -> Plan:
    """Reads a plan file (JSON, or YAML, which pev also reads); raises
    ``ValueError("Plan validation failed: …")`` when it is not a plan."""
    text = Path(plan_path).read_text()
    try:
        data = json.loads(text) if text.lstrip()[:1] in ("{", "[") else yaml.safe_load(text)
        return Plan.model_validate(data)
    except (ValueError, yaml.YAMLError) as e:
        raise ValueError(f"Plan validation failed: {e}") from e


def is_rego_policy_file(filepath: str) -> bool:
    if filepath.endswith(".rego"):
        return True
    try:
        with open(filepath) as f:
            content = f.read(1000)
            return "package" in content and any(
                rule in content for rule in ["default ", " = ", "{", "input."]
            )
    except Exception:
        return False


def load_policy(policy_path: Optional[str] = None) -> Tuple[Policy, Optional[str]]:
    """``(Policy, None)`` for a YAML policy, ``(Policy(), rego_text)`` for a Rego one."""
    if policy_path is None:
        return Policy(), None
    try:
        if is_rego_policy_file(policy_path):
            with open(policy_path) as f:
                return Policy(), f.read()
        with open(policy_path) as f:
            data = yaml.safe_load(f)
        if data is None:
            return Policy(), None
        return Policy.model_validate(data), None
    except Exception as e:
        raise ValueError(f"Failed to load policy from {policy_path}: {e}") from e


def load_yaml_policy(policy_path: str) -> Policy:
    policy, _ = load_policy(policy_path)
    return policy


def load_rego_policy(policy_path: str) -> str:
    if not Path(policy_path).exists():
        raise ValueError(f"Rego policy file not found: {policy_path}")
    with open(policy_path) as f:
        return f.read()
