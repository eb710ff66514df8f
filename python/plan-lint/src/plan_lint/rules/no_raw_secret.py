"""Raw secrets in arguments: pev's RAW_SECRET findings."""

from __future__ import annotations

from typing import Any, List

import pev

from plan_lint.core import _error, _plan_document, pev_policy
from plan_lint.types import PlanError


def check_plan(plan: Any, policy: Any) -> List[PlanError]:
    result = pev.lint(_plan_document(plan), pev_policy(policy))
    return [_error(f) for f in result.errors if f.code == "RAW_SECRET"]
