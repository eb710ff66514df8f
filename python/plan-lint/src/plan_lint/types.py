"""plan-lint's types (pydantic v2 models), widened to carry what pev reports and reads.

- ``ErrorCode`` holds plan-lint's codes and every pev code, so ``ErrorCode(finding.code)`` never
  fails on a pev finding.
- ``PlanStep`` takes ``args`` (plan-lint's code) or ``parameters`` (plan-lint's docs) and keeps
  other keys such as ``depends_on`` (plan-lint dropped them; pev analyses them).
- ``ValidationResult`` keeps ``status``/``risk_score``/``errors``/``warnings`` and adds the
  documented ``valid``/``is_valid``/``violations``.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Dict, List, Optional, Union

import pev
from pydantic import AliasChoices, BaseModel, ConfigDict, Field


class Status(str, Enum):
    """Status of a plan validation."""

    PASS = "pass"
    WARN = "warn"
    ERROR = "error"


_PLAN_LINT_CODES = [
    "SCHEMA_INVALID",
    "TOOL_DENY",
    "BOUND_VIOLATION",
    "RAW_SECRET",
    "LOOP_DETECTED",
    "MAX_STEPS_EXCEEDED",
    "MISSING_HANDLER",
]
_ALL_CODES = _PLAN_LINT_CODES + [c.code for c in pev.codes() if c.code not in _PLAN_LINT_CODES]

ErrorCode = Enum("ErrorCode", {code: code for code in _ALL_CODES}, type=str)  # type: ignore[misc]
ErrorCode.__doc__ = "Error codes: plan-lint's, then every other code pev reports."
ErrorCode.__module__ = __name__


class PlanError(BaseModel):
    """An error found during plan validation (pev's ``step_id``, ``severity``, ``path`` kept)."""

    model_config = ConfigDict(extra="allow")

    step: Optional[int] = None
    code: ErrorCode  # type: ignore[valid-type]
    msg: str

    @property
    def rule(self) -> str:
        """The documented name of ``code``."""
        return self.code.value  # type: ignore[attr-defined, no-any-return]

    @property
    def message(self) -> str:
        """The documented name of ``msg``."""
        return self.msg


class PlanWarning(BaseModel):
    """A warning found during plan validation."""

    model_config = ConfigDict(extra="allow")

    step: Optional[int] = None
    code: str
    msg: str

    @property
    def rule(self) -> str:
        return self.code

    @property
    def message(self) -> str:
        return self.msg


class PlanStepArg(BaseModel):
    """A single argument for a plan step."""

    name: str
    value: Any


class PlanStep(BaseModel):
    """A single step in a plan. ``args`` may be given as ``parameters``; other keys are kept."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    id: str
    tool: str
    args: Dict[str, Any] = Field(
        default_factory=dict, validation_alias=AliasChoices("args", "parameters")
    )
    on_fail: str = "abort"

    @property
    def parameters(self) -> Dict[str, Any]:
        return self.args


class Plan(BaseModel):
    """A complete plan to be validated; keys pev knows beyond plan-lint's are kept."""

    model_config = ConfigDict(extra="allow")

    goal: str
    context: Optional[Dict[str, Any]] = Field(default_factory=lambda: {})
    steps: List[PlanStep]
    meta: Optional[Dict[str, Any]] = Field(default_factory=lambda: {})


class PolicyRule(BaseModel):
    """A single policy rule."""

    name: str
    description: str


class Policy(BaseModel):
    """A policy: plan-lint's keys, and pev's (``deny_tools``, ``approve_tools``, ``severity``, …)
    as extra keys passed on to pev."""

    model_config = ConfigDict(extra="allow")

    allow_tools: List[str] = Field(default_factory=list)
    bounds: Dict[str, List[Union[int, float]]] = Field(default_factory=lambda: {})
    deny_tokens_regex: List[str] = Field(default_factory=list)
    max_steps: int = 100
    risk_weights: Dict[str, float] = Field(default_factory=lambda: {})
    fail_risk_threshold: float = 0.8


class Violation(BaseModel):
    """One finding as plan-lint's docs describe it (``rule``, ``message``)."""

    rule: str
    message: str
    severity: str
    step: Optional[int] = None
    step_id: Optional[str] = None


class ValidationResult(BaseModel):
    """Result of a plan validation."""

    status: Status
    risk_score: float
    errors: List[PlanError] = Field(default_factory=list)
    warnings: List[PlanWarning] = Field(default_factory=list)

    @property
    def valid(self) -> bool:
        """The documented verdict: no error (and the risk under the threshold)."""
        return self.status != Status.ERROR

    @property
    def is_valid(self) -> bool:
        return self.valid

    @property
    def violations(self) -> List[Violation]:
        """Errors then warnings, as the docs' ``violation.rule``/``violation.message``."""
        out = []
        for finding, level in [(e, "error") for e in self.errors] + [(w, "warning") for w in self.warnings]:
            extra = finding.model_extra or {}
            out.append(
                Violation(
                    rule=finding.rule,
                    message=finding.msg,
                    severity=str(extra.get("severity", level)),
                    step=finding.step,
                    step_id=extra.get("step_id"),
                )
            )
        return out
