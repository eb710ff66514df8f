#!/usr/bin/env bash
# Traces (issues 15 and 32): for a 3-step and an N-step run (1,000 by default), the spans and
# bytes of one OTLP export, how long `pev export` takes to map the journal and send it to a
# loopback receiver, and what the live exporter costs the run: the same plan with traces off
# and with OTEL_EXPORTER_OTLP_ENDPOINT set, R rounds, each round running off and live back to
# back (which first alternates). The live cost is the median of the rounds' differences (a pair
# is seconds apart, so a load that drifts on a shared machine mostly cancels), in wall time and
# in CPU time (user + system, which the machine's load moves much less), each also as a share
# of the median run without traces.
#
# With BEFORE set to another pev (the binary before a change), every round runs both, in turn,
# so the two are measured side by side under the same load.
#
# --check: measures PEV's live cost on the N-step run (R=9 unless set) and exits 1 when its
# wall or CPU share of the run is more than 20% above the figures in bench/otel.baseline; a
# figure that is over is measured again, up to 3 times, before the check fails (the machine is
# shared). Not run by `cargo test`.
#
# Usage: PEV=target/release/pev [BEFORE=/path/to/pev-before] bench/otel.sh [--check]
#   env: N=1000 R=5
set -euo pipefail
: "${PEV:?set PEV to the pev to measure}"
check=0
[[ "${1:-}" == "--check" ]] && check=1
n="${N:-1000}"
rounds="${R:-$([[ $check == 1 ]] && echo 9 || echo 5)}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
# A receiver that reads each body, counts its bytes, and answers 200.
python3 - "$port" "$work/bytes" <<'PY' &
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        n = int(self.headers.get("content-length", "0")); self.rfile.read(n)
        with open(sys.argv[2], "a") as f:
            f.write(f"{n}\n")
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
receiver=$!
trap 'kill $receiver 2>/dev/null; rm -rf "$work"' EXIT
sleep 0.5
endpoint="http://127.0.0.1:$port"

# A workspace with the plan of `bench/report.sh` (N `file.write` steps in chains of 10, each
# with an assertion) and, outside it (pev ignores a policy a command could have written), a
# policy with the sandbox off.
setup() {
  local ws="$work/ws-$1"
  mkdir -p "$ws"
  python3 "$here/chain_plan.py" "$1" >"$ws/plan.json"
  printf "sandbox: off\nmax_steps: 100000\n" >"$work/policy.yaml"
}

# "<wall ms> <cpu ms>" of one run (CPU: user + system, children included): $1 pev, $2 steps,
# $3 off|live.
run_ms() {
  local ws="$work/ws-$2" s e
  local -a env_args=(env -u OTEL_EXPORTER_OTLP_ENDPOINT)
  [[ "$3" == live ]] && env_args=(env OTEL_EXPORTER_OTLP_ENDPOINT="$endpoint")
  rm -rf "$ws/out" "$ws/.pev"
  s=$(date +%s%N)
  local TIMEFORMAT="%3U %3S"
  { time (cd "$ws" && "${env_args[@]}" "$1" run plan.json --policy "$work/policy.yaml" --yes \
    >/dev/null 2>"$work/err") || { cat "$work/err" >&2; exit 1; }; } 2>"$work/cpu"
  e=$(date +%s%N)
  if grep -q "warning" "$work/err"; then cat "$work/err" >&2; fi
  echo "$(( (e - s) / 1000000 )) $(awk '{printf "%d", ($1 + $2) * 1000}' "$work/cpu")"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2))}'; }

# R rounds for each binary named in $@ on $steps steps; leaves "$work/<label>.off", ".live",
# ".diff" (wall ms, one line a round) and ".cpuoff", ".cpudiff" (CPU ms).
measure() {
  local steps=$1; shift
  for label in "$@"; do
    for f in off live diff cpuoff cpudiff; do : >"$work/$label.$f"; done
  done
  for round in $(seq "$rounds"); do
    for label in "$@"; do
      local bin="$PEV"; [[ "$label" == before ]] && bin="$BEFORE"
      local off live off_cpu live_cpu
      # Which of the pair runs first alternates, so an order effect cancels too.
      if (( round % 2 )); then
        read -r off off_cpu < <(run_ms "$bin" "$steps" off)
        read -r live live_cpu < <(run_ms "$bin" "$steps" live)
      else
        read -r live live_cpu < <(run_ms "$bin" "$steps" live)
        read -r off off_cpu < <(run_ms "$bin" "$steps" off)
      fi
      echo "$off" >>"$work/$label.off"; echo "$live" >>"$work/$label.live"
      echo $(( live - off )) >>"$work/$label.diff"
      echo "$off_cpu" >>"$work/$label.cpuoff"; echo $(( live_cpu - off_cpu )) >>"$work/$label.cpudiff"
    done
  done
}

# "<wall cost ms> <share %> <cpu cost ms> <cpu share %>" of binary $1 from the last measure.
cost() {
  local off diff cpuoff cpudiff
  off=$(median <"$work/$1.off"); diff=$(median <"$work/$1.diff")
  cpuoff=$(median <"$work/$1.cpuoff"); cpudiff=$(median <"$work/$1.cpudiff")
  echo "$diff $(awk -v d="$diff" -v o="$off" 'BEGIN {printf "%.1f", 100 * d / o}')" \
    "$cpudiff $(awk -v d="$cpudiff" -v o="$cpuoff" 'BEGIN {printf "%.1f", 100 * d / o}')"
}

if [[ $check == 1 ]]; then
  baseline="$here/otel.baseline"
  want=$(awk '$1 == "live_cost_pct" {print $2}' "$baseline")
  want_cpu=$(awk '$1 == "live_cpu_pct" {print $2}' "$baseline")
  limit=$(awk -v w="$want" 'BEGIN {printf "%.1f", w * 1.2}')
  limit_cpu=$(awk -v w="$want_cpu" 'BEGIN {printf "%.1f", w * 1.2}')
  setup "$n"
  for try in 1 2 3; do
    measure "$n" after
    read -r ms pct cpu_ms cpu_pct < <(cost after)
    echo "try $try: live cost ${ms} ms wall (${pct}% of the ${n}-step run; baseline ${want}%," \
      "limit ${limit}%), ${cpu_ms} ms CPU (${cpu_pct}%; baseline ${want_cpu}%, limit ${limit_cpu}%)"
    if awk -v p="$pct" -v l="$limit" -v c="$cpu_pct" -v m="$limit_cpu" \
      'BEGIN {exit !(p <= l && c <= m)}'; then
      echo "ok"
      exit 0
    fi
  done
  echo "FAIL: the live exporter's cost is more than 20% above bench/otel.baseline" >&2
  exit 1
fi

labels=(after)
[[ -n "${BEFORE:-}" ]] && labels=(before after)
echo "rounds: $rounds; medians; live cost: median of (live - off) over the rounds, wall and CPU"
echo
echo "| pev | run | spans | OTLP bytes (live requests) | \`pev export\` | run, traces off | run, traces live | live cost, wall | CPU, traces off | live cost, CPU |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for steps in 3 "$n"; do
  setup "$steps"
  measure "$steps" "${labels[@]}"
  for label in "${labels[@]}"; do
    bin="$PEV"; [[ "$label" == before ]] && bin="$BEFORE"
    # One live run more, to count what it sent.
    : >"$work/bytes"
    run_ms "$bin" "$steps" live >/dev/null
    requests=$(wc -l <"$work/bytes")
    : >"$work/bytes"
    s=$(date +%s%N)
    sent=$(cd "$work/ws-$steps" && "$bin" export last --otlp "$endpoint")
    e=$(date +%s%N)
    spans=$(echo "$sent" | sed -E 's/.*: ([0-9]+) span.*/\1/')
    bytes=$(awk '{s+=$1} END {print s+0}' "$work/bytes")
    read -r ms pct cpu_ms cpu_pct < <(cost "$label")
    echo "| $label | $steps steps | $spans | $(( bytes / 1024 )) KB ($requests) | $(( (e - s) / 1000000 )) ms | $(median <"$work/$label.off") ms | $(median <"$work/$label.live") ms | $ms ms ($pct %) | $(median <"$work/$label.cpuoff") ms | $cpu_ms ms ($cpu_pct %) |"
  done
done
