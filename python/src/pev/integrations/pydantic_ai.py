"""PydanticAI: an output validator that sends lint errors back to the model.

    planner = Agent(model, output_type=Plan, retries=3)
    planner.output_validator(plan_validator(policy))

A plan with lint errors raises ``ModelRetry`` with the findings as ``pev agent`` words them for
its own planner, so the model answers again within the agent's ``retries``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

from .. import _lint

T = TypeVar("T")


def plan_validator(policy: Any = None, *, fail_risk: float | None = None) -> Callable[[T], T]:
    from pydantic_ai import ModelRetry

    compiled = _lint.as_policy(policy)

    def validate_plan(output: T) -> T:
        result = _lint.lint(output, compiled, fail_risk=fail_risk)
        if not result.ok:
            raise ModelRetry(result.feedback())
        return output

    return validate_plan
