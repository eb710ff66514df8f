"""plan-lint's API on pev: ``validate_plan`` and its types, with pev's checks in process.

Installed by ``pev-plan-lint`` (it replaces ``plan-lint``: uninstall that first).
"""

import pev as _pev

from plan_lint.core import validate_plan
from plan_lint.types import PlanError, ValidationResult

__version__ = "0.0.4"
__backend__ = f"pev {_pev.__version__}"

# plan-lint's README imports this name.
lint_plan = validate_plan

__all__ = ["validate_plan", "ValidationResult", "PlanError", "lint_plan"]
