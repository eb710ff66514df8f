"""JSON output: ``result.model_dump()`` as plan-lint wrote it."""

from __future__ import annotations

import json
from typing import IO, Any, Dict

from plan_lint.types import ValidationResult


def to_dict(result: ValidationResult) -> Dict[str, Any]:
    return result.model_dump(mode="json")


def report(result: ValidationResult, output: IO[str]) -> None:
    output.write(json.dumps(to_dict(result), indent=2))
