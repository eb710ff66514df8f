#!/usr/bin/env bash
# Traces (issue 15): for a 3-step and an N-step run (1,000 by default), the spans and bytes of
# one OTLP export, how long `pev export` takes to map the journal and send it to a loopback
# receiver, and the wall time of the run itself with and without the live exporter on (the same
# plan, best of 3 each).
# Usage: PEV=target/release/pev bench/otel.sh     env: N=1000
set -euo pipefail
: "${PEV:?set PEV to the pev to measure}"
n="${N:-1000}"
work="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
# A receiver that reads each body, counts its bytes, and answers 200.
python3 - "$port" "$work/bytes" <<'PY' &
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        n = int(self.headers.get("content-length", "0")); self.rfile.read(n)
        open(sys.argv[2], "a").write(f"{n}\n")
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
receiver=$!
trap 'kill $receiver 2>/dev/null; rm -rf "$work"' EXIT
sleep 0.5
ms() { echo $(( ($2 - $1) / 1000000 )); }
best() { sort -n | head -1; }
echo "| run | spans | OTLP bytes | pev export (map + encode + send) | run, traces off | run, traces live |"
echo "|---|---|---|---|---|---|"
for steps in 3 "$n"; do
  ws="$work/ws-$steps"
  mkdir -p "$ws"
  python3 "$(dirname "$0")/chain_plan.py" "$steps" >"$ws/plan.json"
  printf "sandbox: off\nmax_steps: 100000\n" >"$ws/policy.yaml"
  off=$(for _ in 1 2 3; do rm -rf "$ws/out" "$ws/.pev"; s=$(date +%s%N)
    (cd "$ws" && env -u OTEL_EXPORTER_OTLP_ENDPOINT "$PEV" run plan.json --policy policy.yaml --yes >/dev/null 2>&1); e=$(date +%s%N); ms "$s" "$e"; done | best)
  on=$(for _ in 1 2 3; do rm -rf "$ws/out" "$ws/.pev"; s=$(date +%s%N)
    (cd "$ws" && OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port" "$PEV" run plan.json --policy policy.yaml --yes >/dev/null 2>&1); e=$(date +%s%N); ms "$s" "$e"; done | best)
  : >"$work/bytes"
  s=$(date +%s%N)
  sent=$(cd "$ws" && "$PEV" export last --otlp "http://127.0.0.1:$port")
  e=$(date +%s%N)
  spans=$(echo "$sent" | sed -E 's/.*: ([0-9]+) span.*/\1/')
  bytes=$(awk '{s+=$1} END {print s+0}' "$work/bytes")
  echo "| $steps steps | $spans | $(( bytes / 1024 )) KB | $(ms "$s" "$e") ms | $off ms | $on ms |"
done
