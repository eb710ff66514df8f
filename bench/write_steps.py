#!/usr/bin/env python3
"""What a `file.write` step costs `pev run` (issue 32, item 2), independent and chained.

Each round runs, for each binary given, a plan of STEPS `file.write` steps of a new small file
(bench/gen_run_plan.py), all independent (at the default `--jobs`, one a core, and at
`--jobs 8`) and as one chain, plus a 1-step plan; the per-step
overhead is (time of the STEPS-step plan - time of the 1-step plan) / STEPS. Every run gets a
workspace directory never used before: creating thousands of files right after deleting as many
in the same place makes ext4 (without a journal, as here) scan past the recently freed inodes,
which costs bare Python about 0.5 ms a file, more than pev's whole overhead; a fresh directory
keeps that out of the figure. The floors printed beside: bare Python making the same files the
same way (a temporary file renamed into place, no fsync), and one fsync of a small overwrite,
which a chain pays once a step (each step's intent is durable before its write, and the next
step cannot start before this one ended).

Usage: bench/write_steps.py PEV [PEV_BEFORE]          env: STEPS=10000 ROUNDS=3
       bench/write_steps.py --check PEV               fails when the independent figure is more
                                                      than 20% above bench/write_steps.baseline
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# `--jobs` of the wide independent run.
JOBS_WIDE = 8


def plan(out, steps, chain, policy=None):
    argv = [sys.executable, os.path.join(HERE, "gen_run_plan.py"), "--kind", "write",
            "--steps", str(steps), "--chain", "1" if chain else "0", "--out", out]
    if policy:
        argv += ["--policy-out", policy]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


def timed_run(pev, plan_path, policy, ws, jobs=None):
    os.makedirs(ws)
    with open(os.path.join(ws, "data.txt"), "w") as f:
        f.write("hello world\n")
    subprocess.run(["sync"], check=True)
    start = time.perf_counter()
    argv = [pev, "run", plan_path, "--policy", policy, "--workspace", ws, "--json"]
    if jobs:
        argv += ["--jobs", str(jobs)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def floor_files(d, n):
    os.makedirs(d)
    subprocess.run(["sync"], check=True)
    start = time.perf_counter()
    for i in range(n):
        p = os.path.join(d, "%06d.txt" % i)
        fd = os.open(p + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"written %d\n" % i)
        os.close(fd)
        os.rename(p + ".tmp", p)
    return time.perf_counter() - start


def floor_fsync(d, n=300):
    path = os.path.join(d, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    times = []
    for i in range(n):
        os.pwrite(fd, b"x" * 4096, (i % 64) * 4096)
        start = time.perf_counter()
        os.fsync(fd)
        times.append(time.perf_counter() - start)
    os.close(fd)
    return statistics.median(times)


def main():
    args = sys.argv[1:]
    check = bool(args) and args[0] == "--check"
    if check:
        args = args[1:]
    if not args:
        print(__doc__)
        sys.exit(2)
    bins = [(os.path.abspath(a), name) for a, name in zip(args, ["this", "before"])]
    steps = int(os.environ.get("STEPS", "10000"))
    rounds = int(os.environ.get("ROUNDS", "3"))
    work = tempfile.mkdtemp(prefix="pev-write-steps-", dir=os.environ.get("WORK"))
    try:
        policy = os.path.join(work, "policy.yaml")
        plans = {}
        for kind, n, chain in [("one", 1, False), ("indep", steps, False), ("chain", steps, True)]:
            plans[kind] = os.path.join(work, f"{kind}.json")
            plan(plans[kind], n, chain, policy if kind == "one" else None)
        # The independent plan again with 8 steps at a time (the default is one a core): the
        # intents of the steps running together share commits.
        plans["indep8"] = plans["indep"]
        got = {(name, kind): [] for _, name in bins for kind in plans}
        files, fsyncs = [], []
        fresh = iter(range(10**9))
        for _ in range(rounds):
            for pev, name in bins:
                for kind, path in plans.items():
                    ws = os.path.join(work, f"ws{next(fresh)}")
                    jobs = JOBS_WIDE if kind == "indep8" else None
                    got[(name, kind)].append(timed_run(pev, path, policy, ws, jobs))
            files.append(floor_files(os.path.join(work, f"floor{next(fresh)}"), steps))
            fsyncs.append(floor_fsync(work))
        print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
              f"{steps} steps, {rounds} rounds, medians")
        print(f"| pev | independent, per step | independent, --jobs {JOBS_WIDE}, per step "
              "| chained, per step | 1-step run |")
        print("|---|---|---|---|---|")
        per_step = {}
        for _, name in bins:
            one = statistics.median(got[(name, "one")])
            row = []
            for kind in ("indep", "indep8", "chain"):
                ms = (statistics.median(got[(name, kind)]) - one) / steps * 1000
                per_step[(name, kind)] = ms
                row.append(f"{ms:.3f} ms")
            print(f"| {name} | {row[0]} | {row[1]} | {row[2]} | {one * 1000:.0f} ms |")
        print(f"| floor: Python, same files (temp + rename) | "
              f"{statistics.median(files) / steps * 1000:.3f} ms | | | |")
        print(f"| floor: one fsync (a chain pays one a step) | | | "
              f"{statistics.median(fsyncs) * 1000:.3f} ms | |")
        if check:
            base = None
            with open(os.path.join(HERE, "write_steps.baseline")) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == "independent_ms_per_step":
                        base = float(parts[1])
            now = per_step[("this", "indep")]
            if base is None:
                sys.exit("no independent_ms_per_step in bench/write_steps.baseline")
            if now > base * 1.2:
                print(f"FAIL: {now:.3f} ms a step, more than 20% above the baseline {base} ms")
                sys.exit(1)
            print(f"ok: {now:.3f} ms a step (baseline {base} ms, limit +20%)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
