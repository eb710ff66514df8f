#!/usr/bin/env bash
# Wraps pev so the hook payloads Claude Code sends (and pev's answers) are recorded.
#   PEV_BIN=/path/to/pev PEV_LOG_DIR=/tmp/x claude_pev_logger.sh gate [--record]   (hooks)
#   PEV_BIN=/path/to/pev PEV_LOG_DIR=/tmp/x claude_pev_logger.sh mcp [...]         (MCP server: stdio tee'd)
# Each hook call leaves hook-NNN-<event>.{in.json,out.json,err.txt,rc,env} in $PEV_LOG_DIR.
set -u
PEV_BIN=${PEV_BIN:?set PEV_BIN}
DIR=${PEV_LOG_DIR:?set PEV_LOG_DIR}
mkdir -p "$DIR"
if [ "${1:-}" = mcp ]; then
  { echo "argv: $*"; echo "cwd: $PWD"; env | grep -E '^(CLAUDE|PEV)' | sort; } > "$DIR/mcp-start-$$.txt"
  # exec: Claude Code's SIGINT/SIGTERM at shutdown must reach pev itself, not a waiting shell.
  exec "$PEV_BIN" "$@" < <(tee -a "$DIR/mcp-in.jsonl") > >(tee -a "$DIR/mcp-out.jsonl") 2>>"$DIR/mcp-stderr.txt"
fi
in=$(cat)
n=$(ls "$DIR" | grep -c '^hook-.*\.in\.json$')
ev=$(printf '%s' "$in" | python3 -c 'import json,sys
try: print(json.load(sys.stdin).get("hook_event_name","unknown"))
except Exception: print("unparsable")')
base=$(printf '%s/hook-%03d-%s' "$DIR" "$n" "$ev")
printf '%s' "$in" > "$base.in.json"
{ echo "argv: $*"; echo "cwd: $PWD"; env | grep -E '^(CLAUDE|PEV)' | sort; } > "$base.env"
out=$(printf '%s' "$in" | "$PEV_BIN" "$@" 2>"$base.err.txt"); rc=$?
printf '%s' "$out" > "$base.out.json"
echo "$rc" > "$base.rc"
printf '%s' "$out"
exit "$rc"
