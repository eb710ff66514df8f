"""pev's exceptions, and the one place the extension's internal error becomes one of them.

Lint findings are a result, never an exception: these are for input pev cannot read at all
(a plan that is not JSON/YAML, a policy that does not compile), for a missing binary, and for a
command the binary refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from ._types import LintResult


class PevError(Exception):
    """Base of every error pev raises."""


class PlanSyntaxError(PevError, ValueError):
    """The plan is not valid JSON or YAML; ``line``/``column`` are 1-based (0 when unknown)."""

    def __init__(self, message: str, *, format: str, line: int, column: int) -> None:
        super().__init__(message)
        self.format = format
        self.line = line
        self.column = column


@dataclass(frozen=True)
class SchemaIssue:
    """One field of a plan with the wrong shape."""

    step: int | None
    pointer: str
    message: str


class PlanSchemaError(PevError, ValueError):
    """The plan does not match the schema (``parse_plan`` only: ``lint`` reports these as
    ``SCHEMA_INVALID`` findings, as ``pev lint`` does)."""

    def __init__(self, message: str, *, issues: tuple[SchemaIssue, ...]) -> None:
        super().__init__(message)
        self.issues = issues


class PolicyError(PevError, ValueError):
    """The policy cannot be used. ``kind`` is one of io, empty, yaml, invalid_regex,
    invalid_bound, invalid_value, unknown_severity_code, rego, type."""

    def __init__(self, message: str, *, kind: str, path: str | None) -> None:
        super().__init__(message)
        self.kind = kind
        self.path = path


class UnknownCodeError(PevError, KeyError):
    """``explain()`` was given a name that is no lint code."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class PlanRejected(PevError):
    """Raised by ``LintResult.raise_for_status()`` when the plan has errors."""

    def __init__(self, result: LintResult) -> None:
        super().__init__(result.feedback())
        self.result = result


class PevBinaryNotFound(PevError, FileNotFoundError):
    """No ``pev`` executable: the wheel for this platform carries none (only Linux wheels do),
    ``PEV_BIN`` is unset and none is on PATH."""


class PevCommandError(PevError):
    """The ``pev`` binary refused the command (exit 2: bad input or usage)."""

    def __init__(self, message: str, *, exit_code: int, stderr: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.message = message
        self.stderr = stderr


def reraise(err: Exception) -> NoReturn:
    """Turns the extension's ``NativeError(kind, message, details_json)`` into its typed form."""
    kind, message, details = err.args
    info: dict[str, Any] = json.loads(details)
    if kind == "syntax":
        raise PlanSyntaxError(
            message, format=info["format"], line=info["line"], column=info["column"]
        ) from None
    if kind == "schema":
        issues = tuple(SchemaIssue(i["step"], i["pointer"], i["message"]) for i in info["issues"])
        raise PlanSchemaError(message, issues=issues) from None
    if kind == "policy":
        raise PolicyError(message, kind=info["kind"], path=info.get("path")) from None
    if kind == "unknown_code":
        raise UnknownCodeError(message) from None
    if kind == "usage":
        raise ValueError(message) from None
    raise PevError(message) from None
