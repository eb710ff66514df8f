#!/usr/bin/env bash
# Benchmarks `pev agent` against a local mock model (bench/mock_model.py, Anthropic Messages API
# over HTTP on 127.0.0.1, so the real client path runs):
#
# (a) Parallel efficiency. The planner writes 8 independent instruction steps; each step takes
#     3 executor turns (file.write, file.read, a summary) and 1 judge call; every model call is
#     answered after 200 ms. With --jobs 8 the critical path is
#       200 ms x (1 planner call + max over steps of (3 executor turns + 1 judge call)) = 1.0 s,
#     and the target is a wall time within 1.3x of it. The path is computed from the mock's
#     script parameters and checked against the calls the mock counted. The same plan with
#     --jobs 1 (critical path 200 ms x (1 + 8 x 4) = 6.6 s) shows what the parallelism buys.
# (b) Harness overhead per model call. The same shape with 12 executor turns per step (1 write,
#     10 reads, a summary) against a mock that answers at once, --jobs 1 so no two calls overlap:
#     (wall - time spent inside the mock) / model calls, and the marginal cost per call from the
#     difference with a 2-turn run (which cancels the fixed costs: process start, planning, lint,
#     journal setup). The same two runs with the offline scripted provider (`script:` roles, same
#     conversation, no HTTP) separate the HTTP client's share from the rest of the harness.
#
# Times whole processes (hyperfine for (a), a Python timer for (b)); each run starts from a fresh
# journal and output directory. Writes everything to bench/out/agent/.
#
# Usage: bench/agent_parallel.sh        (env: RUNS=10 for (a), RUNS_B=30 for (b), PARTS="a b")
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out=bench/out/agent
runs="${RUNS:-10}"
runs_b="${RUNS_B:-30}"
parts="${PARTS:-a b}"
mkdir -p "$out"

as_root() { if [[ "$(id -u)" -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  as_root apt-get install -y "$@" || { as_root apt-get update && as_root apt-get install -y "$@"; }
}
command -v hyperfine >/dev/null || apt_install hyperfine

cargo build --release -p pev
pev="${CARGO_TARGET_DIR:-$root/target}/release/pev"
[[ "$pev" = /* ]] || pev="$root/$pev"

# The mock servers this script started, stopped on exit (by pid).
mock_pids=()
cleanup() { for pid in "${mock_pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# start_mock NAME ARGS...: starts bench/mock_model.py ARGS and waits for its port in $out/NAME.port.
start_mock() {
  local name="$1"
  shift
  rm -f "$out/$name.port"
  python3 bench/mock_model.py "$@" >"$out/$name.port" 2>"$out/$name.err" &
  mock_pids+=("$!")
  for _ in $(seq 100); do
    grep -q '^port ' "$out/$name.port" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "mock $name did not start:" >&2
  cat "$out/$name.err" >&2
  exit 1
}
port_of() { awk '/^port /{print $2; exit}' "$out/$1.port"; }

# workspace DIR URL-or-SCRIPTDIR: a fresh workspace whose pev.toml sends the roles there.
workspace() {
  local ws="$1" where="$2"
  rm -rf "$ws"
  mkdir -p "$ws"
  local role model
  for role in planner executor verifier; do
    case "$role" in
      planner) model=claude-opus-4-6 ;;
      executor) model=claude-sonnet-4-5 ;;
      verifier) model=claude-haiku-4-5 ;;
    esac
    if [[ "$where" = http* ]]; then
      printf '[roles.%s]\nprovider = "anthropic"\nmodel = "%s"\nbase_url = "%s"\n\n' \
        "$role" "$model" "$where"
    else
      printf '[roles.%s]\nprovider = "script:%s/%s.json"\nmodel = "%s"\n\n' \
        "$role" "$where" "$role" "$model"
    fi
  done >"$ws/pev.toml"
}

goal="Write the 8 part files"

echo "## machine"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
free -h | sed -n '1,2p'
echo "rustc: $(rustc --version); hyperfine: $(hyperfine --version); $(python3 --version)"
echo "pev: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ' + uncommitted changes in crates/')"

# ---------------------------------------------------------------------------------------------
if [[ " $parts " = *" a "* ]]; then
echo "## (a) 8 independent instruction steps, 200 ms per model call"
steps=8 turns=3 judge=1 delay_ms=200
start_mock parallel --delay-ms "$delay_ms" --steps "$steps" --turns "$turns" --judge
url="http://127.0.0.1:$(port_of parallel)"
ws="$root/$out/ws-parallel"
workspace "$ws" "$url"
reset="rm -rf $ws/.pev $ws/out"

$reset
curl -sf -X POST "$url/reset" >/dev/null
env -i PATH="$PATH" ANTHROPIC_API_KEY=bench-key "$pev" agent "$goal" --workspace "$ws" --json --jobs 8 \
  >"$out/parallel-j8.jsonl" 2>"$out/parallel-j8.err" \
  || { echo "pev exited $?"; cat "$out/parallel-j8.err"; exit 1; }
curl -sf "$url/stats" >"$out/parallel-j8.stats.json"
python3 - "$out" "$steps" "$turns" "$judge" "$delay_ms" <<'PY'
import json, sys
out, steps, turns, judge, delay_ms = sys.argv[1], *map(int, sys.argv[2:5]), float(sys.argv[5])
events = [json.loads(line) for line in open(f"{out}/parallel-j8.jsonl")]
result = events[-1]["result"]
stats = json.load(open(f"{out}/parallel-j8.stats.json"))
expected = {"planner": 1, "executor": steps * turns, "verifier": steps * judge}
got = {k: stats["calls"].get(k, 0) for k in expected}
assert result["status"] == "success", result["reasons"]
assert got == expected, f"the mock counted {got}, the script implies {expected}"
running = peak = 0
for e in events:
    if e["event"] == "step.started":
        running += 1
        peak = max(peak, running)
    elif e["event"] == "step.finished":
        running -= 1
critical = delay_ms / 1000 * (1 + turns + judge)
serial = delay_ms / 1000 * (1 + steps * (turns + judge))
json.dump({"critical_j8": critical, "critical_j1": serial}, open(f"{out}/critical.json", "w"))
print(f"status {result['status']}, calls {got}, at most {peak} steps running at once, "
      f"duration_ms {result['duration_ms']} (the run after planning), "
      f"mean time in the mock per call {stats['busy_s'] / stats['total'] * 1000:.1f} ms")
print(f"critical path: --jobs 8 {critical:.2f} s, --jobs 1 {serial:.2f} s")
PY

for jobs in 8 1; do
  hyperfine --style basic -N --warmup 1 --runs "$runs" --prepare "$reset" \
    --export-json "$out/hyperfine-parallel-j$jobs.json" -n "pev agent, 8 steps x (3 turns + judge), --jobs $jobs" \
    "env -i PATH=$PATH ANTHROPIC_API_KEY=bench-key $pev agent '$goal' --workspace $ws --json --jobs $jobs"
done
$reset
fi

# ---------------------------------------------------------------------------------------------
if [[ " $parts " = *" b "* ]]; then
echo "## (b) harness overhead per model call (instant mock, --jobs 1)"
for t in 2 12; do
  start_mock "instant-t$t" --delay-ms 0 --steps 8 --turns "$t" --judge
  workspace "$root/$out/ws-http-t$t" "http://127.0.0.1:$(port_of "instant-t$t")"
  python3 bench/mock_model.py --write-scripts "$root/$out/script-t$t" --steps 8 --turns "$t" --judge
  workspace "$root/$out/ws-script-t$t" "$root/$out/script-t$t"
done
python3 - "$pev" "$out" "$runs_b" "$goal" "$(port_of instant-t2)" "$(port_of instant-t12)" <<'PY'
import json, os, shutil, statistics, subprocess, sys, time, urllib.request
pev, out, runs, goal, port2, port12 = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
env = {"PATH": os.environ["PATH"], "ANTHROPIC_API_KEY": "bench-key"}

def once(ws, port):
    for d in (".pev", "out"):
        shutil.rmtree(os.path.join(ws, d), ignore_errors=True)
    if port:
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/reset", method="POST")).read()
    # The deletions above (and the last run's writes) go to disk before the clock starts.
    os.sync()
    start = time.perf_counter()
    p = subprocess.run([pev, "agent", goal, "--workspace", ws, "--json", "--jobs", "1"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    result = json.loads(p.stdout.decode().splitlines()[-1])["result"]
    assert p.returncode == 0 and result["status"] == "success", (p.returncode, p.stderr.decode()[-2000:])
    busy = 0.0
    if port:
        stats = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/stats").read())
        assert stats["total"] == result["usage"]["llm_calls"], (stats, result["usage"])
        busy = stats["busy_s"]
    return wall, busy, result["usage"]["llm_calls"], result["usage"]["tool_calls"]

rows = {}
for kind in ("http", "script"):
    for t, port in ((2, port2), (12, port12)):
        ws = os.path.join(out, f"ws-{kind}-t{t}")
        once(ws, port if kind == "http" else None)  # warm-up
        samples = [once(ws, port if kind == "http" else None) for _ in range(runs)]
        walls = [s[0] for s in samples]
        busy = statistics.mean(s[1] for s in samples)
        calls, tools = samples[0][2], samples[0][3]
        rows[(kind, t)] = (statistics.mean(walls), statistics.stdev(walls), min(walls), max(walls),
                           busy, calls, tools, statistics.median(walls))
json.dump({f"{k}-t{t}": v for (k, t), v in rows.items()}, open(os.path.join(out, "overhead.json"), "w"), indent=1)

print(f"{runs} runs each, after 1 warm-up")
print("| provider | turns per step | model calls | tool calls | wall mean ± σ (ms) | median (ms) | min … max (ms) | in the mock (ms) | (mean wall − mock) / call (ms) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for (kind, t), (mean, sd, lo, hi, busy, calls, tools, med) in rows.items():
    print(f"| {'anthropic over HTTP' if kind == 'http' else 'script (no HTTP)'} | {t} | {calls} | {tools} | "
          f"{mean*1000:.1f} ± {sd*1000:.1f} | {med*1000:.1f} | {lo*1000:.1f} … {hi*1000:.1f} | {busy*1000:.1f} | "
          f"{(mean - busy) / calls * 1000:.3f} |")
for kind in ("http", "script"):
    a, b = rows[(kind, 2)], rows[(kind, 12)]
    by_mean = ((b[0] - b[4]) - (a[0] - a[4])) / (b[5] - a[5])
    by_median = ((b[7] - b[4]) - (a[7] - a[4])) / (b[5] - a[5])
    print(f"marginal cost per model call ({kind}): {by_mean*1000:.3f} ms from the means, "
          f"{by_median*1000:.3f} ms from the medians "
          f"(each extra call is one executor turn plus one journaled file.read)")
PY
fi
