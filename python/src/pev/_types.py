"""Typed results: frozen dataclasses built from pev's JSON documents (CONTRACTS.md §4–5).

Every result keeps ``raw``, the JSON object as pev produced it, and ``to_dict()`` returns it, so
fields the contract adds later are reachable before these classes learn them. Constructors ignore
keys they do not know. Codes are plain ``str`` (a newer binary's code always loads); the closed
sets are ``str`` enums that compare equal to their JSON strings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, Mapping


class Status(str, Enum):
    """A lint verdict."""

    PASS = "pass"
    WARN = "warn"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


class Severity(str, Enum):
    """How bad a finding is."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    def __str__(self) -> str:
        return self.value


class RunStatus(str, Enum):
    """A run's outcome."""

    SUCCESS = "success"
    PARTIAL = "partial"
    FAILED = "failed"
    AWAITING_APPROVAL = "awaiting_approval"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Finding:
    """One lint finding. ``step`` is the 0-based index (None for plan-level findings);
    ``line``/``column`` are set when the plan was given as text or a file."""

    step: int | None
    step_id: str | None
    code: str
    severity: Severity
    msg: str
    path: str
    level: Literal["error", "warning"]
    line: int | None = None
    column: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], level: Literal["error", "warning"]) -> Finding:
        return cls(
            step=data.get("step"),
            step_id=data.get("step_id"),
            code=data["code"],
            severity=Severity(data["severity"]),
            msg=data["msg"],
            path=data.get("path", ""),
            level=level,
            line=data.get("line"),
            column=data.get("column"),
            raw=data,
        )

    @property
    def message(self) -> str:
        return self.msg

    def to_dict(self) -> dict[str, Any]:
        return dict(self.raw)


@dataclass(frozen=True)
class LintResult:
    """What ``pev lint --format json`` prints, typed."""

    status: Status
    risk_score: float
    errors: tuple[Finding, ...]
    warnings: tuple[Finding, ...]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LintResult:
        return cls(
            status=Status(data["status"]),
            risk_score=float(data["risk_score"]),
            errors=tuple(Finding.from_dict(f, "error") for f in data.get("errors", ())),
            warnings=tuple(Finding.from_dict(f, "warning") for f in data.get("warnings", ())),
            raw=data,
        )

    @property
    def ok(self) -> bool:
        """The plan may run: no error and the risk is under the threshold."""
        return self.status != Status.ERROR

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.errors + self.warnings

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def has(self, code: str) -> bool:
        return any(f.code == code for f in self.findings)

    def feedback(self) -> str:
        """The findings as a planner model should read them: the words ``pev agent`` sends back to
        its own planner (crates/engine's ``feedback_message``)."""
        from . import _lint

        findings = self.errors or self.warnings
        lines = ["The plan was rejected by the linter. Fix these problems:"]
        for f in findings:
            line = f"- {f.code}"
            if f.step_id is not None:
                line += f' in step "{f.step_id}"'
            if f.path:
                line += f" at {f.path}"
            line += f": {f.msg.strip()} Fix: {_lint.fix_for(f.code)}"
            lines.append(line)
        if not findings and self.status == Status.ERROR:
            lines.append(f"- the risk score {self.risk_score} reaches the policy's threshold.")
        return "\n".join(lines) + "\n\nAnswer with the whole corrected plan as JSON."

    def raise_for_status(self) -> LintResult:
        """Returns ``self`` when the plan may run, else raises ``PlanRejected``."""
        from ._errors import PlanRejected

        if not self.ok:
            raise PlanRejected(self)
        return self

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.raw))

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.raw, indent=indent)


@dataclass(frozen=True)
class CodeInfo:
    """One lint code, as ``pev lint --explain CODE`` describes it."""

    code: str
    level: Literal["error", "warning"]
    severity: Severity
    explanation: str
    fix: str

    def __str__(self) -> str:
        return (
            f"{self.code}: {self.level}, {self.severity.value} severity\n"
            f"  {self.explanation}\n  fix: {self.fix}\n"
        )


@dataclass(frozen=True)
class AssertionResult:
    """One assertion checked: ``{type, passed, detail}``."""

    type: str
    passed: bool
    detail: str
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AssertionResult:
        return cls(str(data.get("type", "")), bool(data["passed"]), str(data.get("detail", "")), data)


@dataclass(frozen=True)
class Reason:
    """Why a run is not a success."""

    code: str
    step: str | None
    message: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reason:
        return cls(data["code"], data.get("step"), data.get("message", ""))


@dataclass(frozen=True)
class StepResult:
    """One step of a run."""

    id: str
    status: str
    attempts: int
    evidence: tuple[str, ...]
    assertions: tuple[AssertionResult, ...]
    output: Any
    error: str | None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepResult:
        return cls(
            id=data["id"],
            status=data["status"],
            attempts=int(data.get("attempts", 0)),
            evidence=tuple(data.get("evidence", ())),
            assertions=tuple(AssertionResult.from_dict(a) for a in data.get("assertions", ())),
            output=data.get("output"),
            error=data.get("error"),
            raw=data,
        )


@dataclass(frozen=True)
class RunResult:
    """A run's result (CONTRACTS.md §4)."""

    run_id: str
    goal: str
    status: RunStatus
    reasons: tuple[Reason, ...]
    goal_actions_executed: bool
    steps: tuple[StepResult, ...]
    warnings: tuple[str, ...]
    duration_ms: int
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        return cls(
            run_id=data.get("run_id", ""),
            goal=data.get("goal", ""),
            status=RunStatus(data["status"]),
            reasons=tuple(Reason.from_dict(r) for r in data.get("reasons", ())),
            goal_actions_executed=bool(data.get("goal_actions_executed", False)),
            steps=tuple(StepResult.from_dict(s) for s in data.get("steps", ())),
            warnings=tuple(data.get("warnings", ())),
            duration_ms=int(data.get("duration_ms", 0)),
            raw=data,
        )

    @property
    def ok(self) -> bool:
        return self.status == RunStatus.SUCCESS

    @property
    def postconditions(self) -> list[dict[str, Any]]:
        return list(self.raw.get("postconditions", ()))

    @property
    def file_mutations(self) -> list[dict[str, Any]]:
        return list(self.raw.get("file_mutations", ()))

    @property
    def usage(self) -> dict[str, Any]:
        return dict(self.raw.get("usage", {}))

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.raw))


@dataclass(frozen=True)
class VerifyResult:
    """``pev check``: assertions checked against a workspace outside a run."""

    passed: bool
    results: tuple[AssertionResult, ...]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VerifyResult:
        results = tuple(AssertionResult.from_dict(r) for r in data.get("results", ()))
        return cls(bool(data["passed"]), results, data)


@dataclass(frozen=True)
class GateDecision:
    """What ``pev gate`` answered a Stop hook: allow (nothing, or only a system message), block
    (the agent must go on, ``reason`` says why) or stop (end the session)."""

    decision: Literal["allow", "block", "stop"]
    reason: str | None
    system_message: str | None
    raw: Mapping[str, Any] | None = None

    @classmethod
    def from_output(cls, text: str) -> GateDecision:
        text = text.strip()
        if not text:
            return cls("allow", None, None, None)
        data = json.loads(text)
        if data.get("decision") == "block":
            return cls("block", data.get("reason"), data.get("systemMessage"), data)
        if data.get("continue") is False:
            return cls("stop", data.get("stopReason"), data.get("systemMessage"), data)
        return cls("allow", None, data.get("systemMessage"), data)

    @property
    def allowed(self) -> bool:
        return self.decision == "allow"

    def as_hook_json(self) -> dict[str, Any]:
        """The hook output as Claude Code and Codex command hooks read it."""
        return dict(self.raw or {})

    def as_claude_hook_output(self) -> dict[str, Any]:
        """The hook output for the Claude Agent SDK (Python), which spells ``continue`` as
        ``continue_``."""
        out = self.as_hook_json()
        if "continue" in out:
            out["continue_"] = out.pop("continue")
        return out
