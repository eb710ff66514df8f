#!/usr/bin/env python3
"""A plan of N `file.write` steps in chains of 10, each with an assertion (the plan the report
and trace benchmarks run): `python3 bench/chain_plan.py N > plan.json`."""
import json
import sys

n = int(sys.argv[1])
steps = [{"id": f"s{i}", "tool": "file.write",
          "parameters": {"path": f"out/f{i}.txt", "content": f"line {i}\n" * 20},
          "depends_on": [f"s{i-1}"] if i % 10 else [],
          "assertions": [{"type": "file_exists", "path": f"out/f{i}.txt"}]} for i in range(n)]
print(json.dumps({"goal": f"write {n} files", "steps": steps}))
