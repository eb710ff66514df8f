"""plan-lint's ``core`` API, answered by pev's linter in process.

``validate_plan`` lints the whole plan under the policy; ``check_tools_allowed``,
``check_bounds`` and ``check_raw_secrets`` lint a one-step plan under a policy holding only
that rule and keep that rule's findings. Malformed bounds and regexes are skipped, as plan-lint
skipped them, rather than raised.
"""

from __future__ import annotations

import os
import re
import warnings
from functools import lru_cache
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import pev

from plan_lint.types import (
    ErrorCode,
    Plan,
    PlanError,
    PlanStep,
    PlanWarning,
    Policy,
    Status,
    ValidationResult,
)


class PevCompatWarning(UserWarning):
    """A plan-lint input pev does not take as it is (e.g. a policy key pev does not know)."""


@lru_cache(maxsize=1)
def _pev_policy_keys() -> frozenset[str]:
    return frozenset(pev.schema("policy").get("properties", {}))


def _plan_document(plan: Union[Plan, Mapping[str, Any], Any]) -> Any:
    if isinstance(plan, Plan):
        return plan.model_dump(mode="json")
    if isinstance(plan, Mapping):
        return dict(plan)
    if hasattr(plan, "model_dump"):
        return plan.model_dump(mode="json")
    return plan  # text or a path: pev reads it


def _policy_document(policy: Union[Policy, Mapping[str, Any], None]) -> Dict[str, Any]:
    if policy is None:
        return {}
    data = policy.model_dump(mode="json") if isinstance(policy, Policy) else dict(policy)
    known = _pev_policy_keys()
    unknown = sorted(k for k in data if k not in known)
    for key in unknown:
        warnings.warn(
            f"policy key `{key}` means nothing to pev and is ignored (plan-lint ignored it too)",
            PevCompatWarning,
            stacklevel=4,
        )
        data.pop(key)
    return data


def pev_policy(
    policy: Union[Policy, Mapping[str, Any], None],
    rego_policy: Optional[str] = None,
    *,
    base_dir: Optional[str] = None,
) -> pev.Policy:
    """The pev policy for a plan-lint policy (and Rego text, evaluated in process)."""
    rego = [("<rego_policy>", rego_policy)] if rego_policy else []
    return pev.Policy.from_dict(_policy_document(policy), base_dir=base_dir, rego=rego)


_REGO_CODE = re.compile(r"^[^\n]*?: \[([A-Z_]+)\] ")


def _error(finding: pev.Finding, step: Optional[int] = None) -> PlanError:
    code, msg = finding.code, finding.msg
    if code == "POLICY_VIOLATION":
        # A Rego policy's own code ("file: [CODE] msg"): plan-lint reports it as that code.
        match = _REGO_CODE.match(msg)
        if match and match.group(1) in ErrorCode.__members__:
            code = match.group(1)
    extra = {"step_id": finding.step_id, "severity": finding.severity.value, "path": finding.path}
    return PlanError(step=finding.step if step is None else step, code=ErrorCode(code), msg=msg, **extra)


def _warning(finding: pev.Finding) -> PlanWarning:
    extra = {"step_id": finding.step_id, "severity": finding.severity.value, "path": finding.path}
    return PlanWarning(step=finding.step, code=finding.code, msg=finding.msg, **extra)


def to_validation_result(result: pev.LintResult) -> ValidationResult:
    """A pev lint result in plan-lint's shape."""
    return ValidationResult(
        status=Status(result.status.value),
        risk_score=result.risk_score,
        errors=[_error(f) for f in result.errors],
        warnings=[_warning(f) for f in result.warnings],
    )


def validate_plan(
    plan: Union[Plan, Mapping[str, Any]],
    policy: Union[Policy, Mapping[str, Any], None] = None,
    rego_policy: Optional[str] = None,
    use_opa: bool = False,
    *,
    policies: Optional[Sequence[Union[str, "os.PathLike[str]"]]] = None,
    context: Optional[Mapping[str, Any]] = None,
    config: Optional[Mapping[str, Any]] = None,
) -> ValidationResult:
    """Validates a plan against a policy with pev's checks.

    ``policy`` may be left out (pev's default policy, as plan-lint's docs show); ``policies`` is
    the documented spelling with policy files (YAML, or ``.rego``). ``use_opa`` changes nothing:
    Rego is always evaluated in process. ``context`` is merged into the plan's context; ``config``
    is accepted for the documented signature and ignored.
    """
    del use_opa, config
    document = _plan_document(plan)
    if context and isinstance(document, dict):
        document = {**document, "context": {**(document.get("context") or {}), **dict(context)}}
    compiled = pev_policy(policy, rego_policy)
    if policies:
        compiled = _merge_policy_files(policy, rego_policy, policies)
    return to_validation_result(pev.lint(document, compiled))


def _merge_policy_files(
    policy: Union[Policy, Mapping[str, Any], None],
    rego_policy: Optional[str],
    files: Iterable[Union[str, "os.PathLike[str]"]],
) -> pev.Policy:
    from plan_lint.loader import load_policy

    document = _policy_document(policy)
    rego = [("<rego_policy>", rego_policy)] if rego_policy else []
    for path in files:
        loaded, text = load_policy(os.fspath(path))
        if text is not None:
            rego.append((os.fspath(path), text))
        else:
            document.update(_policy_document(loaded))
    return pev.Policy.from_dict(document, rego=rego)


validate_plan_builtin = validate_plan


def validate_plan_opa(
    plan: Plan, policy: Policy, rego_policy: Optional[str] = None
) -> ValidationResult:
    return validate_plan(plan, policy, rego_policy, use_opa=True)


def _one_step(step: Union[PlanStep, Mapping[str, Any]], policy: Dict[str, Any], code: str) -> List[pev.Finding]:
    data = step.model_dump(mode="json") if isinstance(step, PlanStep) else dict(step)
    result = pev.lint({"goal": "check one step", "steps": [data]}, pev.Policy.from_dict(policy))
    return [f for f in result.errors if f.code == code]


def check_tools_allowed(step: PlanStep, allowed_tools: List[str], step_idx: int) -> Optional[PlanError]:
    """TOOL_DENY when ``step.tool`` matches none of ``allowed_tools`` (exact names or globs)."""
    found = _one_step(step, {"allow_tools": list(allowed_tools)}, "TOOL_DENY")
    return _error(found[0], step_idx) if found else None


def _valid_bound(key: str, value: Any) -> bool:
    if "." not in key.strip(".") or not isinstance(value, (list, tuple)) or len(value) != 2:
        return False
    low, high = value
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high))
    return numbers and low <= high


def check_bounds(step: PlanStep, bounds: Dict[str, List[float]], step_idx: int) -> List[PlanError]:
    """BOUND_VIOLATION for each argument outside its ``"<tool>.<arg>": [min, max]`` (tool names
    may contain dots: the longest that matches wins)."""
    valid = {k: list(v) for k, v in bounds.items() if _valid_bound(k, v)}
    return [_error(f, step_idx) for f in _one_step(step, {"bounds": valid}, "BOUND_VIOLATION")]


def _valid_regex(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def check_raw_secrets(step: PlanStep, deny_patterns: List[str], step_idx: int) -> List[PlanError]:
    """RAW_SECRET for each argument value matching a deny pattern (and pev's own secret checks)."""
    patterns = [p for p in deny_patterns if _valid_regex(p)]
    return [_error(f, step_idx) for f in _one_step(step, {"deny_tokens_regex": patterns}, "RAW_SECRET")]


def detect_cycles(plan: Plan) -> Optional[PlanError]:
    """LOOP_DETECTED for a real cycle through ``depends_on`` and references (none otherwise)."""
    result = pev.lint(_plan_document(plan))
    loops = [f for f in result.errors if f.code == "LOOP_DETECTED"]
    return _error(loops[0]) if loops else None


def calculate_risk_score(
    errors: List[PlanError], warnings: List[PlanWarning], risk_weights: Dict[str, float]
) -> float:
    """pev's score: over the distinct codes found, the policy's weight (keys case-insensitive)
    or 0.2 for an error and 0.05 for a warning; capped at 1, rounded to 2 decimals."""
    weights = {k.lower(): v for k, v in risk_weights.items()}
    codes: Dict[Tuple[str, bool], None] = {}
    for e in errors:
        codes[(getattr(e.code, "value", str(e.code)), True)] = None
    for w in warnings:
        codes[(str(w.code), False)] = None
    total = sum(weights.get(code.lower(), 0.2 if is_error else 0.05) for code, is_error in codes)
    return round(min(total, 1.0) * 100) / 100
