#!/usr/bin/env bash
# Wraps `pev gate` for Codex hooks: records the exact hook payload Codex sends on stdin,
# pev's answer on stdout/stderr and the exit code, then replays pev's answer unchanged.
#   PEV_BIN         the pev binary (required)
#   PEV_HOOK_LOG    directory for the records (required); one file per invocation:
#                   NNN-<event>.in.json, .out, .err, .rc
# Arguments are passed to `pev gate` (e.g. --record).
set -u
dir="${PEV_HOOK_LOG:?}"
mkdir -p "$dir"
in=$(mktemp "$dir/.in.XXXXXX")
cat > "$in"
event=$(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1])).get("hook_event_name","unknown"))
except Exception: print("unparsable")' "$in")
n=$(ls "$dir" | grep -c '\.in\.json$' || true)
base=$(printf '%s/%03d-%s' "$dir" "$((n + 1))" "$event")
mv "$in" "$base.in.json"
printf '%s\n' "$*" > "$base.args"
env | grep -E '^(CODEX|PEV|CLAUDE)' | sed 's/=.*KEY.*/=…/' > "$base.env" || true
pwd > "$base.cwd"
"${PEV_BIN:?}" gate "$@" < "$base.in.json" > "$base.out" 2> "$base.err"
rc=$?
echo "$rc" > "$base.rc"
cat "$base.out"
cat "$base.err" >&2
exit "$rc"
