"""pev, a Plan-Execute-Verify harness for LLM agents, in Python.

In process, on every platform (the extension ``pev._pev``, GIL released):
``lint``, ``lint_file``, ``parse_plan``, ``Policy``, ``explain``, ``codes``, ``schema``.

Through the bundled ``pev`` binary (Linux wheels): ``run``/``arun``, ``verify``/``averify``,
``gate``/``agate``, ``gate_status``/``agate_status``, ``mcp_server``, ``find_pev_bin``;
``python -m pev …`` is the binary itself.
"""

from __future__ import annotations

from . import _pev
from ._bin import find_pev_bin
from ._errors import (
    PevBinaryNotFound,
    PevCommandError,
    PevError,
    PlanRejected,
    PlanSchemaError,
    PlanSyntaxError,
    PolicyError,
    SchemaIssue,
    UnknownCodeError,
)
from ._lint import Policy, codes, explain, lint, lint_file, parse_plan, schema
from ._process import (
    agate,
    agate_status,
    arun,
    averify,
    gate,
    gate_status,
    mcp_command,
    mcp_server,
    run,
    serve_mcp,
    verify,
)
from ._types import (
    AssertionResult,
    CodeInfo,
    Finding,
    GateDecision,
    LintResult,
    Reason,
    RunResult,
    RunStatus,
    Severity,
    Status,
    StepResult,
    VerifyResult,
)

__version__: str = _pev.__version__

__all__ = [
    "AssertionResult",
    "CodeInfo",
    "Finding",
    "GateDecision",
    "LintResult",
    "PevBinaryNotFound",
    "PevCommandError",
    "PevError",
    "PlanRejected",
    "PlanSchemaError",
    "PlanSyntaxError",
    "Policy",
    "PolicyError",
    "Reason",
    "RunResult",
    "RunStatus",
    "SchemaIssue",
    "Severity",
    "Status",
    "StepResult",
    "UnknownCodeError",
    "VerifyResult",
    "__version__",
    "agate",
    "agate_status",
    "arun",
    "averify",
    "codes",
    "explain",
    "find_pev_bin",
    "gate",
    "gate_status",
    "lint",
    "lint_file",
    "mcp_command",
    "mcp_server",
    "parse_plan",
    "run",
    "schema",
    "serve_mcp",
    "verify",
]
