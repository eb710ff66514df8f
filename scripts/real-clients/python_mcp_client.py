#!/usr/bin/env python3
"""Drive an MCP server over stdio with the OFFICIAL Python MCP SDK (`mcp` on PyPI, 2.x).

Usage:
    python_mcp_client.py --workspace DIR [--mode auto|legacy|2026-07-28]
                         [--timeout SECONDS] [--trace] -- SERVER_CMD [ARGS...]

Sequence: connect (SDK handshake), tools/list, then tools/call of
plan_create, step_update (expected isError: hello.txt missing), write
DIR/hello.txt, step_update again (expected success), plan_show.

Prints one JSON line for the tool list and one per call on stdout. Exits 0 only
when the tool list holds the six expected tools, the first step_update has
isError true and the second isError false; exits 1 on any failed check or any
protocol error (JSON-RPC error response, schema-invalid result, unparseable
line from the server, timeout, closed connection).

--trace copies every JSON-RPC message sent / received to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import asynccontextmanager
from importlib.metadata import version as pkg_version
from typing import Any

import anyio
import mcp_types as types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

EXPECTED_TOOLS = [
    "plan_create",
    "plan_show",
    "step_update",
    "postcondition_verify",
    "todo_write",
    "lint_plan",
]

PLAN_CREATE_ARGS: dict[str, Any] = {
    "objective": "Add a greeting file",
    "steps": [
        {
            "id": "write",
            "title": "Write hello.txt",
            "assertions": [{"type": "file_exists", "path": "hello.txt"}],
        }
    ],
    "postconditions": [
        {
            "description": "hello.txt exists",
            "assertions": [{"type": "file_exists", "path": "hello.txt"}],
        }
    ],
}

STEP_UPDATE_ARGS: dict[str, Any] = {
    "id": "write",
    "status": "done",
    "evidence": "wrote hello.txt with echo",
}


def err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def out(obj: Any) -> None:
    print(json.dumps(obj, ensure_ascii=False), flush=True)


class Failure(Exception):
    """A check failed (not a protocol error)."""


@asynccontextmanager
async def traced_stdio(params: StdioServerParameters, trace: bool):
    """stdio_client, optionally teeing every JSON-RPC message to stderr."""
    async with stdio_client(params) as (read, write):
        if not trace:
            yield read, write
            return
        to_session_send, to_session_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        from_session_send, from_session_recv = anyio.create_memory_object_stream[SessionMessage](0)

        def dump(direction: str, item: SessionMessage | Exception) -> None:
            if isinstance(item, Exception):
                err(f"[wire {direction}] <transport exception: {item!r}>")
            else:
                err(f"[wire {direction}] " + item.message.model_dump_json(by_alias=True, exclude_unset=True))

        async def pump_in() -> None:
            async with to_session_send:
                async for item in read:
                    dump("<-", item)
                    await to_session_send.send(item)

        async def pump_out() -> None:
            async with from_session_recv:
                async for item in from_session_recv:
                    dump("->", item)
                    await write.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_in)
            tg.start_soon(pump_out)
            try:
                yield to_session_recv, from_session_send
            finally:
                tg.cancel_scope.cancel()
                to_session_recv.close()
                from_session_send.close()


class TracedStdioTransport:
    """A `mcp.client.Transport` (async context manager yielding (read, write))."""

    def __init__(self, params: StdioServerParameters, trace: bool) -> None:
        self._cm = traced_stdio(params, trace)

    async def __aenter__(self):
        return await self._cm.__aenter__()

    async def __aexit__(self, *exc: Any):
        return await self._cm.__aexit__(*exc)


def result_line(tool: str, result: types.CallToolResult) -> dict[str, Any]:
    text = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
    return {
        "tool": tool,
        "isError": result.is_error,
        "structuredContent": result.structured_content,
        "text": text[:200],
    }


async def run(args: argparse.Namespace) -> None:
    workspace = os.path.abspath(args.workspace)
    os.makedirs(workspace, exist_ok=True)
    hello = os.path.join(workspace, "hello.txt")
    if os.path.exists(hello):
        raise Failure(f"{hello} already exists; use a fresh workspace (the first step_update must fail)")

    params = StdioServerParameters(
        command=args.server[0],
        args=args.server[1:],
        # The SDK passes only a small env allowlist by default; give the server ours.
        env=dict(os.environ),
    )

    stream_errors: list[Exception] = []

    async def message_handler(message: Any) -> None:
        # Transport-level exceptions (e.g. a non-JSON-RPC line on the server's stdout) arrive here.
        if isinstance(message, Exception):
            stream_errors.append(message)
            err(f"protocol error from transport: {message!r}")
        else:
            err(f"server notification: {message.model_dump_json(by_alias=True, exclude_none=True)}")

    def check_stream() -> None:
        if stream_errors:
            raise Failure(f"transport reported {len(stream_errors)} protocol error(s): {stream_errors[0]!r}")

    client = Client(
        TracedStdioTransport(params, args.trace),
        mode=args.mode,
        read_timeout_seconds=args.timeout,
        message_handler=message_handler,
        client_info=types.Implementation(name="pev-python-sdk-probe", version=pkg_version("mcp")),
        cache=None,  # no client-side response cache: every list/call reaches the server
    )

    async with client:
        info = client.server_info
        err(
            "connected: protocol_version="
            f"{client.protocol_version} server_info="
            f"{info.model_dump(by_alias=True, exclude_none=True) if info else None} "
            f"capabilities={client.server_capabilities.model_dump(by_alias=True, exclude_none=True)}"
        )

        # tools/list, following pagination
        names: list[str] = []
        cursor: str | None = None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor)
            names += [tool.name for tool in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        out({"tools": names})
        check_stream()
        missing = [n for n in EXPECTED_TOOLS if n not in names]
        if missing:
            raise Failure(f"tools/list is missing {missing}")

        async def call(tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
            result = await client.call_tool(tool, arguments)
            out(result_line(tool, result))
            check_stream()
            return result

        created = await call("plan_create", PLAN_CREATE_ARGS)
        if created.is_error:
            err("warning: plan_create returned isError=true")

        first = await call("step_update", STEP_UPDATE_ARGS)

        with open(hello, "w", encoding="utf-8") as f:
            f.write("hello\n")

        second = await call("step_update", STEP_UPDATE_ARGS)

        shown = await call("plan_show", {})
        if shown.is_error:
            err("warning: plan_show returned isError=true")

        check_stream()

    problems = []
    if first.is_error is not True:
        problems.append(f"first step_update isError={first.is_error!r}, expected true (hello.txt did not exist)")
    if second.is_error:  # absent isError means false per the spec
        problems.append(f"second step_update isError={second.is_error!r}, expected false (hello.txt exists)")
    if problems:
        raise Failure("; ".join(problems))


def parse_args(argv: list[str]) -> argparse.Namespace:
    if "--" not in argv:
        err("usage: python_mcp_client.py --workspace DIR [options] -- SERVER_CMD [ARGS...]")
        sys.exit(2)
    split = argv.index("--")
    own, server = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(
        prog="python_mcp_client.py",
        usage="%(prog)s --workspace DIR [options] -- SERVER_CMD [ARGS...]",
    )
    parser.add_argument("--workspace", required=True, help="the server's workspace; hello.txt is written here")
    parser.add_argument(
        "--mode",
        default="auto",
        help="SDK connect mode: 'auto' (default: server/discover probe, falls back to initialize), "
        "'legacy' (initialize handshake only), or '2026-07-28' (stateless, no handshake)",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="per-request read timeout in seconds")
    parser.add_argument("--trace", action="store_true", help="print every JSON-RPC message to stderr")
    args = parser.parse_args(own)
    if not server:
        parser.error("missing SERVER_CMD after --")
    args.server = server
    return args


def leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) anyio task-group ExceptionGroups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def main() -> int:
    args = parse_args(sys.argv[1:])
    err(f"mcp SDK {pkg_version('mcp')} (mcp-types {pkg_version('mcp-types')}), mode={args.mode}")
    try:
        try:
            anyio.run(run, args)
        except BaseExceptionGroup as group:
            inner = leaf(group)
            if isinstance(inner, Exception):
                raise inner from group
            raise
    except Failure as e:
        err(f"FAIL: {e}")
        return 1
    except MCPError as e:
        err(f"FAIL: protocol error (JSON-RPC {e.error.code}): {e.error.message} data={e.error.data!r}")
        return 1
    except Exception as e:  # pydantic ValidationError, RuntimeError (outputSchema), ExceptionGroup, OSError...
        err(f"FAIL: {type(e).__name__}: {e}")
        return 1
    err("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
