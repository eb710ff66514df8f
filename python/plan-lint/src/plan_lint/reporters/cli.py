"""Text output for people."""

from __future__ import annotations

from typing import IO, Union

import pev

from plan_lint.types import ValidationResult


def render(result: Union[pev.LintResult, ValidationResult]) -> str:
    if isinstance(result, ValidationResult):
        status, risk = result.status.value, result.risk_score
        rows = [("error", e.step, e.code.value, e.msg) for e in result.errors]  # type: ignore[attr-defined]
        rows += [("warning", w.step, w.code, w.msg) for w in result.warnings]
    else:
        status, risk = result.status.value, result.risk_score
        rows = [(f.level, f.step, f.code, f.msg) for f in result.findings]
    lines = [f"Plan status: {status.upper()} (risk score {risk:.2f})"]
    for level, step, code, msg in rows:
        where = f"step {step}" if step is not None else "plan"
        lines.append(f"  {level:<7} {where:<8} {code}: {msg}")
    if not rows:
        lines.append("  no findings")
    return "\n".join(lines) + "\n"


def report(result: Union[pev.LintResult, ValidationResult], output: IO[str]) -> None:
    output.write(render(result))
