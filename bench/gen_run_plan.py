#!/usr/bin/env python3
"""Writes the plans that bench/run_overhead.sh and bench/run_parallel.sh time with `pev run`.

Kinds (every step calls one cheap built-in tool directly, so what is measured is the harness:
scheduling, reference resolution, hashing, assertions, events and the SQLite journal):

  read     N `file.read` steps of the small file `data.txt` (the workspace must hold it).
           --chain K: step i depends_on step i-1 when i % K != 0, so K=1 is one sequential
           chain of N steps and K=0 (the default) makes every step independent.
  write    N `file.write` steps, each writing a different small file `out/NNNNNN.txt`; a write
           journals its intent durably (one fsync'd commit, shared by whatever is queued with
           it) before the file is touched. --chain as for read.
  sleep    N independent `shell.exec` steps of `sleep SECONDS` (--seconds, default 0.2).

The goal names a change for write and sleep plans and asks for nothing for read plans, so every
plan ends `success` (a read-only plan whose goal asked for a change would end `partial`).

The default lint policy allows 100 steps (max_steps); --policy-out writes the policy the benches
pass with --policy, which raises it to 1,000,000 and changes nothing else.

Usage: gen_run_plan.py --kind read|write|sleep --steps N [--chain K] [--seconds S] --out PLAN.json
       gen_run_plan.py --policy-out POLICY.yaml
Python 3.11, standard library only; output is deterministic.
"""

import argparse
import json
import sys


def step_id(i: int) -> str:
    return f"s{i:06d}"


def make_plan(kind: str, steps: int, chain: int, seconds: float) -> dict:
    out = []
    for i in range(steps):
        step: dict = {"id": step_id(i)}
        if kind == "read":
            step["tool"] = "file.read"
            step["parameters"] = {"path": "data.txt"}
        elif kind == "write":
            step["tool"] = "file.write"
            step["parameters"] = {"path": f"out/{i:06d}.txt", "content": f"line {i}\n"}
        else:
            step["tool"] = "shell.exec"
            step["parameters"] = {"command": f"sleep {seconds}"}
        # K=1: every step after the first depends on the one before (one chain); K>1: chains
        # of K. (Until 2026-11-27 K=1 made no dependency at all, so the "one chain" figures of
        # bench/run_overhead.sh were of independent steps; see BENCHMARKS.md, issue 32.)
        if i > 0 and (chain == 1 or (chain > 1 and i % chain != 0)):
            step["depends_on"] = [step_id(i - 1)]
        out.append(step)
    goals = {
        "read": "Look at data.txt",
        "write": "Write one small file per step under out/",
        "sleep": "Run the sleep commands",
    }
    return {"goal": goals[kind], "steps": out}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", choices=["read", "write", "sleep"])
    p.add_argument("--steps", type=int)
    p.add_argument("--chain", type=int, default=0, help="dependency on the previous step unless i %% K == 0; 0 = none")
    p.add_argument("--seconds", type=float, default=0.2, help="sleep length for --kind sleep")
    p.add_argument("--out")
    p.add_argument("--policy-out")
    a = p.parse_args()
    if a.policy_out:
        with open(a.policy_out, "w") as f:
            f.write("# Written by bench/gen_run_plan.py: the default policy, with room for 10,000-step plans.\nmax_steps: 1000000\n")
        if not a.out:
            return 0
    if not (a.kind and a.steps and a.out):
        sys.exit("--kind, --steps and --out are required to write a plan")
    if a.steps < 1 or a.chain < 0:
        sys.exit("--steps must be >= 1 and --chain >= 0")
    with open(a.out, "w") as f:
        json.dump(make_plan(a.kind, a.steps, a.chain, a.seconds), f, separators=(",", ":"))
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
