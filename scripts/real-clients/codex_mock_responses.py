#!/usr/bin/env python3
"""A local stand-in for the OpenAI Responses API, to drive the real Codex CLI offline.

    codex_mock_responses.py --scenario honest|early|lazy [--port 0] [--log FILE] [--port-file FILE]

Python stdlib only. Serves:
  POST /v1/responses   streamed (SSE) or plain JSON, like the real API
  GET  /v1/models      a one-model list (Codex may ask for it)
  anything else        404 with an OpenAI-style error body
Every request (method, path, headers without the key, JSON body) is appended to --log
as one JSON line, and so is every answer's summary.

The "model" is deterministic: the next action is derived only from the conversation
(the `input` items Codex sends), so a retried request gets the same answer.

Scenarios (the pev MCP tools are found in the request's `tools` by suffix, so the
naming Codex uses, e.g. `mcp__pev__plan_create`, is discovered, not assumed):
  honest  plan_create -> shell write hello.txt -> step_update done -> postcondition_verify -> final
  early   plan_create -> final "Done." (every time it is asked again)
  lazy    plan_create -> step_update done without writing (pev refuses) -> final "Done." (repeatedly)

Validation, like the real API (400 invalid_request_error): `model` is a non-empty string;
`input` is a string or a list of items with a known `type`; every function_call_output
(custom_tool_call_output) follows a function_call (custom_tool_call) with the same call_id,
and every call is answered at most once; function tool names match ^[a-zA-Z0-9_-]{1,64}$
and have unique names; `parameters` is a JSON object schema.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
STEP_DONE = {"id": "write", "status": "done", "evidence": "wrote hello.txt"}
POST_VERIFY = {"id": "p1", "evidence": "file says hi"}
WRITE_CMD = "printf 'hi\\n' > hello.txt"

KNOWN_ITEM_TYPES = {
    "message", "function_call", "function_call_output", "custom_tool_call",
    "custom_tool_call_output", "reasoning", "local_shell_call", "local_shell_call_output",
    "web_search_call", "compaction", "item_reference", "tool_search_call",
    "tool_search_output", "image_generation_call", "mcp_call", "mcp_list_tools",
    "file_search_call", "computer_call", "computer_call_output",
}
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

LOCK = threading.Lock()
LOG_PATH = None
SCENARIO = "honest"
MODEL_ID = "mock-model"


def log(rec: dict) -> None:
    rec = dict(rec)
    rec["ts"] = time.time()
    line = json.dumps(rec, sort_keys=True)
    with LOCK:
        if LOG_PATH:
            with open(LOG_PATH, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        else:
            print(line, file=sys.stderr, flush=True)


class ApiError(Exception):
    def __init__(self, message: str, param: str | None = None, code: str | None = None, status: int = 400):
        super().__init__(message)
        self.message, self.param, self.code, self.status = message, param, code, status


def validate(body) -> None:
    if not isinstance(body, dict):
        raise ApiError("The request body must be a JSON object.", None, "invalid_type")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError("Missing required parameter: 'model'.", "model", "missing_required_parameter")
    inp = body.get("input")
    if inp is None:
        raise ApiError("Missing required parameter: 'input'.", "input", "missing_required_parameter")
    if not isinstance(inp, (str, list)):
        raise ApiError("Invalid type for 'input': expected a string or an array.", "input", "invalid_type")
    if isinstance(inp, list):
        calls: dict[str, str] = {}
        answered: set[str] = set()
        for i, item in enumerate(inp):
            p = f"input[{i}]"
            if not isinstance(item, dict):
                raise ApiError(f"Invalid type for '{p}': expected an object.", p, "invalid_type")
            t = item.get("type", "message" if "role" in item else None)
            if t not in KNOWN_ITEM_TYPES:
                raise ApiError(f"Invalid value: '{t}'. Supported values are: {sorted(KNOWN_ITEM_TYPES)}.",
                               f"{p}.type", "invalid_value")
            if t == "message":
                if item.get("role") not in ("user", "assistant", "system", "developer"):
                    raise ApiError(f"Invalid value for '{p}.role'.", f"{p}.role", "invalid_value")
                if not isinstance(item.get("content"), (str, list)):
                    raise ApiError(f"Missing required parameter: '{p}.content'.", f"{p}.content",
                                   "missing_required_parameter")
            elif t in ("function_call", "custom_tool_call"):
                cid = item.get("call_id")
                if not isinstance(cid, str) or not cid:
                    raise ApiError(f"Missing required parameter: '{p}.call_id'.", f"{p}.call_id",
                                   "missing_required_parameter")
                if not isinstance(item.get("name"), str):
                    raise ApiError(f"Missing required parameter: '{p}.name'.", f"{p}.name",
                                   "missing_required_parameter")
                if t == "function_call" and not isinstance(item.get("arguments"), str):
                    raise ApiError(f"Invalid type for '{p}.arguments': expected a string.",
                                   f"{p}.arguments", "invalid_type")
                calls[cid] = t
            elif t in ("function_call_output", "custom_tool_call_output"):
                cid = item.get("call_id")
                want = "function_call" if t == "function_call_output" else "custom_tool_call"
                if calls.get(cid) != want:
                    raise ApiError(f"No tool call found for {t.replace('_output', ' output')} with call_id {cid}.",
                                   "input", None)
                if cid in answered:
                    raise ApiError(f"Duplicate {t} for call_id {cid}.", "input", None)
                answered.add(cid)
                if "output" not in item:
                    raise ApiError(f"Missing required parameter: '{p}.output'.", f"{p}.output",
                                   "missing_required_parameter")
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise ApiError("Invalid type for 'tools': expected an array.", "tools", "invalid_type")
    seen = set()
    flat = []
    for i, tool in enumerate(tools):
        flat.append((f"tools[{i}]", tool))
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            ns = tool.get("name")
            if not isinstance(ns, str) or not TOOL_NAME_RE.match(ns):
                raise ApiError(f"Invalid 'tools[{i}].name': string does not match pattern.", f"tools[{i}].name",
                               "invalid_value")
            subs = tool.get("tools")
            if not isinstance(subs, list) or not subs:
                raise ApiError(f"Missing required parameter: 'tools[{i}].tools'.", f"tools[{i}].tools",
                               "missing_required_parameter")
            for j, sub in enumerate(subs):
                if isinstance(sub, dict):
                    sub = dict(sub, name=f"{ns}/{sub.get('name')}", _short=sub.get("name"))
                flat.append((f"tools[{i}].tools[{j}]", sub))
    for where, tool in flat:
        i = where  # error paths name the nested position
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise ApiError(f"Missing required parameter: '{i}.type'.", f"{i}.type",
                           "missing_required_parameter")
        if tool["type"] in ("function", "custom"):
            name = tool.get("name")
            short = tool.get("_short", name)
            if not isinstance(short, str) or not TOOL_NAME_RE.match(short):
                raise ApiError(f"Invalid '{i}.name': string does not match pattern. Expected a string "
                               "that matches the pattern '^[a-zA-Z0-9_-]+$' (max 64).",
                               f"{i}.name", "invalid_value")
            if name in seen:
                raise ApiError(f"Duplicate tool name: '{name}'.", f"{i}.name", "invalid_value")
            seen.add(name)
        if tool["type"] == "function":
            params = tool.get("parameters")
            if params is not None and (not isinstance(params, dict) or params.get("type") not in ("object", None)):
                raise ApiError(f"Invalid schema for function '{tool.get('name')}': schema must be a JSON Schema "
                               "of 'type: \"object\"'.", f"{i}.parameters", "invalid_function_parameters")


def tool_names(body) -> list[str]:
    """Every callable tool; a tool inside a `namespace` tool (how Codex groups MCP tools,
    e.g. namespace `mcp__pev` holding `plan_create`) is listed as `NAMESPACE/NAME`."""
    out = []
    for t in body.get("tools") or []:
        if t.get("type") in ("function", "custom") and isinstance(t.get("name"), str):
            out.append(t["name"])
        elif t.get("type") == "namespace":
            for sub in t.get("tools") or []:
                if isinstance(sub.get("name"), str):
                    out.append(f"{t.get('name')}/{sub['name']}")
    return out


def find_tool(names: list[str], suffix: str) -> str | None:
    # prefer a pev-namespaced name, e.g. mcp__pev/plan_create
    hits = [n for n in names if n.split("/")[-1].endswith(suffix) and "pev" in n]
    hits = hits or [n for n in names if n.split("/")[-1].endswith(suffix)]
    return hits[0] if hits else None


def history(body) -> list[tuple[str, str]]:
    """(short tool name, arguments) of every call in the conversation, in order."""
    out = []
    inp = body.get("input")
    if not isinstance(inp, list):
        return out
    for item in inp:
        if item.get("type") in ("function_call", "custom_tool_call"):
            name = item.get("name", "")
            ns = item.get("namespace") or ""
            out.append((f"{ns}/{name}" if ns else name, item.get("arguments") or item.get("input") or ""))
    return out


def called(hist, suffix: str) -> bool:
    return any(n.endswith(suffix) for n, _ in hist)


def shell_call(names: list[str]):
    """Codex's shell tool, whichever flavour this version offers: (name, kind, payload)."""
    if "shell_command" in names:
        return "shell_command", "function", {"command": WRITE_CMD}
    if "exec_command" in names:
        return "exec_command", "function", {"cmd": WRITE_CMD}
    if "shell" in names:
        return "shell", "function", {"command": ["bash", "-lc", WRITE_CMD]}
    if "apply_patch" in names:
        patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"
        return "apply_patch", "custom", patch
    return None


def decide(body) -> dict:
    """The next model action: {"kind":"call","name":..,"args":..,"tool_type":..} or {"kind":"text","text":..}."""
    names = tool_names(body)
    hist = history(body)
    plan_create = find_tool(names, "plan_create")
    if plan_create is None and not called(hist, "plan_create"):
        return {"kind": "text", "text": "ERROR: no plan_create tool offered; tools were: " + ", ".join(names)}
    if not called(hist, "plan_create"):
        return {"kind": "call", "name": plan_create, "args": PLAN, "tool_type": "function"}
    if SCENARIO == "honest":
        wrote = any("hello.txt" in str(a) and ("printf" in str(a) or "Add File" in str(a)) for _, a in hist)
        if not wrote:
            sc = shell_call(names)
            if sc is None:
                return {"kind": "text", "text": "ERROR: no shell tool offered; tools were: " + ", ".join(names)}
            return {"kind": "call", "name": sc[0], "args": sc[2], "tool_type": sc[1]}
        if not called(hist, "step_update"):
            return {"kind": "call", "name": find_tool(names, "step_update"), "args": STEP_DONE, "tool_type": "function"}
        if not called(hist, "postcondition_verify"):
            return {"kind": "call", "name": find_tool(names, "postcondition_verify"), "args": POST_VERIFY,
                    "tool_type": "function"}
        return {"kind": "text", "text": "Created hello.txt containing hi; the plan step and postcondition are verified."}
    if SCENARIO == "lazy" and not called(hist, "step_update"):
        return {"kind": "call", "name": find_tool(names, "step_update"), "args": STEP_DONE, "tool_type": "function"}
    return {"kind": "text", "text": "Done."}


def new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def build_events(body, action) -> tuple[list[tuple[str, dict]], dict]:
    resp_id = new_id("resp_")
    created = int(time.time())
    base = {
        "id": resp_id, "object": "response", "created_at": created, "status": "in_progress",
        "error": None, "incomplete_details": None, "instructions": None, "model": body.get("model"),
        "output": [], "parallel_tool_calls": bool(body.get("parallel_tool_calls", False)),
        "previous_response_id": None, "reasoning": {"effort": None, "summary": None},
        "store": bool(body.get("store", False)), "temperature": 1.0, "tool_choice": body.get("tool_choice", "auto"),
        "tools": [], "top_p": 1.0, "truncation": "disabled", "usage": None, "metadata": {},
    }
    ev: list[tuple[str, dict]] = []
    ev.append(("response.created", {"response": dict(base)}))
    ev.append(("response.in_progress", {"response": dict(base)}))
    if action["kind"] == "call" and action["tool_type"] == "function":
        args = json.dumps(action["args"])
        item_id, call_id = new_id("fc_"), new_id("call_")
        ns, _, short = action["name"].rpartition("/")
        item = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
                "call_id": call_id, "name": short}
        if ns:  # a tool of a namespace tool: the call names both, like the real API
            item["namespace"] = ns
        ev.append(("response.output_item.added", {"output_index": 0, "item": dict(item)}))
        half = len(args) // 2
        for chunk in (args[:half], args[half:]):
            ev.append(("response.function_call_arguments.delta",
                       {"item_id": item_id, "output_index": 0, "delta": chunk}))
        ev.append(("response.function_call_arguments.done", {"item_id": item_id, "output_index": 0, "arguments": args}))
        done = dict(item, status="completed", arguments=args)
    elif action["kind"] == "call":  # custom (freeform) tool, e.g. apply_patch
        item_id, call_id = new_id("ctc_"), new_id("call_")
        item = {"id": item_id, "type": "custom_tool_call", "status": "in_progress", "call_id": call_id,
                "name": action["name"], "input": ""}
        ev.append(("response.output_item.added", {"output_index": 0, "item": dict(item)}))
        ev.append(("response.custom_tool_call_input.delta", {"item_id": item_id, "output_index": 0,
                                                             "delta": action["args"]}))
        ev.append(("response.custom_tool_call_input.done", {"item_id": item_id, "output_index": 0,
                                                            "input": action["args"]}))
        done = dict(item, status="completed", input=action["args"])
    else:
        text = action["text"]
        item_id = new_id("msg_")
        item = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        ev.append(("response.output_item.added", {"output_index": 0, "item": dict(item)}))
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        ev.append(("response.content_part.added", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                                   "part": part}))
        words = re.findall(r"\S+\s*", text) or [text]
        for w in words:
            ev.append(("response.output_text.delta", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                                      "delta": w, "logprobs": []}))
        ev.append(("response.output_text.done", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                                 "text": text, "logprobs": []}))
        fpart = dict(part, text=text)
        ev.append(("response.content_part.done", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                                  "part": fpart}))
        done = dict(item, status="completed", content=[fpart])
    ev.append(("response.output_item.done", {"output_index": 0, "item": done}))
    in_tok = len(json.dumps(body.get("input"))) // 4
    out_tok = 20
    final = dict(base, status="completed", output=[done], usage={
        "input_tokens": in_tok, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out_tok, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": in_tok + out_tok})
    ev.append(("response.completed", {"response": final}))
    out = []
    for seq, (name, data) in enumerate(ev):
        out.append((name, dict({"type": name, "sequence_number": seq}, **data)))
    return out, final


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock-responses/1"

    def log_message(self, fmt, *args):  # quiet; we log JSON ourselves
        pass

    def _headers(self) -> dict:
        h = {k.lower(): v for k, v in self.headers.items()}
        if "authorization" in h:
            h["authorization"] = h["authorization"][:12] + "…"
        return h

    def _send_json(self, status: int, obj) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", new_id("req_"))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, etype="invalid_request_error", param=None, code=None):
        log({"dir": "answer", "status": status, "error": message, "param": param, "code": code})
        self._send_json(status, {"error": {"message": message, "type": etype, "param": param, "code": code}})

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        if enc == "zstd" or enc == "gzip" or enc == "br":
            if enc == "gzip":
                import gzip
                raw = gzip.decompress(raw)
            else:
                return raw, None, f"unsupported Content-Encoding {enc}"
        return raw, raw, None

    def do_GET(self):
        log({"dir": "request", "method": "GET", "path": self.path, "headers": self._headers()})
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/models"):
            self._send_json(200, {"object": "list", "data": [
                {"id": MODEL_ID, "object": "model", "created": 1700000000, "owned_by": "mock"}],
                "models": []})
            return
        self._error(404, f"Unknown request URL: GET {self.path}.", code="unknown_url")

    def do_POST(self):
        raw, decoded, err = self._read_body()
        headers = self._headers()
        body = None
        if decoded is not None:
            try:
                body = json.loads(decoded or b"null")
            except ValueError as e:
                err = f"We could not parse the JSON body of your request. ({e})"
        log({"dir": "request", "method": "POST", "path": self.path, "headers": headers, "body": body,
             "raw_len": len(raw or b"")})
        if err:
            self._error(400, err)
            return
        path = self.path.split("?")[0].rstrip("/")
        if not path.endswith("/responses"):
            self._error(404, f"Unknown request URL: POST {self.path}.", code="unknown_url")
            return
        if not headers.get("authorization", "").startswith("Bearer "):
            self._error(401, "You didn't provide an API key.", etype="invalid_request_error")
            return
        try:
            validate(body)
        except ApiError as e:
            self._error(e.status, e.message, param=e.param, code=e.code)
            return
        action = decide(body)
        events, final = build_events(body, action)
        log({"dir": "answer", "status": 200, "scenario": SCENARIO, "action": action,
             "tools": tool_names(body), "n_input": len(body["input"]) if isinstance(body["input"], list) else 1})
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.send_header("x-request-id", new_id("req_"))
            self.end_headers()
            for name, data in events:
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
            self.close_connection = True
        else:
            self._send_json(200, final)


def main() -> int:
    global LOG_PATH, SCENARIO, MODEL_ID
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default=None, help="honest|early|lazy (default: $MOCK_SCENARIO or honest)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--log", default=None)
    ap.add_argument("--port-file", default=None, help="write the bound port here once listening")
    ap.add_argument("--model", default="mock-model")
    a = ap.parse_args()
    import os
    SCENARIO = a.scenario or os.environ.get("MOCK_SCENARIO", "honest")
    if SCENARIO not in ("honest", "early", "lazy"):
        ap.error(f"unknown scenario {SCENARIO}")
    LOG_PATH, MODEL_ID = a.log, a.model
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    port = srv.server_address[1]
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.replace(a.port_file + ".tmp", a.port_file)
    print(f"mock Responses API on http://{a.host}:{port}/v1 scenario={SCENARIO}", file=sys.stderr, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
