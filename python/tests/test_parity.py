"""Parity with the CLI: for every plan among the repository's lint fixtures (and examples/lint),
under no policy and under each policy beside it, the in-process result equals what
`pev lint PLAN [--policy P] --format json` prints, line and column included; a policy the CLI
refuses raises PolicyError with the CLI's message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pev

from pev_test_support import EXAMPLES, LINT_FIXTURES, run_cli


def _is_policy(path: Path) -> bool:
    return "policy" in path.name or path.suffix == ".rego"


def _cases() -> list[tuple[Path, Path | None]]:
    cases: list[tuple[Path, Path | None]] = []
    directories = sorted({p.parent for p in LINT_FIXTURES.rglob("*")} | {EXAMPLES / "lint"})
    for directory in directories:
        files = sorted(p for p in directory.iterdir() if p.suffix in (".json", ".yaml", ".yml", ".rego"))
        plans = [p for p in files if not _is_policy(p)]
        policies = [p for p in files if _is_policy(p)]
        for plan in plans:
            cases.append((plan, None))
            cases.extend((plan, policy) for policy in policies)
    return cases


CASES = _cases()


def test_the_fixtures_are_found() -> None:
    plans = {plan for plan, _ in CASES}
    assert len(plans) >= 23, plans
    assert any(policy is not None and policy.suffix == ".rego" for _, policy in CASES)


@pytest.mark.parametrize(
    ("plan", "policy"),
    CASES,
    ids=[f"{p.parent.name}/{p.name}+{q.name if q else 'default'}" for p, q in CASES],
)
def test_in_process_lint_equals_pev_lint_json(pev_bin: str, plan: Path, policy: Path | None) -> None:
    args = ["lint", str(plan), "--format", "json"] + (["--policy", str(policy)] if policy else [])
    proc = run_cli(pev_bin, *args)
    if proc.returncode == 2 and not proc.stdout.strip():
        # The CLI refused the policy (or the plan): Python raises the same message.
        with pytest.raises((pev.PolicyError, pev.PlanSyntaxError)) as info:
            pev.lint(plan, pev.Policy.load(policy) if policy else None)
        assert str(info.value) in proc.stderr
        return
    expected = json.loads(proc.stdout)
    result = pev.lint(plan, pev.Policy.load(policy) if policy else None)
    assert result.to_dict() == expected
    assert (result.status == "error") == (proc.returncode != 0)
    # The same plan as a dict: the same findings, without lines (no text of the user's).
    as_dict = pev.lint(_load(plan), pev.Policy.load(policy) if policy else None)
    for finding in expected["errors"] + expected["warnings"]:
        finding.pop("line", None)
        finding.pop("column", None)
    assert as_dict.to_dict() == expected


def _load(plan: Path) -> object:
    import yaml

    text = plan.read_text()
    return json.loads(text) if plan.suffix == ".json" else yaml.safe_load(text)
