"""Helpers shared by the tests: the repository's paths and running the pev binary."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LINT_FIXTURES = REPO / "crates" / "lint" / "tests" / "fixtures"
EXAMPLES = REPO / "examples"


def run_cli(pev_bin: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([pev_bin, *args], input=stdin, capture_output=True, text=True, timeout=300)


def cli_json(pev_bin: str, *args: str, stdin: str | None = None) -> Any:
    proc = run_cli(pev_bin, *args, stdin=stdin)
    assert proc.stdout.strip(), f"pev {' '.join(args)} printed nothing: {proc.stderr}"
    return json.loads(proc.stdout)


def has_subcommand(pev_bin: str, name: str) -> bool:
    proc = run_cli(pev_bin, name, "--help")
    return proc.returncode == 0
