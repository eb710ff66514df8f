#!/usr/bin/env bash
# pev's traces against the official OTLP protobuf classes: runs the offline example agent with
# OTEL_EXPORTER_OTLP_ENDPOINT pointing at otlp_receiver.py (opentelemetry-proto from PyPI), then
# checks what arrived: one trace, the GenAI span names, every parent present. Then `pev export`
# replays the run to the same receiver and must give the same trace.
#
#   scripts/real-clients/otlp.sh [path/to/pev]      (downloads ~5 MB of Python packages once)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
pev="${1:-$repo/target/debug/pev}"
venv="${OTLP_VENV:-${TMPDIR:-/tmp}/pev-otlp-venv}"
[ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q opentelemetry-proto; }
work="$(mktemp -d)"
trap 'kill "$receiver" 2>/dev/null || true; rm -rf "$work"' EXIT
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$venv/bin/python" "$here/otlp_receiver.py" "$port" "$work/live.jsonl" &
receiver=$!
sleep 1
cp -r "$repo/examples/agent" "$work/agent"
OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port" \
  "$pev" agent "Change the site background to dark green" -w "$work/agent/site" >/dev/null 2>"$work/err"
mv "$work/live.jsonl" "$work/live.spans"
"$pev" export last -w "$work/agent/site" --otlp "http://127.0.0.1:$port" >/dev/null
python3 - "$work/live.spans" "$work/live.jsonl" <<'PY'
import json, sys
live = [json.loads(l) for l in open(sys.argv[1])]
replay = [json.loads(l) for l in open(sys.argv[2])]
ids = {s["spanId"]: s for s in live}
assert len({s["traceId"] for s in live}) == 1, "one trace"
names = {s["name"] for s in live}
for n in ["invoke_agent pev", "plan", "step patch-css", "verify patch-css", "execute_tool file.patch",
          "chat claude-opus-4-6", "chat claude-sonnet-4-5", "chat claude-haiku-4-5"]:
    assert n in names, (n, names)
for s in live:
    assert s["name"] == "invoke_agent pev" or s.get("parentSpanId") in ids, s["name"]
key = lambda s: (s["traceId"], s["spanId"], s["name"], s["startTimeUnixNano"], s["endTimeUnixNano"])
assert sorted(map(key, live)) == sorted(map(key, replay)), "the replay is the same trace"
print(f"ok: {len(live)} spans in one trace, decoded by opentelemetry-proto; pev export gives the same trace")
PY
