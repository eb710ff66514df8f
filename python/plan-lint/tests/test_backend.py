"""The `plan_lint` these tests import is the drop-in on pev, never a stray plan-lint install
(which would let the upstream tests pass against the original)."""

from pathlib import Path

import plan_lint


def test_plan_lint_is_the_drop_in() -> None:
    assert plan_lint.__backend__.startswith("pev ")
    assert (Path(plan_lint.__file__).parent / "core.py").read_text().count("pev.lint") >= 1


def test_no_subprocess_in_opa() -> None:
    source = (Path(plan_lint.__file__).parent / "opa.py").read_text()
    assert "import subprocess" not in source and "subprocess." not in source.split('"""', 2)[2]
