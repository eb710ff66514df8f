"""The ``plan-lint`` command (a Typer app, as plan-lint's), linting with pev.

plan-lint's flags are all accepted. Differences, on purpose: ``-f json`` prints pev's lint JSON
(plan-lint's keys plus ``step_id``, ``severity``, ``path``, ``line``, ``column``); ``-r`` overrides
the policy's threshold only when given (plan-lint always overrode it with 0.8); ``--opa`` and
``-t rego`` need no ``opa`` binary; ``-s`` is accepted and ignored, as in plan-lint.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Optional

import pev
import typer

from plan_lint.core import PevCompatWarning, pev_policy
from plan_lint.loader import is_rego_policy_file, load_policy
from plan_lint.reporters import cli as cli_reporter

app = typer.Typer(
    name="plan-lint",
    help="A static analysis toolkit for LLM agent plans (checks by pev)",
    add_completion=False,
)


def compile_policy(policy_file: Optional[str], policy_type: str = "auto") -> pev.Policy:
    """The pev policy for a plan-lint policy file (YAML, or Rego by extension, content or -t)."""
    if policy_file is None:
        return pev.Policy.default()
    kind = policy_type.lower()
    if kind == "rego" or (kind == "auto" and is_rego_policy_file(policy_file)):
        return pev.Policy.from_dict({}, rego=[(policy_file, Path(policy_file).read_text())])
    policy, _ = load_policy(policy_file)
    return pev_policy(policy, base_dir=os.path.dirname(os.path.abspath(policy_file)))


@app.command()
def lint_plan(
    plan_file: str = typer.Argument(..., help="Path to the plan file (JSON or YAML)"),
    policy_file: Optional[str] = typer.Option(
        None, "--policy", "-p", help="Path to the policy file (YAML or Rego)"
    ),
    policy_type: str = typer.Option(
        "auto", "--policy-type", "-t", help="Policy type: 'yaml', 'rego', or 'auto'"
    ),
    schema_file: Optional[str] = typer.Option(
        None, "--schema", "-s", help="Accepted for compatibility; pev's schema applies"
    ),
    output_format: str = typer.Option("cli", "--format", "-f", help="Output format (cli or json)"),
    output_file: Optional[str] = typer.Option(
        None, "--output", "-o", help="Path to write output (default: stdout)"
    ),
    fail_risk: Optional[float] = typer.Option(
        None, "--fail-risk", "-r", help="Risk score threshold for failure (0-1) [default: the policy's]"
    ),
    use_opa: bool = typer.Option(False, "--opa", help="Accepted; Rego is always evaluated in process"),
) -> None:
    """Validate a plan against a policy."""
    del schema_file, use_opa
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PevCompatWarning)
            policy = compile_policy(policy_file, policy_type)
        for w in caught:
            print(f"Warning: {w.message}", file=sys.stderr)
        for note in policy.notes:
            print(f"Note: {note}", file=sys.stderr)
        result = pev.lint(Path(plan_file), policy, fail_risk=fail_risk)
        if output_format.lower() == "json":
            text = result.to_json() + "\n"
        else:
            text = cli_reporter.render(result)
        if output_file:
            Path(output_file).write_text(text)
        else:
            sys.stdout.write(text)
    except (pev.PevError, OSError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        sys.exit(1)
    if result.status == pev.Status.ERROR:
        sys.exit(1)


if __name__ == "__main__":
    app()
