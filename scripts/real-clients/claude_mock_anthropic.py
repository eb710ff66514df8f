#!/usr/bin/env python3
"""A tiny, deterministic stand-in for the Anthropic Messages API (Python stdlib only).

It lets the real Claude Code CLI run offline against pev: point ANTHROPIC_BASE_URL at it.

    python3 claude_mock_anthropic.py --scenario honest --port 0 --port-file /tmp/port \
        --log /tmp/mock.jsonl --dump-dir /tmp/mock-bodies [--workspace /abs/ws]

Endpoints
  POST /v1/messages[?beta=true]        the model (SSE when "stream": true, JSON otherwise)
  POST /v1/messages/count_tokens       {"input_tokens": N}
  GET  /v1/models[/ID]                 a one-model list
  HEAD/GET anything else               200 {} (startup probes); POST anything else: 404 in the API's error shape

Requests are validated the way the real API does it, and a bad one gets a 400 with
{"type":"error","error":{"type":"invalid_request_error","message":...}} (and is logged as such):
model and max_tokens present, roles user/assistant, the first message from the user, every
tool_use answered by a tool_result in the very next user message and every tool_result
pointing at a tool_use of the previous assistant message, tool names ^[a-zA-Z0-9_-]{1,128}$,
unique, and input_schema an object schema with sane keywords.

Scenarios (the behaviour of the "model" on the main agent loop, i.e. requests whose tools
include a *plan_create tool; every other request, e.g. title generation or a quota probe,
gets a short text answer):
  honest  plan_create -> Write hello.txt -> step_update done -> postcondition_verify p1 -> final text
  early   plan_create -> "Done." every time it is asked to go on
  lazy    plan_create -> step_update done without writing (pev refuses) -> "Done." every time
The next action is derived only from the conversation in the request (which tool calls have
already been answered), so the same conversation always gets the same answer.
"""

import argparse
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

PLAN = {
    "objective": "Create hello.txt containing hi",
    "steps": [
        {
            "id": "write",
            "title": "Write hello.txt",
            "assertions": [{"type": "file_contains", "path": "hello.txt", "pattern": "hi"}],
        }
    ],
    "postconditions": [
        {
            "description": "hello.txt says hi",
            "assertions": [{"type": "file_contains", "path": "hello.txt", "pattern": "hi"}],
        }
    ],
}
STEP_DONE = {"id": "write", "status": "done", "evidence": "wrote hello.txt with the Write tool"}
POST_VERIFY = {"id": "p1", "evidence": "file says hi"}

TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}

ARGS = None
LOG_LOCK = threading.Lock()
COUNTER = {"n": 0}


class ApiError(Exception):
    def __init__(self, message, status=400, etype="invalid_request_error"):
        super().__init__(message)
        self.message = message
        self.status = status
        self.etype = etype


def log(entry):
    entry = dict(entry)
    entry["t"] = round(time.time(), 3)
    line = json.dumps(entry, ensure_ascii=False)
    with LOG_LOCK:
        if ARGS.log:
            with open(ARGS.log, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        if ARGS.verbose:
            print(line, file=sys.stderr, flush=True)


def next_id():
    with LOG_LOCK:
        COUNTER["n"] += 1
        return COUNTER["n"]


# ---------------------------------------------------------------- validation


def content_blocks(msg):
    c = msg.get("content")
    if isinstance(c, str):
        return [{"type": "text", "text": c}]
    if isinstance(c, list):
        return c
    raise ApiError("messages: content must be a string or a list of content blocks")


def check_schema(schema, where):
    if not isinstance(schema, dict):
        raise ApiError(f"{where}: JSON schema is invalid. It must match JSON Schema draft 2020-12")
    t = schema.get("type")
    if t is not None:
        ts = t if isinstance(t, list) else [t]
        for x in ts:
            if x not in JSON_TYPES:
                raise ApiError(f"{where}: JSON schema is invalid. It must match JSON Schema draft 2020-12 (type {x!r})")
    req = schema.get("required")
    if req is not None and not (isinstance(req, list) and all(isinstance(r, str) for r in req)):
        raise ApiError(f"{where}.required: JSON schema is invalid. It must match JSON Schema draft 2020-12")
    props = schema.get("properties")
    if props is not None:
        if not isinstance(props, dict):
            raise ApiError(f"{where}.properties: JSON schema is invalid. It must match JSON Schema draft 2020-12")
        for k, v in props.items():
            check_schema(v, f"{where}.properties.{k}")
    for key in ("items", "additionalProperties", "not", "if", "then", "else"):
        v = schema.get(key)
        if isinstance(v, dict):
            check_schema(v, f"{where}.{key}")
        elif v is not None and not isinstance(v, bool):
            raise ApiError(f"{where}.{key}: JSON schema is invalid. It must match JSON Schema draft 2020-12")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        v = schema.get(key)
        if v is not None:
            if not isinstance(v, list):
                raise ApiError(f"{where}.{key}: JSON schema is invalid. It must match JSON Schema draft 2020-12")
            for i, s in enumerate(v):
                check_schema(s, f"{where}.{key}.{i}")
    for key in ("$defs", "definitions"):
        v = schema.get(key)
        if isinstance(v, dict):
            for k, s in v.items():
                check_schema(s, f"{where}.{key}.{k}")


def validate(body, betas=""):
    if not isinstance(body, dict):
        raise ApiError("body: Input should be an object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError("model: Field required")
    mt = body.get("max_tokens")
    if not isinstance(mt, int) or isinstance(mt, bool) or mt < 1:
        raise ApiError("max_tokens: Field required" if mt is None else "max_tokens: Input should be a positive integer")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ApiError("messages: at least one message is required")
    tools = body.get("tools") or []
    names = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ApiError(f"tools.{i}: Input should be an object")
        if tool.get("type") not in (None, "custom"):
            continue  # server tools (web_search_20250305, ...) have their own shapes
        name = tool.get("name")
        if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            raise ApiError(f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
        if name in names:
            raise ApiError(f"tools: Tool names must be unique.")
        names.add(name)
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise ApiError(f"tools.{i}.custom.input_schema: Field required")
        if schema.get("type") != "object":
            raise ApiError(f"tools.{i}.custom.input_schema.type: Input should be 'object'")
        check_schema(schema, f"tools.{i}.custom.input_schema")
    prev_role = None
    prev_tool_use_ids = []
    # Claude Code 2.1.x sends the beta "mid-conversation-system-2026-04-07" and then puts
    # {"role": "system", "content": "..."} messages (e.g. hook context) between the turns.
    mid_system = "mid-conversation-system" in betas
    for i, m in enumerate(msgs):
        role = m.get("role") if isinstance(m, dict) else None
        if role == "system" and mid_system and i > 0:
            if not isinstance(m.get("content"), (str, list)):
                raise ApiError(f"messages.{i}.content: Input should be a string or a list")
            continue  # neutral: neither a turn nor a break in tool_use/tool_result pairing
        if role not in ("user", "assistant"):
            raise ApiError(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise ApiError("messages: first message must use the \"user\" role")
        blocks = content_blocks(m)
        if role == "assistant":
            if prev_tool_use_ids:
                raise ApiError(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(prev_tool_use_ids)}. Each `tool_use` block must have a corresponding `tool_result` "
                    f"block in the next message."
                )
            ids = []
            for b in blocks:
                if b.get("type") == "tool_use":
                    if not isinstance(b.get("id"), str) or not isinstance(b.get("input"), dict):
                        raise ApiError(f"messages.{i}.content: tool_use blocks need an id and an object input")
                    ids.append(b["id"])
            if prev_role == "assistant":
                ids = prev_tool_use_ids + ids  # consecutive turns are merged by the API
            prev_tool_use_ids = ids
        else:
            results = [b for b in blocks if b.get("type") == "tool_result"]
            seen = {b.get("tool_use_id") for b in results}
            for b in results:
                if b.get("tool_use_id") not in prev_tool_use_ids:
                    raise ApiError(
                        f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{b.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` "
                        f"block in the previous message."
                    )
            missing = [t for t in prev_tool_use_ids if t not in seen]
            if missing:
                raise ApiError(
                    f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
                    f"in the next message."
                )
            prev_tool_use_ids = []
        prev_role = role
    if prev_tool_use_ids and msgs[-1].get("role") == "assistant":
        pass  # a prefill ending in tool_use would be rejected by the real API too, but CC never sends it
    return body


# ---------------------------------------------------------------- the model


def text_of(block_or_content):
    if isinstance(block_or_content, str):
        return block_or_content
    if isinstance(block_or_content, list):
        return "\n".join(text_of(b) for b in block_or_content)
    if isinstance(block_or_content, dict):
        if block_or_content.get("type") == "text":
            return block_or_content.get("text", "")
        if block_or_content.get("type") == "tool_result":
            return text_of(block_or_content.get("content", ""))
    return ""


def system_text(body):
    s = body.get("system")
    if isinstance(s, str):
        return s
    if isinstance(s, list):
        return "\n".join(b.get("text", "") for b in s if isinstance(b, dict))
    return ""


def since_last_assistant(body):
    """The text of every user/system message after the last assistant turn (hook feedback lands here)."""
    out = []
    for m in reversed(body["messages"]):
        if m.get("role") == "assistant":
            break
        out.append(text_of(m.get("content")))
    return "\n".join(reversed(out))


def find_tool(tools, suffix):
    for t in tools:
        n = t.get("name", "")
        if n == suffix or n.endswith("__" + suffix):
            return n
    return None


def workspace_of(body):
    if ARGS.workspace:
        return ARGS.workspace
    texts = [system_text(body)] + [text_of(m.get("content")) for m in body.get("messages", []) if m.get("role") == "user"]
    for t in texts:
        m = re.search(r"(?:Primary working directory|Working directory|cwd):\s*(\S+)", t)
        if m:
            return m.group(1)
    return os.getcwd()


def conversation_state(body):
    """Which tools (by suffix) were called, and their results (text, is_error), in order."""
    calls = []  # (name, id, input)
    results = {}
    for m in body["messages"]:
        for b in content_blocks(m):
            if b.get("type") == "tool_use":
                calls.append((b.get("name", ""), b.get("id"), b.get("input")))
            elif b.get("type") == "tool_result":
                results[b.get("tool_use_id")] = (text_of(b.get("content", "")), bool(b.get("is_error")))
    return calls, results


def called(calls, results, suffix):
    return [(n, i, inp, results.get(i)) for (n, i, inp) in calls if n == suffix or n.endswith("__" + suffix)]


def decide(body):
    """Returns (kind, payload, note): kind 'text' -> str, kind 'tool' -> (name, input)."""
    tools = body.get("tools") or []
    plan_create = find_tool(tools, "plan_create")
    last_user = since_last_assistant(body)
    calls, results = conversation_state(body)
    if not plan_create:
        if find_tool(tools, "Write") is None:
            # A side request (title, summary, quota probe, ...), not the agent loop.
            return "text", "OK", "side"
        # The agent loop, but pev's tools are not there (yet): Claude Code connects MCP servers
        # asynchronously in -p mode and offers WaitForMcpServers meanwhile. A model that needs
        # pev's tools calls it (at most 3 times).
        if find_tool(tools, "WaitForMcpServers") and len(called(calls, results, "WaitForMcpServers")) < 3:
            return "tool", ("WaitForMcpServers", {}), "no-pev-tools:wait"
        return "text", "I cannot plan: pev's tools are not available.", "no-pev-tools"
    step_update = find_tool(tools, "step_update")
    post_verify = find_tool(tools, "postcondition_verify")
    blocked = "pev" in last_user and ("block" in last_user.lower() or "stop hook" in last_user.lower())
    note = "blocked-feedback" if blocked else ""
    sc = ARGS.scenario
    if not called(calls, results, "plan_create"):
        return "tool", (plan_create, PLAN), note
    if sc == "early":
        return "text", "Done.", note
    if sc == "lazy":
        if not called(calls, results, "step_update"):
            return "tool", (step_update, STEP_DONE), note
        return "text", "Done.", note
    # honest
    if not called(calls, results, "Write"):
        path = os.path.join(workspace_of(body), "hello.txt")
        return "tool", ("Write", {"file_path": path, "content": "hi\n"}), note
    if not called(calls, results, "step_update"):
        return "tool", (step_update, STEP_DONE), note
    if not called(calls, results, "postcondition_verify"):
        return "tool", (post_verify, POST_VERIFY), note
    return "text", "Created hello.txt containing hi; the step and the postcondition are verified.", note


def estimate_tokens(body):
    return max(1, len(json.dumps(body)) // 4)


def build_blocks(kind, payload, n):
    if kind == "text":
        return [{"type": "text", "text": payload}], "end_turn"
    name, inp = payload
    return [
        {"type": "text", "text": f"Calling {name}."},
        {"type": "tool_use", "id": f"toolu_mock{n:04d}_{re.sub('[^A-Za-z0-9]', '', name)[-20:]}", "name": name, "input": inp},
    ], "tool_use"


# ---------------------------------------------------------------- HTTP


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock-anthropic/1.0"

    def log_message(self, fmt, *a):  # silence the default stderr log
        pass

    def _send(self, status, obj, extra_headers=None):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_mock{next_id():06d}")
        for k, v in (extra_headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status, etype, message):
        self._send(status, {"type": "error", "error": {"type": etype, "message": message}})

    def _read_body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        return raw

    def do_HEAD(self):
        log({"method": "HEAD", "path": self.path})
        self._send(200, {})

    def do_GET(self):
        path = urlparse(self.path).path
        log({"method": "GET", "path": self.path})
        if path.startswith("/v1/models"):
            m = {"type": "model", "id": "claude-sonnet-4-5", "display_name": "Mock", "created_at": "2025-01-01T00:00:00Z"}
            if path.rstrip("/") == "/v1/models":
                self._send(200, {"data": [m], "has_more": False, "first_id": m["id"], "last_id": m["id"]})
            else:
                m["id"] = path.rsplit("/", 1)[-1]
                self._send(200, m)
            return
        self._send(200, {})

    def do_POST(self):
        path = urlparse(self.path).path
        raw = self._read_body()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            log({"method": "POST", "path": self.path, "error": "invalid json"})
            return self._error(400, "invalid_request_error", "Request body is not valid JSON")
        n = next_id()
        if ARGS.dump_dir:
            os.makedirs(ARGS.dump_dir, exist_ok=True)
            with open(os.path.join(ARGS.dump_dir, f"req-{n:04d}.json"), "w") as f:
                json.dump({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()
                                                           if k.lower() not in ("x-api-key", "authorization")},
                           "body": body}, f, indent=1)
        if path == "/v1/messages/count_tokens":
            log({"method": "POST", "path": self.path, "n": n, "count_tokens": True})
            return self._send(200, {"input_tokens": estimate_tokens(body)})
        if path != "/v1/messages":
            log({"method": "POST", "path": self.path, "n": n, "status": 404})
            return self._error(404, "not_found_error", f"Not found: {path}")
        summary = {
            "method": "POST", "path": self.path, "n": n, "model": body.get("model"), "stream": body.get("stream"),
            "max_tokens": body.get("max_tokens"), "messages": len(body.get("messages") or []),
            "tools": [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)],
        }
        if len(summary["tools"]) > 12:
            pev_tools = [t for t in summary["tools"] if "pev" in t or "plan" in t]
            summary["tools"] = {"count": len(summary["tools"]), "pev": pev_tools,
                                "others": [t for t in summary["tools"] if t not in pev_tools]}
        try:
            validate(body, self.headers.get("anthropic-beta") or "")
        except ApiError as e:
            summary.update(status=e.status, error=e.message)
            log(summary)
            return self._error(e.status, e.etype, e.message)
        msgs = body["messages"]
        last = msgs[-1]
        summary["last_role"] = last.get("role")
        summary["since_assistant"] = since_last_assistant(body)[-800:]
        tr = [b for b in content_blocks(last) if b.get("type") == "tool_result"]
        if tr:
            summary["tool_results"] = [{"id": b.get("tool_use_id"), "is_error": b.get("is_error", False),
                                        "content": b.get("content")} for b in tr]
        kind, payload, note = decide(body)
        blocks, stop_reason = build_blocks(kind, payload, n)
        summary.update(status=200, answer=[b.get("name") or b.get("text") for b in blocks],
                       answer_inputs=[b.get("input") for b in blocks if b.get("type") == "tool_use"],
                       stop_reason=stop_reason, note=note)
        log(summary)
        msg_id = f"msg_mock{n:06d}"
        usage_in = estimate_tokens(body)
        out_tokens = max(1, len(json.dumps(blocks)) // 4)
        if not body.get("stream"):
            return self._send(200, {
                "id": msg_id, "type": "message", "role": "assistant", "model": body["model"], "content": blocks,
                "stop_reason": stop_reason, "stop_sequence": None,
                "usage": {"input_tokens": usage_in, "output_tokens": out_tokens,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
            })
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", f"req_mock{n:06d}")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

        def ev(name, data):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

        ev("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": body["model"], "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": usage_in, "output_tokens": 1, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}})
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                ev("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": {"type": "text", "text": ""}})
                if i == 0:
                    ev("ping", {"type": "ping"})
                t = b["text"]
                for j in range(0, len(t), 16):
                    ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                               "delta": {"type": "text_delta", "text": t[j:j + 16]}})
            else:
                ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                    "type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})
                js = json.dumps(b["input"])
                ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                           "delta": {"type": "input_json_delta", "partial_json": ""}})
                for j in range(0, len(js), 40):
                    ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                               "delta": {"type": "input_json_delta", "partial_json": js[j:j + 40]}})
            ev("content_block_stop", {"type": "content_block_stop", "index": i})
        ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                             "usage": {"output_tokens": out_tokens}})
        ev("message_stop", {"type": "message_stop"})


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default=os.environ.get("MOCK_SCENARIO", "honest"),
                    choices=["honest", "early", "lazy"])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=int(os.environ.get("MOCK_PORT", "0")))
    ap.add_argument("--port-file", help="write the bound port here once listening")
    ap.add_argument("--workspace", default=os.environ.get("MOCK_WORKSPACE"),
                    help="absolute workspace for the Write tool (default: parsed from the system prompt)")
    ap.add_argument("--log", default=os.environ.get("MOCK_LOG"), help="JSON-lines request log")
    ap.add_argument("--dump-dir", default=os.environ.get("MOCK_DUMP_DIR"), help="save every request body here")
    ap.add_argument("-v", "--verbose", action="store_true")
    ARGS = ap.parse_args()
    srv = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    port = srv.server_address[1]
    if ARGS.port_file:
        tmp = ARGS.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, ARGS.port_file)
    print(f"mock anthropic ({ARGS.scenario}) on http://{ARGS.host}:{port}", file=sys.stderr, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
