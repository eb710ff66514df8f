#!/usr/bin/env python3
"""Writes benchmark plans and the policy that goes with them, for bench/lint.sh.

A plan of N steps is one long chain: every step depends_on the previous one and reads its result
(`${prev.result.…}`), and also reads the step eight places back with the `{{id.result}}` spelling,
so reference checks must follow transitive dependencies the whole length of the chain. The tools
cycle through db.query_ro (a SELECT with a bound parameter), file.read, file.write (with
assertions), shell.exec (with an exit-code assertion), payments.transfer (an amount under a
dotted-tool bound) and notify.email. References sit where a careful planner puts them (bound SQL
parameters, environment variables, message bodies), so a clean plan is measured, not a plan that
is all findings; about one step in a thousand (a transfer) is over its bound, so the report is never empty.

Steps are written with `args` (plan-lint requires it; pev reads it as `parameters`) and the policy
(bench/policy.yaml, copied by --policy-out) uses only plan-lint's keys, so plan-lint 0.0.3 and pev
lint exactly the same files.

Usage: gen_plan.py --steps N --out PLAN.json
       gen_plan.py --policy-out POLICY.yaml
Python 3.11, standard library only; output is deterministic.
"""

import argparse
import json
import os
import shutil
import sys

TOOLS = ["db.query_ro", "file.read", "file.write", "shell.exec", "payments.transfer", "notify.email"]
# The step this far back is referenced too; 8 is 2 modulo the 6 tools, which keeps every reference
# into payments/notify coming from a non-sensitive tool (no SENSITIVE_DATA_EXPOSURE by design).
BACK = 8

# The policy is a committed file, shared with the criterion bench (crates/lint/benches/lint.rs).
POLICY_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "policy.yaml")


def step_id(i: int) -> str:
    return f"step-{i:06d}"


def make_step(i: int) -> dict:
    tool = TOOLS[i % len(TOOLS)]
    prev = step_id(i - 1) if i > 0 else None
    back = f"{{{{{step_id(i - BACK)}.result}}}}" if i >= BACK else "none"
    ref = (lambda path: f"${{{prev}.result.{path}}}") if prev else (lambda path: "start")
    step: dict = {"id": step_id(i), "title": f"{tool} #{i}", "tool": tool}
    if tool == "db.query_ro":
        step["args"] = {
            "query": "SELECT id, total, created_at FROM orders WHERE customer_id = $1 AND total > $2",
            "params": [ref("message_id"), 10],
            "limit": 100,
            "trace": back,
        }
    elif tool == "file.read":
        step["args"] = {"path": f"data/orders-{i}.csv", "offset": ref("rows.0.offset"), "limit": 4096}
    elif tool == "file.write":
        path = f"out/report-{i}.txt"
        step["args"] = {"path": path, "content": f"Report {i}: {ref('content')} (from {back})"}
        step["assertions"] = [
            {"type": "file_exists", "path": path},
            {"type": "file_contains", "path": path, "pattern": f"Report {i}:"},
        ]
    elif tool == "shell.exec":
        step["args"] = {
            "command": f"wc -l out/report-{i - 1}.txt",
            "timeout_s": 30,
            "env": {"REPORT_SHA": ref("sha256"), "TRACE": back},
        }
        step["assertions"] = [{"type": "exit_code_eq", "code": 0}]
    elif tool == "payments.transfer":
        # Every 166th transfer (about one step in a thousand) is over the 1000 bound.
        amount = 5000 if (i // len(TOOLS)) % 166 == 165 else 10 + (i * 37) % 990
        step["args"] = {
            "to": f"ACC-{i:06d}",
            "amount": amount,
            "currency": "EUR",
            "memo": f"batch {ref('stdout')} {back}",
        }
        step["acceptance_criteria"] = ["The bank confirms the transfer"]
    else:  # notify.email
        step["args"] = {
            "to": "ops@example.com",
            "subject": f"Transfer {i - 1} done",
            "body": f"Transfer {ref('id')} is done; trace {back}",
        }
    if prev:
        step["depends_on"] = [prev]
    return step


def write_plan(n: int, out: str) -> None:
    plan = {
        "goal": f"Process {n} orders end to end (benchmark plan)",
        "context": {"generator": "bench/gen_plan.py", "steps": n},
        "steps": [make_step(i) for i in range(n)],
        "meta": {"planner": "bench", "created_at": "2026-01-01T00:00:00Z"},
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(plan, f, separators=(",", ":"))
        f.write("\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, help="number of steps in the plan")
    parser.add_argument("--out", help="where to write the plan (JSON)")
    parser.add_argument("--policy-out", help="where to write the policy (YAML)")
    args = parser.parse_args()
    if args.policy_out:
        shutil.copyfile(POLICY_FILE, args.policy_out)
    if args.steps is not None:
        if not args.out or args.steps < 0:
            parser.error("--steps needs a non-negative N and --out")
        write_plan(args.steps, args.out)
    if args.policy_out is None and args.steps is None:
        parser.error("nothing to do: give --steps N --out PLAN and/or --policy-out POLICY")
    return 0


if __name__ == "__main__":
    sys.exit(main())
