"""Lint in process: plans and policies in every form Python code holds them, through the
extension (``pev._pev``), which runs pev-lint itself with the GIL released.

A plan may be a Mapping, a pydantic model (anything with ``model_dump``), JSON or YAML text
(``str``/``bytes``), or a file (``os.PathLike``). A bare ``str`` naming an existing file raises
``TypeError``: pass ``pathlib.Path`` to lint a file, so ``"plan.json"`` is never linted as YAML.
Findings carry line and column when the plan was text or a file, as ``pev lint --format json``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Union

from . import _pev
from ._errors import PolicyError, reraise
from ._types import CodeInfo, LintResult, Severity

PlanInput = Union[Mapping[str, Any], str, bytes, "os.PathLike[str]", Any]
PolicyInput = Union["Policy", Mapping[str, Any], "os.PathLike[str]", str, None]

# Past this size `pev lint --format json` reports without lines; so does this module.
_LOCATE_MAX_TEXT = 8 * 1024 * 1024


def _json_default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"a plan cannot hold a {type(value).__name__}: {value!r}")


def _sniff(text: str) -> str:
    return "json" if text.lstrip()[:1] in ("{", "[") else "yaml"


def _format_of(name: str, text: str) -> str:
    lower = name.lower()
    if lower.endswith(".json"):
        return "json"
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    return _sniff(text)


def _read_text(path: os.PathLike[str] | str) -> str:
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"cannot read plan `{os.fspath(path)}`: it is not UTF-8 text") from e


def _plan_text(plan: Any) -> tuple[str, str, bool]:
    """``(text, format, locate)`` for any plan input."""
    if isinstance(plan, os.PathLike):
        text = _read_text(plan)
        return text, _format_of(os.fspath(plan), text), True
    if isinstance(plan, bytes):
        plan = plan.decode("utf-8")
    if isinstance(plan, str):
        if "\n" not in plan and plan.strip() and os.path.isfile(plan):
            raise TypeError(
                f"{plan!r} names a file: pass pathlib.Path({plan!r}) to lint it "
                "(a str is linted as JSON or YAML text)"
            )
        return plan, _sniff(plan), True
    if hasattr(plan, "model_dump"):
        plan = plan.model_dump(mode="json")
    if isinstance(plan, Mapping):
        return json.dumps(plan, default=_json_default), "json", False
    raise TypeError(
        "a plan is a dict, a pydantic model, JSON/YAML text or a pathlib.Path, "
        f"not {type(plan).__name__}"
    )


class Policy:
    """A policy compiled once: immutable, reusable, safe to share across threads.

    ``Policy.load(path)`` reads a YAML/JSON policy (and the Rego files it names) or a bare
    ``.rego`` file; ``from_dict``/``from_yaml`` compile one held in memory (Rego files named in it
    are read relative to ``base_dir``, default the current directory; ``rego`` adds modules as
    ``(label, source)`` pairs).
    """

    __slots__ = ("_compiled", "_label")

    def __init__(self, compiled: _pev.CompiledPolicy, label: str) -> None:
        self._compiled = compiled
        self._label = label

    @classmethod
    def load(cls, path: os.PathLike[str] | str) -> Policy:
        try:
            return cls(_pev.CompiledPolicy.load(os.fspath(path)), os.fspath(path))
        except _pev.NativeError as e:
            reraise(e)

    @classmethod
    def from_yaml(
        cls,
        text: str,
        *,
        base_dir: os.PathLike[str] | str | None = None,
        rego: Iterable[tuple[str, str]] = (),
        label: str = "<policy>",
    ) -> Policy:
        base = os.fspath(base_dir) if base_dir is not None else os.getcwd()
        try:
            compiled = _pev.CompiledPolicy.from_text(text, label, base, list(rego))
        except _pev.NativeError as e:
            reraise(e)
        return cls(compiled, label)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        base_dir: os.PathLike[str] | str | None = None,
        rego: Iterable[tuple[str, str]] = (),
    ) -> Policy:
        if not isinstance(data, Mapping):
            raise PolicyError(
                f"a policy is a mapping, not {type(data).__name__}", kind="type", path=None
            )
        text = json.dumps(dict(data), default=_json_default)
        if text == "{}":
            # An empty document is the default policy (pev refuses an empty file, not `{}`).
            text = "{}\n"
        return cls.from_yaml(text, base_dir=base_dir, rego=rego, label="<dict>")

    @classmethod
    def default(cls) -> Policy:
        return cls(_pev.CompiledPolicy.default(), "<default>")

    @property
    def fail_risk_threshold(self) -> float:
        return self._compiled.fail_risk_threshold

    @property
    def notes(self) -> tuple[str, ...]:
        """Remarks that do not stop the policy from being used (e.g. a risk weight naming no code)."""
        return tuple(self._compiled.notes)

    @property
    def rego(self) -> tuple[tuple[str, str], ...]:
        return tuple(self._compiled.rego_sources())

    def to_dict(self) -> dict[str, Any]:
        """The policy document with every default filled in."""
        return json.loads(self._compiled.to_json())

    def __repr__(self) -> str:
        return f"Policy({self._label!r})"


def as_policy(policy: PolicyInput) -> Policy | None:
    """A ``Policy`` from any policy input (None stays None: the default policy)."""
    if policy is None or isinstance(policy, Policy):
        return policy
    if isinstance(policy, Mapping):
        return Policy.from_dict(policy)
    if isinstance(policy, (str, os.PathLike)):
        return Policy.load(policy)
    raise TypeError(f"a policy is a pev.Policy, a dict or a path, not {type(policy).__name__}")


def _policy(policy: PolicyInput) -> _pev.CompiledPolicy | None:
    if policy is None:
        return None
    if isinstance(policy, Policy):
        return policy._compiled
    if isinstance(policy, Mapping):
        return Policy.from_dict(policy)._compiled
    if isinstance(policy, (str, os.PathLike)):
        return Policy.load(policy)._compiled
    raise TypeError(
        f"a policy is a pev.Policy, a dict or a path, not {type(policy).__name__}"
    )


def lint(plan: PlanInput, policy: PolicyInput = None, *, fail_risk: float | None = None) -> LintResult:
    """Lints a plan against a policy (default: pev's default policy). ``fail_risk`` overrides the
    policy's ``fail_risk_threshold``, as ``pev lint --fail-risk``. Findings are the result; only a
    plan that is not JSON/YAML at all raises (``PlanSyntaxError``), or a bad policy
    (``PolicyError``)."""
    text, fmt, locate = _plan_text(plan)
    compiled = _policy(policy)
    locate = locate and len(text) <= _LOCATE_MAX_TEXT
    try:
        out = _pev.lint(text, fmt, compiled, fail_risk, locate)
    except _pev.NativeError as e:
        reraise(e)
    return LintResult.from_dict(json.loads(out))


def lint_file(
    path: os.PathLike[str] | str, policy: PolicyInput = None, *, fail_risk: float | None = None
) -> LintResult:
    """Lints the plan in a file (JSON or YAML by its extension, else by its first character)."""
    return lint(Path(path), policy, fail_risk=fail_risk)


def parse_plan(plan: PlanInput) -> dict[str, Any]:
    """The plan in pev's canonical form (aliases resolved, defaults filled in). Raises
    ``PlanSyntaxError`` or ``PlanSchemaError``."""
    text, fmt, _ = _plan_text(plan)
    try:
        return json.loads(_pev.parse(text, fmt))
    except _pev.NativeError as e:
        reraise(e)


def _code_info(row: tuple[str, str, str, str, str]) -> CodeInfo:
    code, level, severity, explanation, fix = row
    return CodeInfo(code, level, Severity(severity), explanation, fix)  # type: ignore[arg-type]


def explain(code: str) -> CodeInfo:
    """What a lint code means, its default level and severity, and its fix (case-insensitive)."""
    try:
        return _code_info(_pev.explain(code))
    except _pev.NativeError as e:
        reraise(e)


@lru_cache(maxsize=1)
def codes() -> tuple[CodeInfo, ...]:
    """Every lint code, in the order of CONTRACTS.md §5."""
    return tuple(_code_info(row) for row in _pev.codes())


def fix_for(code: str) -> str:
    for info in codes():
        if info.code == code:
            return info.fix
    return ""


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of ``plan``, ``lint``, ``policy`` or ``result`` (= ``pev schema KIND``)."""
    try:
        return json.loads(_pev.schema(kind))
    except _pev.NativeError as e:
        reraise(e)
