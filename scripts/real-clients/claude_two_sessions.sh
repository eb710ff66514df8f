#!/usr/bin/env bash
# Two REAL Claude Code sessions at once in ONE workspace, offline, each against its own local mock
# Anthropic model (issue 28: sessions never cross). Session A is honest (plans, writes
# hello.txt, records it); session B stops early ("Done." without recording its step). With
# pev's plugin (whose MCP server is given no session id), each must get its own run and its own
# verdict: A success, B refused at Stop and never success.
#
#   scripts/real-clients/claude_two_sessions.sh [--mode plugin|project] [--keep]
#
# Environment: PEV_BIN, CLAUDE_BIN as for claude_code.sh (npm install --prefix
# /work/npm-clients/claude @anthropic-ai/claude-code). Exit 0 when every check passes.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
if [ -z "${PEV_BIN:-}" ]; then
  for c in "${CARGO_TARGET_DIR:-/nonexistent}/debug/pev" "$REPO/target/debug/pev"; do
    [ -x "$c" ] && { PEV_BIN=$c; break; }
  done
fi
CLAUDE_BIN=${CLAUDE_BIN:-/work/npm-clients/claude/node_modules/.bin/claude}
[ -x "${PEV_BIN:-}" ] || { echo "pev binary not found (set PEV_BIN)" >&2; exit 2; }
[ -x "$CLAUDE_BIN" ] || { echo "claude not found at $CLAUDE_BIN" >&2; exit 2; }
PEV_BIN=$(readlink -f "$PEV_BIN")
MODE=plugin KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) MODE=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
OUT=$(mktemp -d /var/tmp/pev-claude2.XXXXXX)
WS="$OUT/ws"; mkdir -p "$WS"; WS=$(cd "$WS" && pwd -P)
echo "claude: $("$CLAUDE_BIN" --version 2>/dev/null)   pev: $("$PEV_BIN" --version)   runs: $OUT"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; [ "$KEEP" = 1 ] || rm -rf "$OUT"; }
trap cleanup EXIT

extra=()
if [ "$MODE" = plugin ]; then
  "$PEV_BIN" integrate claude --plugin "$OUT/plugin" -w "$WS" >"$OUT/integrate.txt" 2>&1 || { cat "$OUT/integrate.txt"; exit 1; }
  extra=(--plugin-dir "$OUT/plugin")
else
  "$PEV_BIN" integrate claude -w "$WS" >"$OUT/integrate.txt" 2>&1 || { cat "$OUT/integrate.txt"; exit 1; }
fi

start_session() {  # start_session NAME SCENARIO
  local name=$1 sc=$2 R="$OUT/$1"
  mkdir -p "$R/home"
  python3 "$HERE/claude_mock_anthropic.py" --scenario "$sc" --port-file "$R/port" --log "$R/mock.jsonl" \
    --dump-dir "$R/bodies" --workspace "$WS" >"$R/mock.err" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do [ -s "$R/port" ] && break; sleep 0.1; done
  (cd "$WS" && env -i PATH="/usr/local/bin:/usr/bin:/bin" HOME="$R/home" TERM=dumb LANG=C.UTF-8 IS_SANDBOX=1 \
      ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$R/port")" ANTHROPIC_API_KEY=sk-ant-mock-0000 \
      DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
      timeout 300 "$CLAUDE_BIN" -p "Create hello.txt containing hi" --output-format json \
        --permission-mode bypassPermissions "${extra[@]}" >"$R/claude.out" 2>"$R/claude.err"; echo $? >"$R/claude.rc") &
  PIDS+=($!)
}

start_session a honest
start_session b early
wait "${PIDS[1]}" "${PIDS[3]}"

python3 - "$OUT" "$WS" "$PEV_BIN" <<'PY'
import json, subprocess, sys
out, ws, pev = sys.argv[1:4]
fails = []
def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)
sessions = {}
for name in ("a", "b"):
    try:
        sessions[name] = json.load(open(f"{out}/{name}/claude.out")).get("session_id")
    except Exception as e:
        sessions[name] = None
        check(False, f"session {name}: claude output is not JSON ({e})")
check(all(sessions.values()) and sessions["a"] != sessions["b"], f"two sessions: {sessions}")
runs = [json.loads(l) for l in subprocess.run([pev, "runs", "--json", "-w", ws], capture_output=True, text=True).stdout.splitlines() if l.strip()]
check(len(runs) == 2, f"two runs in the workspace's journal ({len(runs)})")
status = {}
for name, sid in sessions.items():
    r = subprocess.run([pev, "gate", "status", "-w", ws, "--session", sid or "-"], capture_output=True, text=True)
    try:
        status[name] = json.loads(r.stdout)
    except Exception:
        status[name] = {}
ids = {n: s.get("run_id") for n, s in status.items()}
check(ids["a"] and ids["b"] and ids["a"] != ids["b"], f"each session has its own run: {ids}")
check(status["a"].get("status") == "success", f"A (honest) is success: {status['a'].get('status')}")
check(status["b"].get("status") in ("partial", "failed"), f"B (stopped early) is not success: {status['b'].get('status')}")
sys.exit(1 if fails else 0)
PY
rc=$?
[ $rc -ne 0 ] && KEEP=1 && echo "kept: $OUT"
exit $rc
