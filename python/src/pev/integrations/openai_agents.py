"""OpenAI Agents SDK: an output guardrail that lints a planner agent's plan.

    planner = Agent(..., output_type=AgentOutputSchema(Plan, strict_json_schema=False),
                    output_guardrails=[plan_guardrail(policy)])

A plan with lint errors trips the wire (``OutputGuardrailTripwireTriggered``), whose
``guardrail_result.output.output_info`` is the lint result (``pev lint --format json``) with the
planner ``feedback``.
"""

from __future__ import annotations

from typing import Any, Mapping

from .. import _lint


def plan_guardrail(policy: Any = None, *, name: str = "pev_lint", fail_risk: float | None = None) -> Any:
    from agents import GuardrailFunctionOutput, output_guardrail

    compiled = _lint.as_policy(policy)

    @output_guardrail(name=name)
    def pev_lint(ctx: Any, agent: Any, output: Any) -> Any:
        result = _lint.lint(output, compiled, fail_risk=fail_risk)
        info = result.to_dict()
        info["feedback"] = "" if result.ok else result.feedback()
        return GuardrailFunctionOutput(output_info=info, tripwire_triggered=not result.ok)

    return pev_lint
