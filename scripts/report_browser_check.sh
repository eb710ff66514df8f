#!/usr/bin/env bash
# `pev report` in a real browser (headless Chromium, the Debian `chromium` package): a run whose
# step writes `<script>` into a file and prints it, reported, rendered, its DOM checked (the
# steps, statuses and the diff are there; the injected script did not run: the title is pev's)
# and a screenshot written. Outside `cargo test` (Chromium is a ~100 MB install):
#   apt-get install -y --no-install-recommends chromium
#   PEV=target/debug/pev scripts/report_browser_check.sh [OUT_DIR]
set -euo pipefail
pev="$(realpath "${PEV:-target/debug/pev}")"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
out="$(realpath "$out")"
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)"
[[ -n "$browser" ]] || { echo "no chromium on PATH (apt-get install -y chromium)"; exit 2; }
ws="$(mktemp -d)"
trap 'rm -rf "$ws"' EXIT
cat >"$ws/plan.json" <<'JSON'
{"goal": "Write a page <b>and</b> print it",
 "steps": [
  {"id": "page", "tool": "file.write",
   "parameters": {"path": "x.html", "content": "<script>document.title='pwned'</script>\n<p>hello</p>\n"},
   "assertions": [{"type": "file_contains", "path": "x.html", "pattern": "hello"}]},
  {"id": "print", "tool": "shell.exec", "parameters": {"command": "cat x.html"}, "depends_on": ["page"]},
  {"id": "missing", "tool": "file.read", "parameters": {"path": "nope.txt"}, "depends_on": ["page"], "on_fail": "continue"}
 ]}
JSON
(cd "$ws" && "$pev" run plan.json --yes >/dev/null 2>&1) || true
(cd "$ws" && "$pev" report last -o "$out/report.html")
flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run)
"$browser" "${flags[@]}" --dump-dom "file://$out/report.html" >"$out/dom.html" 2>/dev/null
"$browser" "${flags[@]}" --window-size=1280,1800 --screenshot="$out/report.png" "file://$out/report.html" >/dev/null 2>&1
fail=0
check() { if grep -q -- "$2" "$out/dom.html"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
check "the title is pev's (the injected script did not run)" "<title>pev run "
if grep -q "<title>pwned" "$out/dom.html"; then echo "FAIL the injected script ran"; fail=1; fi
check "the verdict" 'class="verdict s-partial"'
check "a node per step" 'class="node n-done"'
check "the failed step" 'class="node n-failed"'
check "the diff" 'class="add">+&lt;script&gt;'
check "the reasons" "Why it is not success"
[[ -s "$out/report.png" ]] && echo "ok   screenshot $out/report.png ($(stat -c %s "$out/report.png") bytes)" || { echo "FAIL no screenshot"; fail=1; }
exit "$fail"
