"""In-process lint (pev-harness) vs `pev lint` as a process vs plan-lint, side by side in one run.

Usage: python bench/python_lint.py [--plan-lint VENV_PYTHON] [--repeat N]
Run with the Python of a venv where pev-harness is installed. Plans come from bench/gen_plan.py
(100, 1,000 and 10,000 steps, with its policy). `--plan-lint` names the Python of a venv holding
the real plan-lint 0.0.3 (`pip install plan-lint==0.0.3`); without it that column is skipped.
Each figure is the median of N runs (default 5) of: in process, `pev.lint(text, policy)` with the
policy compiled once; process, `pev lint PLAN --policy P --format json` (spawn included);
plan-lint, `validate_plan(load_plan(PLAN), load_policy(P)[0])` timed inside its interpreter.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pev

HERE = Path(__file__).resolve().parent
PLAN_LINT_TIMER = """
import sys, time, statistics
from plan_lint.loader import load_plan, load_policy
from plan_lint.core import validate_plan
plan_path, policy_path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
times = []
for _ in range(n):
    t = time.perf_counter()
    validate_plan(load_plan(plan_path), load_policy(policy_path)[0])
    times.append(time.perf_counter() - t)
print(statistics.median(times))
"""


def median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan-lint")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    policy = work / "policy.yaml"
    subprocess.run([sys.executable, HERE / "gen_plan.py", "--policy-out", policy], check=True)
    compiled = pev.Policy.load(policy)
    binary = pev.find_pev_bin()
    print("| steps | in process (pev.lint) | `pev lint` process | plan-lint 0.0.3 |")
    print("|---:|---:|---:|---:|")
    for steps in (100, 1_000, 10_000):
        plan = work / f"plan-{steps}.json"
        subprocess.run([sys.executable, HERE / "gen_plan.py", "--steps", str(steps), "--out", plan], check=True)
        text = plan.read_text()
        inproc = median_ms(lambda: pev.lint(text, compiled), a.repeat)
        argv = [binary, "lint", str(plan), "--policy", str(policy), "--format", "json"]
        process = median_ms(lambda: subprocess.run(argv, capture_output=True), a.repeat)
        # The same findings both ways (the in-process result is the CLI's JSON).
        cli = json.loads(subprocess.run(argv, capture_output=True, text=True).stdout)
        assert pev.lint(plan, compiled).to_dict() == cli
        pl = "–"
        if a.plan_lint:
            out = subprocess.run([a.plan_lint, "-c", PLAN_LINT_TIMER, plan, policy, str(a.repeat)],
                                 capture_output=True, text=True)
            pl = f"{float(out.stdout) * 1000:.1f} ms" if out.returncode == 0 else f"failed: {out.stderr.strip().splitlines()[-1]}"
        print(f"| {steps:,} | {inproc:.1f} ms | {process:.1f} ms | {pl} |")


if __name__ == "__main__":
    main()
