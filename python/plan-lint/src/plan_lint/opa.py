"""plan-lint's OPA module. Rego is evaluated in process by pev (regorus): no ``opa`` binary and
no ``subprocess`` call, so nothing here can be fooled by a patched ``subprocess.run``.

``policy_to_rego`` writes the policy as *valid* Rego (v0 syntax, which pev also accepts), where
plan-lint's text did not parse. ``evaluate_with_opa`` lints the plan under the policy with pev;
Rego given as ``rego_policy`` is added to the policy and its violations keep their own codes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Union

from plan_lint.core import validate_plan
from plan_lint.types import Plan, Policy, ValidationResult


class OPAError(Exception):
    """Exception raised for OPA-related errors."""


def _list(values: object) -> str:
    return json.dumps(list(values))  # type: ignore[call-overload]


def policy_to_rego(policy: Policy) -> str:
    """The policy as a Rego module (package ``planlint``): ``allow`` and ``violations``."""
    bounds = []
    for key, value in policy.bounds.items():
        if len(value) >= 2 and "." in key:
            tool, arg = key.rsplit(".", 1)
            bounds.append({"tool": tool, "arg": arg, "min": value[0], "max": value[1]})
    return f"""package planlint

default allow = false

allowed_tools = {_list(policy.allow_tools)}

sensitive_patterns = {_list(policy.deny_tokens_regex)}

bounds = {json.dumps(bounds)}

max_steps = {int(policy.max_steps)}

tool_allowed(tool) {{
    count(allowed_tools) == 0
}}

tool_allowed(tool) {{
    allowed_tools[_] == tool
}}

all_tools_allowed {{
    count([i | input.steps[i]; not tool_allowed(input.steps[i].tool)]) == 0
}}

steps_within_limit {{
    count(input.steps) <= max_steps
}}

allow {{
    all_tools_allowed
    steps_within_limit
    count(violations) == 0
}}

violations[{{"step": i, "code": "TOOL_DENY", "msg": msg}}] {{
    step := input.steps[i]
    not tool_allowed(step.tool)
    msg := sprintf("Tool '%s' is not allowed by policy", [step.tool])
}}

violations[{{"step": i, "code": "BOUND_VIOLATION", "msg": msg}}] {{
    step := input.steps[i]
    bound := bounds[_]
    step.tool == bound.tool
    value := step.args[bound.arg]
    is_number(value)
    not within(value, bound)
    msg := sprintf("Argument '%s' value %v is outside bounds [%v, %v]", [bound.arg, value, bound.min, bound.max])
}}

within(value, bound) {{
    value >= bound.min
    value <= bound.max
}}

violations[{{"step": i, "code": "RAW_SECRET", "msg": msg}}] {{
    step := input.steps[i]
    text := json.marshal(step.args)
    pattern := sensitive_patterns[_]
    regex.match(pattern, text)
    msg := sprintf("Potentially sensitive data matching pattern '%s' found in arguments", [pattern])
}}

violations[{{"code": "MAX_STEPS_EXCEEDED", "msg": msg}}] {{
    count(input.steps) > max_steps
    msg := sprintf("Plan has %d steps, exceeding max of %d", [count(input.steps), max_steps])
}}
"""


def evaluate_with_opa(
    plan: Plan, policy: Policy, rego_policy: Optional[str] = None
) -> ValidationResult:
    """Validates the plan under the policy, and under ``rego_policy`` when given, in process."""
    try:
        return validate_plan(plan, policy, rego_policy, use_opa=True)
    except ValueError as e:
        raise OPAError(f"OPA evaluation failed: {e}") from e


def is_rego_policy(policy_content: str) -> bool:
    """Whether text looks like a Rego policy (plan-lint's heuristic)."""
    return "package" in policy_content and any(
        rule in policy_content for rule in ["default ", " = ", "{", "input."]
    )


def load_rego_policy_file(filepath: Union[str, Path]) -> str:
    path = Path(filepath)
    if not path.exists():
        raise FileNotFoundError(f"Rego policy file not found: {filepath}")
    return path.read_text()
