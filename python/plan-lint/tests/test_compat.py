"""The drop-in against plan-lint's own examples, its CI smoke command and its documented API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pev
import pytest

import plan_lint
import plan_lint.loader
from plan_lint import core
from plan_lint.opa import evaluate_with_opa, policy_to_rego
from plan_lint.types import ErrorCode, Plan, PlanStep, Policy, Status

EXAMPLES = Path(plan_lint.__file__).parent / "examples"


def test_ci_smoke_command_gives_pevs_findings() -> None:
    # plan-lint's CI: python -m plan_lint price_drop.json --policy policy.yaml --format json,
    # grepped for TOOL_DENY and RAW_SECRET.
    proc = subprocess.run(
        [sys.executable, "-m", "plan_lint", str(EXAMPLES / "price_drop.json"),
         "--policy", str(EXAMPLES / "policy.yaml"), "--format", "json"],
        capture_output=True, text=True,
    )
    assert proc.returncode == 1, proc.stderr
    assert "TOOL_DENY" in proc.stdout and "RAW_SECRET" in proc.stdout
    pev_cli = subprocess.run(
        [pev.find_pev_bin(), "lint", str(EXAMPLES / "price_drop.json"),
         "--policy", str(EXAMPLES / "policy.yaml"), "--format", "json"],
        capture_output=True, text=True,
    )
    assert json.loads(proc.stdout) == json.loads(pev_cli.stdout)
    # The risk weight `tool_write` names no pev code: said, not silently dropped.
    assert "tool_write" in proc.stderr


def test_bundled_example_findings_are_pevs() -> None:
    # crates/lint/tests/suite/plan_lint_compat.rs, row "bundled_price_drop", pev's column.
    plan = json.loads((EXAMPLES / "price_drop.json").read_text())
    policy, _ = plan_lint.loader.load_policy(str(EXAMPLES / "policy.yaml"))
    result = core.validate_plan(plan, policy)
    # No false LOOP_DETECTED (plan-lint reports one: step-003 merely reads two earlier steps),
    # and each finding once (plan-lint reports TOOL_DENY and RAW_SECRET twice each).
    assert [(e.code.value, e.step) for e in result.errors] == [("TOOL_DENY", 0), ("RAW_SECRET", 2)]
    assert sorted((w.code, w.step) for w in result.warnings) == [
        ("REFERENCE_NOT_DEPENDENCY", 2), ("REFERENCE_NOT_DEPENDENCY", 2), ("UNVERIFIED_EFFECT", 2)]
    # raw_secret's weight (0.5) applies: 0.2 + 0.5 + 2 x 0.05.
    assert (result.status, result.risk_score) == (Status.ERROR, 0.8)


def test_dotted_tool_bounds_work_where_plan_lint_split_at_the_first_dot() -> None:
    step = PlanStep(id="s", tool="price.discount", args={"discount_pct": -70})
    found = core.check_bounds(step, {"price.discount.discount_pct": [-50, 0]}, 3)
    assert [(e.code, e.step) for e in found] == [(ErrorCode.BOUND_VIOLATION, 3)]


def test_risk_weights_keys_apply() -> None:
    plan = Plan(goal="g", steps=[PlanStep(id="a", tool="x.y", args={})])
    light = core.validate_plan(plan, Policy(allow_tools=["z"], risk_weights={"tool_deny": 0.1}))
    heavy = core.validate_plan(plan, Policy(allow_tools=["z"], risk_weights={"tool_deny": 0.7}))
    assert (light.risk_score, heavy.risk_score) == (0.1, 0.7)


def test_the_seed_pages_example_runs() -> None:
    # plan-lint's docs, "Plan Structure" > "API Usage", verbatim but for the policy it needs:
    # step2 sends db.query_ro's result to notify.email, which pev flags unless approved.
    plan = Plan(
        goal="Send notification to user",
        steps=[
            PlanStep(id="step1", tool="db.query_ro",
                     parameters={"query": "SELECT email FROM users WHERE id = $1", "args": ["user-456"]}),
            PlanStep(id="step2", tool="notify.email",
                     parameters={"to": "{{step1.result.email}}", "subject": "Notification",
                                 "body": "This is a notification"},
                     depends_on=["step1"]),
        ],
        context={"user_id": "user-456"},
    )
    result = plan_lint.validate_plan(plan)
    assert not result.valid
    assert "SENSITIVE_DATA_EXPOSURE" in [v.rule for v in result.violations]
    assert all(v.message for v in result.violations)
    approved = plan_lint.validate_plan(plan, {"approve_tools": ["notify.*"]})
    assert approved.valid, approved.violations


def test_documented_validate_plan_with_policy_files(tmp_path: Path) -> None:
    rego = tmp_path / "deny.rego"
    rego.write_text(
        'package planlint\n\nviolations[{"step": i, "code": "TOOL_DENY", "msg": "no shell"}] {\n'
        '    input.steps[i].tool == "shell.exec"\n}\n'
    )
    plan = {"goal": "g", "steps": [{"id": "a", "tool": "shell.exec", "args": {"command": "ls"},
                                    "acceptance_criteria": ["listed"]}]}
    result = plan_lint.validate_plan(plan, policies=[str(rego)])
    assert [e.code for e in result.errors] == [ErrorCode.TOOL_DENY]
    assert result.errors[0].code == "TOOL_DENY"


def test_generated_rego_is_valid_and_enforces_the_policy() -> None:
    policy = Policy(allow_tools=["file.read"], deny_tokens_regex=["AKIA"], max_steps=5,
                    bounds={"pay.refund.amount": [0, 100]})
    rego = policy_to_rego(policy)
    plan = Plan(goal="g", steps=[
        PlanStep(id="a", tool="pay.refund", args={"amount": 500, "note": "AKIA1234"}),
    ])
    # Rego only (an empty built-in policy): the violations come from the generated module.
    result = core.validate_plan(plan, None, rego)
    assert result.status == Status.ERROR
    codes = sorted(e.code.value for e in result.errors)
    assert {"TOOL_DENY", "BOUND_VIOLATION", "RAW_SECRET"} <= set(codes), codes


def test_evaluate_with_opa_runs_in_process() -> None:
    policy = Policy(allow_tools=["file.read"])
    plan = Plan(goal="g", steps=[PlanStep(id="a", tool="file.read", args={"path": "x"})])
    assert evaluate_with_opa(plan, policy).status == Status.PASS


def test_unknown_policy_keys_warn_and_are_dropped() -> None:
    plan = Plan(goal="g", steps=[PlanStep(id="a", tool="file.read", args={"path": "x"})])
    with pytest.warns(core.PevCompatWarning, match="tool_patterns"):
        result = core.validate_plan(plan, Policy(tool_patterns={"db.*": "x"}))
    assert result.status == Status.PASS
