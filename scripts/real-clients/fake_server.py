#!/usr/bin/env python3
"""A tiny stdio MCP server in pure Python (no SDK), only to prove python_mcp_client.py.

    fake_server.py --workspace DIR [--log FILE]

Newline-delimited JSON-RPC 2.0 on stdin/stdout, handshake era (2025-11-25 and
older). Implements initialize, notifications/initialized, ping, tools/list
(the six pev tool names) and tools/call. `server/discover` (the 2026-07-28
probe) is answered with -32601 so SDK clients fall back to initialize.
step_update refuses (isError) unless every file_exists assertion of the step
holds in DIR. Every received line is appended to --log (default: stderr).

--misbehave MODE breaks one thing on purpose, to check that the client fails:
  bad-structured   step_update success whose structuredContent violates its outputSchema
  garbage-line     a non-JSON line on stdout before the tools/list answer
  no-serverinfo    initialize result without serverInfo
  bad-version      initialize answers protocolVersion "2099-01-01"
  rpc-error-step   step_update refusal as a JSON-RPC error instead of isError
  silent-discover  never answer server/discover (the SDK waits 10 s, then initializes)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

HANDSHAKE_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]

OBJ = {"type": "object"}
ASSERTION = {
    "type": "object",
    "properties": {"type": {"type": "string"}, "path": {"type": "string"}},
    "required": ["type"],
}

TOOLS = [
    {
        "name": "plan_create",
        "description": "Create a plan.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "objective": {"type": "string"},
                "steps": {"type": "array", "items": OBJ},
                "postconditions": {"type": "array", "items": OBJ},
            },
            "required": ["objective", "steps"],
        },
    },
    {
        "name": "plan_show",
        "description": "Show the plan.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "step_update",
        "description": "Update a step's status; 'done' is refused unless its assertions hold.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "status": {"type": "string", "enum": ["pending", "in_progress", "done", "blocked"]},
                "evidence": {"type": "string"},
            },
            "required": ["id", "status"],
        },
        # Exercises the SDK's structuredContent-vs-outputSchema validation on success results.
        "outputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "status": {"type": "string"},
                "failed": {"type": "array", "items": ASSERTION},
            },
            "required": ["id", "status"],
        },
    },
    {"name": "postcondition_verify", "description": "Verify postconditions.", "inputSchema": OBJ},
    {"name": "todo_write", "description": "Write the todo list.", "inputSchema": OBJ},
    {"name": "lint_plan", "description": "Lint a plan.", "inputSchema": OBJ},
]


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Server:
    def __init__(self, workspace: str, log, misbehave: str) -> None:
        self.workspace = workspace
        self.misbehave = misbehave
        self.log = log
        self.initialized = False
        self.plan: dict[str, Any] | None = None

    def send(self, msg: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()

    def tool_result(self, text: str, structured: dict[str, Any] | None, is_error: bool) -> dict[str, Any]:
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
        if structured is not None:
            result["structuredContent"] = structured
        return result

    def call_tool(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name == "plan_create":
            steps = [dict(step, status="pending") for step in args.get("steps", [])]
            self.plan = {
                "objective": args.get("objective"),
                "steps": steps,
                "postconditions": args.get("postconditions", []),
            }
            return self.tool_result(f"plan created with {len(steps)} step(s)", {"plan": self.plan}, False)
        if name == "plan_show":
            if self.plan is None:
                return self.tool_result("no plan", {"plan": None}, True)
            return self.tool_result(json.dumps(self.plan), {"plan": self.plan}, False)
        if name == "step_update":
            if self.plan is None:
                return self.tool_result("no plan", None, True)
            step = next((s for s in self.plan["steps"] if s.get("id") == args.get("id")), None)
            if step is None:
                return self.tool_result(f"unknown step {args.get('id')!r}", None, True)
            status = args.get("status")
            if status == "done":
                failed = [
                    a
                    for a in step.get("assertions", [])
                    if a.get("type") == "file_exists"
                    and not os.path.exists(os.path.join(self.workspace, a.get("path", "")))
                ]
                if failed and self.misbehave == "rpc-error-step":
                    raise RpcError(-32603, "assertion failed")
                if failed:
                    paths = ", ".join(a.get("path", "") for a in failed)
                    return self.tool_result(
                        f"refused: assertion(s) failed: file_exists {paths}",
                        {"id": step["id"], "status": step["status"], "failed": failed},
                        True,
                    )
            step["status"] = status
            step["evidence"] = args.get("evidence")
            structured: dict[str, Any] = {"id": step["id"], "status": status}
            if self.misbehave == "bad-structured":
                structured = {"id": 42}
            return self.tool_result(f"step {step['id']} -> {status}", structured, False)
        return self.tool_result(f"{name}: not implemented in the fake server", None, True)

    def handle(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        msg_id = msg.get("id")
        params = msg.get("params") or {}
        if method is None:
            return  # a response to something we never sent
        if msg_id is None:  # notification
            if method == "notifications/initialized":
                self.initialized = True
            return

        def reply(result: dict[str, Any]) -> None:
            self.send({"jsonrpc": "2.0", "id": msg_id, "result": result})

        def error(code: int, message: str) -> None:
            self.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

        if method == "initialize":
            requested = params.get("protocolVersion")
            version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
            result = {
                "protocolVersion": "2099-01-01" if self.misbehave == "bad-version" else version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "fake-pev", "version": "0.0.0"},
            }
            if self.misbehave == "no-serverinfo":
                del result["serverInfo"]
            reply(result)
        elif method == "ping":
            reply({})
        elif method == "tools/list":
            if self.misbehave == "garbage-line":
                sys.stdout.write("this is not JSON-RPC\n")
            reply({"tools": TOOLS})
        elif method == "tools/call":
            name = params.get("name")
            if name not in {t["name"] for t in TOOLS}:
                error(-32602, f"Unknown tool: {name}")
            else:
                try:
                    reply(self.call_tool(name, params.get("arguments") or {}))
                except RpcError as e:
                    error(e.code, e.message)
        elif method == "server/discover" and self.misbehave == "silent-discover":
            pass
        else:  # includes server/discover
            error(-32601, f"Method not found: {method}")

    def serve(self) -> None:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            self.log.write(line + "\n")
            self.log.flush()
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                self.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
                continue
            self.handle(msg)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--log", help="append every received line here (default: stderr)")
    parser.add_argument(
        "--misbehave",
        default="none",
        choices=["none", "bad-structured", "garbage-line", "no-serverinfo", "bad-version", "rpc-error-step", "silent-discover"],
    )
    args = parser.parse_args()
    log = open(args.log, "a", encoding="utf-8") if args.log else sys.stderr
    Server(os.path.abspath(args.workspace), log, args.misbehave).serve()


if __name__ == "__main__":
    main()
