#!/usr/bin/env bash
# Run pev under the REAL Codex CLI, offline, against a local mock of the OpenAI Responses API.
#
#   scripts/real-clients/codex.sh [--no-wrap] [--provider-first] [--save-payloads DIR] [SCENARIO...]
#
# SCENARIO: honest, early, lazy (default: all three). For each one:
#   1. a temp workspace (git init) and a temp CODEX_HOME;
#   2. `pev integrate codex --user` with CODEX_HOME set (pev's own files);
#   3. the script, as a user would, adds a model provider pointing at the mock to
#      CODEX_HOME/config.toml (top-level model/model_provider + [model_providers.mock]);
#      with --provider-first that config exists BEFORE `pev integrate` (pev must merge);
#   4. unless --no-wrap, pev's hook commands are wrapped by codex_gate_logger.sh (records
#      every hook payload and pev's answer) and `pev mcp` by codex_mcp_tee.sh (records the
#      JSON-RPC traffic); the wrappers change nothing else;
#   5. `codex exec --strict-config --dangerously-bypass-approvals-and-sandbox
#      --dangerously-bypass-hook-trust --skip-git-repo-check --json` (hooks run untrusted:
#      this flag is Codex's automation switch; pev never writes trust hashes);
#   6. `pev gate status -w WS` and `pev show last -w WS`, then PASS/FAIL with the reasons.
#
# Environment: PEV_BIN (default $CARGO_TARGET_DIR/debug/pev or /work/target-main/debug/pev),
# CODEX_BIN (default /work/npm-clients/codex/node_modules/.bin/codex), OUT (default a new
# /tmp/pev-codex.XXXXXX), CODEX_TIMEOUT seconds per run (default 300).
# --save-payloads DIR copies every hook payload Codex sent and pev's answer to
# DIR/codex_<scenario>_<NNN>_<event>.json / .out.json, and the first MCP lines (initialize,
# tools/list, tools/call) to DIR/codex_<scenario>_mcp_first_lines.json (test fixtures).
# Exit status: 0 when every scenario passed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
PEV_BIN=${PEV_BIN:-${CARGO_TARGET_DIR:-/work/target-main}/debug/pev}
CODEX_BIN=${CODEX_BIN:-/work/npm-clients/codex/node_modules/.bin/codex}
CODEX_TIMEOUT=${CODEX_TIMEOUT:-300}
wrap=1 save="" provider_first=0
scenarios=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-wrap) wrap=0 ;;
    --provider-first) provider_first=1 ;;
    --save-payloads) save=$2; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    honest|early|lazy) scenarios+=("$1") ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
[ ${#scenarios[@]} -eq 0 ] && scenarios=(honest early lazy)
[ -x "$PEV_BIN" ] || { echo "no pev binary at $PEV_BIN" >&2; exit 2; }
[ -x "$CODEX_BIN" ] || { echo "no codex at $CODEX_BIN (npm install --prefix /work/npm-clients/codex @openai/codex)" >&2; exit 2; }
PEV_BIN=$(readlink -f "$PEV_BIN")
OUT=${OUT:-$(mktemp -d /tmp/pev-codex.XXXXXX)}
mkdir -p "$OUT"
echo "pev:   $PEV_BIN ($("$PEV_BIN" --version))"
mkdir -p "$OUT/.codex-version-home"   # even --version writes CODEX_HOME/tmp: keep ~/.codex untouched
echo "codex: $CODEX_BIN ($(CODEX_HOME="$OUT/.codex-version-home" "$CODEX_BIN" --version 2>/dev/null | head -1))"
echo "out:   $OUT"

mock_pid=""
cleanup() { [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null; }
trap cleanup EXIT

# configure CODEX_HOME/config.toml: provider + (optionally) the wrappers
configure() { # home port R
  python3 - "$1" "$2" "$3" "$wrap" "$PEV_BIN" "$here" "$4" <<'PY'
import json, os, sys, tomllib
home, port, R, wrap, pev, here, what = sys.argv[1:]
top = ('# added by codex.sh: the mock Responses API\n'
       'model = "mock-model"\nmodel_provider = "mock"\n\n')
prov = (f'\n\n[model_providers.mock]\nname = "Mock Responses"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\nwire_api = "responses"\nenv_key = "MOCK_API_KEY"\n')
if what == "provider-only":  # before pev integrate: a user's existing config
    open(f"{home}/config.toml", "w").write(top + prov.lstrip())
    sys.exit(0)
cfg_p, hooks_p = f"{home}/config.toml", f"{home}/hooks.json"
cfg = open(cfg_p).read()
tomllib.loads(cfg)  # pev's file must be valid TOML
if wrap == "1":
    line = f'command = "{pev}"\nargs = ["mcp"]'
    assert line in cfg, "unexpected [mcp_servers.pev] shape:\n" + cfg
    cfg = cfg.replace(line, f'command = "{here}/codex_mcp_tee.sh"\nargs = []\n'
                      f'env = {{ PEV_BIN = "{pev}", PEV_MCP_LOG = "{R}/mcp" }}')
    hooks = json.load(open(hooks_p))
    for groups in hooks["hooks"].values():
        for g in groups:
            for h in g["hooks"]:
                assert h["command"].startswith(pev + " gate"), h
                rest = h["command"][len(pev + " gate"):]
                h["command"] = (f"env PEV_BIN={pev} PEV_HOOK_LOG={R}/hooks "
                                f"{here}/codex_gate_logger.sh{rest}")
    json.dump(hooks, open(hooks_p, "w"), indent=2)
if what == "all":
    cfg = top + cfg + prov
conf = tomllib.loads(cfg)
assert conf.get("model_provider") == "mock" and "mock" in conf.get("model_providers", {}), "provider lost"
assert "pev" in conf.get("mcp_servers", {}), "no [mcp_servers.pev]"
open(cfg_p, "w").write(cfg)
PY
}

fails=0
summary=()
for sc in "${scenarios[@]}"; do
  R="$OUT/$sc"; WS="$R/ws"; HOME_C="$R/codex-home"
  rm -rf "$R"; mkdir -p "$WS" "$HOME_C" "$R/hooks" "$R/mcp"
  git -C "$WS" init -q .
  echo; echo "=== $sc ($R)"
  python3 "$here/codex_mock_responses.py" --scenario "$sc" --log "$R/mock.jsonl" \
      --port-file "$R/port" 2> "$R/mock.err" &
  mock_pid=$!
  for _ in $(seq 50); do [ -s "$R/port" ] && break; sleep 0.1; done
  port=$(cat "$R/port")
  [ "$provider_first" = 1 ] && configure "$HOME_C" "$port" "$R" provider-only
  (cd "$WS" && CODEX_HOME="$HOME_C" "$PEV_BIN" integrate codex --user) > "$R/integrate.out" 2>&1
  echo "integrate rc=$?"
  cp "$HOME_C/config.toml" "$R/pev-config.toml"; cp "$HOME_C/hooks.json" "$R/pev-hooks.json"
  configure "$HOME_C" "$port" "$R" "$([ "$provider_first" = 1 ] && echo wrap-only || echo all)" || { echo "FAIL $sc: could not configure"; fails=$((fails+1)); continue; }
  start=$(date +%s)
  (cd "$WS" && CODEX_HOME="$HOME_C" MOCK_API_KEY=sk-mock timeout "$CODEX_TIMEOUT" "$CODEX_BIN" exec \
      --strict-config --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox \
      --dangerously-bypass-hook-trust --json -C "$WS" "Create hello.txt containing hi" \
      < /dev/null > "$R/codex.jsonl" 2> "$R/codex.err")
  codex_rc=$?
  kill "$mock_pid" 2>/dev/null; wait "$mock_pid" 2>/dev/null; mock_pid=""
  echo "codex exec rc=$codex_rc in $(( $(date +%s) - start ))s"
  sid=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    try: e = json.loads(l)
    except ValueError: continue
    if e.get("type") == "thread.started": print(e["thread_id"]); break' "$R/codex.jsonl" 2>/dev/null)
  echo "codex session (thread) id: ${sid:-?}"
  # as documented: the workspace only (no --session)
  "$PEV_BIN" gate status -w "$WS" > "$R/status-plain.json" 2> "$R/status-plain.err"
  plain_rc=$?
  echo "pev gate status -w WS: rc=$plain_rc $(head -c 200 "$R/status-plain.err")"
  # the session's run (what the verdict uses)
  "$PEV_BIN" gate status -w "$WS" --session "${sid:-none}" > "$R/status.json" 2> "$R/status.err"
  status_rc=$?
  "$PEV_BIN" show last -w "$WS" > "$R/show.txt" 2>&1
  echo "pev gate status -w WS --session $sid: rc=$status_rc status=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("status"))' "$R/status.json" 2>/dev/null) $(head -c 200 "$R/status.err")"
  sed 's/^/  show: /' "$R/show.txt" | head -25

  # judge
  verdict=$(python3 - "$sc" "$R" "$WS" "$codex_rc" "$status_rc" "$wrap" "$plain_rc" <<'PY'
import glob, json, os, sys
sc, R, WS, codex_rc, status_rc, wrap, plain_rc = sys.argv[1:]
codex_rc, status_rc, plain_rc = int(codex_rc), int(status_rc), int(plain_rc)
why, info = [], []
if status_rc == 0 and plain_rc != 0:
    info.append(f"NOTE (pev): `pev gate status -w WS` without --session exits {plain_rc} "
                f"({open(R + '/status-plain.err').read().strip()[:160]}) although the session's run succeeded")
def jl(p):
    out = []
    for l in open(p, errors="replace"):
        try: out.append(json.loads(l))
        except ValueError: pass
    return out
events = jl(f"{R}/codex.jsonl") if os.path.exists(f"{R}/codex.jsonl") else []
mock = jl(f"{R}/mock.jsonl")
answers = [m for m in mock if m.get("dir") == "answer"]
bad = [a for a in answers if a.get("status") != 200]
if bad: why.append(f"mock answered errors: {[(a['status'], a.get('error')) for a in bad][:3]}")
acts = [a["action"].get("name") or ("text:" + a["action"]["text"][:30]) for a in answers if "action" in a]
info.append("model actions: " + " -> ".join(acts))
errs = [a["action"]["text"] for a in answers if a.get("action", {}).get("text", "").startswith("ERROR")]
if errs: why.append(errs[0][:300])
# what the tool calls returned (from the next request's input)
outs = {}
for m in mock:
    if m.get("dir") == "request" and isinstance(m.get("body"), dict):
        items = m["body"].get("input") or []
        names = {i.get("call_id"): (i.get("namespace", "") + "/" + i.get("name", "")) for i in items
                 if i.get("type") in ("function_call", "custom_tool_call")}
        for i in items:
            if i.get("type") in ("function_call_output", "custom_tool_call_output"):
                outs[i["call_id"]] = (names.get(i["call_id"]), i.get("output"))
# hooks
hooks = []
if wrap == "1":
    for p in sorted(glob.glob(f"{R}/hooks/*.in.json")):
        base = p[:-len(".in.json")]
        ev = os.path.basename(base).split("-", 1)[1]
        out = open(base + ".out").read().strip() if os.path.exists(base + ".out") else ""
        rc = open(base + ".rc").read().strip() if os.path.exists(base + ".rc") else "?"
        try: ans = json.loads(out) if out else {}
        except ValueError: ans = {"_unparsable": out}
        hooks.append((ev, rc, ans))
    info.append("hooks: " + ", ".join(f"{e}(rc={rc}){':block' if a.get('decision')=='block' else ''}"
                                      f"{':continue=false' if a.get('continue') is False else ''}" for e, rc, a in hooks))
    if not hooks: why.append("no hook ran (hooks.json not loaded or not trusted?)")
    for e, rc, a in hooks:
        if rc != "0": why.append(f"hook {e} exited {rc}")
        if "_unparsable" in a: why.append(f"hook {e} printed non-JSON: {a['_unparsable'][:100]}")
# the Stop hook's refusals as Codex fed them back to the model (works without the wrappers too)
reqs = [m["body"] for m in mock if m.get("dir") == "request" and isinstance(m.get("body"), dict)]
def texts(body):
    for i in body.get("input") or []:
        if i.get("type") == "message" and isinstance(i.get("content"), list):
            for c in i["content"]:
                yield i.get("role"), c.get("text", "")
hook_prompts = [t for r, t in texts(reqs[-1]) if "<hook_prompt" in t] if reqs else []
info.append(f"Stop refusals fed back to the model: {len(hook_prompts)}")
session_ctx = any(r == "developer" and "pev checks your work" in t for r, t in texts(reqs[0])) if reqs else False
info.append(f"SessionStart additionalContext reached the model: {session_ctx}")
stops = [a for e, rc, a in hooks if e == "Stop"]
blocks = [a for a in stops if a.get("decision") == "block"]
halts = [a for a in stops if a.get("continue") is False]
mcp_errors = [v for v in outs.values() if v[0] and "pev" in v[0] and isinstance(v[1], str) and
              ("isError" in v[1] or "error" in v[1].lower()[:200])]
info.append(f"tool outputs: {[(n, (o if isinstance(o, str) else json.dumps(o))[:120]) for n, o in outs.values()]}")
ws_hello = os.path.exists(f"{WS}/hello.txt")
if sc == "honest":
    if codex_rc != 0: why.append(f"codex exit {codex_rc}")
    if not ws_hello: why.append("hello.txt not written")
    if blocks or halts: why.append(f"the gate refused an honest stop: {(blocks or halts)[0]}")
    if hook_prompts: why.append(f"a stop refusal reached the model: {hook_prompts[0][:200]}")
    if wrap == "1" and not stops: why.append("the Stop hook never ran")
    if status_rc != 0: why.append(f"pev gate status exit {status_rc} (want 0)")
elif sc == "early":
    if status_rc == 0: why.append("pev gate status says success for an early stop")
    if wrap == "1":
        if len(blocks) != 3: why.append(f"{len(blocks)} blocks (want 3)")
        if len(halts) != 1: why.append(f"{len(halts)} continue:false (want 1)")
    if len(hook_prompts) != 3: why.append(f"{len(hook_prompts)} refusals reached the model (want 3)")
elif sc == "lazy":
    if status_rc == 0: why.append("pev gate status says success for a lazy run")
    su = [o for n, o in outs.values() if n and n.endswith("step_update")]
    if not su: why.append("step_update was never answered")
    elif not any("isError" in str(o) or "refus" in str(o).lower() or "fail" in str(o).lower() for o in su):
        why.append(f"step_update was not refused: {str(su[0])[:200]}")
    if not hook_prompts: why.append("the gate never refused the stop")
print(json.dumps({"pass": not why, "why": why, "info": info}))
PY
)
  echo "$verdict" > "$R/verdict.json"
  python3 -c 'import json,sys; v=json.loads(sys.argv[1]); [print("  " + i[:600]) for i in v["info"]]; [print("  reason: " + w) for w in v["why"]]' "$verdict"
  if python3 -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1])["pass"] else 1)' "$verdict"; then
    summary+=("PASS $sc"); echo "PASS $sc"
  else
    summary+=("FAIL $sc"); echo "FAIL $sc"; fails=$((fails+1))
  fi
  if [ -n "$save" ] && [ "$wrap" = 1 ]; then
    # every hook payload (and pev's answer), like the claude_* fixtures:
    # codex_<scenario>_<NNN>_<event>.json and .out.json; plus the first MCP lines Codex sent
    mkdir -p "$save"
    rm -f "$save"/codex_"$sc"_*.json
    i=0
    for f in "$R"/hooks/*.in.json; do
      [ -e "$f" ] || continue
      b=${f%.in.json}; ev=${b##*/[0-9][0-9][0-9]-}
      n=$(printf '%03d' "$i"); i=$((i + 1))
      python3 -m json.tool "$f" > "$save/codex_${sc}_${n}_${ev}.json"
      [ -s "$b.out" ] && python3 -m json.tool "$b.out" > "$save/codex_${sc}_${n}_${ev}.out.json"
    done
    python3 - "$R" "$save" "$sc" <<'PY'
import glob, json, sys
R, save, sc = sys.argv[1:]
f = sorted(glob.glob(f"{R}/mcp/*.in"))
if f:
    lines = [json.loads(l) for l in open(f[0]) if l.strip()]
    outs = [json.loads(l) for l in open(f[0][:-3] + ".out") if l.strip()]
    json.dump({"client_to_server": lines[:4], "server_to_client_initialize": outs[:1]},
              open(f"{save}/codex_{sc}_mcp_first_lines.json", "w"), indent=2)
    # pev's tools as Codex offered them to the model (its first /v1/responses request)
    req = next(json.loads(l) for l in open(f"{R}/mock.jsonl") if '"body"' in l)
    tools = req["body"].get("tools") or []
    pev_ns = [t for t in tools if t.get("type") == "namespace" and "pev" in t.get("name", "")]
    listed = next((o["result"]["tools"] for o in outs if o.get("id") == 1 and "result" in o), [])
    json.dump({"_comment": "pev's tools in a /v1/responses request from Codex (codex_mock_responses.py log), "
                           "and the inputSchema sizes pev sent in tools/list",
               "codex_version": req["headers"].get("user-agent"),
               "tool_names": [t.get("name") or t.get("type") for t in tools],
               "pev_namespace_tool": pev_ns[0] if pev_ns else None,
               "pev_tools_list_input_schema_chars": {t["name"]: len(json.dumps(t["inputSchema"])) for t in listed}},
              open(f"{save}/codex_request_pev_tools.json", "w"), indent=2)
PY
    echo "  saved $i hook payloads + MCP first lines to $save/codex_${sc}_*"
  fi
done
echo; printf '%s\n' "${summary[@]}"
echo "(artifacts in $OUT; delete when done)"
exit $(( fails > 0 ))
