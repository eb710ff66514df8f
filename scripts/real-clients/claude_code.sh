#!/usr/bin/env bash
# Drive the REAL Claude Code CLI against pev, offline, with a local mock Anthropic model.
#
#   scripts/real-clients/claude_code.sh [--mode auto|plugin|project] [--keep] [--save-payloads] [--no-wrap]
#                                       [SCENARIO...]        (default: honest early lazy)
#
# For each scenario: a fresh workspace and HOME, `pev integrate claude --plugin DIR` (or project
# settings), claude_mock_anthropic.py as the model, `claude -p ... --output-format json`, then
# `pev gate status --session SID` and `pev show last`, and a PASS/FAIL line against the expectation.
#
# Environment:
#   PEV_BIN     pev binary      (default: $CARGO_TARGET_DIR/debug/pev, else /work/target-main/debug/pev, else target/debug/pev)
#   CLAUDE_BIN  claude binary   (default: /work/npm-clients/claude/node_modules/.bin/claude)
#   OUT_DIR     where runs go   (default: a mktemp dir, removed at the end unless --keep or a failure)
#   CLAUDE_EXTRA_ENV  extra VAR=value words for claude's environment (e.g. ENABLE_TOOL_SEARCH=true)
#
# --mode auto (default): the plugin first; if pev's tools never reach the model, project settings.
# --no-wrap: run pev directly instead of through claude_pev_logger.sh (no payload recording).
# --save-payloads: copy the recorded hook stdin/stdout and request excerpts to payloads/claude_*.json.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

if [ -z "${PEV_BIN:-}" ]; then
  for c in "${CARGO_TARGET_DIR:-/nonexistent}/debug/pev" /work/target-main/debug/pev "$REPO/target/debug/pev"; do
    [ -x "$c" ] && { PEV_BIN=$c; break; }
  done
fi
CLAUDE_BIN=${CLAUDE_BIN:-/work/npm-clients/claude/node_modules/.bin/claude}
[ -x "${PEV_BIN:-}" ] || { echo "pev binary not found (set PEV_BIN)" >&2; exit 2; }
[ -x "$CLAUDE_BIN" ] || { echo "claude not found at $CLAUDE_BIN (npm install --prefix /work/npm-clients/claude @anthropic-ai/claude-code)" >&2; exit 2; }
PEV_BIN=$(readlink -f "$PEV_BIN")

MODE=auto KEEP=0 SAVE=0 WRAP=1 SCENARIOS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) MODE=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --save-payloads) SAVE=1; shift ;;
    --no-wrap) WRAP=0; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    honest|early|lazy) SCENARIOS+=("$1"); shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ ${#SCENARIOS[@]} -eq 0 ] && SCENARIOS=(honest early lazy)
case "$MODE" in auto|plugin|project) ;; *) echo "--mode auto|plugin|project" >&2; exit 2 ;; esac
[ "$SAVE" = 1 ] && [ "$WRAP" = 0 ] && { echo "--save-payloads needs the wrapper (drop --no-wrap)" >&2; exit 2; }

OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/pev-claude.XXXXXX)}
mkdir -p "$OUT_DIR"
CLAUDE_VERSION=$(HOME=$OUT_DIR/version-home DISABLE_AUTOUPDATER=1 "$CLAUDE_BIN" --version 2>/dev/null)
echo "claude: $CLAUDE_BIN ($CLAUDE_VERSION)"
echo "pev:    $PEV_BIN ($("$PEV_BIN" --version))"
echo "runs:   $OUT_DIR"

MOCK_PID=
cleanup() { [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null; }
trap cleanup EXIT

# Point the generated hook commands and MCP server at the logging wrapper (same pev underneath).
wrap_config() {  # wrap_config FILE...
  [ "$WRAP" = 1 ] || return 0
  python3 - "$PEV_BIN" "$HERE/claude_pev_logger.sh" "$@" <<'PY'
import json, sys
pev, logger, files = sys.argv[1], sys.argv[2], sys.argv[3:]
for f in files:
    d = json.load(open(f))
    for name, srv in (d.get("mcpServers") or {}).items():
        if srv.get("command") == pev:
            srv["command"] = logger
            srv["args"] = ["mcp"] + srv.get("args", [])[1:] if srv.get("args", [""])[0] == "mcp" else srv.get("args", [])
    for groups in (d.get("hooks") or {}).values():
        for g in groups:
            for h in g.get("hooks", []):
                if h.get("command", "").startswith(pev + " "):
                    h["command"] = logger + h["command"][len(pev):]
    json.dump(d, open(f, "w"), indent=2)
PY
}

# run_claude R MODE SCENARIO -> R/claude.out, R/mock.jsonl, R/logs/
run_claude() {
  local R=$1 mode=$2 sc=$3
  rm -rf "$R"; mkdir -p "$R/ws" "$R/home" "$R/logs"
  local WS; WS=$(cd "$R/ws" && pwd -P)
  local extra=()
  if [ "$mode" = plugin ]; then
    "$PEV_BIN" integrate claude --plugin "$R/plugin" -w "$WS" >"$R/integrate.txt" 2>&1 || return 1
    wrap_config "$R/plugin/.mcp.json" "$R/plugin/hooks/hooks.json"
    extra=(--plugin-dir "$R/plugin")
  else
    "$PEV_BIN" integrate claude -w "$WS" >"$R/integrate.txt" 2>&1 || return 1
    wrap_config "$WS/.mcp.json" "$WS/.claude/settings.json"
  fi
  python3 "$HERE/claude_mock_anthropic.py" --scenario "$sc" --port-file "$R/port" --log "$R/mock.jsonl" \
    --dump-dir "$R/bodies" --workspace "$WS" >"$R/mock.err" 2>&1 &
  MOCK_PID=$!
  for _ in $(seq 100); do [ -s "$R/port" ] && break; sleep 0.1; done
  [ -s "$R/port" ] || { echo "mock did not start: $(cat "$R/mock.err")" >&2; return 1; }
  # A clean environment: a temp HOME (no user config), an API key (no OAuth), no telemetry/updater.
  # IS_SANDBOX=1: Claude Code refuses bypassPermissions as root otherwise.
  (cd "$WS" && env -i PATH="/usr/local/bin:/usr/bin:/bin" HOME="$R/home" TERM=dumb LANG=C.UTF-8 IS_SANDBOX=1 \
      ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$R/port")" ANTHROPIC_API_KEY=sk-ant-mock-0000 \
      DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
      PEV_BIN="$PEV_BIN" PEV_LOG_DIR="$R/logs" ${CLAUDE_EXTRA_ENV:-} \
      timeout 300 "$CLAUDE_BIN" -p "Create hello.txt containing hi" --output-format json \
        --permission-mode bypassPermissions --debug-file "$R/claude-debug.log" "${extra[@]}" \
      >"$R/claude.out" 2>"$R/claude.err")
  echo $? >"$R/claude.rc"
  kill "$MOCK_PID" 2>/dev/null; wait "$MOCK_PID" 2>/dev/null; MOCK_PID=
  return 0
}

pev_tools_offered() {  # did any model request carry pev's plan_create?
  python3 - "$1/mock.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    t = d.get("tools")
    names = t.get("pev", []) + t.get("others", []) if isinstance(t, dict) else (t or [])
    if any(n.endswith("__plan_create") for n in names):
        sys.exit(0)
sys.exit(1)
PY
}

FAILS=0
declare -A RESULT
for sc in "${SCENARIOS[@]}"; do
  R="$OUT_DIR/$sc"
  used=$MODE
  if [ "$MODE" = project ]; then
    run_claude "$R" project "$sc"
  else
    run_claude "$R" plugin "$sc"; used=plugin
    if [ "$MODE" = auto ] && ! pev_tools_offered "$R"; then
      echo "[$sc] the plugin did not bring pev's tools to the model; falling back to project settings"
      mv "$R" "$R.plugin-failed"
      run_claude "$R" project "$sc"; used=project
    fi
  fi
  WS=$(cd "$R/ws" && pwd -P)
  SID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("session_id",""))' "$R/claude.out" 2>/dev/null)
  "$PEV_BIN" gate status -w "$WS" --session "$SID" >"$R/status.json" 2>"$R/status.err" </dev/null; st_rc=$?
  "$PEV_BIN" gate status -w "$WS" >"$R/status-nosession.json" 2>"$R/status-nosession.err" </dev/null; st0_rc=$?
  "$PEV_BIN" show last -w "$WS" >"$R/show.txt" 2>&1 </dev/null
  verdict=$(python3 - "$sc" "$R" "$WS" "$st_rc" "$used" <<'PY'
import glob, json, os, sys
sc, R, WS, st_rc, used = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
fails, facts = [], []
def check(ok, what):
    (facts if ok else fails).append(what)
claude = {}
try:
    claude = json.load(open(f"{R}/claude.out"))
except Exception as e:
    fails.append(f"claude output is not JSON ({e})")
check(open(f"{R}/claude.rc").read().strip() == "0", "claude exit 0")
mock = [json.loads(l) for l in open(f"{R}/mock.jsonl")]
bad = [m for m in mock if m.get("status", 200) >= 400]
check(not bad, "no request rejected by the mock API" + (f": {bad[0].get('error')}" if bad else ""))
def names(m):
    t = m.get("tools")
    return t.get("pev", []) + t.get("others", []) if isinstance(t, dict) else (t or [])
offered = sorted({n for m in mock for n in names(m) if "pev" in n})
check(any(n.endswith("__plan_create") for n in offered), f"pev tools offered to the model ({', '.join(offered) or 'none'})")
answers = [(m.get("answer") or [None])[-1] for m in mock if m.get("path", "").startswith("/v1/messages?") or m.get("path") == "/v1/messages"]
results = [r for m in mock for r in m.get("tool_results") or []]
hooks = sorted(glob.glob(f"{R}/logs/hook-*.in.json"))
stops = []
for h in hooks:
    if h.endswith("-Stop.in.json"):
        out = open(h.replace(".in.json", ".out.json")).read().strip()
        stops.append(json.loads(out) if out else {})
blocks = [s for s in stops if s.get("decision") == "block"]
halts = [s for s in stops if s.get("continue") is False]
if not hooks:  # --no-wrap: no hook logs; count the refusals the model was sent, and how Claude Code ended
    blocks = [m for m in mock if "Stop hook feedback:" in (m.get("since_assistant") or "")]
    halts = [1] if claude.get("terminal_reason") == "stop_hook_prevented" else []
    stops = [{"continue": False}] if halts else []
try:
    status = json.load(open(f"{R}/status.json")).get("status")
except Exception:
    status = None
show = open(f"{R}/show.txt").read()
hello = os.path.join(WS, "hello.txt")
hello_txt = open(hello).read() if os.path.exists(hello) else None
refused = [r for r in results if r.get("is_error")]
if sc == "honest":
    check(len(blocks) == 0 and not halts, f"no stop refused (Stop answers: {[list(s) for s in stops]})")
    check(st_rc == 0 and status == "success", f"pev gate status exit {st_rc}, status {status} (want 0/success)")
    check(hello_txt == "hi\n", f"hello.txt is {hello_txt!r}")
    check("success" in show.splitlines()[0] if show else False, "pev show last: " + (show.splitlines()[0] if show else "(empty)"))
    check(not refused, f"no pev tool refused ({len(refused)} refused)")
elif sc == "early":
    check(len(blocks) == 3, f"stop refused {len(blocks)} times (want 3)")
    check(len(halts) == 1 and stops and stops[-1].get("continue") is False, "then stopped with continue:false")
    check(st_rc in (1, 3) and status in ("partial", "failed"), f"pev gate status exit {st_rc}, status {status} (want partial/failed)")
    check(status != "success", "never success")
else:  # lazy
    check(any("step_update refused" in str(r.get("content")) for r in refused), "step_update done without the file is refused (isError)")
    check(len(blocks) >= 1, f"stop refused {len(blocks)} times")
    check(st_rc != 0 and status != "success", f"pev gate status exit {st_rc}, status {status} (never success)")
    check(hello_txt is None, "hello.txt was not written")
print(json.dumps({"ok": not fails, "fails": fails, "facts": facts, "status": status, "status_rc": st_rc,
                  "blocks": len(blocks), "halts": len(halts), "mode": used,
                  "terminal_reason": claude.get("terminal_reason"), "result": claude.get("result"),
                  "session": claude.get("session_id")}))
PY
)
  RESULT[$sc]=$verdict
  ok=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["ok"])' "$verdict")
  python3 - "$sc" "$verdict" "$st0_rc" <<'PY'
import json, sys
sc, v, st0 = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
print(f"{'PASS' if v['ok'] else 'FAIL'} {sc:7s} mode={v['mode']} status={v['status']} (gate status exit {v['status_rc']}) "
      f"blocks={v['blocks']} halted={v['halts']} claude terminal_reason={v['terminal_reason']} result={v['result']!r}")
for f in v["facts"]:
    print(f"     ok   {f}")
for f in v["fails"]:
    print(f"     FAIL {f}")
print(f"     note `pev gate status -w WS` without --session: exit {st0}")
PY
  [ "$ok" = True ] || FAILS=$((FAILS + 1))
done

if [ "$SAVE" = 1 ]; then
  P="$HERE/payloads"; mkdir -p "$P"
  python3 - "$OUT_DIR" "$P" "$CLAUDE_VERSION" "${SCENARIOS[@]}" <<'PY'
import glob, json, os, re, sys
out, P, version, scs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
saved = []
def save(name, obj):
    path = os.path.join(P, name)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")
    saved.append(name)
for sc in scs:
    R = os.path.join(out, sc)
    for f in sorted(glob.glob(f"{R}/logs/hook-*.in.json")):
        m = re.match(r"hook-(\d+)-(\w+)\.in\.json", os.path.basename(f))
        n, ev = m.group(1), m.group(2)
        args = open(f.replace(".in.json", ".env")).readline().split(":", 1)[1].strip()
        stdout = open(f.replace(".in.json", ".out.json")).read()
        save(f"claude_{sc}_{n}_{ev}.json", json.load(open(f)))
        save(f"claude_{sc}_{n}_{ev}.out.json", {
            "_comment": f"pev's answer to claude_{sc}_{n}_{ev}.json (Claude Code {version}); argv: pev {args}",
            "argv": args.split(), "exit_code": int(open(f.replace(".in.json", ".rc")).read()),
            "stdout": json.loads(stdout) if stdout.strip() else None,
            "stderr": open(f.replace(".in.json", ".err.txt")).read()})
    # What the model saw: pev's tools as offered, and pev's tool results as sent back.
    bodies = sorted(glob.glob(f"{R}/bodies/req-*.json"))
    tools_saved = False
    results = []
    for b in bodies:
        d = json.load(open(b))["body"]
        if not isinstance(d, dict) or "messages" not in d:
            continue
        pev_tools = [t for t in d.get("tools") or [] if "pev" in t.get("name", "")]
        if pev_tools and not tools_saved and sc == scs[0]:
            save("claude_request_pev_tools.json", {"_comment": f"pev's tools in a /v1/messages request from Claude Code {version}",
                                                  "tool_names": [t["name"] for t in d["tools"]], "pev_tools": pev_tools})
            tools_saved = True
        uses = {blk["id"]: blk["name"] for m in d["messages"] if m.get("role") == "assistant" and isinstance(m.get("content"), list)
                for blk in m["content"] if blk.get("type") == "tool_use"}
        last = d["messages"][-1]
        if isinstance(last.get("content"), list):
            for blk in last["content"]:
                if blk.get("type") == "tool_result":
                    results.append({"tool": uses.get(blk["tool_use_id"]), **blk})
                if blk.get("type") == "text" and blk.get("text", "").startswith("Stop hook feedback"):
                    results.append({"stop_hook_feedback_message": last})
    save(f"claude_{sc}_model_saw.json", {"_comment": f"tool_result blocks (and Stop-hook feedback) Claude Code {version} sent to the model, scenario {sc}",
                                          "items": results})
print("saved", len(saved), "payload files to", P)
PY
fi

echo
for sc in "${SCENARIOS[@]}"; do
  python3 -c 'import json,sys; v=json.loads(sys.argv[2]); print(("PASS" if v["ok"] else "FAIL"), sys.argv[1], "->", v["status"], "exit", v["status_rc"])' "$sc" "${RESULT[$sc]}"
done
if [ "$FAILS" = 0 ] && [ "$KEEP" = 0 ]; then
  rm -rf "$OUT_DIR"
else
  echo "runs kept in $OUT_DIR"
fi
[ "$FAILS" = 0 ]
